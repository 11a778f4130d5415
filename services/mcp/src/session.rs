//! The HTTP client of a streamable-HTTP server's connection: rmcp's own (reqwest), plus what
//! rmcp does not tell: that the server no longer knows the connection's session.
//!
//! A server that restarted answers the old session id with `404` (what the MCP specification
//! asks) or `400` (what the TypeScript SDK's examples, server-everything among them, send).
//! rmcp turns a 404 into [`StreamableHttpError::SessionExpired`], but a 400 whose body is a
//! JSON-RPC error without an id becomes an answer to no request, which it drops: the call then
//! waits for its timeout, and every later call too. So after a POST on a session fails in a way
//! a 400 could explain (a JSON-RPC error, or a response rmcp could not use), the client asks
//! the server with a `ping` on the same session, where it sees the HTTP status itself: a 400 or
//! 404 means the session is gone. Then the POST fails at once, and the connection's
//! [`SessionLoss`] carries why, for its supervisor to open a new session. Other statuses (401,
//! 429, 5xx, …) are left to rmcp.
//!
//! Nor does rmcp tell that the server went away: a POST that cannot connect fails with a raw
//! transport error and the connection stays "up", and the event stream (`GET`) retries for
//! ever. A request on a session that cannot connect (connection refused, no route, a TLS
//! handshake that fails) reports the server [`Lost::Unreachable`]: its supervisor shows it down
//! and connects again, and a call whose request never connected (so never reached the server)
//! waits for it to come back.

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_MCP_METHOD, HEADER_MCP_NAME, HEADER_MCP_PARAM_PREFIX,
    HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long the session check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);
/// Redirects followed for one request at most (same-origin 307 and 308 only, as rmcp's own
/// client does: they keep the method and the body).
const MAX_REDIRECTS: usize = 10;
/// Bytes of the server's answer kept in the reason.
const REASON_BODY_BYTES: usize = 200;

/// Why a connection's session can no longer be used.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Lost {
    /// The server answered that it no longer knows the session (it restarted).
    SessionRefused(String),
    /// The server could not be reached: nothing listens there now, or the connection failed
    /// before a request was sent.
    Unreachable(String),
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::SessionRefused(why) | Lost::Unreachable(why) => f.write_str(why),
        }
    }
}

/// Why a connection's session was lost, once it was (the first reason stays). Set by the
/// connection's HTTP client, read by the server's supervisor and by calls that failed.
#[derive(Clone)]
pub(crate) struct SessionLoss(Arc<watch::Sender<Option<Lost>>>);

impl SessionLoss {
    /// A connection's, not lost.
    pub(crate) fn new() -> Self {
        SessionLoss(Arc::new(watch::channel(None).0))
    }

    fn report(&self, why: Lost) {
        self.0.send_if_modified(|lost| {
            let first = lost.is_none();
            if first {
                *lost = Some(why);
            }
            first
        });
    }

    /// Why the session was lost, if it was.
    pub(crate) fn reason(&self) -> Option<Lost> {
        self.0.borrow().clone()
    }

    /// Waits until the session is lost: why.
    pub(crate) async fn lost(&self) -> Lost {
        let mut rx = self.0.subscribe();
        let why = rx
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|why| why.clone());
        match why {
            Some(why) => why,
            // The sender lives in `self`: never closed while this waits.
            None => std::future::pending().await,
        }
    }
}

/// rmcp's reqwest client that notices a session the server no longer knows.
#[derive(Clone)]
pub(crate) struct SessionCheckingClient {
    http: reqwest::Client,
    loss: SessionLoss,
}

impl SessionCheckingClient {
    /// A client reporting to `loss`; reqwest configured as rmcp configures its own (no idle
    /// pooling; same-origin 307 and 308 redirects only).
    pub(crate) fn new(loss: SessionLoss) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                let same_origin = attempt
                    .previous()
                    .first()
                    .is_some_and(|first| first.origin() == attempt.url().origin());
                let keeps_body = matches!(
                    attempt.status(),
                    StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
                );
                if attempt.previous().len() > MAX_REDIRECTS {
                    attempt.error("too many redirects")
                } else if same_origin && keeps_body {
                    attempt.follow()
                } else {
                    attempt.stop()
                }
            }))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(SessionCheckingClient { http, loss })
    }

    /// Whether the server still knows `session`: `Some(why)` when a `ping` on it is answered
    /// 400 or 404. `headers` are those of the failed POST: the ones that describe that message
    /// (SEP-2243's `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`) are replaced by the ping's.
    async fn session_refused(
        &self,
        uri: &str,
        session: &str,
        auth_header: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Option<String> {
        let mut request = self
            .http
            .post(uri)
            .timeout(CHECK_TIMEOUT)
            .header(
                reqwest::header::ACCEPT,
                format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
            )
            .header(HEADER_SESSION_ID, session)
            .json(&serde_json::json!({
                "jsonrpc": "2.0",
                "id": "agentd-session-check",
                "method": "ping",
            }));
        let mut described = false;
        for (name, value) in headers {
            let lower = name.as_str();
            if lower.eq_ignore_ascii_case(HEADER_MCP_METHOD)
                || lower.eq_ignore_ascii_case(HEADER_MCP_NAME)
                || lower.starts_with(&HEADER_MCP_PARAM_PREFIX.to_ascii_lowercase())
            {
                described = true;
                continue;
            }
            request = request.header(name, value);
        }
        if described {
            request = request.header(HEADER_MCP_METHOD, "ping");
        }
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        let mut response = request.send().await.ok()?;
        let status = response.status();
        if status != StatusCode::BAD_REQUEST && status != StatusCode::NOT_FOUND {
            return None;
        }
        let mut body = Vec::new();
        while body.len() < REASON_BODY_BYTES {
            match tokio::time::timeout(CHECK_TIMEOUT, response.chunk()).await {
                Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
        body.truncate(REASON_BODY_BYTES);
        let body = String::from_utf8_lossy(&body);
        Some(match body.trim() {
            "" => format!("HTTP {status}"),
            body => format!("HTTP {status}: {body}"),
        })
    }
}

impl SessionCheckingClient {
    /// Reports the server unreachable when `answer`, a request on the session, could not
    /// connect.
    fn report_unreachable<T>(&self, answer: &Result<T, StreamableHttpError<reqwest::Error>>) {
        if let Err(StreamableHttpError::Client(e)) = answer
            && e.is_connect()
        {
            self.loss.report(Lost::Unreachable(format!(
                "the server cannot be reached ({})",
                error_chain(e)
            )));
        }
    }
}

/// `e` and its sources, joined by `: ` (reqwest's own message names only the URL).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The connection failure in `sent`, a transport's error, if it is one: the request could not
/// connect, so it never reached the server.
fn connect_failure(sent: &rmcp::transport::DynamicTransportError) -> Option<&reqwest::Error> {
    match sent
        .error
        .downcast_ref::<StreamableHttpError<reqwest::Error>>()
    {
        Some(StreamableHttpError::Client(e)) if e.is_connect() => Some(e),
        _ => None,
    }
}

/// Whether `error`, a request's failure on a streamable-HTTP connection, happened before the
/// request reached the server: it could not connect, so the server never ran it.
pub(crate) fn never_sent(error: &rmcp::ServiceError) -> bool {
    matches!(error, rmcp::ServiceError::TransportSend(sent) if connect_failure(sent).is_some())
}

/// Why a connection could not be initialised, said plainly when the server cannot be reached.
pub(crate) fn initialisation_failure(error: &rmcp::service::ClientInitializeError) -> String {
    if let rmcp::service::ClientInitializeError::TransportError { error: sent, .. } = error
        && let Some(e) = connect_failure(sent)
    {
        return format!("the server cannot be reached ({})", error_chain(e));
    }
    format!("initialisation failed: {error}")
}

/// What a POST on a session answered that may be the server refusing the session: rmcp's
/// 404, or what a 400 becomes (a JSON-RPC error, a response it could not use).
fn may_be_refused(
    answer: &Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>,
) -> bool {
    matches!(
        answer,
        Ok(StreamableHttpPostResponse::Json(
            ServerJsonRpcMessage::Error(_),
            _
        )) | Err(StreamableHttpError::UnexpectedServerResponse(_))
    )
}

impl StreamableHttpClient for SessionCheckingClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let answer = self
            .http
            .post_message_with_response_limits(
                uri.clone(),
                message,
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
                limits,
            )
            .await;
        let Some(session) = session_id else {
            return answer;
        };
        let expired = matches!(answer, Err(StreamableHttpError::SessionExpired));
        let refused = if expired {
            Some("HTTP 404 Not Found".to_string())
        } else if may_be_refused(&answer) {
            self.session_refused(&uri, &session, auth_header, custom_headers)
                .await
        } else {
            None
        };
        match refused {
            Some(status) => {
                let why = format!("the server no longer knows the session ({status})");
                self.loss.report(Lost::SessionRefused(why.clone()));
                Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    why,
                )))
            }
            None => {
                self.report_unreachable(&answer);
                answer
            }
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        if self.loss.reason().is_some() {
            // The server no longer knows it, or cannot be reached: nothing to end.
            return Ok(());
        }
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let has_session = session_id.is_some();
        let stream = self
            .http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        if has_session {
            self.report_unreachable(&stream);
        }
        stream
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let has_session = session_id.is_some();
        let stream = self
            .http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        if has_session {
            self.report_unreachable(&stream);
        }
        stream
    }
}
