//! `GET /v1/events`: the caller's events as Server-Sent Events. The route checks what it is
//! asked for (an agent that exists, within the caller's scope); `crate::sse` streams.

use crate::errors::ApiError;
use crate::sse::{EventsQuery, stream};
use actix_web::{HttpRequest, HttpResponse, web};
use agentd_proto::AgentdError;

/// Server-Sent Events. Without a filter, every event of every agent of the deployment (every
/// tree; with Redis, every process's), text deltas included: the operator's view; a caller
/// scoped by `X-Agentd-Root` gets that root's tree. `agent_id` or `root_id` narrows to a
/// subtree (within the caller's scope, `not_ancestor` outside it). A stream narrowed to an
/// agent that does not exist is `agent_not_found`, not a stream on which nothing will ever come;
/// one narrowed to something that is no agent id at all is `invalid_argument`.
#[utoipa::path(
    get, path = "/v1/events", tag = "operations",
    params(
        ("agent_id" = Option<String>, Query, format = Uuid, description = "Only this agent and its descendants"),
        ("root_id" = Option<String>, Query, format = Uuid, description = "Same as `agent_id`, named for a tree"),
        ("last_event_id" = Option<String>, Query, description = "Resume after this event id (as the `Last-Event-ID` header)"),
        ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event id: the events missed since come first, or `event: lagged` if they are no longer kept"),
    ),
    responses(
        (status = 200, description = "Server-Sent Events, each with an `id:`, one JSON event per `data:` line", body = String, content_type = "text/event-stream"),
    )
)]
pub async fn events(
    st: web::Data<super::ApiState>,
    q: web::Query<EventsQuery>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let mut q = q.into_inner();
    let scope = super::scope(&req);
    if let Some(id) = q.agent_id.as_ref().or(q.root_id.as_ref()) {
        super::AgentId::parse(id)?;
        st.system
            .deps()
            .store
            .get_agent(id)
            .await
            .map_err(AgentdError::from)?
            .ok_or_else(|| AgentdError::agent_not_found(id))?;
        st.system.check_scope(scope.as_deref(), id).await?;
    } else if let Some(root) = scope {
        // A caller confined to a tree sees that tree, as with `?root_id=`, never every event.
        super::AgentId::parse(&root)?;
        st.system.record(&root).await?;
        q.root_id = Some(root);
    }
    let last_event_id = req
        .headers()
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| q.last_event_id.take())
        .filter(|id| !id.trim().is_empty());
    Ok(stream(
        st.system.clone(),
        st.events.clone(),
        q,
        last_event_id,
        st.shutdown.clone(),
    )
    .await)
}
