//! Commands on tools: the tools an agent is shown, running one as the agent, the open calls,
//! answering a service tool's call, approving or rejecting a call that waits for approval.

use crate::client::{Client, Failure};
use crate::output::{self, Output};
use anyhow::anyhow;
use clap::Subcommand;
use serde_json::{Value, json};

#[derive(Subcommand)]
pub enum ToolCommands {
    /// List the tools an agent's model is shown.
    Tools {
        /// Agent id.
        agent_id: String,
    },
    /// Run a tool as an agent would (`POST /v1/agents/{id}/tools/{tool}`; `POST
    /// /v1/tools/{tool}` is the same call with the agent id in the body).
    Invoke {
        /// Agent id.
        agent_id: String,
        /// The tool's name (e.g. `Manage`, `spawn_agent`, `current_time`).
        tool: String,
        /// The tool's arguments, as a JSON object.
        #[arg(default_value = "{}")]
        args: String,
    },
    /// List the open tool calls: service calls waiting for their answer (`pending`) and calls
    /// waiting for approval (`awaiting_approval`), oldest first.
    ToolCalls {
        /// Only calls with this status: pending or awaiting_approval.
        #[arg(long)]
        status: Option<String>,
    },
    /// Answer a pending call of a service tool (`waiting_tool`): `--result JSON` or
    /// `--error MESSAGE [--code CODE]`.
    ToolResult {
        /// Agent id.
        agent_id: String,
        /// agentd's id of the call (`GET /v1/tool_calls`).
        call_id: String,
        /// The result, as JSON.
        #[arg(long, conflicts_with = "error")]
        result: Option<String>,
        /// The tool's failure, for the model.
        #[arg(long, required_unless_present = "result")]
        error: Option<String>,
        /// The worker's own error code (free text).
        #[arg(long, requires = "error")]
        code: Option<String>,
    },
    /// Approve a tool call that waits for approval (`waiting_review`): it runs.
    Approve {
        /// Agent id.
        agent_id: String,
        /// agentd's id of the call (`GET /v1/tool_calls?status=awaiting_approval`).
        call_id: String,
        /// Why (kept with the call).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Reject a tool call that waits for approval: the model gets the reason as a tool error.
    Reject {
        /// Agent id.
        agent_id: String,
        /// agentd's id of the call (`GET /v1/tool_calls?status=awaiting_approval`).
        call_id: String,
        /// Why, for the model.
        #[arg(long)]
        reason: String,
    },
}

impl ToolCommands {
    pub fn run(&self, client: &Client, out: &Output) -> Result<(), Failure> {
        let (v, human): (_, fn(&Value) -> String) = match self {
            ToolCommands::Tools { agent_id } => (
                client.get(&format!("/v1/agents/{agent_id}/tools"))?,
                output::tools,
            ),
            ToolCommands::Invoke {
                agent_id,
                tool,
                args,
            } => (
                client.post(
                    &format!("/v1/agents/{agent_id}/tools/{tool}"),
                    parse_json("the arguments", args)?,
                )?,
                output::pretty,
            ),
            ToolCommands::ToolCalls { status } => (
                client.get_with("/v1/tool_calls", &[("status", status.as_deref())])?,
                output::tool_calls,
            ),
            ToolCommands::ToolResult {
                agent_id,
                call_id,
                result,
                error,
                code,
            } => {
                let body = match (result, error) {
                    (Some(text), _) => json!({ "result": parse_json("--result", text)? }),
                    (None, Some(message)) => {
                        json!({"error": {"message": message, "code": code}})
                    }
                    (None, None) => {
                        return Err(Failure::Other(anyhow!("give --result or --error")));
                    }
                };
                (
                    client.post(
                        &format!("/v1/agents/{agent_id}/tool_results/{call_id}"),
                        body,
                    )?,
                    output::pretty,
                )
            }
            ToolCommands::Approve {
                agent_id,
                call_id,
                reason,
            } => (
                client.post(
                    &format!("/v1/agents/{agent_id}/approvals/{call_id}"),
                    json!({"approve": true, "reason": reason}),
                )?,
                output::pretty,
            ),
            ToolCommands::Reject {
                agent_id,
                call_id,
                reason,
            } => (
                client.post(
                    &format!("/v1/agents/{agent_id}/approvals/{call_id}"),
                    json!({"approve": false, "reason": reason}),
                )?,
                output::pretty,
            ),
        };
        out.answer(&v, human)
    }
}

/// `text` as JSON; `what` names it in the error.
fn parse_json(what: &str, text: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|e| Failure::Other(anyhow!("{what} is not JSON: {e}")))
}
