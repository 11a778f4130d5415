//! The HTTP API (`/v1`). Every route is a thin door onto [`AgentSystem`]; errors are JSON
//! `{code, message}` with the stable codes.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError, web};
use agentd_actors::AgentSystem;
use agentd_proto::{AgentdError, Command, Control, ErrorCode, InboxItem, SpawnRequest};
use serde::Deserialize;
use serde_json::{Value, json};

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct ApiState {
    /// The actors.
    pub system: AgentSystem,
}

/// An [`AgentdError`] as an HTTP response.
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

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code()).json(&self.0)
    }
}

type ApiResult = Result<HttpResponse, ApiError>;

/// Registers every route.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz))
        .service(
            web::scope("/v1")
                .route("/info", web::get().to(info))
                .route("/agents", web::post().to(spawn))
                .route("/agents", web::get().to(list))
                .route("/tree", web::get().to(tree))
                .route("/commands", web::post().to(command))
                .route("/tools/{tool}", web::post().to(invoke_tool_detached))
                .route("/agents/{id}", web::get().to(inspect))
                .route("/agents/{id}", web::delete().to(delete))
                .route("/agents/{id}/messages", web::post().to(send))
                .route("/agents/{id}/control", web::post().to(control))
                .route("/agents/{id}/reset", web::post().to(reset))
                .route("/agents/{id}/compact", web::post().to(compact))
                .route("/agents/{id}/thread", web::get().to(thread))
                .route("/agents/{id}/children", web::get().to(children))
                .route("/agents/{id}/tools", web::get().to(tools))
                .route("/agents/{id}/tools/{tool}", web::post().to(invoke_tool)),
        );
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

async fn readyz(st: web::Data<ApiState>) -> ApiResult {
    st.system
        .deps()
        .store
        .list_roots()
        .await
        .map_err(AgentdError::from)?;
    Ok(HttpResponse::Ok().json(json!({"status": "ready"})))
}

async fn info(st: web::Data<ApiState>) -> HttpResponse {
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
    }))
}

async fn spawn(st: web::Data<ApiState>, body: web::Json<SpawnRequest>) -> ApiResult {
    let rec = st.system.spawn(body.into_inner()).await?;
    let view = st.system.inspect(&rec.id).await?;
    Ok(HttpResponse::Created().json(view))
}

#[derive(Deserialize)]
struct ListQuery {
    parent_id: Option<String>,
}

async fn list(st: web::Data<ApiState>, q: web::Query<ListQuery>) -> ApiResult {
    let agents = st.system.list(q.parent_id.as_deref()).await?;
    Ok(HttpResponse::Ok().json(json!({"agents": agents})))
}

async fn tree(st: web::Data<ApiState>) -> ApiResult {
    Ok(HttpResponse::Ok().json(json!({"roots": st.system.tree().await?})))
}

async fn command(st: web::Data<ApiState>, body: web::Json<Command>) -> ApiResult {
    Ok(HttpResponse::Ok().json(st.system.execute(body.into_inner()).await?))
}

async fn inspect(st: web::Data<ApiState>, id: web::Path<String>) -> ApiResult {
    Ok(HttpResponse::Ok().json(st.system.inspect(&id).await?))
}

async fn delete(st: web::Data<ApiState>, id: web::Path<String>) -> ApiResult {
    st.system.control(&id, Control::Delete).await?;
    Ok(HttpResponse::Ok().json(json!({"agent_id": id.into_inner(), "status": "deleted"})))
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
    id: web::Path<String>,
    body: web::Json<SendBody>,
) -> ApiResult {
    st.system.send(&id, &body.text, body.interrupt).await?;
    Ok(HttpResponse::Accepted().json(json!({"agent_id": id.into_inner(), "status": "sent"})))
}

#[derive(Deserialize)]
struct ControlBody {
    #[serde(alias = "action")]
    control: String,
}

async fn control(
    st: web::Data<ApiState>,
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
    let rec = st.system.control(&id, control).await?;
    Ok(HttpResponse::Ok().json(json!({
        "agent_id": id.into_inner(), "control": control.as_str(), "status": rec.map(|r| r.status)
    })))
}

#[derive(Deserialize, Default)]
struct ResetBody {
    #[serde(default)]
    message: Option<String>,
}

async fn reset(
    st: web::Data<ApiState>,
    id: web::Path<String>,
    body: Option<web::Json<ResetBody>>,
) -> ApiResult {
    let message = body
        .and_then(|b| b.into_inner().message)
        .filter(|m| !m.trim().is_empty());
    st.system.post(&id, InboxItem::Reset { message }).await?;
    Ok(HttpResponse::Accepted().json(
        json!({"summary": "Agent session reset requested.", "target_agent_id": id.into_inner()}),
    ))
}

async fn compact(st: web::Data<ApiState>, id: web::Path<String>) -> ApiResult {
    st.system.post(&id, InboxItem::Compact).await?;
    Ok(HttpResponse::Accepted().json(
        json!({"summary": "Agent compaction requested.", "target_agent_id": id.into_inner()}),
    ))
}

async fn thread(st: web::Data<ApiState>, id: web::Path<String>) -> ApiResult {
    Ok(HttpResponse::Ok()
        .json(json!({"agent_id": id.as_str(), "entries": st.system.thread(&id).await?})))
}

async fn children(st: web::Data<ApiState>, id: web::Path<String>) -> ApiResult {
    st.system.record(&id).await?;
    Ok(HttpResponse::Ok().json(json!({"agents": st.system.list(Some(&id)).await?})))
}

async fn tools(st: web::Data<ApiState>, id: web::Path<String>) -> ApiResult {
    Ok(HttpResponse::Ok().json(json!({"tools": st.system.tools_of(&id).await?})))
}

async fn invoke_tool(
    st: web::Data<ApiState>,
    path: web::Path<(String, String)>,
    body: web::Json<Value>,
) -> ApiResult {
    let (id, tool) = path.into_inner();
    Ok(HttpResponse::Ok().json(
        st.system
            .invoke_tool(Some(&id), &tool, body.into_inner())
            .await?,
    ))
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
    tool: web::Path<String>,
    body: web::Json<DetachedToolBody>,
) -> ApiResult {
    let body = body.into_inner();
    Ok(HttpResponse::Ok().json(
        st.system
            .invoke_tool(body.agent_id.as_deref(), &tool, body.args)
            .await?,
    ))
}
