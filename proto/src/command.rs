//! Commands other services send to agentd (through the HTTP API or the Redis command stream),
//! and the reply they get.

use crate::control::Control;
use crate::error::AgentdError;
use crate::manage::ManageOptions;
use serde::{Deserialize, Serialize};

/// What a service asks to create an agent. Unknown fields are refused (a typo such as `promt`
/// would otherwise spawn an agent that never runs); the camelCase aliases are accepted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SpawnRequest {
    /// Agent type (e.g. `lead`, `research`); default `subagent`.
    #[serde(default, alias = "agentType")]
    pub agent_type: Option<String>,
    /// Title; defaults to the type's title.
    #[serde(default)]
    pub title: Option<String>,
    /// First message; the agent starts working on it at once.
    #[serde(default)]
    pub prompt: Option<String>,
    /// Parent agent; `None` creates a root (foreground unless `background`).
    #[serde(default, alias = "parentId")]
    pub parent_id: Option<String>,
    /// Tools the new agent may use (a subset of its type's tools).
    #[serde(default, alias = "allowedTools")]
    pub allowed_tools: Option<Vec<String>>,
    /// Files attached to the first message.
    #[serde(default, alias = "contextFiles")]
    pub context_files: Vec<String>,
    /// Manage options override for this root's workers.
    #[serde(default, deserialize_with = "crate::strict::optional_object")]
    pub manage: Option<ManageOptions>,
    /// Spending limits (capped by the parent's).
    #[serde(default, deserialize_with = "crate::strict::optional_object")]
    pub budget: Option<crate::usage::Budget>,
    /// Scheduling priority (default: the parent's, or normal).
    #[serde(default)]
    pub priority: Option<crate::usage::Priority>,
    /// Agents that must complete before this one runs.
    #[serde(default, alias = "dependsOn")]
    pub depends_on: Vec<String>,
    /// What it does when a dependency fails, is cancelled or terminated (`fail` or `hold`);
    /// `None`: `limits.on_dependency_failure`.
    #[serde(default, alias = "onDependencyFailure")]
    pub on_dependency_failure: Option<crate::event::OnDependencyFailure>,
    /// Model provider override (a `[providers.<name>]` of the config).
    #[serde(default)]
    pub provider: Option<String>,
    /// Model name override.
    #[serde(default)]
    pub model: Option<String>,
    /// Environment variables (a process-backend agent's process gets them).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// A background agent (seeds 003 and 004): a root that is not foreground (no management
    /// tools), or a sub-agent whose output is queued for its parent like any message.
    #[serde(default)]
    pub background: bool,
    /// Makes the spawn idempotent (the HTTP `Idempotency-Key` header sets it too): a spawn
    /// retried with the same key under the same parent (or as a root) answers the agent the
    /// first one made, and never makes a second; the same key with another request is
    /// `idempotency_key_reused`. At most 255 characters, visible ASCII.
    #[serde(
        default,
        alias = "idempotencyKey",
        skip_serializing_if = "Option::is_none"
    )]
    pub idempotency_key: Option<String>,
}

/// A request from outside agentd. A command naming a field its type does not have is refused
/// whole (`invalid_argument` at the HTTP door; on the command stream a dead letter and an
/// `invalid_argument` reply), so a misspelt field is never silently dropped. The envelope
/// around a command stays open to new fields; the command itself does not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    /// Create an agent.
    Spawn(Box<SpawnRequest>),
    /// Send text to an agent (a root's conversation or a follow-up to any agent).
    Send {
        /// Target agent.
        agent_id: String,
        /// The text.
        text: String,
        /// Abort the running turn first.
        #[serde(default)]
        interrupt: bool,
        /// Makes the message idempotent (the HTTP `Idempotency-Key` header sets it too): a
        /// message retried with the same key to the same agent answers what the first one did
        /// and is queued once, for 24 h; the same key with another text is
        /// `idempotency_key_reused`. At most 255 characters, visible ASCII.
        #[serde(
            default,
            alias = "idempotencyKey",
            skip_serializing_if = "Option::is_none"
        )]
        idempotency_key: Option<String>,
    },
    /// Apply a lifecycle control.
    Control {
        /// Target agent.
        agent_id: String,
        /// The control.
        #[serde(deserialize_with = "crate::strict::object")]
        control: Control,
    },
    /// Post `reset` to an agent.
    Reset {
        /// Target agent.
        agent_id: String,
        /// Seed message.
        #[serde(default)]
        message: Option<String>,
    },
    /// Post `compact` to an agent.
    Compact {
        /// Target agent.
        agent_id: String,
    },
    /// Read one agent's record.
    Inspect {
        /// Target agent.
        agent_id: String,
    },
    /// List the children of an agent, or all roots.
    List {
        /// Parent; `None` lists roots.
        #[serde(default)]
        parent_id: Option<String>,
    },
    /// Read an agent's thread.
    Thread {
        /// Target agent.
        agent_id: String,
    },
    /// Provide what an agent in `waiting_dependency` asked for.
    ProvideDependency {
        /// Target agent.
        agent_id: String,
        /// The dependency (text or JSON as text).
        value: String,
    },
    /// Answer the question of an agent in `waiting_question`.
    AnswerQuestion {
        /// Target agent.
        agent_id: String,
        /// The answer.
        answer: String,
        /// The id of the inbox item the answer becomes (default: a new one); the same id
        /// twice is one answer (A2A derives it from its message id).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item_id: Option<uuid::Uuid>,
    },
    /// Cancel one inbox item of an agent alone: taken out of its queue if it waits there, its
    /// turn interrupted if it runs; the rest of the queue goes on (the `cancel` control drops
    /// it all and stops the agent).
    CancelItem {
        /// Target agent.
        agent_id: String,
        /// The item (its envelope id).
        item_id: uuid::Uuid,
    },
    /// Replace an agent's budget (e.g. raise it, then `resume`).
    SetBudget {
        /// Target agent.
        agent_id: String,
        /// The new limits.
        #[serde(deserialize_with = "crate::strict::object")]
        budget: crate::usage::Budget,
    },
    /// Replace an agent's environment variables (a process-backend agent's process is started
    /// again with them before its next turn).
    SetEnv {
        /// Target agent.
        agent_id: String,
        /// The new variables.
        env: std::collections::BTreeMap<String, String>,
    },
    /// Take a checkpoint of an agent now (reason `manual`).
    Checkpoint {
        /// Target agent.
        agent_id: String,
    },
    /// List an agent's checkpoints, newest first.
    Checkpoints {
        /// Target agent.
        agent_id: String,
    },
    /// Bring an agent back to one of its checkpoints.
    Restore {
        /// Target agent.
        agent_id: String,
        /// The checkpoint; `None` = the newest.
        #[serde(default)]
        checkpoint_id: Option<uuid::Uuid>,
    },
    /// Fork an agent: a new root of its type whose thread is a copy of the source's up to a
    /// point, the source untouched. Answers the fork.
    Fork {
        /// The source agent.
        agent_id: String,
        /// Where the copy ends: one of the source's checkpoints (its conversation), or an entry
        /// of its thread (that entry included); `None` = its thread now.
        #[serde(default)]
        at: Option<uuid::Uuid>,
        /// A retry with the same key answers the fork the first attempt made (as a spawn's).
        #[serde(default)]
        idempotency_key: Option<String>,
    },
    /// Answer a pending call of a service tool of `agent_id` with `result` or `error` (one
    /// of them). The first answer is applied; later ones get `tool_call_closed`.
    ToolResult {
        /// The agent whose turn made the call.
        agent_id: String,
        /// agentd's id of the call.
        call_id: uuid::Uuid,
        /// The tool's result.
        #[serde(default, deserialize_with = "crate::strict::optional_unique_value")]
        #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
        result: Option<serde_json::Value>,
        /// The tool's failure.
        #[serde(default, deserialize_with = "crate::strict::optional_object")]
        error: Option<crate::tool_call::ToolAnswerError>,
    },
    /// Approve or reject a call of `agent_id` that waits for approval (`awaiting_approval`).
    /// The first decision is applied; later ones get `tool_call_closed`.
    ApproveTool {
        /// The agent whose turn made the call.
        agent_id: String,
        /// agentd's id of the call.
        call_id: uuid::Uuid,
        /// `true` runs the call, `false` rejects it.
        approve: bool,
        /// Why (a rejection's reason reaches the model).
        #[serde(default)]
        reason: Option<String>,
    },
    /// Run a tool as if `agent_id`'s model had called it (for gateways and tests).
    InvokeTool {
        /// The calling agent (its thread is the tool's runtime thread). Required.
        #[serde(default)]
        agent_id: Option<String>,
        /// Tool name.
        tool: String,
        /// Tool arguments.
        #[serde(default, deserialize_with = "crate::strict::unique_value")]
        args: serde_json::Value,
    },
}

/// The answer to a [`Command`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The command's result, if it succeeded.
    #[serde(default, deserialize_with = "crate::strict::optional_unique_value")]
    pub result: Option<serde_json::Value>,
    /// The error, if it failed.
    #[serde(default)]
    pub error: Option<AgentdError>,
}

impl Reply {
    /// The command's result as it was answered: its error, or its value (`null` if none).
    pub fn into_result(self) -> Result<serde_json::Value, AgentdError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.result.unwrap_or(serde_json::Value::Null)),
        }
    }
}

impl From<Result<serde_json::Value, AgentdError>> for Reply {
    fn from(r: Result<serde_json::Value, AgentdError>) -> Self {
        match r {
            Ok(v) => Reply {
                result: Some(v),
                error: None,
            },
            Err(e) => Reply {
                result: None,
                error: Some(e),
            },
        }
    }
}

impl Command {
    /// The agent the command acts on, if it names one (a spawn's and a list's: the parent).
    pub fn target(&self) -> Option<&str> {
        match self {
            Command::Send { agent_id, .. }
            | Command::Control { agent_id, .. }
            | Command::Reset { agent_id, .. }
            | Command::Compact { agent_id }
            | Command::Inspect { agent_id }
            | Command::Thread { agent_id }
            | Command::ProvideDependency { agent_id, .. }
            | Command::AnswerQuestion { agent_id, .. }
            | Command::SetBudget { agent_id, .. }
            | Command::SetEnv { agent_id, .. }
            | Command::Checkpoint { agent_id }
            | Command::Checkpoints { agent_id }
            | Command::Restore { agent_id, .. }
            | Command::Fork { agent_id, .. }
            | Command::ToolResult { agent_id, .. }
            | Command::ApproveTool { agent_id, .. }
            | Command::CancelItem { agent_id, .. } => Some(agent_id),
            Command::InvokeTool { agent_id, .. } => agent_id.as_deref(),
            Command::Spawn(req) => req.parent_id.as_deref(),
            Command::List { parent_id } => parent_id.as_deref(),
        }
    }

    /// Refuses a command whose agent ids (its target, a spawn's parent and dependencies) do not
    /// have an agent id's form, as a path refuses one: `invalid_argument`, never a search for
    /// an agent that could not exist.
    pub fn check_agent_ids(&self) -> Result<(), AgentdError> {
        if let Some(target) = self.target() {
            check_agent_id(target)?;
        }
        if let Command::Spawn(req) = self {
            for id in &req.depends_on {
                check_agent_id(id)?;
            }
        }
        Ok(())
    }
}

/// `id` if it has the form of an agent id (a hyphenated uuid, as agentd makes them); otherwise
/// `invalid_argument` saying so. The HTTP paths and queries and the commands use this one rule.
pub fn check_agent_id(id: &str) -> Result<(), AgentdError> {
    if id.len() == 36 && uuid::Uuid::try_parse(id).is_ok() {
        Ok(())
    } else {
        Err(AgentdError::new(
            crate::error::ErrorCode::InvalidArgument,
            format!(
                "`{id}` is not an agent id (a uuid such as 0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162)"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{DEFAULT_MAX_ENVELOPE_BYTES, decode_envelope};
    use crate::envelope::Item;
    use serde_json::json;

    fn refused(v: serde_json::Value) -> String {
        match serde_json::from_value::<Command>(v) {
            Ok(c) => format!("accepted: {c:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_command_naming_a_field_it_does_not_have_is_refused_naming_it() {
        for (command, field) in [
            (
                json!({"type": "spawn", "agent_type": "lead", "promt": "hi"}),
                "promt",
            ),
            (
                json!({"type": "send", "agent_id": "a", "text": "hi", "urgent": true}),
                "urgent",
            ),
            (
                json!({"type": "inspect", "agent_id": "a", "verbose": true}),
                "verbose",
            ),
            (json!({"type": "list", "parentId": "a"}), "parentId"),
            (
                json!({"type": "spawn", "manage": {"mode": "async", "mod": "x"}}),
                "mod",
            ),
            (
                json!({"type": "tool_result", "agent_id": "a",
                       "call_id": "0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162",
                       "error": {"message": "no", "detail": "x"}}),
                "detail",
            ),
            (
                json!({"type": "set_budget", "agent_id": "a", "budget": {"max_token": 5}}),
                "max_token",
            ),
        ] {
            let why = refused(command.clone());
            assert!(
                why.contains(&format!("unknown field `{field}`")),
                "{command}: {why}"
            );
        }
    }

    #[test]
    fn camel_case_aliases_are_still_accepted() {
        let spawn = json!({"type": "spawn", "agentType": "lead", "parentId": "p",
                           "allowedTools": ["x"], "contextFiles": [], "dependsOn": ["d"],
                           "manage": {"syncTimeoutMs": 5}});
        match serde_json::from_value::<Command>(spawn) {
            Ok(Command::Spawn(req)) => {
                assert_eq!(req.agent_type.as_deref(), Some("lead"));
                assert_eq!(req.parent_id.as_deref(), Some("p"));
                assert_eq!(req.depends_on, vec!["d".to_string()]);
                assert_eq!(req.manage.map(|m| m.sync_timeout_ms), Some(5));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_spawn_chooses_what_a_failing_dependency_does() {
        use crate::event::OnDependencyFailure;
        let spawn = |v: serde_json::Value| serde_json::from_value::<Command>(v);
        for (body, policy) in [
            (
                json!({"type": "spawn", "on_dependency_failure": "fail"}),
                Some(OnDependencyFailure::Fail),
            ),
            (
                json!({"type": "spawn", "onDependencyFailure": "hold"}),
                Some(OnDependencyFailure::Hold),
            ),
            (json!({"type": "spawn"}), None),
        ] {
            match spawn(body.clone()) {
                Ok(Command::Spawn(req)) => assert_eq!(req.on_dependency_failure, policy, "{body}"),
                other => panic!("{body}: {other:?}"),
            }
        }
        let why = spawn(json!({"type": "spawn", "on_dependency_failure": "retry"}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(why.contains("unknown variant `retry`"), "{why}");
    }

    #[test]
    fn the_envelope_stays_open_while_its_command_is_strict() {
        let envelope = |item: serde_json::Value| {
            let map = json!({
                "v": 1, "id": "0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162",
                "from": {"type": "external", "name": "py"}, "to": {"type": "system"},
                "sent_at": 5, "a_field_of_a_later_version": [1, 2], "item": item,
            });
            let bytes = rmp_serde::to_vec_named(&map).unwrap_or_default();
            decode_envelope(&bytes, DEFAULT_MAX_ENVELOPE_BYTES)
        };
        let ok = envelope(json!({"kind": "command", "type": "inspect", "agent_id": "a"}));
        assert_eq!(
            ok.map(|e| e.item).ok(),
            Some(Item::Command(Command::Inspect {
                agent_id: "a".into()
            }))
        );
        let typo = envelope(json!({"kind": "command", "type": "spawn", "promt": "hi"}));
        let why = typo.err().map(|e| e.message).unwrap_or_default();
        assert!(why.contains("unknown field `promt`"), "{why}");
    }
}
