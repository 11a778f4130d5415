//! Runtime configuration the actors read: limits, agent types, prices, prompts. The service
//! builds it from layered config files; tests build it in code.

use agentd_proto::{
    AgentdError, ErrorCode, InputLimits, ManageOptions, OnDependencyFailure, Price,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

/// Limits that keep trees bounded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Deepest allowed agent (roots are depth 0). Default 1: only roots manage (seed 004).
    pub max_depth: u32,
    /// Children one parent may have (live or closed). Default 64.
    pub max_children: u32,
    /// Model calls in one turn before it is ended. Default 16.
    pub max_steps_per_turn: u32,
    /// Largest context file attached to a spawn, in bytes. Default 64 KiB.
    pub context_file_max_bytes: u64,
    /// Entries kept verbatim after a compaction. Default 4.
    pub compact_keep_recent: usize,
    /// Live agent actors one process hosts; spawns and re-activations beyond it are refused
    /// with `unavailable`. Default 100000.
    pub max_live_agents: usize,
    /// Turns running at once in one process; more wait in `queued` by priority. 0 = no limit.
    pub max_running_turns: usize,
    /// Turns of one parent's children running at once. 0 = no limit.
    pub max_running_turns_per_parent: usize,
    /// When a dependency fails: `hold` its dependents (default) or `fail` them, unless their
    /// spawn chose (`SpawnRequest::on_dependency_failure`); any other value holds.
    pub on_dependency_failure: String,
    /// Attempts of a task whose turn fails for now (its model could not answer: a provider's
    /// 5xx, a timeout, a connection error) before the agent is `failed` (1 = no automatic
    /// retry). A failure no retry fixes fails the agent at the first attempt.
    pub max_attempts: u32,
    /// First retry delay, ms; doubled per attempt up to `retry_backoff_max_ms`.
    pub retry_backoff_ms: u64,
    /// Longest retry delay, ms.
    pub retry_backoff_max_ms: u64,
    /// An `[ERROR]…[/ERROR]` marker fails the agent (otherwise it is recorded as `last_error`).
    pub fail_on_error_marker: bool,
    /// Longest agent title, in characters. Default 200.
    pub max_title_chars: usize,
    /// Largest first message of a spawn, in bytes. Default 256 KiB.
    pub max_prompt_bytes: usize,
    /// Largest message (follow-up, reset seed, Manage message, dependency, answer), in bytes.
    /// Default 128 KiB.
    pub max_message_bytes: usize,
    /// Largest result of a tool call from outside agentd (an MCP server) recorded for the
    /// model, in bytes; a longer one is cut and says so. Default 64 KiB.
    pub tool_result_max_bytes: usize,
    /// How long a tool call waits for a person's approval (`awaiting_approval`) before it is
    /// closed as timed out and the model gets a tool error, in ms. 0 = wait for ever (default).
    pub approval_timeout_ms: u64,
}

impl Limits {
    /// `on_dependency_failure` as a policy: `"fail"` fails, anything else holds.
    pub fn dependency_failure_policy(&self) -> OnDependencyFailure {
        if self.on_dependency_failure == "fail" {
            OnDependencyFailure::Fail
        } else {
            OnDependencyFailure::Hold
        }
    }

    /// What callers may hand agentd, checked alike at every door.
    pub fn input(&self) -> InputLimits {
        InputLimits {
            max_title_chars: self.max_title_chars,
            max_prompt_bytes: self.max_prompt_bytes,
            max_message_bytes: self.max_message_bytes,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 1,
            max_children: 64,
            max_steps_per_turn: 16,
            context_file_max_bytes: 64 * 1024,
            compact_keep_recent: 4,
            max_live_agents: 100_000,
            max_running_turns: 0,
            max_running_turns_per_parent: 0,
            on_dependency_failure: "hold".into(),
            max_attempts: 3,
            retry_backoff_ms: 1_000,
            retry_backoff_max_ms: 60_000,
            fail_on_error_marker: false,
            max_title_chars: InputLimits::default().max_title_chars,
            max_prompt_bytes: InputLimits::default().max_prompt_bytes,
            max_message_bytes: InputLimits::default().max_message_bytes,
            tool_result_max_bytes: 64 * 1024,
            approval_timeout_ms: 0,
        }
    }
}

/// One agent type: what an agent of this type is told, may use and may talk to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentType {
    /// Type name (the table key; filled in when loaded).
    pub name: String,
    /// Default title of agents of this type; workers are addressed by it, trimmed.
    pub title: String,
    /// One line for people and for the spawn tool's description.
    pub description: String,
    /// The type's system prompt overlay.
    pub prompt: String,
    /// Regular (non-management) tools agents of this type get.
    pub tools: Vec<String>,
    /// Agent types connected as Manage workers (seed 000).
    pub workers: Vec<String>,
    /// Manage options for this type's workers.
    pub manage: ManageOptions,
    /// Sub-agents of this type get the management tools while `depth < max_depth`.
    pub grants_management: bool,
    /// A `yield_to_parent` of an agent of this type waits for a person's approval (the
    /// approval gate of tools, `waiting_review`) before its result reaches the parent: a
    /// rejection comes back to the agent as the tool's error, so it can revise and yield again.
    pub review_yield: bool,
    /// Model name passed to the backend, if the type pins one.
    pub model: Option<String>,
    /// Model provider (a `[providers.<name>]` of the config), if the type pins one.
    pub provider: Option<String>,
    /// How many phases a task of this type has (`=== PHASE N COMPLETE ===`); progress is
    /// phase / phases.
    pub phases: Option<u32>,
    /// Tools an agent CLI (the process backend's `claude-code` protocol) runs by itself for
    /// agents of this type (`--allowedTools`): the CLI's own names, e.g. `Bash`, `Read`,
    /// `Edit`, or rules such as `Bash(git:*)`. An agent's own allowed tools narrow them.
    pub cli_tools: Vec<String>,
    /// The agent CLI's permission mode for this type (`--permission-mode`: `default`,
    /// `acceptEdits`, `plan`, `bypassPermissions`); unset = the CLI's default.
    pub cli_permission_mode: Option<String>,
    /// What the type's A2A Agent Card says of it (`[a2a]` of the type file; read by the A2A
    /// server only).
    pub a2a: A2aCardSection,
}

/// `[a2a]` of an agent type file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct A2aCardSection {
    /// The card's skills (none: one skill made from the type's name and description).
    pub skills: Vec<A2aSkill>,
}

/// One skill of an A2A Agent Card (`AgentSkill`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct A2aSkill {
    /// Its id, unique within the card.
    pub id: String,
    /// Its name (empty: the id).
    pub name: String,
    /// What it does.
    pub description: String,
    /// Keywords.
    pub tags: Vec<String>,
    /// Example requests.
    pub examples: Vec<String>,
}

/// The agent type table, with the seed's aliases (`worker` = `coding`, `debugger` = `debug`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentTypes {
    types: BTreeMap<String, AgentType>,
    /// Each type's name and default title as its agents' records hold them: shared by all
    /// of them (one string for 100,000 idle agents of a type, not one each).
    shared: BTreeMap<String, SharedNames>,
}

/// A type's name and default title, shared by the records of its agents.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedNames {
    /// The type's name.
    pub name: agentd_proto::SharedName,
    /// [`AgentTypes::default_title`], trimmed.
    pub title: agentd_proto::SharedName,
}

impl AgentTypes {
    /// The type names that name another type (seed 004).
    pub const ALIASES: [(&'static str, &'static str); 3] = [
        ("worker", "coding"),
        ("debugger", "debug"),
        ("spawn_subagent", "subagent"),
    ];

    /// Builds and validates a table. Worker titles must be non-empty and unique after
    /// trimming (`invalid_title`); workers must name known types (`unknown_agent_type`).
    pub fn new(types: impl IntoIterator<Item = AgentType>) -> Result<Self, AgentdError> {
        let mut map = BTreeMap::new();
        for t in types {
            map.insert(t.name.clone(), t);
        }
        let shared = map
            .iter()
            .map(|(name, t)| (name.clone(), SharedNames::of(t)))
            .collect();
        let table = AgentTypes { types: map, shared };
        table.validate()?;
        Ok(table)
    }

    fn validate(&self) -> Result<(), AgentdError> {
        for t in self.types.values() {
            let mut seen = HashSet::new();
            for w in &t.workers {
                let worker = self.get(w).ok_or_else(|| {
                    AgentdError::new(
                        ErrorCode::UnknownAgentType,
                        format!("agent type `{}` names unknown worker type `{w}`", t.name),
                    )
                })?;
                let title = worker.title.trim();
                if title.is_empty() {
                    return Err(AgentdError::new(
                        ErrorCode::InvalidTitle,
                        format!("worker `{w}` of `{}` has an empty title", t.name),
                    ));
                }
                if !seen.insert(title.to_string()) {
                    return Err(AgentdError::new(
                        ErrorCode::InvalidTitle,
                        format!("agent type `{}` has two workers titled `{title}`", t.name),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The longest sync wait any type's Manage tool is configured with, ms (what a call that
    /// runs a tool in another process may have to wait for, besides its own work).
    pub fn longest_sync_wait_ms(&self) -> u64 {
        self.types
            .values()
            .map(|t| t.manage.sync_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// Resolves a type name, or an alias. A type of the alias's own name (one `agents.dir`
    /// defines, as `worker.toml`) is that name's: it replaces the alias, as a file replaces
    /// the built-in type of its name.
    pub fn get(&self, name: &str) -> Option<&AgentType> {
        if let Some(t) = self.types.get(name) {
            return Some(t);
        }
        let name = name.trim();
        self.types.get(name).or_else(|| {
            Self::ALIASES
                .iter()
                .find(|(alias, _)| *alias == name)
                .and_then(|(_, to)| self.types.get(*to))
        })
    }

    /// The title agents of type `t` get by default: its title, or its name if it has none.
    pub fn default_title(t: &AgentType) -> String {
        match t.title.trim() {
            "" => t.name.clone(),
            title => title.to_string(),
        }
    }

    /// The name and default title the records of type `t`'s agents share (made afresh for a
    /// type that is not this table's).
    pub fn shared_names(&self, t: &AgentType) -> SharedNames {
        self.shared
            .get(&t.name)
            .cloned()
            .unwrap_or_else(|| SharedNames::of(t))
    }

    /// All types, by name.
    pub fn iter(&self) -> impl Iterator<Item = &AgentType> {
        self.types.values()
    }

    /// The worker types of `parent_type`, by trimmed title.
    pub fn workers_of(&self, parent_type: &str) -> Vec<&AgentType> {
        self.get(parent_type)
            .map(|t| self.workers(t).collect())
            .unwrap_or_default()
    }

    /// The worker types of `parent`, in its order (types it names that do not exist left out).
    pub fn workers<'a>(
        &'a self,
        parent: &'a AgentType,
    ) -> impl Iterator<Item = &'a AgentType> + Clone {
        parent.workers.iter().filter_map(|w| self.get(w))
    }
}

/// Everything the actors need to know that is not a port: plain data, fixed when the process
/// starts (what changes at run time, like the tool catalogue, lives with the ports, in `Deps`).
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Limits.
    pub limits: Limits,
    /// Agent types.
    pub types: AgentTypes,
    /// Price per model name; models not listed use `default_price`.
    pub prices: BTreeMap<String, Price>,
    /// Price of unlisted models (seed 001's Claude pricing by default).
    pub default_price: Price,
    /// Base system prompt of every agent.
    pub base_prompt: String,
    /// Overlay for every sub-agent (seed 004's sub-agent role).
    pub subagent_prompt: String,
    /// Directories context files may be read from.
    pub context_dirs: Vec<PathBuf>,
    /// Arbiters (threads) that host agents; 0 means one per core, 1 (the default) the
    /// current one: hops between threads cost more than agents' own work (see
    /// `deploy/default.toml`).
    pub arbiters: usize,
    /// Names of the configured model providers besides the default (spawns and types may
    /// name them).
    pub providers: std::collections::BTreeSet<String>,
    /// Checkpoints kept per agent (older ones are pruned; 0 keeps all).
    pub checkpoints_keep: usize,
    /// Running turns allowed per provider (`default` = the default provider); providers not
    /// listed have no limit.
    pub provider_limits: BTreeMap<String, usize>,
    /// Context windows per provider (`default` = the default provider); providers not listed
    /// are not checked before a call.
    pub context_windows: BTreeMap<String, ContextWindow>,
    /// Request and token rates per provider (`default` = the default provider); providers not
    /// listed are not paced.
    pub provider_rates: BTreeMap<String, ProviderRates>,
}

/// How fast agentd may call a provider (0 = no limit of that kind).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProviderRates {
    /// Calls per minute.
    pub requests_per_minute: u32,
    /// Input tokens per minute, each call's estimated before it is made.
    pub tokens_per_minute: u32,
}

/// A provider's context window: a request's input and the answer it asks for must fit in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextWindow {
    /// Tokens the model takes in all (input and answer).
    pub context_tokens: u64,
    /// Tokens a request leaves for the answer.
    pub max_tokens: u64,
}

impl RuntimeConfig {
    /// A config with default limits and prompts around `types`.
    pub fn with_types(types: AgentTypes) -> Self {
        RuntimeConfig {
            limits: Limits::default(),
            types,
            prices: BTreeMap::new(),
            default_price: Price::default(),
            base_prompt: "You are an agent run by agentd.".into(),
            subagent_prompt: "You are a sub-agent. Do the task you were given and finish it \
                              with yield_to_parent, passing your result."
                .into(),
            context_dirs: vec![PathBuf::from(".")],
            arbiters: 1,
            providers: Default::default(),
            checkpoints_keep: 20,
            provider_limits: BTreeMap::new(),
            context_windows: BTreeMap::new(),
            provider_rates: BTreeMap::new(),
        }
    }

    /// The price of `model` (or the default price).
    pub fn price_of(&self, model: Option<&str>) -> Price {
        model
            .and_then(|m| self.prices.get(m))
            .copied()
            .unwrap_or(self.default_price)
    }
}

impl SharedNames {
    fn of(t: &AgentType) -> Self {
        SharedNames {
            name: t.name.as_str().into(),
            title: AgentTypes::default_title(t).trim().into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(name: &str, title: &str, workers: &[&str]) -> AgentType {
        AgentType {
            name: name.into(),
            title: title.into(),
            workers: workers.iter().map(|w| w.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn duplicate_trimmed_titles_are_invalid_title() {
        let err = AgentTypes::new([
            ty("lead", "Lead", &["a", "b"]),
            ty("a", "Ops", &[]),
            ty("b", "  Ops ", &[]),
        ])
        .err()
        .map(|e| e.code);
        assert_eq!(err, Some(ErrorCode::InvalidTitle));
    }

    #[test]
    fn empty_worker_titles_are_invalid_title() {
        let err = AgentTypes::new([ty("lead", "Lead", &["a"]), ty("a", "   ", &[])])
            .err()
            .map(|e| e.code);
        assert_eq!(err, Some(ErrorCode::InvalidTitle));
    }

    #[test]
    fn aliases_resolve() {
        let t = AgentTypes::new([ty("coding", "Coder", &[]), ty("debug", "Debugger", &[])]);
        let t = t.unwrap_or_default();
        assert_eq!(t.get("worker").map(|t| t.name.as_str()), Some("coding"));
        assert_eq!(t.get("debugger").map(|t| t.name.as_str()), Some("debug"));
    }
}
