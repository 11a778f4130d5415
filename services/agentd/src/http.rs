//! The HTTP API (`/v1`). Every route is a thin door onto [`AgentSystem`]; errors are JSON
//! `{code, message}` with the stable codes ([`crate::errors`]).

use crate::errors::{ApiError, JsonObject, optional_json};
use actix_web::{HttpRequest, HttpResponse, web};
use agentd_actors::AgentSystem;
use agentd_proto::{AgentTrees, AgentdError, Command, Control, ErrorCode, SpawnRequest, WorkQueue};
use serde::Deserialize;
use serde_json::{Value, json};

/// Header that scopes an external caller to one root's tree (`not_ancestor` outside it).
pub const SCOPE_HEADER: &str = "x-agentd-root";

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct ApiState {
    /// The actors.
    pub system: AgentSystem,
    /// The Redis bus, when configured (its partitions show in `/v1/info`).
    pub redis: Option<std::sync::Arc<agentd_bus::RedisBus>>,
    /// The in-process event bus (`/v1/events`).
    pub bus: agentd_bus::InProcessBus,
    /// Turns `true` when the service stops: event streams end then.
    pub shutdown: crate::sse::Shutdown,
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
                .service(web::resource("/openapi.json").route(web::get().to(openapi_doc)))
                .service(web::resource("/events").route(web::get().to(crate::sse::events)))
                .service(
                    web::resource("/agents")
                        .route(web::post().to(spawn))
                        .route(web::get().to(list)),
                )
                .service(web::resource("/tree").route(web::get().to(tree)))
                .service(web::resource("/queue").route(web::get().to(queue)))
                .service(web::resource("/commands").route(web::post().to(command)))
                .service(web::resource("/tools/{tool}").route(web::post().to(invoke_tool_detached)))
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
                    web::resource("/agents/{id}/checkpoints")
                        .route(web::get().to(checkpoints))
                        .route(web::post().to(take_checkpoint)),
                )
                .service(
                    web::resource("/agents/{id}/checkpoints/{checkpoint}")
                        .route(web::get().to(checkpoint)),
                )
                .service(web::resource("/agents/{id}/restore").route(web::post().to(restore)))
                .service(web::resource("/agents/{id}/env").route(web::post().to(set_env))),
        );
}

/// Liveness: the process is up.
#[utoipa::path(
    get, path = "/healthz", tag = "operations",
    responses(
        (status = 200, description = "Up", body = crate::openapi::Health),
    )
)]
pub(crate) async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(crate::openapi::Health {
        status: "ok".into(),
    })
}

/// This document.
#[utoipa::path(
    get, path = "/v1/openapi.json", tag = "operations",
    responses(
        (status = 200, description = "The OpenAPI document", body = Object),
    )
)]
pub(crate) async fn openapi_doc(auth: web::Data<crate::auth::Auth>) -> HttpResponse {
    HttpResponse::Ok().json(crate::openapi::document(auth.token.is_some()))
}

/// Prometheus metrics (text exposition format 0.0.4).
#[utoipa::path(
    get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "The metrics", body = String, content_type = "text/plain"),
    )
)]
pub(crate) async fn metrics(st: web::Data<ApiState>) -> HttpResponse {
    let m = agentd_actors::metrics::global();
    if let Some(bus) = &st.redis {
        m.set(
            "agentd_partitions_owned",
            "Partitions this process owns.",
            &[],
            bus.owned().len() as f64,
        );
        for (k, pending, lag) in bus.partition_stats().await {
            let k = k.to_string();
            m.set(
                "agentd_stream_pending",
                "Entries read but not acknowledged, per partition.",
                &[("partition", &k)],
                pending as f64,
            );
            m.set(
                "agentd_stream_lag",
                "Entries not yet read, per partition.",
                &[("partition", &k)],
                lag as f64,
            );
        }
    }
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(m.render())
}

/// Readiness: the store (and Redis, when configured) answers.
#[utoipa::path(
    get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = crate::openapi::Ready),
        (status = 500, description = "`store_error`: the store does not answer", body = AgentdError),
        (status = 503, description = "`unavailable`: Redis or a lease check failed", body = AgentdError),
    )
)]
pub(crate) async fn readyz(st: web::Data<ApiState>) -> ApiResult {
    st.system
        .deps()
        .store
        .list_roots()
        .await
        .map_err(AgentdError::from)?;
    let partitions = match &st.redis {
        Some(bus) => Some(
            bus.check_leases()
                .await
                .map_err(|m| AgentdError::new(ErrorCode::Unavailable, m))?,
        ),
        None => None,
    };
    Ok(HttpResponse::Ok().json(crate::openapi::Ready {
        status: "ready".into(),
        partitions_owned: partitions,
    }))
}

/// Version, model backend, store, agent types, owned partitions.
#[utoipa::path(
    get, path = "/v1/info", tag = "operations",
    responses(
        (status = 200, description = "About this process", body = crate::openapi::Info),
    )
)]
pub(crate) async fn info(st: web::Data<ApiState>) -> HttpResponse {
    let live_agents = st.system.live_count().await.ok();
    let deps = st.system.deps();
    let agent_types = deps
        .config
        .types
        .iter()
        .map(|t| crate::openapi::AgentTypeInfo {
            name: t.name.clone(),
            title: t.title.clone(),
            description: t.description.clone(),
            workers: t.workers.clone(),
        })
        .collect();
    HttpResponse::Ok().json(crate::openapi::Info {
        service: "agentd".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        model_backend: deps.model.backend().into(),
        store: deps.store.kind().into(),
        agent_types,
        process_id: st.redis.as_ref().map(|r| r.process_id().to_string()),
        partitions_owned: st.redis.as_ref().map(|r| r.owned()),
        live_agents,
    })
}

/// The root an external caller is scoped to (`X-Agentd-Root`), if it names one.
fn scope(req: &HttpRequest) -> Option<String> {
    req.headers()
        .get(SCOPE_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

async fn run(st: &ApiState, req: &HttpRequest, cmd: Command) -> Result<Value, ApiError> {
    Ok(st.system.execute_scoped(cmd, scope(req).as_deref()).await?)
}

/// Spawn an agent (a root, or a child with `parent_id`).
#[utoipa::path(
    post, path = "/v1/agents", tag = "agents",
    request_body(content = SpawnRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new agent", body = agentd_proto::AgentView),
        (status = 429, description = "`depth_limit`, `fanout_limit` or `budget_exceeded`", body = AgentdError),
    )
)]
pub(crate) async fn spawn(
    st: web::Data<ApiState>,
    req: HttpRequest,
    body: JsonObject<SpawnRequest>,
) -> ApiResult {
    let view = run(&st, &req, Command::Spawn(Box::new(body.into_inner()))).await?;
    Ok(HttpResponse::Created().json(view))
}

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    parent_id: Option<String>,
}

/// List roots, or the children of `parent_id`.
#[utoipa::path(
    get, path = "/v1/agents", tag = "agents",
    params(("parent_id" = Option<String>, Query, description = "List this agent's children instead of the roots")),
    responses(
        (status = 200, description = "The agents, oldest first", body = agentd_proto::AgentList),
    )
)]
pub(crate) async fn list(
    st: web::Data<ApiState>,
    req: HttpRequest,
    q: web::Query<ListQuery>,
) -> ApiResult {
    let parent_id = q.into_inner().parent_id;
    Ok(HttpResponse::Ok().json(run(&st, &req, Command::List { parent_id }).await?))
}

/// Every tree with statuses, tokens and cost rolled up.
#[utoipa::path(
    get, path = "/v1/tree", tag = "agents",
    responses(
        (status = 200, description = "One node per root", body = AgentTrees),
    )
)]
pub(crate) async fn tree(st: web::Data<ApiState>, req: HttpRequest) -> ApiResult {
    let roots = st.system.tree(scope(&req).as_deref()).await?;
    Ok(HttpResponse::Ok().json(AgentTrees { roots }))
}

/// Execute any command (same schema as the Redis command stream).
#[utoipa::path(
    post, path = "/v1/commands", tag = "agents",
    request_body(content = Command, content_type = "application/json"),
    responses(
        (status = 200, description = "The command's result (its shape is the matching route's)", body = Value),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
        (status = 429, description = "`depth_limit`, `fanout_limit` or `budget_exceeded`", body = AgentdError),
    )
)]
pub(crate) async fn command(
    st: web::Data<ApiState>,
    req: HttpRequest,
    body: JsonObject<Command>,
) -> ApiResult {
    Ok(HttpResponse::Ok().json(run(&st, &req, body.into_inner()).await?))
}

/// Inspect an agent.
#[utoipa::path(
    get, path = "/v1/agents/{id}", tag = "agents",
    params(("id" = String, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "The agent", body = agentd_proto::Inspection),
    )
)]
pub(crate) async fn inspect(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
) -> ApiResult {
    let agent_id = id.into_inner();
    Ok(HttpResponse::Ok().json(run(&st, &req, Command::Inspect { agent_id }).await?))
}

/// Delete an agent and its descendants with their history.
#[utoipa::path(
    delete, path = "/v1/agents/{id}", tag = "agents",
    params(("id" = String, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "Deleted", body = crate::openapi::Deleted),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn delete(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
) -> ApiResult {
    let agent_id = id.into_inner();
    run(
        &st,
        &req,
        Command::Control {
            agent_id: agent_id.clone(),
            control: Control::Delete,
        },
    )
    .await?;
    Ok(HttpResponse::Ok().json(crate::openapi::Deleted {
        agent_id,
        status: "deleted".into(),
    }))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct SendBody {
    #[serde(alias = "message")]
    text: String,
    #[serde(default)]
    interrupt: bool,
}

/// Send a message or follow-up (`interrupt` aborts the turn).
#[utoipa::path(
    post, path = "/v1/agents/{id}/messages", tag = "agents",
    params(("id" = String, Path, description = "The agent's id")),
    request_body(content = SendBody, content_type = "application/json"),
    responses(
        (status = 202, description = "Stored in the agent's inbox", body = crate::openapi::Sent),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
        (status = 429, description = "`depth_limit`, `fanout_limit` or `budget_exceeded`", body = AgentdError),
    )
)]
pub(crate) async fn send(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: JsonObject<SendBody>,
) -> ApiResult {
    let SendBody { text, interrupt } = body.into_inner();
    let v = run(
        &st,
        &req,
        Command::Send {
            agent_id: id.into_inner(),
            text,
            interrupt,
        },
    )
    .await?;
    Ok(HttpResponse::Accepted().json(v))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct ControlBody {
    #[serde(alias = "action")]
    #[schema(value_type = crate::openapi::ControlName)]
    control: String,
}

/// pause, resume, cancel, terminate, close or delete.
#[utoipa::path(
    post, path = "/v1/agents/{id}/control", tag = "agents",
    params(("id" = String, Path, description = "The agent's id")),
    request_body(content = ControlBody, content_type = "application/json"),
    responses(
        (status = 200, description = "Applied", body = crate::openapi::ControlApplied),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn control(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: JsonObject<ControlBody>,
) -> ApiResult {
    let control: Control =
        serde_json::from_value(json!({"type": body.control.trim()})).map_err(|_| {
            AgentdError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "unknown control `{}` (pause, resume, cancel, terminate, close, delete)",
                    body.control
                ),
            )
        })?;
    let v = run(
        &st,
        &req,
        Command::Control {
            agent_id: id.into_inner(),
            control,
        },
    )
    .await?;
    Ok(HttpResponse::Ok().json(v))
}

/// `reset`'s optional body: none, `{}` or `{message}`.
#[derive(Deserialize, utoipa::ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResetBody {
    #[serde(default)]
    message: Option<String>,
}

/// Reset the session (optionally seeded with `message`).
#[utoipa::path(
    post, path = "/v1/agents/{id}/reset", tag = "agents",
    params(("id" = String, Path, description = "The agent's id")),
    request_body(content = Option<ResetBody>, content_type = "application/json", description = "Optional: no body, or `{}`, is the default"),
    responses(
        (status = 202, description = "Queued", body = crate::openapi::SessionRequested),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn reset(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: web::Bytes,
) -> ApiResult {
    let message = optional_json::<ResetBody>(&req, &body)?
        .message
        .filter(|m| !m.trim().is_empty());
    let v = run(
        &st,
        &req,
        Command::Reset {
            agent_id: id.into_inner(),
            message,
        },
    )
    .await?;
    Ok(HttpResponse::Accepted().json(v))
}

/// Compact the session.
#[utoipa::path(
    post, path = "/v1/agents/{id}/compact", tag = "agents",
    params(("id" = String, Path, description = "The agent's id")),
    responses(
        (status = 202, description = "Queued", body = crate::openapi::SessionRequested),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn compact(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
) -> ApiResult {
    let v = run(
        &st,
        &req,
        Command::Compact {
            agent_id: id.into_inner(),
        },
    )
    .await?;
    Ok(HttpResponse::Accepted().json(v))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct ProvideBody {
    #[serde(alias = "answer", alias = "text")]
    value: String,
}

/// Provide what a `waiting_dependency` agent asked for (`value`).
#[utoipa::path(
    post, path = "/v1/agents/{id}/dependency", tag = "agents",
    params(("id" = String, Path, description = "The agent's id")),
    request_body(content = ProvideBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The agent", body = agentd_proto::AgentView),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn provide_dependency(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: JsonObject<ProvideBody>,
) -> ApiResult {
    let cmd = Command::ProvideDependency {
        agent_id: id.into_inner(),
        value: body.into_inner().value,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

/// Answer a `waiting_question` agent (`answer`).
#[utoipa::path(
    post, path = "/v1/agents/{id}/answer", tag = "agents",
    params(("id" = String, Path, description = "The agent's id")),
    request_body(content = ProvideBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The agent", body = agentd_proto::AgentView),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn answer_question(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: JsonObject<ProvideBody>,
) -> ApiResult {
    let cmd = Command::AnswerQuestion {
        agent_id: id.into_inner(),
        answer: body.into_inner().value,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

/// Replace the agent's budget (`max_tokens`, `max_cost_usd`, `deadline_ms`).
#[utoipa::path(
    post, path = "/v1/agents/{id}/budget", tag = "agents",
    params(("id" = String, Path, description = "The agent's id")),
    request_body(content = agentd_proto::Budget, content_type = "application/json"),
    responses(
        (status = 200, description = "The agent with its new budget", body = agentd_proto::AgentView),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn set_budget(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: JsonObject<agentd_proto::Budget>,
) -> ApiResult {
    let cmd = Command::SetBudget {
        agent_id: id.into_inner(),
        budget: body.into_inner(),
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct EnvBody {
    env: std::collections::BTreeMap<String, String>,
}

/// Replace the agent's environment variables (`env`: a map).
#[utoipa::path(
    post, path = "/v1/agents/{id}/env", tag = "agents",
    params(("id" = String, Path, description = "The agent's id")),
    request_body(content = EnvBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The agent", body = agentd_proto::AgentView),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn set_env(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: JsonObject<EnvBody>,
) -> ApiResult {
    let cmd = Command::SetEnv {
        agent_id: id.into_inner(),
        env: body.into_inner().env,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

/// Agents with work pending or running, by priority then age, with their queue state.
#[utoipa::path(
    get, path = "/v1/queue", tag = "agents",
    responses(
        (status = 200, description = "The work queue", body = WorkQueue),
    )
)]
pub(crate) async fn queue(st: web::Data<ApiState>, req: HttpRequest) -> ApiResult {
    let tasks = st.system.queue(scope(&req).as_deref()).await?;
    Ok(HttpResponse::Ok().json(WorkQueue { tasks }))
}

/// The agent's checkpoints, newest first (summaries).
#[utoipa::path(
    get, path = "/v1/agents/{id}/checkpoints", tag = "checkpoints",
    params(("id" = String, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "The checkpoints", body = crate::openapi::CheckpointList),
    )
)]
pub(crate) async fn checkpoints(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
) -> ApiResult {
    let cmd = Command::Checkpoints {
        agent_id: id.into_inner(),
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

/// Take a checkpoint now (reason `manual`).
#[utoipa::path(
    post, path = "/v1/agents/{id}/checkpoints", tag = "checkpoints",
    params(("id" = String, Path, description = "The agent's id")),
    responses(
        (status = 201, description = "The checkpoint taken", body = crate::openapi::CheckpointSummary),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn take_checkpoint(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
) -> ApiResult {
    let cmd = Command::Checkpoint {
        agent_id: id.into_inner(),
    };
    Ok(HttpResponse::Created().json(run(&st, &req, cmd).await?))
}

/// One checkpoint in full: conversation, pending items, environment.
#[utoipa::path(
    get, path = "/v1/agents/{id}/checkpoints/{checkpoint}", tag = "checkpoints",
    params(("id" = String, Path, description = "The agent's id"), ("checkpoint" = String, Path, format = Uuid, description = "The checkpoint's id")),
    responses(
        (status = 200, description = "The checkpoint", body = crate::openapi::CheckpointDetail),
    )
)]
pub(crate) async fn checkpoint(
    st: web::Data<ApiState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> ApiResult {
    let (agent_id, checkpoint) = path.into_inner();
    st.system
        .check_scope(scope(&req).as_deref(), &agent_id)
        .await?;
    let id = uuid::Uuid::parse_str(&checkpoint).map_err(|e| {
        AgentdError::new(
            ErrorCode::InvalidArgument,
            format!("`{checkpoint}` is not a checkpoint id: {e}"),
        )
    })?;
    let cp = st.system.find_checkpoint(&agent_id, Some(id)).await?;
    let mut v = cp.summary();
    v["conversation"] = json!(cp.conversation);
    v["pending"] = json!(cp.pending);
    v["environment"] = json!(cp.environment);
    Ok(HttpResponse::Ok().json(v))
}

/// `restore`'s optional body: none, `{}` or `{checkpoint_id}`.
#[derive(Deserialize, utoipa::ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RestoreBody {
    #[serde(default, alias = "checkpointId")]
    #[schema(value_type = Option<String>, format = Uuid)]
    checkpoint_id: Option<uuid::Uuid>,
}

/// Restore the agent to `checkpoint_id` (default: its newest checkpoint).
#[utoipa::path(
    post, path = "/v1/agents/{id}/restore", tag = "checkpoints",
    params(("id" = String, Path, description = "The agent's id")),
    request_body(content = Option<RestoreBody>, content_type = "application/json", description = "Optional: no body, or `{}`, is the default"),
    responses(
        (status = 200, description = "The restored agent", body = agentd_proto::AgentView),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn restore(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: web::Bytes,
) -> ApiResult {
    let cmd = Command::Restore {
        agent_id: id.into_inner(),
        checkpoint_id: optional_json::<RestoreBody>(&req, &body)?.checkpoint_id,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

/// The agent's thread.
#[utoipa::path(
    get, path = "/v1/agents/{id}/thread", tag = "agents",
    params(("id" = String, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "The thread", body = crate::openapi::ThreadView),
    )
)]
pub(crate) async fn thread(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
) -> ApiResult {
    let agent_id = id.into_inner();
    let mut v = run(
        &st,
        &req,
        Command::Thread {
            agent_id: agent_id.clone(),
        },
    )
    .await?;
    v["agent_id"] = json!(agent_id);
    Ok(HttpResponse::Ok().json(v))
}

/// The agent's children (live and closed).
#[utoipa::path(
    get, path = "/v1/agents/{id}/children", tag = "agents",
    params(("id" = String, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "The children, oldest first", body = agentd_proto::AgentList),
    )
)]
pub(crate) async fn children(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
) -> ApiResult {
    let agent_id = id.into_inner();
    st.system.record(&agent_id).await?;
    Ok(HttpResponse::Ok().json(
        run(
            &st,
            &req,
            Command::List {
                parent_id: Some(agent_id),
            },
        )
        .await?,
    ))
}

/// The tools the agent's model is shown.
#[utoipa::path(
    get, path = "/v1/agents/{id}/tools", tag = "tools",
    params(("id" = String, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "The tools", body = crate::openapi::ToolList),
    )
)]
pub(crate) async fn tools(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
) -> ApiResult {
    st.system.check_scope(scope(&req).as_deref(), &id).await?;
    Ok(HttpResponse::Ok().json(json!({"tools": st.system.tools_of(&id).await?})))
}

/// Run a tool as the agent (the body is its arguments).
#[utoipa::path(
    post, path = "/v1/agents/{id}/tools/{tool}", tag = "tools",
    params(("id" = String, Path, description = "The agent's id"), ("tool" = String, Path, description = "The tool's name (e.g. `Manage`, `spawn_agent`)")),
    request_body(content = Object, content_type = "application/json"),
    responses(
        (status = 200, description = "The tool's result", body = Value),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
        (status = 429, description = "`depth_limit`, `fanout_limit` or `budget_exceeded`", body = AgentdError),
    )
)]
pub(crate) async fn invoke_tool(
    st: web::Data<ApiState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: JsonObject<Value>,
) -> ApiResult {
    let (id, tool) = path.into_inner();
    let cmd = Command::InvokeTool {
        agent_id: Some(id),
        tool,
        args: body.into_inner(),
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct DetachedToolBody {
    #[serde(default, alias = "thread_id", alias = "agentId", alias = "threadId")]
    agent_id: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    args: Value,
}

/// Run a tool as `agent_id` (missing: `missing_thread_id`).
#[utoipa::path(
    post, path = "/v1/tools/{tool}", tag = "tools",
    params(("tool" = String, Path, description = "The tool's name (e.g. `Manage`, `spawn_agent`)")),
    request_body(content = DetachedToolBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The tool's result", body = Value),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
        (status = 429, description = "`depth_limit`, `fanout_limit` or `budget_exceeded`", body = AgentdError),
    )
)]
pub(crate) async fn invoke_tool_detached(
    st: web::Data<ApiState>,
    req: HttpRequest,
    tool: web::Path<String>,
    body: JsonObject<DetachedToolBody>,
) -> ApiResult {
    let body = body.into_inner();
    let cmd = Command::InvokeTool {
        agent_id: body.agent_id,
        tool: tool.into_inner(),
        args: body.args,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}
