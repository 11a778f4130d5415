//! The webhook port: one signed POST of a tool call's arguments, its JSON answer back. The
//! service wires an HTTP client in (`services/models/src/webhook.rs`); `actors` knows no HTTP.

use async_trait::async_trait;
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

/// One call of a webhook tool.
#[derive(Debug, Clone, Copy)]
pub struct WebhookCall<'a> {
    /// Where to POST.
    pub url: &'a str,
    /// The HMAC-SHA256 key of `X-Agentd-Signature`.
    pub secret: &'a [u8],
    /// agentd's id of the call (`X-Agentd-Call-Id`): the receiver de-duplicates by it.
    pub call_id: Uuid,
    /// The body, as JSON.
    pub arguments: &'a Value,
    /// The whole call's bound, retries included.
    pub timeout: Duration,
    /// The W3C trace context of the call (its `traceparent` header): the receiver's work joins
    /// the trace.
    pub trace: Option<agentd_proto::TraceContext>,
}

/// Why a webhook call gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    /// It answered with a status other than 2xx (after retries, for 5xx).
    #[error("answered {status}: {excerpt}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The start of the body (bounded).
        excerpt: String,
    },
    /// It did not answer in time.
    #[error("timed out")]
    Timeout,
    /// It could not be reached (after retries).
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// A 2xx answer whose body is not JSON.
    #[error("answered with a body that is not JSON: {0}")]
    NotJson(String),
}

/// Calls webhooks.
#[async_trait]
pub trait WebhookClient: Send + Sync + 'static {
    /// POSTs `call.arguments` signed; answers the JSON body of a 2xx answer.
    async fn call(&self, call: WebhookCall<'_>) -> Result<Value, WebhookError>;
}
