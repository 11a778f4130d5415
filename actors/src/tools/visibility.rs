//! Which tools an agent sees, and the refusal of a call to any other: one rule for both, so a
//! model that guesses a hidden tool's name gets `not_root` or `tool_not_allowed` (or
//! `unknown_tool` for a name that names no tool), never a result.

use crate::catalogue::Tool;
use crate::catalogue::{ToolGroup, any_matches};
use crate::deps::Deps;
use agentd_proto::{AgentRecord, AgentdError, ErrorCode};

/// Whether `rec` is a foreground agent: a root created by a person or a service, not spawned
/// as a background job (seed 003).
pub fn is_foreground(rec: &AgentRecord) -> bool {
    rec.parent_id.is_none() && rec.foreground
}

/// Whether `rec` may use management tools: a foreground root, or a sub-agent whose type grants
/// them while `depth < max_depth`. A background root manages nothing, whatever its type grants.
pub fn may_manage(rec: &AgentRecord, deps: &Deps) -> bool {
    let cfg = &deps.config;
    if rec.parent_id.is_none() {
        return is_foreground(rec);
    }
    cfg.types
        .get(&rec.agent_type)
        .map(|t| t.grants_management && rec.depth < cfg.limits.max_depth)
        .unwrap_or(false)
}

/// The tools `rec` sees (and may call), in the order it is shown them: the management tools
/// if it may manage (those for foreground agents only if it is one), the regular tools its
/// type lists (by name, or a whole MCP server as `mcp__<server>__*`), narrowed to its allowed
/// tools (same grammar) if it has a list; then, for a sub-agent, the sub-agent tools, whatever
/// its list says.
pub fn visible_tools(rec: &AgentRecord, deps: &Deps) -> Vec<Tool> {
    let sight = Sight::of(rec, deps);
    let catalogue = &deps.tools;
    let mut tools: Vec<Tool> = catalogue
        .tools()
        .filter(|tool| tool.group() != ToolGroup::SubAgentOnly && sight.sees(tool))
        .collect();
    tools.extend(
        catalogue
            .tools()
            .filter(|tool| tool.group() == ToolGroup::SubAgentOnly && sight.sees(tool)),
    );
    tools
}

/// What decides which tools one agent sees: [`visible_tools`]'s rule for one tool at a time,
/// so that a call checks its own tool without listing the others.
struct Sight<'a> {
    rec: &'a AgentRecord,
    manages: bool,
    foreground: bool,
    agent_type: Option<&'a crate::config::AgentType>,
}

impl<'a> Sight<'a> {
    fn of(rec: &'a AgentRecord, deps: &'a Deps) -> Self {
        Sight {
            rec,
            manages: may_manage(rec, deps),
            foreground: is_foreground(rec),
            agent_type: deps.config.types.get(&rec.agent_type),
        }
    }

    /// Whether the agent sees `tool`: the sub-agent tools if it is a sub-agent, whatever its
    /// list says; any other tool if its group admits it and the agent's allowed tools (if it
    /// has a list) name it.
    fn sees(&self, tool: &Tool) -> bool {
        let admitted = match tool.group() {
            ToolGroup::SubAgentOnly => return self.rec.parent_id.is_some(),
            ToolGroup::Management => self.manages,
            ToolGroup::ForegroundOnly => self.manages && self.foreground,
            ToolGroup::Regular => self.agent_type.is_some_and(|ty| match tool {
                // A built-in regular tool by its own name, as before MCP.
                Tool::Builtin(_) => ty.tools.iter().any(|n| n == tool.name()),
                _ => any_matches(&ty.tools, tool),
            }),
        };
        admitted
            && self
                .rec
                .allowed_tools
                .as_ref()
                .is_none_or(|allowed| any_matches(allowed, tool))
    }
}

/// The tool `name` names if `rec` may call it; otherwise why not: `not_root` for a management
/// tool, `tool_not_allowed` for another tool it does not see, `unknown_tool` for a name that
/// names no tool.
pub fn callable(rec: &AgentRecord, deps: &Deps, name: &str) -> Result<Tool, AgentdError> {
    let Some(tool) = deps.tools.resolve(name) else {
        return Err(crate::catalogue::unknown(name));
    };
    if Sight::of(rec, deps).sees(&tool) {
        return Ok(tool);
    }
    let name = tool.name();
    Err(match tool.group() {
        ToolGroup::Management | ToolGroup::ForegroundOnly => AgentdError::new(
            ErrorCode::NotRoot,
            format!(
                "`{name}` is for foreground (root) agents; `{}` may not manage agents",
                rec.id
            ),
        ),
        ToolGroup::SubAgentOnly => AgentdError::new(
            ErrorCode::ToolNotAllowed,
            "only sub-agents can yield to a parent",
        ),
        ToolGroup::Regular => AgentdError::new(
            ErrorCode::ToolNotAllowed,
            format!("`{name}` is not among this agent's tools"),
        ),
    })
}
