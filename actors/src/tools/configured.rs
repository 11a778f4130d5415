//! How a [`ConfiguredTool`] runs: a webhook tool is called now; a service tool's call is
//! refused here (its answer comes to a waiting turn).

use super::{ToolContext, ToolOutcome};
use crate::catalogue::{ConfiguredRun, ConfiguredTool};
use crate::ports::{WebhookCall, WebhookError};
use agentd_proto::{AgentdError, ErrorCode};
use serde_json::Value;
use std::time::Duration;

impl ConfiguredTool {
    /// Runs a webhook tool now (call `call_id`). A service tool's call waits for its answer
    /// inside a turn (`turn::service_calls`), so running one here is refused.
    pub(crate) async fn run(
        &self,
        ctx: &ToolContext,
        call_id: uuid::Uuid,
        args: &Value,
    ) -> Result<ToolOutcome, AgentdError> {
        let ConfiguredRun::Http { url, secret } = &self.run else {
            return Err(AgentdError::new(
                ErrorCode::InvalidTransition,
                format!(
                    "`{}` is a service tool: another service answers its calls, which only an agent's turn makes",
                    self.name
                ),
            ));
        };
        let Some(client) = ctx.deps.tools.webhooks() else {
            return Err(AgentdError::new(
                ErrorCode::Internal,
                "no webhook client is wired into this process",
            ));
        };
        let call = WebhookCall {
            url,
            secret: secret.expose(),
            call_id,
            arguments: args,
            timeout: Duration::from_millis(self.timeout_ms),
            trace: agentd_observe::telemetry::current(),
        };
        match client.call(call).await {
            Ok(value) => Ok(ToolOutcome::Value(value)),
            Err(WebhookError::Timeout) => Err(AgentdError::new(
                ErrorCode::ToolTimeout,
                format!(
                    "webhook `{}` did not answer within {} ms",
                    self.name, self.timeout_ms
                ),
            )),
            Err(e) => Err(AgentdError::new(
                ErrorCode::ToolFailed,
                format!("webhook `{}`: {e}", self.name),
            )),
        }
    }
}
