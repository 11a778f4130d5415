//! The HTTP API (`/v1`). Every route is a thin door onto [`AgentSystem`]; errors are JSON
//! `{code, message}` with the stable codes ([`crate::errors`]).
//!
//! | module | routes |
//! |---|---|
//! | [`operations`] | health, readiness, metrics, info, trees, queue, commands |
//! | [`events`] | `/v1/events`: the events as Server-Sent Events (the streaming itself: `crate::sse`) |
//! | [`agents`] | spawn, list, inspect, delete, messages, controls, budget, env, thread, children |
//! | [`sessions`] | reset, compact, checkpoints, restore |
//! | [`tools`] | an agent's tools, running a tool, answering service calls, open calls |
//! | [`bodies`] | the answers the routes assemble themselves, typed for the OpenAPI document |
//!
//! The API document itself is served by `openapi.rs`, which describes these routes.

mod agents;
pub mod bodies;
mod events;
mod operations;
mod sessions;
mod tools;

pub(crate) use agents::*;
pub(crate) use events::*;
pub(crate) use operations::*;
pub(crate) use sessions::*;
pub(crate) use tools::*;

use crate::errors::ApiError;
use actix_web::{HttpRequest, HttpResponse, web};
use agentd_actors::AgentSystem;
use agentd_proto::{AgentdError, Command};
use serde::Deserialize;
use serde_json::Value;

/// An agent id in a path or a query: a uuid in its hyphenated form, as agentd makes them. The
/// path or query extractor refuses anything else (`400 invalid_argument`, [`crate::errors`]), so
/// a malformed id is a malformed request, not a `404` for an agent that could never exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentId(String);

impl AgentId {
    /// `id` if it has the form of an agent id; otherwise why not (`invalid_argument`).
    pub(crate) fn parse(id: &str) -> Result<AgentId, AgentdError> {
        agentd_proto::command::check_agent_id(id).map(|()| AgentId(id.to_string()))
    }

    /// The id.
    pub(crate) fn into_string(self) -> String {
        self.0
    }
}

impl std::ops::Deref for AgentId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for AgentId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let id = String::deserialize(d)?;
        AgentId::parse(&id).map_err(|e| serde::de::Error::custom(e.message))
    }
}

/// Header that scopes an external caller to one root's tree (`not_ancestor` outside it).
pub const SCOPE_HEADER: &str = "x-agentd-root";

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct ApiState {
    /// The actors.
    pub system: AgentSystem,
    /// The Redis bus, when configured (its partitions show in `/v1/info`).
    pub redis: Option<std::sync::Arc<agentd_bus::RedisBus>>,
    /// What `/v1/events` shows.
    pub events: crate::sse::EventFeed,
    /// Turns `true` when the service stops: event streams end then.
    pub shutdown: crate::sse::Shutdown,
    /// `telemetry.trace_url`: a link to a trace, `{trace_id}` replaced (`None`: no link).
    pub trace_url: Option<String>,
    /// How long a request waits for the store (`redis.request_wait_ms`; `None`: no bound, as
    /// without Redis).
    pub request_wait: Option<std::time::Duration>,
}

type ApiResult = Result<HttpResponse, ApiError>;

/// Registers every route, one resource per path, so a path asked with a method it does not
/// take is `405 method_not_allowed` (with `Allow`), not `404`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    crate::dashboard::routes(cfg);
    cfg.service(web::resource("/healthz").route(web::get().to(healthz)))
        .service(web::resource("/readyz").route(web::get().to(readyz)))
        .service(web::resource("/metrics").route(web::get().to(metrics)))
        .service(
            web::scope("/v1")
                .service(web::resource("/info").route(web::get().to(info)))
                .service(web::resource("/events").route(web::get().to(events)))
                .service(
                    web::resource("/agents")
                        .route(web::post().to(spawn))
                        .route(web::get().to(list)),
                )
                .service(web::resource("/tree").route(web::get().to(tree)))
                .service(web::resource("/queue").route(web::get().to(queue)))
                .service(web::resource("/commands").route(web::post().to(command)))
                .service(web::resource("/tools/{tool}").route(web::post().to(invoke_tool_detached)))
                .service(web::resource("/tool_calls").route(web::get().to(tool_calls)))
                .service(
                    web::resource("/agents/{id}")
                        .route(web::get().to(inspect))
                        .route(web::delete().to(delete)),
                )
                .service(web::resource("/agents/{id}/messages").route(web::post().to(send)))
                .service(web::resource("/agents/{id}/control").route(web::post().to(control)))
                .service(web::resource("/agents/{id}/reset").route(web::post().to(reset)))
                .service(web::resource("/agents/{id}/compact").route(web::post().to(compact)))
                .service(
                    web::resource("/agents/{id}/dependency")
                        .route(web::post().to(provide_dependency)),
                )
                .service(
                    web::resource("/agents/{id}/answer").route(web::post().to(answer_question)),
                )
                .service(web::resource("/agents/{id}/budget").route(web::post().to(set_budget)))
                .service(web::resource("/agents/{id}/thread").route(web::get().to(thread)))
                .service(web::resource("/agents/{id}/children").route(web::get().to(children)))
                .service(web::resource("/agents/{id}/tools").route(web::get().to(tools)))
                .service(
                    web::resource("/agents/{id}/tools/{tool}").route(web::post().to(invoke_tool)),
                )
                .service(
                    web::resource("/agents/{id}/tool_results/{call_id}")
                        .route(web::post().to(tool_result)),
                )
                .service(
                    web::resource("/agents/{id}/approvals/{call_id}")
                        .route(web::post().to(approve_tool)),
                )
                .service(
                    web::resource("/agents/{id}/checkpoints")
                        .route(web::get().to(checkpoints))
                        .route(web::post().to(take_checkpoint)),
                )
                .service(
                    web::resource("/agents/{id}/checkpoints/{checkpoint}")
                        .route(web::get().to(checkpoint)),
                )
                .service(web::resource("/agents/{id}/restore").route(web::post().to(restore)))
                .service(web::resource("/agents/{id}/fork").route(web::post().to(fork)))
                .service(web::resource("/agents/{id}/env").route(web::post().to(set_env))),
        );
}

/// The root an external caller is scoped to (`X-Agentd-Root`), if it names one.
pub(crate) fn scope(req: &HttpRequest) -> Option<String> {
    req.headers()
        .get(SCOPE_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// `answer` with the `trace_id` of the request's trace (where the work it started runs), unless
/// it names one already.
fn with_trace_id(mut answer: Value) -> Value {
    if let (Some(fields), Some(trace)) =
        (answer.as_object_mut(), agentd_observe::telemetry::current())
    {
        let id = Value::String(trace.trace_id_hex().to_string());
        match fields.get_mut("trace_id") {
            Some(v) if !v.is_null() => {}
            Some(v) => *v = id,
            None => {
                fields.insert("trace_id".into(), id);
            }
        }
    }
    answer
}

/// Runs `cmd` as the request's caller, answering `unavailable` once the store has kept it
/// waiting [`ApiState::request_wait`] ([`AgentSystem::execute_within`]).
async fn run(st: &ApiState, req: &HttpRequest, cmd: Command) -> Result<Value, ApiError> {
    Ok(st
        .system
        .execute_within(cmd, scope(req), st.request_wait)
        .await?)
}

/// A read a handler makes of its own (outside [`run`]), bounded like the commands it runs:
/// `unavailable` once it has waited [`ApiState::request_wait`].
async fn within<T>(
    st: &ApiState,
    read: impl std::future::Future<Output = Result<T, AgentdError>>,
) -> Result<T, AgentdError> {
    match st.request_wait {
        Some(wait) => tokio::time::timeout(wait, read)
            .await
            .unwrap_or_else(|_| Err(agentd_actors::system::deadline_passed(wait))),
        None => read.await,
    }
}
