//! [`HttpWebhooks`]: the `WebhookClient` of webhook tools (`[tools.<name>] kind = "http"`).
//!
//! Each call is one signed POST of the arguments as JSON:
//! - `X-Agentd-Call-Id`: agentd's id of the call (the same on every retry: receivers
//!   de-duplicate by it);
//! - `X-Agentd-Timestamp`: ms since the epoch when the body was signed;
//! - `X-Agentd-Signature: sha256=<hex>`: HMAC-SHA256, keyed with the tool's secret, of
//!   `"<timestamp>.<body>"`.
//!
//! A 2xx JSON body is the result. 5xx answers and connection errors are retried with jittered
//! exponential backoff, within the tool's timeout (which bounds the whole call); any other
//! status is a tool error carrying the status and a bounded excerpt of the body.

use agentd_ports::{WebhookCall, WebhookClient, WebhookError};
use async_trait::async_trait;
use backon::BackoffBuilder;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use std::time::{Duration, SystemTime};

/// The longest excerpt of an error body a tool error carries, in bytes.
const EXCERPT_BYTES: usize = 512;
/// Retries after a 5xx or a connection error (the timeout may end them sooner).
const MAX_RETRIES: usize = 3;
/// The first backoff.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// Calls webhooks over one pooled HTTP client.
pub struct HttpWebhooks {
    client: reqwest::Client,
}

impl HttpWebhooks {
    /// A client; fails only if TLS cannot be set up.
    pub fn new() -> Result<Self, WebhookError> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| WebhookError::Unreachable(format!("building the HTTP client: {e}")))?;
        Ok(HttpWebhooks { client })
    }
}

/// `sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`.
pub fn signature(secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    // HMAC takes keys of any length.
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => return String::new(),
    };
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The start of `body`, at most [`EXCERPT_BYTES`], cut at a character boundary.
fn excerpt(body: &str) -> String {
    if body.len() <= EXCERPT_BYTES {
        return body.to_string();
    }
    let mut end = EXCERPT_BYTES;
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &body[..end])
}

impl HttpWebhooks {
    /// One attempt: `Ok(Err(e))` is worth retrying (5xx, unreachable), `Err(e)` is not.
    async fn attempt(
        &self,
        call: &WebhookCall<'_>,
        body: &[u8],
    ) -> Result<Result<Value, WebhookError>, WebhookError> {
        let timestamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
            .to_string();
        let mut req = self.client.post(call.url);
        if let Some(trace) = &call.trace {
            req = req.header("traceparent", trace.to_string());
        }
        let res = req
            .header("content-type", "application/json")
            .header("x-agentd-call-id", call.call_id.to_string())
            .header("x-agentd-timestamp", &timestamp)
            .header(
                "x-agentd-signature",
                signature(call.secret, &timestamp, body),
            )
            .body(body.to_vec())
            .send()
            .await;
        let resp = match res {
            Ok(resp) => resp,
            Err(e) => return Ok(Err(WebhookError::Unreachable(e.without_url().to_string()))),
        };
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        match status {
            200..=299 => {
                if text.trim().is_empty() {
                    return Ok(Ok(Value::Null));
                }
                serde_json::from_str(&text)
                    .map_err(|_| WebhookError::NotJson(excerpt(&text)))
                    .map(Ok)
            }
            500..=599 => Ok(Err(WebhookError::Status {
                status,
                excerpt: excerpt(&text),
            })),
            _ => Err(WebhookError::Status {
                status,
                excerpt: excerpt(&text),
            }),
        }
    }

    async fn with_retries(&self, call: &WebhookCall<'_>) -> Result<Value, WebhookError> {
        let body =
            serde_json::to_vec(call.arguments).map_err(|e| WebhookError::NotJson(e.to_string()))?;
        let mut delays = backon::ExponentialBuilder::default()
            .with_min_delay(FIRST_BACKOFF)
            .with_max_delay(FIRST_BACKOFF.saturating_mul(16))
            .with_max_times(MAX_RETRIES)
            .with_jitter()
            .build();
        loop {
            match self.attempt(call, &body).await? {
                Ok(value) => return Ok(value),
                Err(e) => match delays.next() {
                    Some(delay) => {
                        tracing::debug!(call_id = %call.call_id, error = %e, "webhook call failed; retrying");
                        tokio::time::sleep(delay).await;
                    }
                    None => return Err(e),
                },
            }
        }
    }
}

#[async_trait]
impl WebhookClient for HttpWebhooks {
    async fn call(&self, call: WebhookCall<'_>) -> Result<Value, WebhookError> {
        match tokio::time::timeout(call.timeout, self.with_retries(&call)).await {
            Ok(res) => res,
            Err(_) => Err(WebhookError::Timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_documented_hmac() {
        // Computed independently: hmac.new(b"key", b"1.{}", hashlib.sha256).hexdigest()
        assert_eq!(
            signature(b"key", "1", b"{}"),
            "sha256=1ba6b8171186efc613e8bcc0cbdab2748f24984d7c5a84faa2637afa0e40d224"
        );
    }

    #[test]
    fn excerpts_are_bounded_at_a_character_boundary() {
        let long = "é".repeat(1000);
        let e = excerpt(&long);
        assert!(e.len() <= EXCERPT_BYTES + "…".len());
        assert!(e.ends_with('…'));
        assert_eq!(excerpt("short"), "short");
    }
}
