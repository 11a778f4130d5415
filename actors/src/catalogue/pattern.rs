//! The grammar of an agent type's `tools` and of a spawn's `allowed_tools`: a tool's name
//! (`current_time`, a configured tool, `mcp__files__read_text_file`) or a whole MCP server
//! (`mcp__files__*`), and the start-up check of the names the types use.

use super::Tool;
use super::ToolCatalogue;
use super::builtin::BuiltinTool;
use crate::config::AgentTypes;
use crate::ports::{PREFIX, is_valid_exposed_name, split_exposed};
use agentd_proto::{AgentdError, ErrorCode};

/// One entry of `tools` or `allowed_tools`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolPattern<'a> {
    /// One tool by its name (a built-in tool's aliases count).
    Name(&'a str),
    /// Every tool of an MCP server: `mcp__<server>__*`.
    Server(&'a str),
}

impl<'a> ToolPattern<'a> {
    /// Reads an entry.
    pub fn parse(entry: &'a str) -> Self {
        match split_exposed(entry) {
            Some((server, "*")) => ToolPattern::Server(server),
            _ => ToolPattern::Name(entry),
        }
    }

    /// Whether the entry names `tool`.
    pub fn matches(&self, tool: &Tool) -> bool {
        match (self, tool) {
            (ToolPattern::Server(server), tool) => tool.mcp_server() == Some(*server),
            (ToolPattern::Name(name), Tool::Builtin(builtin)) => {
                BuiltinTool::named(name) == Some(*builtin)
            }
            (ToolPattern::Name(name), tool) => tool.name() == *name,
        }
    }
}

/// Whether any of `entries` names `tool`.
pub fn any_matches<S: AsRef<str>>(entries: &[S], tool: &Tool) -> bool {
    entries
        .iter()
        .any(|e| ToolPattern::parse(e.as_ref()).matches(tool))
}

/// Checks every type's `tools` at start-up: an MCP entry must name a configured server and fit
/// the providers' name rule; any other entry must name a tool the catalogue has (a built-in
/// tool or a configured one). An MCP tool its server does not list (yet) is not an error: a
/// server may be down at start-up; calls of it get `unknown_tool` until it lists it.
pub fn check_type_tools(types: &AgentTypes, catalogue: &ToolCatalogue) -> Result<(), AgentdError> {
    let servers = catalogue.mcp_servers();
    let invalid = |ty: &str, why: String| {
        AgentdError::new(
            ErrorCode::InvalidArgument,
            format!("agent type `{ty}`: {why}"),
        )
    };
    for ty in types.iter() {
        for entry in &ty.tools {
            if let Some(rest) = entry.strip_prefix(PREFIX) {
                let Some((server, tool)) = split_exposed(entry) else {
                    return Err(invalid(
                        &ty.name,
                        format!(
                            "tool `{entry}` must be mcp__<server>__<tool> or mcp__<server>__* \
                             (read `{rest}`)"
                        ),
                    ));
                };
                if !servers.iter().any(|s| s == server) {
                    return Err(invalid(
                        &ty.name,
                        format!(
                            "tool `{entry}` names MCP server `{server}`, which is not configured"
                        ),
                    ));
                }
                if tool != "*" && !is_valid_exposed_name(entry) {
                    return Err(invalid(
                        &ty.name,
                        format!("tool `{entry}` does not fit ^[A-Za-z0-9_-]{{1,64}}$"),
                    ));
                }
            } else if catalogue.resolve(entry).is_none() {
                return Err(AgentdError::new(
                    ErrorCode::UnknownTool,
                    format!(
                        "agent type `{}` lists tool `{entry}`, which is neither built in nor a \
                         [tools.{entry}]",
                        ty.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_name_a_tool_or_a_whole_server() {
        assert_eq!(
            ToolPattern::parse("mcp__files__*"),
            ToolPattern::Server("files")
        );
        assert_eq!(
            ToolPattern::parse("mcp__files__read_text_file"),
            ToolPattern::Name("mcp__files__read_text_file")
        );
        assert_eq!(
            ToolPattern::parse("current_time"),
            ToolPattern::Name("current_time")
        );
        let clock = Tool::Builtin(BuiltinTool::CurrentTime);
        assert!(ToolPattern::parse("current_time").matches(&clock));
        assert!(!ToolPattern::parse("mcp__files__*").matches(&clock));
        let spawn = Tool::Builtin(BuiltinTool::SpawnAgent);
        assert!(
            ToolPattern::parse("spawn_subagent").matches(&spawn),
            "aliases count"
        );
    }
}
