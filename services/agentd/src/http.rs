//! The HTTP API (`/v1`). Every route is a thin door onto [`AgentSystem`]; errors are JSON
//! `{code, message}` with the stable codes ([`crate::errors`]).

use crate::errors::{ApiError, optional_json};
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

/// Every route of the API: `(method, path, summary)`. `/v1/openapi.json` is built from this
/// table and a test calls each entry against a running server.
pub const ROUTES: &[(&str, &str, &str)] = &[
    ("get", "/healthz", "Liveness: the process is up."),
    (
        "get",
        "/readyz",
        "Readiness: the store (and Redis, when configured) answers.",
    ),
    ("get", "/metrics", "Prometheus metrics."),
    (
        "get",
        "/v1/info",
        "Version, model backend, store, agent types, owned partitions.",
    ),
    ("get", "/v1/openapi.json", "This document."),
    (
        "get",
        "/v1/events",
        "Server-Sent Events; `agent_id` or `root_id` narrows to a subtree.",
    ),
    (
        "post",
        "/v1/agents",
        "Spawn an agent (a root, or a child with `parent_id`).",
    ),
    (
        "get",
        "/v1/agents",
        "List roots, or the children of `parent_id`.",
    ),
    (
        "get",
        "/v1/tree",
        "Every tree with statuses, tokens and cost rolled up.",
    ),
    (
        "get",
        "/v1/queue",
        "Agents with work pending or running, by priority then age, with their queue state.",
    ),
    (
        "post",
        "/v1/commands",
        "Execute any command (same schema as the Redis command stream).",
    ),
    (
        "post",
        "/v1/tools/{tool}",
        "Run a tool as `agent_id` (missing: `missing_thread_id`).",
    ),
    ("get", "/v1/agents/{id}", "Inspect an agent."),
    (
        "delete",
        "/v1/agents/{id}",
        "Delete an agent and its descendants with their history.",
    ),
    (
        "post",
        "/v1/agents/{id}/messages",
        "Send a message or follow-up (`interrupt` aborts the turn).",
    ),
    (
        "post",
        "/v1/agents/{id}/control",
        "pause, resume, cancel, terminate, close or delete.",
    ),
    (
        "post",
        "/v1/agents/{id}/reset",
        "Reset the session (optionally seeded with `message`).",
    ),
    ("post", "/v1/agents/{id}/compact", "Compact the session."),
    (
        "post",
        "/v1/agents/{id}/budget",
        "Replace the agent's budget (`max_tokens`, `max_cost_usd`, `deadline_ms`).",
    ),
    (
        "post",
        "/v1/agents/{id}/dependency",
        "Provide what a `waiting_dependency` agent asked for (`value`).",
    ),
    (
        "post",
        "/v1/agents/{id}/answer",
        "Answer a `waiting_question` agent (`answer`).",
    ),
    ("get", "/v1/agents/{id}/thread", "The agent's thread."),
    (
        "get",
        "/v1/agents/{id}/children",
        "The agent's children (live and closed).",
    ),
    (
        "get",
        "/v1/agents/{id}/tools",
        "The tools the agent's model is shown.",
    ),
    (
        "post",
        "/v1/agents/{id}/tools/{tool}",
        "Run a tool as the agent.",
    ),
    (
        "post",
        "/v1/agents/{id}/env",
        "Replace the agent's environment variables (`env`: a map).",
    ),
    (
        "get",
        "/v1/agents/{id}/checkpoints",
        "The agent's checkpoints, newest first (summaries).",
    ),
    (
        "post",
        "/v1/agents/{id}/checkpoints",
        "Take a checkpoint now (reason `manual`).",
    ),
    (
        "get",
        "/v1/agents/{id}/checkpoints/{checkpoint}",
        "One checkpoint in full: conversation, pending items, environment.",
    ),
    (
        "post",
        "/v1/agents/{id}/restore",
        "Restore the agent to `checkpoint_id` (default: its newest checkpoint).",
    ),
];

/// The OpenAPI 3 document of [`ROUTES`].
pub fn openapi() -> Value {
    let mut paths = serde_json::Map::new();
    for (method, path, summary) in ROUTES {
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        let params: Vec<Value> = path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        entry[*method] = json!({
            "summary": summary,
            "parameters": params,
            "responses": {
                "200": {"description": "OK"},
                "default": {"description": "Error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            }
        });
    }
    json!({
        "openapi": "3.0.3",
        "info": {"title": "agentd", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {
            "schemas": {"Error": {"type": "object", "required": ["code", "message"], "properties": {
                "code": {"type": "string", "description": "stable snake_case error code"},
                "message": {"type": "string"}
            }}},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}
        },
        "security": [{"bearer": []}]
    })
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

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

async fn openapi_doc() -> HttpResponse {
    HttpResponse::Ok().json(openapi())
}

async fn metrics(st: web::Data<ApiState>) -> HttpResponse {
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

async fn readyz(st: web::Data<ApiState>) -> ApiResult {
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
    Ok(HttpResponse::Ok().json(json!({"status": "ready", "partitions_owned": partitions})))
}

async fn info(st: web::Data<ApiState>) -> HttpResponse {
    let live_agents = st.system.live_count().await.ok();
    let deps = st.system.deps();
    let types: Vec<Value> = deps
        .config
        .types
        .iter()
        .map(|t| json!({"name": t.name, "title": t.title, "description": t.description, "workers": t.workers}))
        .collect();
    HttpResponse::Ok().json(json!({
        "service": "agentd", "version": env!("CARGO_PKG_VERSION"),
        "model_backend": deps.model.backend(), "store": deps.store.kind(),
        "agent_types": types,
        "process_id": st.redis.as_ref().map(|r| r.process_id().to_string()),
        "partitions_owned": st.redis.as_ref().map(|r| r.owned()),
        "live_agents": live_agents,
    }))
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

async fn spawn(
    st: web::Data<ApiState>,
    req: HttpRequest,
    body: web::Json<SpawnRequest>,
) -> ApiResult {
    let view = run(&st, &req, Command::Spawn(Box::new(body.into_inner()))).await?;
    Ok(HttpResponse::Created().json(view))
}

#[derive(Deserialize)]
struct ListQuery {
    parent_id: Option<String>,
}

async fn list(st: web::Data<ApiState>, req: HttpRequest, q: web::Query<ListQuery>) -> ApiResult {
    let parent_id = q.into_inner().parent_id;
    Ok(HttpResponse::Ok().json(run(&st, &req, Command::List { parent_id }).await?))
}

async fn tree(st: web::Data<ApiState>, req: HttpRequest) -> ApiResult {
    let roots = st.system.tree(scope(&req).as_deref()).await?;
    Ok(HttpResponse::Ok().json(AgentTrees { roots }))
}

async fn command(st: web::Data<ApiState>, req: HttpRequest, body: web::Json<Command>) -> ApiResult {
    Ok(HttpResponse::Ok().json(run(&st, &req, body.into_inner()).await?))
}

async fn inspect(st: web::Data<ApiState>, req: HttpRequest, id: web::Path<String>) -> ApiResult {
    let agent_id = id.into_inner();
    Ok(HttpResponse::Ok().json(run(&st, &req, Command::Inspect { agent_id }).await?))
}

async fn delete(st: web::Data<ApiState>, req: HttpRequest, id: web::Path<String>) -> ApiResult {
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
    Ok(HttpResponse::Ok().json(json!({"agent_id": agent_id, "status": "deleted"})))
}

#[derive(Deserialize)]
struct SendBody {
    #[serde(alias = "message")]
    text: String,
    #[serde(default)]
    interrupt: bool,
}

async fn send(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: web::Json<SendBody>,
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

#[derive(Deserialize)]
struct ControlBody {
    #[serde(alias = "action")]
    control: String,
}

async fn control(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: web::Json<ControlBody>,
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
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ResetBody {
    #[serde(default)]
    message: Option<String>,
}

async fn reset(
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

async fn compact(st: web::Data<ApiState>, req: HttpRequest, id: web::Path<String>) -> ApiResult {
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

#[derive(Deserialize)]
struct ProvideBody {
    #[serde(alias = "answer", alias = "text")]
    value: String,
}

async fn provide_dependency(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: web::Json<ProvideBody>,
) -> ApiResult {
    let cmd = Command::ProvideDependency {
        agent_id: id.into_inner(),
        value: body.into_inner().value,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

async fn answer_question(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: web::Json<ProvideBody>,
) -> ApiResult {
    let cmd = Command::AnswerQuestion {
        agent_id: id.into_inner(),
        answer: body.into_inner().value,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

async fn set_budget(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: web::Json<agentd_proto::Budget>,
) -> ApiResult {
    let cmd = Command::SetBudget {
        agent_id: id.into_inner(),
        budget: body.into_inner(),
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

#[derive(Deserialize)]
struct EnvBody {
    env: std::collections::BTreeMap<String, String>,
}

async fn set_env(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
    body: web::Json<EnvBody>,
) -> ApiResult {
    let cmd = Command::SetEnv {
        agent_id: id.into_inner(),
        env: body.into_inner().env,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

async fn queue(st: web::Data<ApiState>, req: HttpRequest) -> ApiResult {
    let tasks = st.system.queue(scope(&req).as_deref()).await?;
    Ok(HttpResponse::Ok().json(WorkQueue { tasks }))
}

async fn checkpoints(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
) -> ApiResult {
    let cmd = Command::Checkpoints {
        agent_id: id.into_inner(),
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

async fn take_checkpoint(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<String>,
) -> ApiResult {
    let cmd = Command::Checkpoint {
        agent_id: id.into_inner(),
    };
    Ok(HttpResponse::Created().json(run(&st, &req, cmd).await?))
}

async fn checkpoint(
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
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RestoreBody {
    #[serde(default, alias = "checkpointId")]
    checkpoint_id: Option<uuid::Uuid>,
}

async fn restore(
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

async fn thread(st: web::Data<ApiState>, req: HttpRequest, id: web::Path<String>) -> ApiResult {
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

async fn children(st: web::Data<ApiState>, req: HttpRequest, id: web::Path<String>) -> ApiResult {
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

async fn tools(st: web::Data<ApiState>, req: HttpRequest, id: web::Path<String>) -> ApiResult {
    st.system.check_scope(scope(&req).as_deref(), &id).await?;
    Ok(HttpResponse::Ok().json(json!({"tools": st.system.tools_of(&id).await?})))
}

async fn invoke_tool(
    st: web::Data<ApiState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Json<Value>,
) -> ApiResult {
    let (id, tool) = path.into_inner();
    let cmd = Command::InvokeTool {
        agent_id: Some(id),
        tool,
        args: body.into_inner(),
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

#[derive(Deserialize)]
struct DetachedToolBody {
    #[serde(default, alias = "thread_id", alias = "agentId", alias = "threadId")]
    agent_id: Option<String>,
    #[serde(default)]
    args: Value,
}

async fn invoke_tool_detached(
    st: web::Data<ApiState>,
    req: HttpRequest,
    tool: web::Path<String>,
    body: web::Json<DetachedToolBody>,
) -> ApiResult {
    let body = body.into_inner();
    let cmd = Command::InvokeTool {
        agent_id: body.agent_id,
        tool: tool.into_inner(),
        args: body.args,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}
