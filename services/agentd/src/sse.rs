//! `/v1/events`: live events as Server-Sent Events. `?agent_id=` (or `?root_id=`) narrows the
//! stream to that agent and its descendants (sub-agents spawned later join automatically); every
//! event names its agent. Browsers read it with streaming `fetch` so the bearer header can be
//! sent.
//!
//! A stream never ends by itself, so the HTTP server's graceful stop would wait for it until
//! its timeout: every stream ends as soon as [`Shutdown`] is signalled, and its connection
//! closes with it (a client reconnects to another process, or to this one once it is back).

use crate::errors::ApiError;
use actix_web::web::Bytes;
use actix_web::{HttpResponse, web};
use agentd_actors::AgentSystem;
use agentd_bus::InProcessBus;
use agentd_proto::{AgentdError, Event};
use serde::Deserialize;
use std::collections::HashSet;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// Query of `/v1/events`.
#[derive(Deserialize)]
pub struct EventsQuery {
    /// Only this agent and its descendants.
    pub agent_id: Option<String>,
    /// Same as `agent_id`, named for a tree.
    pub root_id: Option<String>,
}

fn event_type(e: &Event) -> String {
    serde_json::to_value(e)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
        .unwrap_or_else(|| "event".into())
}

/// Tells every event stream that the service stops (`true`); a dropped sender means the same.
pub type Shutdown = tokio::sync::watch::Receiver<bool>;

/// Why the next piece of a stream is what it is.
enum Next {
    Event(Result<Event, RecvError>),
    Idle,
    Shutdown,
}

/// Waits for the next event, 15 s of silence, or shutdown, whichever comes first.
async fn next(rx: &mut tokio::sync::broadcast::Receiver<Event>, shutdown: &mut Shutdown) -> Next {
    if *shutdown.borrow() {
        return Next::Shutdown;
    }
    tokio::select! {
        biased;
        changed = shutdown.changed() => match changed {
            Ok(()) if !*shutdown.borrow() => Next::Idle,
            _ => Next::Shutdown,
        },
        got = tokio::time::timeout(Duration::from_secs(15), rx.recv()) => match got {
            Ok(r) => Next::Event(r),
            Err(_) => Next::Idle,
        },
    }
}

/// Streams events until the client goes away or the service stops.
pub async fn stream(
    system: AgentSystem,
    bus: InProcessBus,
    q: EventsQuery,
    shutdown: Shutdown,
) -> HttpResponse {
    let rx = bus.subscribe();
    let filter = q.agent_id.or(q.root_id);
    let mut known: HashSet<String> = HashSet::new();
    if let Some(root) = &filter {
        // The subtree as it is now; later spawns join through their Spawned event.
        let mut stack = vec![root.clone()];
        while let Some(id) = stack.pop() {
            if known.insert(id.clone())
                && let Ok(kids) = system.deps().store.children(&id).await
            {
                stack.extend(kids);
            }
        }
    }
    let body = futures::stream::unfold(
        (rx, known, filter.is_some(), shutdown),
        |(mut rx, mut known, filtered, mut shutdown)| async move {
            loop {
                match next(&mut rx, &mut shutdown).await {
                    Next::Shutdown | Next::Event(Err(RecvError::Closed)) => return None,
                    Next::Idle => {
                        return Some((
                            Ok::<_, actix_web::Error>(Bytes::from_static(b": keep-alive\n\n")),
                            (rx, known, filtered, shutdown),
                        ));
                    }
                    Next::Event(Err(RecvError::Lagged(n))) => {
                        let msg = format!("event: lagged\ndata: {{\"missed\":{n}}}\n\n");
                        return Some((Ok(Bytes::from(msg)), (rx, known, filtered, shutdown)));
                    }
                    Next::Event(Ok(event)) => {
                        if filtered {
                            if let Event::Spawned {
                                agent_id,
                                parent_id: Some(p),
                                ..
                            } = &event
                                && known.contains(p)
                            {
                                known.insert(agent_id.clone());
                            }
                            let subject = match &event {
                                Event::Forwarded { parent_id, .. } => parent_id.as_str(),
                                other => other.agent_id(),
                            };
                            if !known.contains(subject) {
                                continue;
                            }
                        }
                        let data = serde_json::to_string(&event).unwrap_or_default();
                        let msg = format!("event: {}\ndata: {data}\n\n", event_type(&event));
                        return Some((Ok(Bytes::from(msg)), (rx, known, filtered, shutdown)));
                    }
                }
            }
        },
    );
    // The connection closes with the stream: no idle keep-alive connection holds a stop.
    HttpResponse::Ok()
        .force_close()
        .insert_header(("Content-Type", "text/event-stream"))
        .insert_header(("Cache-Control", "no-cache"))
        .streaming(body)
}

/// Server-Sent Events; `agent_id` or `root_id` narrows to a subtree. A stream narrowed to an
/// agent that does not exist is `agent_not_found`, not a stream on which nothing will ever come.
#[utoipa::path(
    get, path = "/v1/events", tag = "operations",
    params(
        ("agent_id" = Option<String>, Query, description = "Only this agent and its descendants"),
        ("root_id" = Option<String>, Query, description = "Same as `agent_id`, named for a tree"),
    ),
    responses(
        (status = 200, description = "Server-Sent Events, one JSON event per `data:` line", body = String, content_type = "text/event-stream"),
    )
)]
pub async fn events(
    st: web::Data<crate::http::ApiState>,
    q: web::Query<EventsQuery>,
) -> Result<HttpResponse, ApiError> {
    let q = q.into_inner();
    if let Some(id) = q.agent_id.as_ref().or(q.root_id.as_ref()) {
        st.system
            .deps()
            .store
            .get_agent(id)
            .await
            .map_err(AgentdError::from)?
            .ok_or_else(|| AgentdError::agent_not_found(id))?;
    }
    Ok(stream(st.system.clone(), st.bus.clone(), q, st.shutdown.clone()).await)
}
