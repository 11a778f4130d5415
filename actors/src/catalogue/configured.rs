//! [`ConfiguredTool`]: a tool a deployment defines in `[tools.<name>]` — answered by another
//! service (`kind = "service"`) or by a webhook agentd calls (`kind = "http"`).
//!
//! Invariants: a configured tool's name neither starts with `mcp__` nor shadows a built-in
//! tool (checked when the catalogue is built); its secret is never printed (`Debug` masks it).

use crate::ports::ToolSpec;
use agentd_proto::{AgentdError, ErrorCode, ToolKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// Whether a tool's calls wait for a person's approval before they run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// Every call waits for approval (`waiting_review`).
    Always,
    /// Calls run at once.
    #[default]
    Never,
}

/// A secret read from the environment at start-up; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<Arc<str>>) -> Self {
        Secret(value.into())
    }

    /// The secret's bytes (to sign with).
    pub fn expose(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// How a configured tool runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfiguredRun {
    /// Another service answers it: the call waits for the answer.
    Service,
    /// agentd POSTs the arguments to `url`, signed with `secret` (an empty secret signs with
    /// an empty key: the signature then proves nothing, as documented).
    Http {
        /// Where to POST.
        url: String,
        /// The HMAC key.
        secret: Secret,
    },
}

/// A tool defined in `[tools.<name>]`.
#[derive(Debug, Clone)]
pub struct ConfiguredTool {
    /// The name the model is shown and calls.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON schema of its arguments.
    pub parameters: Value,
    /// How long a call may take (a webhook's request, a service's answer), ms.
    pub timeout_ms: u64,
    /// Whether its calls wait for approval.
    pub approval: Approval,
    /// How it runs.
    pub run: ConfiguredRun,
}

/// Tools are told apart by name (names are unique in a catalogue).
impl PartialEq for ConfiguredTool {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for ConfiguredTool {}

impl std::hash::Hash for ConfiguredTool {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ConfiguredTool {
    /// `service` or `http`.
    pub fn kind(&self) -> ToolKind {
        match self.run {
            ConfiguredRun::Service => ToolKind::Service,
            ConfiguredRun::Http { .. } => ToolKind::Http,
        }
    }

    /// The spec the model is shown.
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }
}

/// Checks a configured tool's name: `^[A-Za-z0-9_-]{1,64}$`, not `mcp__…`, no built-in's.
pub fn check_name(name: &str) -> Result<(), AgentdError> {
    let bad = |why: &str| {
        Err(AgentdError::new(
            ErrorCode::InvalidArgument,
            format!("[tools.{name}]: {why}"),
        ))
    };
    let fits = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !fits {
        return bad("a tool name is 1 to 64 letters, digits, `_` or `-`");
    }
    if name.starts_with("mcp__") {
        return bad("names starting with `mcp__` are MCP tools'");
    }
    if super::builtin::BuiltinTool::named(name).is_some() {
        return bad("the name is a built-in tool's");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("lookup_order").is_ok());
        for bad in ["", "mcp__files__x", "current_time", "spawn_subagent", "a b"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn secrets_are_never_printed() {
        let run = ConfiguredRun::Http {
            url: "http://x".into(),
            secret: Secret::new("hunter2"),
        };
        assert!(!format!("{run:?}").contains("hunter2"));
    }
}
