//! What the HTTP backends share: one blocking `ureq` agent run on tokio's blocking pool (so
//! model calls never stall an actor's Arbiter), timeouts, retries with jittered backoff on 5xx
//! and connection errors, `429` turned into a rate limit with the provider's reset time, clear
//! errors for other 4xx and malformed bodies.

use agentd_actors::ModelError;
use serde_json::Value;
use std::time::Duration;

/// Transport settings of an HTTP backend.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Base URL, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// API key (sent as the provider expects).
    pub api_key: String,
    /// Whole-request timeout.
    pub timeout: Duration,
    /// Retries after a 5xx or a connection error.
    pub max_retries: u32,
    /// First backoff; doubled per retry, with jitter.
    pub backoff: Duration,
}

/// Sends one JSON request (with retries) and answers the JSON body.
pub async fn post_json(
    settings: &HttpSettings,
    path: &str,
    headers: Vec<(String, String)>,
    body: Value,
) -> Result<Value, ModelError> {
    let url = format!("{}{path}", settings.base_url.trim_end_matches('/'));
    let mut attempt = 0;
    loop {
        let agent = ureq::AgentBuilder::new().timeout(settings.timeout).build();
        let (url2, headers2, body2) = (url.clone(), headers.clone(), body.clone());
        let res = tokio::task::spawn_blocking(move || {
            let mut req = agent.post(&url2);
            for (k, v) in &headers2 {
                req = req.set(k, v);
            }
            match req.send_json(body2) {
                Ok(r) => Ok(r.into_string()),
                Err(ureq::Error::Status(code, r)) => {
                    let retry_after = r
                        .header("retry-after-ms")
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .or_else(|| {
                            r.header("retry-after")
                                .and_then(|v| v.trim().parse::<f64>().ok())
                                .map(|s| (s * 1000.0) as u64)
                        });
                    Err((Some(code), retry_after, r.into_string().unwrap_or_default()))
                }
                Err(e) => Err((None, None, e.to_string())),
            }
        })
        .await
        .map_err(|e| ModelError::Failed(format!("model request task: {e}")))?;
        match res {
            Ok(Ok(text)) => {
                return serde_json::from_str(&text).map_err(|e| {
                    ModelError::Failed(format!("malformed response from {url}: {e}"))
                });
            }
            Ok(Err(e)) => {
                return Err(ModelError::Failed(format!(
                    "reading the response from {url}: {e}"
                )));
            }
            Err((Some(429), retry_after, _)) => {
                return Err(ModelError::RateLimited {
                    retry_after_ms: retry_after.unwrap_or(5_000),
                });
            }
            Err((Some(code), _, body)) if code < 500 => {
                return Err(ModelError::Failed(format!(
                    "{url} answered {code}: {}",
                    body.chars().take(500).collect::<String>()
                )));
            }
            Err((code, _, msg)) => {
                if attempt >= settings.max_retries {
                    let what = code
                        .map(|c| format!("status {c}"))
                        .unwrap_or_else(|| "connection error".into());
                    return Err(ModelError::Failed(format!(
                        "{url}: {what} after {} attempts: {msg}",
                        attempt + 1
                    )));
                }
                attempt += 1;
                let base = settings.backoff.as_millis() as u64 * (1 << attempt.min(6));
                let jitter = u64::from(uuid::Uuid::new_v4().as_bytes()[0]) * base / 512;
                tokio::time::sleep(Duration::from_millis(base / 2 + jitter)).await;
            }
        }
    }
}
