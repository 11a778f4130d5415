//! Commands on tool calls: answering a service tool's call, approving or rejecting a call that
//! waits for approval.

use crate::client::{Client, Failure};
use crate::output::{self, Output};
use anyhow::anyhow;
use clap::Subcommand;
use serde_json::{Value, json};

#[derive(Subcommand)]
pub enum Tools {
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

impl Tools {
    pub fn run(&self, client: &Client, out: &Output) -> Result<(), Failure> {
        let v = match self {
            Tools::ToolResult {
                agent_id,
                call_id,
                result,
                error,
                code,
            } => {
                let body = match (result, error) {
                    (Some(text), _) => {
                        let value: Value = serde_json::from_str(text)
                            .map_err(|e| Failure::Other(anyhow!("--result is not JSON: {e}")))?;
                        json!({ "result": value })
                    }
                    (None, Some(message)) => {
                        json!({"error": {"message": message, "code": code}})
                    }
                    (None, None) => {
                        return Err(Failure::Other(anyhow!("give --result or --error")));
                    }
                };
                client.post(&format!("/agents/{agent_id}/tool_results/{call_id}"), body)?
            }
            Tools::Approve {
                agent_id,
                call_id,
                reason,
            } => client.post(
                &format!("/agents/{agent_id}/approvals/{call_id}"),
                json!({"approve": true, "reason": reason}),
            )?,
            Tools::Reject {
                agent_id,
                call_id,
                reason,
            } => client.post(
                &format!("/agents/{agent_id}/approvals/{call_id}"),
                json!({"approve": false, "reason": reason}),
            )?,
        };
        out.answer(&v, output::pretty);
        Ok(())
    }
}
