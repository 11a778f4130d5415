//! `/mcp` on the API's own port: rmcp's streamable-HTTP server is a tower service on `http`
//! 1.x, actix-web 4 is on `http` 0.2, so each request is copied across (method, URI, headers,
//! the body actix already read under `server.max_body_bytes`) and the answer copied back (an
//! event stream streamed as it comes, anything else whole). The route sits inside the API's
//! `App`, behind the same middleware as every other route: the bearer token, the body's
//! deadline, the trace context, the JSON errors.

use super::handler::Handler;
use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use futures::StreamExt;
use http_body_util::{BodyExt, BodyStream, Full};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;

/// rmcp's service, as the route holds it.
pub struct McpHttp(pub StreamableHttpService<Handler, NeverSessionManager>);

/// Headers of one hop, not copied across.
fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection" | "content-length" | "transfer-encoding" | "keep-alive" | "upgrade"
    )
}

/// rmcp's service over `handler`: stateless (any process answers any request, with Redis
/// too), answering `Host` names `allowed_hosts` (empty: any), bodies up to `max_body`.
pub fn service(handler: Handler, allowed_hosts: Vec<String>, max_body: usize) -> McpHttp {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_max_request_body_bytes(max_body);
    let config = if allowed_hosts.is_empty() {
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(allowed_hosts)
    };
    McpHttp(StreamableHttpService::new(
        move || Ok(handler.clone()),
        std::sync::Arc::new(NeverSessionManager::default()),
        config,
    ))
}

/// The route: the request handed to rmcp, its answer handed back.
pub async fn handle(req: HttpRequest, body: web::Bytes, mcp: web::Data<McpHttp>) -> HttpResponse {
    let mut builder = http::Request::builder()
        .method(req.method().as_str())
        .uri(req.uri().to_string());
    for (name, value) in req.headers() {
        builder = builder.header(name.as_str(), value.as_bytes());
    }
    let request = match builder.body(Full::new(body)) {
        Ok(r) => r,
        Err(e) => {
            let body = agentd_proto::AgentdError::new(
                agentd_proto::ErrorCode::InvalidArgument,
                format!("the request could not be read: {e}"),
            );
            return HttpResponse::BadRequest().json(body);
        }
    };
    let (parts, body) = mcp.0.handle(request).await.into_parts();
    let status =
        StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut out = HttpResponse::build(status);
    let mut streamed = false;
    for (name, value) in &parts.headers {
        if hop_by_hop(name.as_str()) {
            continue;
        }
        if name == http::header::CONTENT_TYPE && value.as_bytes().starts_with(b"text/event-stream")
        {
            streamed = true;
        }
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_str().as_bytes()),
            HeaderValue::from_bytes(value.as_bytes()),
        ) {
            out.append_header((n, v));
        }
    }
    if streamed {
        let frames = BodyStream::new(body).filter_map(|frame| async move {
            match frame {
                Ok(f) => f.into_data().ok().map(Ok::<_, Infallible>),
                Err(never) => match never {},
            }
        });
        return out.streaming(frames);
    }
    match body.collect().await {
        Ok(collected) => out.body(collected.to_bytes()),
        Err(never) => match never {},
    }
}
