//! Routes on agents: spawn, list, inspect, delete, messages, controls, what a waiting agent
//! asked for, budget, environment, thread and children.

use super::{AgentId, ApiResult, ApiState, run, within};
use crate::errors::JsonObject;
use actix_web::{HttpRequest, HttpResponse, web};
use agentd_proto::{AgentdError, Command, Control, ErrorCode, SpawnRequest};
use serde::Deserialize;
use serde_json::json;

/// The header that makes a spawn idempotent (the IETF `Idempotency-Key` draft).
const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// Spawn an agent (a root, or a child with `parent_id`). With an `Idempotency-Key` header (or
/// the body's `idempotency_key`), a retry answers the agent the first attempt made.
#[utoipa::path(
    post, path = "/v1/agents", tag = "agents",
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "Makes the spawn idempotent: a spawn retried with the same key under the same parent (or as a root) answers the first attempt's agent and makes no second one (kept 24 h, and while that agent exists). 1 to 255 visible ASCII characters; overrides the body's `idempotency_key`."),
    ),
    request_body(content = SpawnRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new agent (or, for a retried idempotent spawn, the first attempt's)", body = agentd_proto::AgentView),
        (status = 422, description = "`idempotency_key_reused`: the key came with another request before", body = AgentdError),
        (status = 429, description = "`depth_limit`, `fanout_limit` or `budget_exceeded`", body = AgentdError),
        (status = 503, description = "`unavailable`: e.g. fewer replicas than `redis.min_replicas` confirmed the agent in time (it may exist: retry with the same `Idempotency-Key`), or a first attempt with the key is still under way", body = AgentdError),
    )
)]
pub(crate) async fn spawn(
    st: web::Data<ApiState>,
    req: HttpRequest,
    body: JsonObject<SpawnRequest>,
) -> ApiResult {
    let mut spawn = body.into_inner();
    if let Some(key) = idempotency_key(&req)? {
        spawn.idempotency_key = Some(key);
    }
    let view = run(&st, &req, Command::Spawn(Box::new(spawn))).await?;
    Ok(HttpResponse::Created().json(super::with_trace_id(view)))
}

/// `fork`'s optional body: none, `{}` or `{at}`.
#[derive(Deserialize, utoipa::ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForkBody {
    /// Where the copy ends: one of the agent's checkpoints, or an entry of its thread (that
    /// entry included). Absent: its thread now.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = Uuid)]
    at: Option<uuid::Uuid>,
}

/// Fork the agent: a new root of its type whose thread is a copy of the agent's up to `at`
/// (one of its checkpoints, or an entry of its thread; default: now), the agent untouched. A
/// copy cut between a tool call and its result closes the call as an interrupt does. The
/// fork's first checkpoint (reason `fork`) holds the copy and names where it came from.
#[utoipa::path(
    post, path = "/v1/agents/{id}/fork", tag = "agents",
    params(
        ("id" = String, Path, format = Uuid, description = "The agent to fork"),
        ("Idempotency-Key" = Option<String>, Header, description = "Makes the fork idempotent: a retry with the same key answers the first attempt's fork (as a spawn's key, kept 24 h)."),
    ),
    request_body(content = Option<ForkBody>, content_type = "application/json", description = "Optional: no body, or `{}`, forks the thread as it is now"),
    responses(
        (status = 201, description = "The fork", body = agentd_proto::AgentView),
        (status = 400, description = "`invalid_argument`: `at` names no checkpoint and no thread entry of the agent", body = AgentdError),
        (status = 422, description = "`idempotency_key_reused`: the key came with another fork (of another agent, or at another point) before", body = AgentdError),
    )
)]
pub(crate) async fn fork(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
    body: web::Bytes,
) -> ApiResult {
    let cmd = Command::Fork {
        agent_id: id.into_inner().into_string(),
        at: crate::errors::optional_json::<ForkBody>(&req, &body)?.at,
        idempotency_key: idempotency_key(&req)?,
    };
    let view = run(&st, &req, cmd).await?;
    Ok(HttpResponse::Created().json(super::with_trace_id(view)))
}

/// The request's `Idempotency-Key` header, if it has one.
fn idempotency_key(req: &HttpRequest) -> Result<Option<String>, AgentdError> {
    let Some(key) = req.headers().get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    let key = key.to_str().map_err(|_| {
        AgentdError::new(
            ErrorCode::InvalidArgument,
            "the Idempotency-Key header is visible ASCII",
        )
    })?;
    Ok(Some(key.to_string()))
}

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    parent_id: Option<AgentId>,
}

/// List roots, or the children of `parent_id`.
#[utoipa::path(
    get, path = "/v1/agents", tag = "agents",
    params(("parent_id" = Option<String>, Query, format = Uuid, description = "List this agent's children instead of the roots")),
    responses(
        (status = 200, description = "The agents, oldest first", body = agentd_proto::AgentList),
    )
)]
pub(crate) async fn list(
    st: web::Data<ApiState>,
    req: HttpRequest,
    q: web::Query<ListQuery>,
) -> ApiResult {
    let parent_id = q.into_inner().parent_id.map(AgentId::into_string);
    if let Some(parent) = &parent_id {
        // The children of an agent that does not exist are no empty list (as `…/children`).
        within(&st, st.system.record(parent)).await?;
    }
    Ok(HttpResponse::Ok().json(run(&st, &req, Command::List { parent_id }).await?))
}

/// Inspect an agent.
#[utoipa::path(
    get, path = "/v1/agents/{id}", tag = "agents",
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    responses(
        (status = 200, description = "The agent", body = agentd_proto::Inspection),
    )
)]
pub(crate) async fn inspect(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
) -> ApiResult {
    let agent_id = id.into_inner().into_string();
    Ok(HttpResponse::Ok().json(run(&st, &req, Command::Inspect { agent_id }).await?))
}

/// Delete an agent and its descendants with their history.
#[utoipa::path(
    delete, path = "/v1/agents/{id}", tag = "agents",
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    responses(
        (status = 200, description = "Deleted", body = super::bodies::Deleted),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn delete(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
) -> ApiResult {
    let agent_id = id.into_inner().into_string();
    run(
        &st,
        &req,
        Command::Control {
            agent_id: agent_id.clone(),
            control: Control::Delete,
        },
    )
    .await?;
    Ok(HttpResponse::Ok().json(super::bodies::Deleted {
        agent_id,
        status: "deleted".into(),
    }))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SendBody {
    #[serde(alias = "message")]
    text: String,
    #[serde(default)]
    interrupt: bool,
}

/// Send a message or follow-up (`interrupt` aborts the turn). With an `Idempotency-Key`
/// header, a retry answers what the first attempt did and the message is queued once.
#[utoipa::path(
    post, path = "/v1/agents/{id}/messages", tag = "agents",
    params(
        ("id" = String, Path, format = Uuid, description = "The agent's id"),
        ("Idempotency-Key" = Option<String>, Header, description = "Makes the message idempotent: a message retried with the same key to the same agent is queued once and answered as the first attempt was (kept 24 h, however many messages come between). Retry with it after a `503 unavailable`: the first attempt may have landed. 1 to 255 visible ASCII characters."),
    ),
    request_body(content = SendBody, content_type = "application/json"),
    responses(
        (status = 202, description = "Stored in the agent's inbox (or, for a retried idempotent message, stored by the first attempt)", body = super::bodies::Sent),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
        (status = 422, description = "`idempotency_key_reused`: the key came with another message to this agent before", body = AgentdError),
        (status = 429, description = "`depth_limit`, `fanout_limit` or `budget_exceeded`", body = AgentdError),
        (status = 503, description = "`unavailable`: the message could not be made durable now; it may have landed: retry with the same `Idempotency-Key`", body = AgentdError),
    )
)]
pub(crate) async fn send(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
    body: JsonObject<SendBody>,
) -> ApiResult {
    let SendBody { text, interrupt } = body.into_inner();
    let idempotency_key = idempotency_key(&req)?;
    let v = run(
        &st,
        &req,
        Command::Send {
            agent_id: id.into_inner().into_string(),
            text,
            interrupt,
            idempotency_key,
        },
    )
    .await?;
    Ok(HttpResponse::Accepted().json(super::with_trace_id(v)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ControlBody {
    #[serde(alias = "action")]
    #[schema(value_type = super::bodies::ControlName)]
    control: String,
}

/// pause, resume, cancel, terminate, close or delete.
#[utoipa::path(
    post, path = "/v1/agents/{id}/control", tag = "agents",
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    request_body(content = ControlBody, content_type = "application/json"),
    responses(
        (status = 200, description = "Applied", body = super::bodies::ControlApplied),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn control(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
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
            agent_id: id.into_inner().into_string(),
            control,
        },
    )
    .await?;
    Ok(HttpResponse::Ok().json(v))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProvideBody {
    #[serde(alias = "answer", alias = "text")]
    value: String,
}

/// Provide what a `waiting_dependency` agent asked for (`value`).
#[utoipa::path(
    post, path = "/v1/agents/{id}/dependency", tag = "agents",
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    request_body(content = ProvideBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The agent", body = agentd_proto::AgentView),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn provide_dependency(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
    body: JsonObject<ProvideBody>,
) -> ApiResult {
    let cmd = Command::ProvideDependency {
        agent_id: id.into_inner().into_string(),
        value: body.into_inner().value,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

/// Answer a `waiting_question` agent (`answer`).
#[utoipa::path(
    post, path = "/v1/agents/{id}/answer", tag = "agents",
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    request_body(content = ProvideBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The agent", body = agentd_proto::AgentView),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn answer_question(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
    body: JsonObject<ProvideBody>,
) -> ApiResult {
    let cmd = Command::AnswerQuestion {
        agent_id: id.into_inner().into_string(),
        answer: body.into_inner().value,
        item_id: None,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

/// Replace the agent's budget (`max_tokens`, `max_cost_usd`, `deadline_ms`).
#[utoipa::path(
    post, path = "/v1/agents/{id}/budget", tag = "agents",
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    request_body(content = agentd_proto::Budget, content_type = "application/json"),
    responses(
        (status = 200, description = "The agent with its new budget", body = agentd_proto::AgentView),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn set_budget(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
    body: JsonObject<agentd_proto::Budget>,
) -> ApiResult {
    let cmd = Command::SetBudget {
        agent_id: id.into_inner().into_string(),
        budget: body.into_inner(),
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EnvBody {
    env: std::collections::BTreeMap<String, String>,
}

/// Replace the agent's environment variables (`env`: a map).
#[utoipa::path(
    post, path = "/v1/agents/{id}/env", tag = "agents",
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    request_body(content = EnvBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The agent", body = agentd_proto::AgentView),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn set_env(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
    body: JsonObject<EnvBody>,
) -> ApiResult {
    let cmd = Command::SetEnv {
        agent_id: id.into_inner().into_string(),
        env: body.into_inner().env,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

/// The agent's thread.
#[utoipa::path(
    get, path = "/v1/agents/{id}/thread", tag = "agents",
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    responses(
        (status = 200, description = "The thread", body = super::bodies::ThreadView),
    )
)]
pub(crate) async fn thread(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
) -> ApiResult {
    let agent_id = id.into_inner().into_string();
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
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    responses(
        (status = 200, description = "The children, oldest first", body = agentd_proto::AgentList),
    )
)]
pub(crate) async fn children(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
) -> ApiResult {
    let agent_id = id.into_inner().into_string();
    within(&st, st.system.record(&agent_id)).await?;
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
