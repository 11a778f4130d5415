//! What the HTTP backends share: one async, pooled `reqwest` client per backend (connections and
//! TLS sessions are reused, HTTP/2 where the server offers it, no thread per call, so the calls
//! in flight are bounded only by how many turns run), a connect timeout, retries with jittered
//! exponential backoff on 5xx and connection errors, `429` turned into a rate limit with the
//! provider's reset time (`retry-after-ms`, `retry-after` in seconds or as an HTTP date), clear
//! errors for other 4xx and malformed bodies.
//!
//! A whole answer ([`HttpClient::post_json`]) is bounded by the whole-request timeout. A
//! streamed one ([`HttpClient::post_events`], Server-Sent Events) is bounded instead by the
//! idle timeout between two chunks (and before the first), so a long answer that keeps coming
//! is never cut; it is retried only before its first byte (a retry after would repeat text the
//! caller has seen).
//!
//! A call ends early when its [`CancellationToken`] is cancelled (it answers
//! [`ModelError::Cancelled`]) or when its future is dropped (an interrupt, a cancel, a shutdown
//! aborting the turn): either closes its request at once instead of letting it run on.

use agentd_ports::ModelError;
use backon::BackoffBuilder;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::header::HeaderMap;
use serde_json::Value;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// Transport settings of an HTTP backend.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Base URL, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// API key (sent as the provider expects).
    pub api_key: String,
    /// Whole-request timeout of an answer asked for whole (connecting is bounded by the
    /// smaller of this and 10 s).
    pub timeout: Duration,
    /// Ask for answers as Server-Sent Events (`stream: true`), so text reaches observers as it
    /// arrives; `false` asks for whole answers.
    pub stream: bool,
    /// Longest silence of a streamed answer: before its first chunk and between two chunks.
    /// Replaces [`Self::timeout`] for streams.
    pub idle_timeout: Duration,
    /// Retries after a 5xx or a connection error.
    pub max_retries: u32,
    /// First backoff; doubled per retry, with jitter.
    pub backoff: Duration,
}

/// The longest a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The wait a `429` without a reset time asks for.
const DEFAULT_RATE_LIMIT_MS: u64 = 5_000;

/// One backend's HTTP client: its settings and its connection pool.
pub(crate) struct HttpClient {
    client: reqwest::Client,
    settings: HttpSettings,
}

impl HttpClient {
    /// A client for `settings`; fails only if TLS cannot be set up.
    pub(crate) fn new(settings: HttpSettings) -> Result<Self, ModelError> {
        // No client-wide timeout: whole answers set theirs per request, streams time each chunk.
        let client = reqwest::Client::builder()
            .connect_timeout(settings.timeout.min(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| ModelError::Failed(format!("building the HTTP client: {e}")))?;
        Ok(HttpClient { client, settings })
    }

    /// The API key to send.
    pub(crate) fn api_key(&self) -> &str {
        &self.settings.api_key
    }

    /// Whether answers are asked for as streams.
    pub(crate) fn streams(&self) -> bool {
        self.settings.stream
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.settings.base_url.trim_end_matches('/'))
    }

    /// GETs `url` (no retries) and answers its JSON body, bounded by the whole-request timeout.
    pub(crate) async fn get_json(
        &self,
        url: &str,
        headers: &[(&str, &str)],
    ) -> Result<Value, ModelError> {
        let mut req = self.client.get(url).timeout(self.settings.timeout);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| ModelError::Unavailable(format!("{url}: {e}")))?;
        let code = resp.status();
        let text = resp.text().await.map_err(|e| {
            ModelError::Unavailable(format!("reading the response from {url}: {e}"))
        })?;
        if !code.is_success() {
            let failed = if code.is_server_error() {
                ModelError::Unavailable
            } else {
                ModelError::Failed
            };
            return Err(failed(format!(
                "{url} answered {}: {}",
                code.as_u16(),
                text.chars().take(500).collect::<String>()
            )));
        }
        serde_json::from_str(&text)
            .map_err(|e| ModelError::Failed(format!("malformed response from {url}: {e}")))
    }

    /// Sends one JSON request (with retries) and answers the JSON body.
    pub(crate) async fn post_json(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: &Value,
        cancel: &CancellationToken,
    ) -> Result<Value, ModelError> {
        let url = self.url(path);
        let whole = async {
            let resp = self
                .send_with_retries(&url, headers, body, Some(self.settings.timeout))
                .await?;
            let text = resp.text().await.map_err(|e| {
                ModelError::Unavailable(format!("reading the response from {url}: {e}"))
            })?;
            serde_json::from_str(&text)
                .map_err(|e| ModelError::Failed(format!("malformed response from {url}: {e}")))
        };
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(ModelError::Cancelled),
            answer = whole => answer,
        }
    }

    /// Sends one JSON request asking for a stream (retried until its answer begins) and hands
    /// each Server-Sent Event to `on_event` until it answers `true` (the answer is complete)
    /// or the stream ends (`Ok` too: `on_event`'s owner knows whether what came is complete).
    pub(crate) async fn post_events(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: &Value,
        cancel: &CancellationToken,
        mut on_event: impl FnMut(&eventsource_stream::Event) -> Result<bool, ModelError>,
    ) -> Result<(), ModelError> {
        let url = self.url(path);
        let idle = self.settings.idle_timeout;
        let silent = || {
            ModelError::Unavailable(format!(
                "{url}: the stream was silent for {} ms (idle_timeout_ms)",
                idle.as_millis()
            ))
        };
        let begun = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ModelError::Cancelled),
            begun = self.send_with_retries(&url, headers, body, None) => begun?,
        };
        let mut events = begun.bytes_stream().eventsource();
        loop {
            let next = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ModelError::Cancelled),
                next = tokio::time::timeout(idle, events.next()) => next.map_err(|_| silent())?,
            };
            match next {
                None => return Ok(()),
                Some(Err(e)) => {
                    return Err(ModelError::Unavailable(format!(
                        "{url}: the stream broke off: {e}"
                    )));
                }
                Some(Ok(event)) => {
                    if on_event(&event)? {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Sends the request until it is answered with a success status (whose body is not read
    /// yet), retrying 5xx and connection errors with backoff; `timeout` bounds each attempt
    /// whole (`None`: a stream, whose caller times its chunks).
    async fn send_with_retries(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &Value,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response, ModelError> {
        let mut delays = backon::ExponentialBuilder::default()
            .with_min_delay(self.settings.backoff)
            .with_max_delay(self.settings.backoff.saturating_mul(64))
            .with_max_times(self.settings.max_retries as usize)
            .with_jitter()
            .build();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mut req = self.client.post(url).json(body);
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            let sent = match timeout {
                Some(timeout) => Some(req.timeout(timeout).send().await),
                // A stream's head is its first chunk: bounded by the idle timeout.
                None => tokio::time::timeout(self.settings.idle_timeout, req.send())
                    .await
                    .ok(),
            };
            let (what, detail) = match sent {
                None => (
                    "no answer".to_string(),
                    format!(
                        "nothing within {} ms (idle_timeout_ms)",
                        self.settings.idle_timeout.as_millis()
                    ),
                ),
                Some(Ok(resp)) if resp.status().is_success() => return Ok(resp),
                Some(Ok(resp)) => {
                    let code = resp.status().as_u16();
                    let wait = retry_after_ms(resp.headers(), SystemTime::now());
                    let text = resp.text().await.unwrap_or_default();
                    if code == 429 {
                        return Err(ModelError::RateLimited {
                            retry_after_ms: wait.unwrap_or(DEFAULT_RATE_LIMIT_MS),
                        });
                    }
                    if code < 500 {
                        return Err(ModelError::Failed(format!(
                            "{url} answered {code}: {}",
                            text.chars().take(500).collect::<String>()
                        )));
                    }
                    (format!("status {code}"), text)
                }
                Some(Err(e)) => ("connection error".to_string(), e.to_string()),
            };
            match delays.next() {
                Some(delay) => tokio::time::sleep(delay).await,
                None => {
                    return Err(ModelError::Unavailable(format!(
                        "{url}: {what} after {attempts} attempts: {}",
                        detail.chars().take(500).collect::<String>()
                    )));
                }
            }
        }
    }
}

/// The JSON of an event's `data`, or a clear error naming what did not parse.
pub(crate) fn event_json(event: &eventsource_stream::Event) -> Result<Value, ModelError> {
    serde_json::from_str(&event.data).map_err(|e| {
        ModelError::Failed(format!(
            "malformed stream event `{}`: {e}: {}",
            event.event,
            event.data.chars().take(200).collect::<String>()
        ))
    })
}

/// The wait a rate-limited answer asks for, in ms: `retry-after-ms`, else `retry-after` as
/// seconds or as an HTTP date, else the latest of the providers' own reset headers —
/// Anthropic's `anthropic-ratelimit-*-reset` (RFC 3339 times) and OpenAI's
/// `x-ratelimit-reset-*` (durations such as `6m0s` or `20ms`) — all counted from `now`.
pub(crate) fn retry_after_ms(headers: &HeaderMap, now: SystemTime) -> Option<u64> {
    standard_retry_after_ms(headers, now).or_else(|| provider_reset_ms(headers, now))
}

/// The wait `retry-after-ms` or `retry-after` asks for.
fn standard_retry_after_ms(headers: &HeaderMap, now: SystemTime) -> Option<u64> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Some(ms.max(0.0) as u64);
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return Some((secs.max(0.0) * 1000.0) as u64);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(now)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    )
}

/// The latest reset the provider's own rate-limit headers give, as a wait from `now`.
fn provider_reset_ms(headers: &HeaderMap, now: SystemTime) -> Option<u64> {
    let until = |at: SystemTime| {
        at.duration_since(now)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    };
    headers
        .iter()
        .filter_map(|(name, value)| {
            let name = name.as_str();
            let value = value.to_str().ok()?.trim();
            if name.starts_with("anthropic-ratelimit-") && name.ends_with("-reset") {
                humantime::parse_rfc3339_weak(value).ok().map(until)
            } else if name.starts_with("x-ratelimit-reset-") {
                humantime::parse_duration(value)
                    .ok()
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            } else {
                None
            }
        })
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                *k,
                HeaderValue::from_str(v).unwrap_or(HeaderValue::from_static("")),
            );
        }
        h
    }

    #[test]
    fn retry_after_in_ms_seconds_or_an_http_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after-ms", "250")]), now),
            Some(250)
        );
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after", "2")]), now),
            Some(2_000)
        );
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after", "0.5")]), now),
            Some(500)
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after", &later)]), now),
            Some(30_000)
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after", &earlier)]), now),
            Some(0)
        );
        assert_eq!(
            retry_after_ms(
                &headers(&[("retry-after", "2"), ("retry-after-ms", "70")]),
                now
            ),
            Some(70),
            "the finer header wins"
        );
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after", "soon")]), now),
            None
        );
        assert_eq!(retry_after_ms(&HeaderMap::new(), now), None);
        // The providers' own reset headers, when no retry-after is given: the latest wins.
        let in_90s = humantime::format_rfc3339(now + Duration::from_secs(90)).to_string();
        let in_20s = humantime::format_rfc3339(now + Duration::from_secs(20)).to_string();
        assert_eq!(
            retry_after_ms(
                &headers(&[
                    ("anthropic-ratelimit-requests-reset", &in_20s),
                    ("anthropic-ratelimit-tokens-reset", &in_90s)
                ]),
                now
            ),
            Some(90_000)
        );
        assert_eq!(
            retry_after_ms(
                &headers(&[
                    ("x-ratelimit-reset-requests", "1s"),
                    ("x-ratelimit-reset-tokens", "6m0s")
                ]),
                now
            ),
            Some(360_000)
        );
        assert_eq!(
            retry_after_ms(&headers(&[("x-ratelimit-reset-tokens", "20ms")]), now),
            Some(20)
        );
        assert_eq!(
            retry_after_ms(
                &headers(&[("retry-after", "3"), ("x-ratelimit-reset-tokens", "6m0s")]),
                now
            ),
            Some(3_000),
            "retry-after wins when given"
        );
    }
}
