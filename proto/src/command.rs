//! Commands other services send to agentd (through the HTTP API or the Redis command stream),
//! and the reply they get.

use crate::control::Control;
use crate::error::AgentdError;
use crate::manage::ManageOptions;
use serde::{Deserialize, Serialize};

/// What a service asks to create an agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    #[serde(default)]
    pub manage: Option<ManageOptions>,
    /// Spending limits (capped by the parent's).
    #[serde(default)]
    pub budget: Option<crate::usage::Budget>,
    /// Scheduling priority (default: the parent's, or normal).
    #[serde(default)]
    pub priority: Option<crate::usage::Priority>,
    /// Agents that must complete before this one runs.
    #[serde(default, alias = "dependsOn")]
    pub depends_on: Vec<String>,
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
}

/// A request from outside agentd.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
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
    },
    /// Apply a lifecycle control.
    Control {
        /// Target agent.
        agent_id: String,
        /// The control.
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
    },
    /// Replace an agent's budget (e.g. raise it, then `resume`).
    SetBudget {
        /// Target agent.
        agent_id: String,
        /// The new limits.
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
    /// Answer a pending call of a service tool of `agent_id` with `result` or `error` (one
    /// of them). The first answer is applied; later ones get `tool_call_closed`.
    ToolResult {
        /// The agent whose turn made the call.
        agent_id: String,
        /// agentd's id of the call.
        call_id: uuid::Uuid,
        /// The tool's result.
        #[serde(default)]
        #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
        result: Option<serde_json::Value>,
        /// The tool's failure.
        #[serde(default)]
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
        #[serde(default)]
        args: serde_json::Value,
    },
}

/// The answer to a [`Command`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The command's result, if it succeeded.
    #[serde(default)]
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
            | Command::ToolResult { agent_id, .. }
            | Command::ApproveTool { agent_id, .. } => Some(agent_id),
            Command::InvokeTool { agent_id, .. } => agent_id.as_deref(),
            Command::Spawn(req) => req.parent_id.as_deref(),
            Command::List { parent_id } => parent_id.as_deref(),
        }
    }
}
