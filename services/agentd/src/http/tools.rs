//! Routes on tools: what an agent's model is shown, and running a tool as an agent.

use super::{ApiResult, ApiState, run, scope};
use crate::errors::JsonObject;
use actix_web::{HttpRequest, HttpResponse, web};
use agentd_proto::{AgentdError, Command};
use serde::Deserialize;
use serde_json::{Value, json};

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
