//! The `Manage` tool's vocabulary (seed 000): its configuration options and its invocation
//! arguments. Field names are snake_case; the seed's camelCase names are accepted as aliases.

use crate::error::{AgentdError, ErrorCode};
use serde::{Deserialize, Serialize};

/// Whether `send_message` waits for the worker's answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ManageMode {
    /// Wait for up to `sync_max_messages` assistant messages or `sync_timeout_ms` (default).
    #[default]
    Sync,
    /// Return at once; the worker's answers are forwarded to the parent as they come.
    Async,
}

/// What a parent does with a worker's answer forwarded to it (seed 000).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AsyncForward {
    /// The parent runs a model turn on it (default).
    #[default]
    Turn,
    /// The parent keeps it on its thread without spending a model turn; it reaches the world
    /// through the events stream (`forwarded`), and the parent's model sees it with its next
    /// message. (Only roots manage workers, so the parent is a root.)
    Relay,
}

/// How a parent talks to its workers; set per agent type and overridable per call. Unknown
/// fields are refused, in an agent type's `[manage]` as in a spawn request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct ManageOptions {
    /// `sync` (default) or `async`.
    pub mode: ManageMode,
    /// Maximum wait in sync mode. Default 15000.
    #[serde(alias = "syncTimeoutMs")]
    pub sync_timeout_ms: u64,
    /// Assistant messages to collect before a sync call returns. Default 1.
    #[serde(alias = "syncMaxMessages")]
    pub sync_max_messages: u32,
    /// Prefix of forwarded text; `{{agentTitle}}` is replaced. Default `From {{agentTitle}}: `.
    #[serde(alias = "asyncPrefix")]
    pub async_prefix: String,
    /// Also prefix forwarded text with the alias and child thread id.
    #[serde(alias = "showCorrelationInOutput")]
    pub show_correlation_in_output: bool,
    /// `turn` (default) or `relay`: what the parent does with a forwarded answer.
    #[serde(alias = "asyncForward")]
    pub async_forward: AsyncForward,
}

impl Default for ManageOptions {
    fn default() -> Self {
        ManageOptions {
            mode: ManageMode::Sync,
            sync_timeout_ms: 15_000,
            sync_max_messages: 1,
            async_prefix: "From {{agentTitle}}: ".to_string(),
            show_correlation_in_output: false,
            async_forward: AsyncForward::Turn,
        }
    }
}

impl ManageOptions {
    /// The prefix for a forwarded message from `title` on thread `child_id` under `alias`.
    pub fn render_prefix(&self, title: &str, alias: &str, child_id: &str) -> String {
        let base = self.async_prefix.replace("{{agentTitle}}", title);
        if self.show_correlation_in_output {
            format!("[alias={alias} thread={child_id}] {base}")
        } else {
            base
        }
    }

    /// These options with the per-call overrides of `req` applied.
    pub fn with_overrides(&self, req: &ManageRequest) -> ManageOptions {
        let mut out = self.clone();
        if let Some(mode) = req.mode {
            out.mode = mode;
        }
        if let Some(ms) = req.sync_timeout_ms {
            out.sync_timeout_ms = ms;
        }
        if let Some(n) = req.sync_max_messages {
            out.sync_max_messages = n.max(1);
        }
        if let Some(prefix) = &req.async_prefix {
            out.async_prefix = prefix.clone();
        }
        if let Some(show) = req.show_correlation_in_output {
            out.show_correlation_in_output = show;
        }
        out
    }
}

/// The two Manage commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ManageCommand {
    /// Route a message to a worker's child thread.
    SendMessage,
    /// Count the active child threads of the current parent thread.
    CheckStatus,
}

/// Arguments of one Manage invocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManageRequest {
    /// `send_message` or `check_status`.
    pub command: ManageCommand,
    /// Worker title (trimmed before matching); required for `send_message`.
    #[serde(default)]
    pub worker: Option<String>,
    /// Text for the worker; required for `send_message`.
    #[serde(default)]
    pub message: Option<String>,
    /// Child thread alias; required.
    #[serde(default, alias = "threadAlias")]
    pub thread_alias: Option<String>,
    /// Per-call override of the mode.
    #[serde(default)]
    pub mode: Option<ManageMode>,
    /// Per-call override of the sync timeout.
    #[serde(default, alias = "syncTimeoutMs")]
    pub sync_timeout_ms: Option<u64>,
    /// Per-call override of the message count.
    #[serde(default, alias = "syncMaxMessages")]
    pub sync_max_messages: Option<u32>,
    /// Per-call override of the forward prefix.
    #[serde(default, alias = "asyncPrefix")]
    pub async_prefix: Option<String>,
    /// Per-call override of the correlation prefix.
    #[serde(default, alias = "showCorrelationInOutput")]
    pub show_correlation_in_output: Option<bool>,
}

impl ManageRequest {
    /// Parses tool arguments. A missing `command` is `missing_field`; wrong types are
    /// `invalid_argument`.
    pub fn from_json(args: &serde_json::Value) -> Result<Self, AgentdError> {
        if args.get("command").is_none() {
            return Err(AgentdError::missing_field("command"));
        }
        // Read from the borrowed value: no copy of the arguments.
        Self::deserialize(args)
            .map_err(|e| AgentdError::new(ErrorCode::InvalidArgument, format!("Manage: {e}")))
    }

    /// The trimmed value of a required text field, or `missing_field`.
    pub fn required<'a>(value: &'a Option<String>, field: &str) -> Result<&'a str, AgentdError> {
        match value.as_deref().map(str::trim) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(AgentdError::missing_field(field)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn camel_case_aliases_are_accepted() {
        let req = ManageRequest::from_json(&json!({
            "command": "send_message", "worker": " ops ", "message": "hi",
            "threadAlias": "t1", "syncTimeoutMs": 5, "mode": "async"
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(req.thread_alias.as_deref(), Some("t1"));
        assert_eq!(req.sync_timeout_ms, Some(5));
        assert_eq!(
            ManageRequest::required(&req.worker, "worker").ok(),
            Some("ops")
        );
    }

    #[test]
    fn prefix_renders_title_and_correlation() {
        let mut o = ManageOptions::default();
        assert_eq!(o.render_prefix("Ops", "a", "c"), "From Ops: ");
        o.show_correlation_in_output = true;
        assert_eq!(
            o.render_prefix("Ops", "a", "c"),
            "[alias=a thread=c] From Ops: "
        );
    }

    #[test]
    fn the_defaults_are_the_seed_s() -> serde_json::Result<()> {
        let o = ManageOptions::default();
        assert_eq!(o.mode, ManageMode::Sync);
        assert_eq!(o.sync_timeout_ms, 15_000);
        assert_eq!(o.sync_max_messages, 1);
        assert_eq!(o.async_prefix, "From {{agentTitle}}: ");
        assert!(!o.show_correlation_in_output);
        // A `[manage]` table that sets nothing gets the same.
        assert_eq!(serde_json::from_value::<ManageOptions>(json!({}))?, o);
        Ok(())
    }
}
