//! Every error the API answers is JSON `{code, message}` with a stable code, whoever refused
//! the request: a handler ([`ApiError`]), actix's extractors (the `*_error` handlers their
//! configs are given), no route ([`not_found`]), or anything else of the framework's that
//! still answers with an error status and no JSON body ([`json_errors`], the outermost
//! middleware). Clients branch on the code, so none of them ever has to parse plain text.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::error::{JsonPayloadError, PathError, QueryPayloadError};
use actix_web::http::{StatusCode, header};
use actix_web::middleware::Next;
use actix_web::{HttpRequest, HttpResponse, ResponseError};
use agentd_proto::strict::UniqueKeys;
use agentd_proto::{AgentdError, ErrorCode};
use serde::de::DeserializeOwned;

/// An [`AgentdError`] as an HTTP response: the code's status, the error as JSON.
#[derive(Debug)]
pub struct ApiError(pub AgentdError);

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<AgentdError> for ApiError {
    fn from(e: AgentdError) -> Self {
        ApiError(e)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.0.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// A `503 unavailable` says when to try again (`Retry-After`, seconds): what refused the
    /// request passes (Redis failing over, a replica catching up, a partition moving), and a
    /// client that waits a second and retries — with an `Idempotency-Key` where the request
    /// takes one — gets through once it has.
    fn error_response(&self) -> HttpResponse {
        let mut answer = HttpResponse::build(self.status_code());
        if self.status_code() == StatusCode::SERVICE_UNAVAILABLE {
            answer.insert_header((header::RETRY_AFTER, RETRY_AFTER_SECS.to_string()));
        }
        answer.json(&self.0)
    }
}

/// The `Retry-After` of a `503 unavailable`, seconds.
pub const RETRY_AFTER_SECS: u64 = 1;

fn api_error(code: ErrorCode, message: impl Into<String>) -> actix_web::Error {
    ApiError(AgentdError::new(code, message)).into()
}

/// What a JSON body the extractor refused becomes: too large is `payload_too_large`, another
/// content type `unsupported_media_type`, anything that is not valid JSON of the route's shape
/// (syntax, types, missing or unknown fields) `invalid_argument`.
pub fn json_error(err: JsonPayloadError, _req: &HttpRequest) -> actix_web::Error {
    match err {
        JsonPayloadError::OverflowKnownLength { length, limit } => api_error(
            ErrorCode::PayloadTooLarge,
            format!("the body has {length} bytes; server.max_body_bytes is {limit}"),
        ),
        JsonPayloadError::Overflow { limit } => api_error(
            ErrorCode::PayloadTooLarge,
            format!("the body is larger than server.max_body_bytes ({limit})"),
        ),
        JsonPayloadError::ContentType => api_error(
            ErrorCode::UnsupportedMediaType,
            "the body must be JSON (content-type: application/json)",
        ),
        JsonPayloadError::Deserialize(e) => api_error(
            ErrorCode::InvalidArgument,
            format!("invalid JSON body: {e}"),
        ),
        other => api_error(
            ErrorCode::InvalidArgument,
            format!("the body could not be read: {other}"),
        ),
    }
}

/// A query string the extractor refused: `invalid_argument`.
pub fn query_error(err: QueryPayloadError, _req: &HttpRequest) -> actix_web::Error {
    api_error(
        ErrorCode::InvalidArgument,
        format!("invalid query string: {err}"),
    )
}

/// A path segment the extractor refused: `invalid_argument`.
pub fn path_error(err: PathError, _req: &HttpRequest) -> actix_web::Error {
    api_error(ErrorCode::InvalidArgument, format!("invalid path: {err}"))
}

/// The default service: no route has this path (`404 not_found`).
pub async fn not_found(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError(AgentdError::new(
        ErrorCode::NotFound,
        format!("no route `{} {}`", req.method(), req.path()),
    )))
}

/// An optional JSON body: none (empty, or only whitespace) is `T::default()`; anything else
/// must be a JSON object of `T`'s shape (`invalid_argument` otherwise, so a malformed body is never
/// taken for an absent one) sent as `application/json` or without a content type
/// (`unsupported_media_type` otherwise).
pub fn optional_json<T: DeserializeOwned + Default>(
    req: &HttpRequest,
    body: &[u8],
) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    if let Some(ct) = req.headers().get(header::CONTENT_TYPE)
        && !is_json(ct)
    {
        return Err(ApiError(AgentdError::new(
            ErrorCode::UnsupportedMediaType,
            "the body must be JSON (content-type: application/json)",
        )));
    }
    let invalid = |why: String| ApiError(AgentdError::new(ErrorCode::InvalidArgument, why));
    // An object, not any JSON serde could read a struct from (`[]` would be one).
    match serde_json::from_slice::<UniqueKeys>(body).map(|v| v.0) {
        Ok(v @ serde_json::Value::Object(_)) => {
            serde_json::from_value(v).map_err(|e| invalid(format!("invalid JSON body: {e}")))
        }
        Ok(_) => Err(invalid("the body must be a JSON object".into())),
        Err(e) => Err(invalid(format!("invalid JSON body: {e}"))),
    }
}

/// A JSON body that must be an object of `T`'s shape. `web::Json` alone reads a struct from a
/// JSON array as well (serde's sequence form: `[null, null]` spawned an agent), so a body is
/// read as JSON under the app's `JsonConfig` (size limit, content type, [`json_error`]), then
/// refused with `invalid_argument` unless it is an object `T` accepts.
pub struct JsonObject<T>(pub T);

impl<T> JsonObject<T> {
    /// The body.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for JsonObject<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: DeserializeOwned + 'static> actix_web::FromRequest for JsonObject<T> {
    type Error = actix_web::Error;
    type Future = futures::future::LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut actix_web::dev::Payload) -> Self::Future {
        let json = actix_web::web::Json::<UniqueKeys>::from_request(req, payload);
        Box::pin(async move {
            let value = json.await?.into_inner().0;
            if !value.is_object() {
                return Err(api_error(
                    ErrorCode::InvalidArgument,
                    "the body must be a JSON object",
                ));
            }
            serde_json::from_value(value).map(JsonObject).map_err(|e| {
                api_error(
                    ErrorCode::InvalidArgument,
                    format!("invalid JSON body: {e}"),
                )
            })
        })
    }
}

fn is_json(value: &header::HeaderValue) -> bool {
    value
        .to_str()
        .ok()
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// The code of an error status the framework answered without a body of ours.
fn code_for(status: StatusCode) -> ErrorCode {
    match status.as_u16() {
        401 => ErrorCode::Unauthorized,
        404 => ErrorCode::NotFound,
        405 => ErrorCode::MethodNotAllowed,
        408 => ErrorCode::RequestTimeout,
        413 => ErrorCode::PayloadTooLarge,
        415 => ErrorCode::UnsupportedMediaType,
        503 => ErrorCode::Unavailable,
        s if s < 500 => ErrorCode::InvalidArgument,
        _ => ErrorCode::Internal,
    }
}

/// The outermost middleware: an error status without a JSON body (a route's `405`, a body
/// over the payload limit, any refusal of the framework's that has no handler of ours)
/// becomes `{code, message}`, its status and `Allow` header kept.
pub async fn json_errors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let res = match next.call(req).await {
        Ok(res) => res.map_into_boxed_body(),
        // The inner service took the request, so no response can be built here: the error
        // goes on as an `ApiError`, which the server renders as JSON.
        Err(e) => {
            let status = e.as_response_error().status_code();
            return Err(ApiError(AgentdError::new(code_for(status), e.to_string())).into());
        }
    };
    let status = res.status();
    let is_error = status.is_client_error() || status.is_server_error();
    if !is_error || res.headers().get(header::CONTENT_TYPE).is_some_and(is_json) {
        return Ok(res);
    }
    let allow = res.headers().get(header::ALLOW).cloned();
    let route = format!("{} {}", res.request().method(), res.request().path());
    let message = match (status, allow.as_ref().and_then(|a| a.to_str().ok())) {
        (StatusCode::METHOD_NOT_ALLOWED, Some(allowed)) => {
            format!("`{route}`: this path takes {allowed}")
        }
        _ => res
            .response()
            .error()
            .map(ToString::to_string)
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| {
                let reason = status.canonical_reason().unwrap_or("error");
                format!("`{route}`: {}", reason.to_lowercase())
            }),
    };
    let (req, _) = res.into_parts();
    let mut out = HttpResponse::build(status);
    if let Some(allow) = allow {
        out.insert_header((header::ALLOW, allow));
    }
    let body = out.json(AgentdError::new(code_for(status), message));
    Ok(ServiceResponse::new(req, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framework_statuses_get_stable_codes() {
        assert_eq!(code_for(StatusCode::NOT_FOUND), ErrorCode::NotFound);
        assert_eq!(
            code_for(StatusCode::METHOD_NOT_ALLOWED),
            ErrorCode::MethodNotAllowed
        );
        assert_eq!(
            code_for(StatusCode::PAYLOAD_TOO_LARGE),
            ErrorCode::PayloadTooLarge
        );
        assert_eq!(
            code_for(StatusCode::BAD_REQUEST),
            ErrorCode::InvalidArgument
        );
        assert_eq!(code_for(StatusCode::BAD_GATEWAY), ErrorCode::Internal);
    }

    #[test]
    fn json_content_types_are_recognised() {
        let v = |s: &'static str| header::HeaderValue::from_static(s);
        assert!(is_json(&v("application/json")));
        assert!(is_json(&v("Application/JSON; charset=utf-8")));
        assert!(!is_json(&v("text/plain")));
        assert!(!is_json(&v("application/x-www-form-urlencoded")));
    }
}
