//! Routes that rewrite an agent's session: reset, compact, checkpoints and restore.

use super::{AgentId, ApiResult, ApiState, run, scope, within};
use crate::errors::optional_json;
use actix_web::{HttpRequest, HttpResponse, web};
use agentd_proto::{AgentdError, Command, ErrorCode};
use serde::Deserialize;
use serde_json::json;

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
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    request_body(content = Option<ResetBody>, content_type = "application/json", description = "Optional: no body, or `{}`, is the default"),
    responses(
        (status = 202, description = "Queued", body = super::bodies::SessionRequested),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn reset(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
    body: web::Bytes,
) -> ApiResult {
    let message = optional_json::<ResetBody>(&req, &body)?
        .message
        .filter(|m| !m.trim().is_empty());
    let v = run(
        &st,
        &req,
        Command::Reset {
            agent_id: id.into_inner().into_string(),
            message,
        },
    )
    .await?;
    Ok(HttpResponse::Accepted().json(v))
}

/// Compact the session.
#[utoipa::path(
    post, path = "/v1/agents/{id}/compact", tag = "agents",
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    responses(
        (status = 202, description = "Queued", body = super::bodies::SessionRequested),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn compact(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
) -> ApiResult {
    let v = run(
        &st,
        &req,
        Command::Compact {
            agent_id: id.into_inner().into_string(),
        },
    )
    .await?;
    Ok(HttpResponse::Accepted().json(v))
}

/// The agent's checkpoints, newest first (summaries).
#[utoipa::path(
    get, path = "/v1/agents/{id}/checkpoints", tag = "checkpoints",
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    responses(
        (status = 200, description = "The checkpoints", body = super::bodies::CheckpointList),
    )
)]
pub(crate) async fn checkpoints(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
) -> ApiResult {
    let cmd = Command::Checkpoints {
        agent_id: id.into_inner().into_string(),
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

/// Take a checkpoint now (reason `manual`).
#[utoipa::path(
    post, path = "/v1/agents/{id}/checkpoints", tag = "checkpoints",
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    responses(
        (status = 201, description = "The checkpoint taken", body = super::bodies::CheckpointSummary),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn take_checkpoint(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
) -> ApiResult {
    let cmd = Command::Checkpoint {
        agent_id: id.into_inner().into_string(),
    };
    Ok(HttpResponse::Created().json(run(&st, &req, cmd).await?))
}

/// One checkpoint in full: conversation, pending items, environment.
#[utoipa::path(
    get, path = "/v1/agents/{id}/checkpoints/{checkpoint}", tag = "checkpoints",
    params(("id" = String, Path, format = Uuid, description = "The agent's id"), ("checkpoint" = String, Path, format = Uuid, description = "The checkpoint's id")),
    responses(
        (status = 200, description = "The checkpoint", body = super::bodies::CheckpointDetail),
    )
)]
pub(crate) async fn checkpoint(
    st: web::Data<ApiState>,
    req: HttpRequest,
    path: web::Path<(AgentId, String)>,
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
    let cp = within(&st, st.system.find_checkpoint(&agent_id, Some(id))).await?;
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
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    request_body(content = Option<RestoreBody>, content_type = "application/json", description = "Optional: no body, or `{}`, is the default"),
    responses(
        (status = 200, description = "The restored agent", body = agentd_proto::AgentView),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
    )
)]
pub(crate) async fn restore(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
    body: web::Bytes,
) -> ApiResult {
    let cmd = Command::Restore {
        agent_id: id.into_inner().into_string(),
        checkpoint_id: optional_json::<RestoreBody>(&req, &body)?.checkpoint_id,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}
