//! Bearer-token authentication. Required when the API binds to anything but loopback, or when
//! `auth.required` is set; `/healthz` and `/readyz` stay open for probes, and the dashboard's
//! static shell ([`crate::dashboard::SHELL_PATHS`]) so the page can load and ask for the token.
//! Tokens are compared in constant time.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{Error, HttpResponse, web};
use agentd_proto::{AgentdError, ErrorCode};

/// The token every request must present, if any.
#[derive(Clone, Debug)]
pub struct Auth {
    /// `None` = open API (loopback only).
    pub token: Option<String>,
}

/// Paths that never need a token.
pub const OPEN_PATHS: [&str; 2] = ["/healthz", "/readyz"];

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token of an `Authorization` value of the bearer scheme, whose name is case-insensitive
/// (RFC 7235 §2.1: `Bearer`, `bearer` and `BEARER` are the same scheme).
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_matches(' '))
}

/// The middleware: refuses a request without the right `Authorization: Bearer` header with
/// `401 {code: "unauthorized"}`.
pub async fn require_token(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let token = req
        .app_data::<web::Data<Auth>>()
        .and_then(|a| a.token.clone());
    let Some(token) = token else {
        return next
            .call(req)
            .await
            .map(ServiceResponse::map_into_boxed_body);
    };
    if OPEN_PATHS.contains(&req.path())
        || crate::dashboard::SHELL_PATHS.contains(&req.path())
        || crate::a2a::is_card_path(req.path())
    {
        return next
            .call(req)
            .await
            .map(ServiceResponse::map_into_boxed_body);
    }
    let presented = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .unwrap_or("");
    if constant_time_eq(presented.as_bytes(), token.as_bytes()) {
        return next
            .call(req)
            .await
            .map(ServiceResponse::map_into_boxed_body);
    }
    let body = AgentdError::new(ErrorCode::Unauthorized, "missing or wrong bearer token");
    Ok(req.into_response(HttpResponse::Unauthorized().json(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_compares_whole_strings() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for v in ["Bearer t0k", "bearer t0k", "BEARER t0k", "bEaReR   t0k"] {
            assert_eq!(bearer_token(v), Some("t0k"), "{v}");
        }
        for v in ["Basic t0k", "Bearert0k", "t0k", "Bearer"] {
            assert_eq!(bearer_token(v), None, "{v}");
        }
    }
}
