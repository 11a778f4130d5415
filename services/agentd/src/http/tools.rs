//! Routes on tools: what an agent's model is shown, and running a tool as an agent.

use super::{AgentId, ApiResult, ApiState, run, scope, within};
use crate::errors::JsonObject;
use actix_web::{HttpRequest, HttpResponse, web};
use agentd_proto::{AgentdError, Command};
use serde::Deserialize;
use serde_json::{Value, json};

/// The tools the agent's model is shown.
#[utoipa::path(
    get, path = "/v1/agents/{id}/tools", tag = "tools",
    params(("id" = String, Path, format = Uuid, description = "The agent's id")),
    responses(
        (status = 200, description = "The tools", body = super::bodies::ToolList),
    )
)]
pub(crate) async fn tools(
    st: web::Data<ApiState>,
    req: HttpRequest,
    id: web::Path<AgentId>,
) -> ApiResult {
    within(&st, st.system.check_scope(scope(&req).as_deref(), &id)).await?;
    let tools = within(&st, st.system.tools_of(&id)).await?;
    Ok(HttpResponse::Ok().json(json!({"tools": tools})))
}

/// Run a tool as the agent (the body is its arguments).
#[utoipa::path(
    post, path = "/v1/agents/{id}/tools/{tool}", tag = "tools",
    params(("id" = String, Path, format = Uuid, description = "The agent's id"), ("tool" = String, Path, description = "The tool's name (e.g. `Manage`, `spawn_agent`)")),
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
    path: web::Path<(AgentId, String)>,
    body: JsonObject<Value>,
) -> ApiResult {
    let (id, tool) = path.into_inner();
    let cmd = Command::InvokeTool {
        agent_id: Some(id.into_string()),
        tool,
        args: body.into_inner(),
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
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

/// The answer to a call of a service tool: `result` or `error`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolResultBody {
    /// The tool's result (any JSON).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    result: Option<Value>,
    /// The tool's failure: a message and, optionally, the worker's own code (free text).
    #[serde(default, deserialize_with = "agentd_proto::strict::optional_object")]
    error: Option<agentd_proto::ToolAnswerError>,
}

/// Answer a pending call of a service tool (the first answer is applied).
#[utoipa::path(
    post, path = "/v1/agents/{id}/tool_results/{call_id}", tag = "tools",
    params(
        ("id" = String, Path, format = Uuid, description = "The agent whose turn made the call"),
        ("call_id" = uuid::Uuid, Path, description = "agentd's id of the call"),
    ),
    request_body(content = ToolResultBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The answer was applied: `{call_id, status: \"answered\"}`", body = super::bodies::ToolCallAnswered),
        (status = 404, description = "`tool_call_not_found`: no such call of this agent", body = AgentdError),
        (status = 409, description = "`tool_call_closed`: answered, timed out, cancelled or rejected already; `invalid_transition`: a call agentd runs itself (MCP, webhook, built-in), not a service tool's", body = AgentdError),
    )
)]
pub(crate) async fn tool_result(
    st: web::Data<ApiState>,
    req: HttpRequest,
    path: web::Path<(AgentId, uuid::Uuid)>,
    body: JsonObject<ToolResultBody>,
) -> ApiResult {
    let (agent_id, call_id) = path.into_inner();
    let body = body.into_inner();
    let cmd = Command::ToolResult {
        agent_id: agent_id.into_string(),
        call_id,
        result: body.result,
        error: body.error,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

/// A person's decision on a call that waits for approval.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalBody {
    /// `true` runs the call, `false` rejects it.
    approve: bool,
    /// Why; a rejection's reason reaches the model as the tool's error.
    #[serde(default)]
    reason: Option<String>,
}

/// Approve or reject a call that waits for approval (the first decision is applied). An
/// approved call runs (a service tool's call is then published and waits for its answer); a
/// rejected one reaches the model as a tool error carrying the reason.
#[utoipa::path(
    post, path = "/v1/agents/{id}/approvals/{call_id}", tag = "tools",
    params(
        ("id" = String, Path, format = Uuid, description = "The agent whose turn made the call"),
        ("call_id" = uuid::Uuid, Path, description = "agentd's id of the call"),
    ),
    request_body(content = ApprovalBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The decision was applied: `{call_id, decision}`", body = super::bodies::ToolCallDecided),
        (status = 404, description = "`tool_call_not_found`: no such call of this agent", body = AgentdError),
        (status = 409, description = "`tool_call_closed`: decided, answered, timed out or cancelled already", body = AgentdError),
    )
)]
pub(crate) async fn approve_tool(
    st: web::Data<ApiState>,
    req: HttpRequest,
    path: web::Path<(AgentId, uuid::Uuid)>,
    body: JsonObject<ApprovalBody>,
) -> ApiResult {
    let (agent_id, call_id) = path.into_inner();
    let body = body.into_inner();
    let cmd = Command::ApproveTool {
        agent_id: agent_id.into_string(),
        call_id,
        approve: body.approve,
        reason: body.reason,
    };
    Ok(HttpResponse::Ok().json(run(&st, &req, cmd).await?))
}

#[derive(Deserialize)]
pub(crate) struct ToolCallsQuery {
    status: Option<agentd_proto::ToolCallStatus>,
}

/// The open calls of service tools, oldest first (of the `X-Agentd-Root` tree if scoped).
#[utoipa::path(
    get, path = "/v1/tool_calls", tag = "tools",
    params(("status" = Option<String>, Query, description = "`pending` or `awaiting_approval` (both if absent)")),
    responses(
        (status = 200, description = "The calls", body = super::bodies::ToolCallList),
    )
)]
pub(crate) async fn tool_calls(
    st: web::Data<ApiState>,
    req: HttpRequest,
    q: web::Query<ToolCallsQuery>,
) -> ApiResult {
    let status = q.into_inner().status;
    if status.is_some_and(|s| !s.is_open()) {
        return Err(AgentdError::new(
            agentd_proto::ErrorCode::InvalidArgument,
            "status is `pending` or `awaiting_approval`: only open calls are listed",
        )
        .into());
    }
    let calls = within(&st, st.system.tool_calls(status, scope(&req).as_deref())).await?;
    Ok(HttpResponse::Ok().json(json!({ "tool_calls": calls })))
}
