//! The Agent2Agent (A2A) protocol, version 1.0: each agent type named in `[a2a] expose` is an
//! A2A agent at `/a2a/<type>`, over the JSON-RPC 2.0 binding (`POST /a2a/<type>`) and the
//! HTTP+JSON binding (`/a2a/<type>/message:send`, `/a2a/<type>/tasks/…`), with its Agent Card
//! at `/a2a/<type>/.well-known/agent-card.json` (the first type's also at
//! `/.well-known/agent-card.json`). docs/a2a.md has the mapping.
//!
//! | module | what it holds |
//! |---|---|
//! | [`card`] | the Agent Cards |
//! | [`error`] | the errors, with their JSON-RPC codes and HTTP statuses |
//! | [`task`] | tasks over agentd's durable state: their records, what became of them |
//! | [`service`] | the operations, whichever binding carries them |
//! | [`shape`] | the JSON-RPC methods and the ProtoJSON shape of their requests' params |
//! | [`stream`] | a task's updates as a stream |
//! | [`push`] | push notification configs and their durable outbox |
//! | [`watch`] | the contexts this process owns read as their states change |
//! | [`bindings`] | JSON-RPC and HTTP+JSON: routes, versions, framing |

mod bindings;
pub(crate) mod card;
mod error;
mod push;
mod service;
mod shape;
mod stream;
mod task;
mod watch;

pub use bindings::routes;
pub use error::A2aError;
pub use push::Pusher;

use agentd_actors::AgentSystem;

/// What the A2A routes share.
#[derive(Clone)]
pub struct A2a {
    /// The actors.
    pub system: AgentSystem,
    /// The events (a stream follows its task through them).
    pub events: crate::sse::EventFeed,
    /// The exposed agent types, in the order the settings list them.
    pub exposed: Vec<String>,
    /// The base of the cards' absolute URLs (`""`: the request's own scheme and host).
    pub public_url: String,
    /// Whether the API needs a bearer token (the cards then declare the scheme).
    pub token_required: bool,
    /// Turns `true` when the service stops: streams end then.
    pub shutdown: crate::sse::Shutdown,
    /// The contexts with push notifications to deliver.
    pub pusher: push::Pusher,
    /// `[a2a] context_idle_close_ms` (0: contexts are not closed for being idle).
    pub idle_close_ms: u64,
}

impl A2a {
    /// Whether `agent_type` is served.
    pub fn serves(&self, agent_type: &str) -> bool {
        self.exposed.iter().any(|t| t == agent_type)
    }
}

/// Whether `path` is an Agent Card's (served without a token: discovery comes first).
pub fn is_card_path(path: &str) -> bool {
    path == card::WELL_KNOWN
        || path
            .strip_prefix("/a2a/")
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(_, tail)| format!("/{tail}") == card::WELL_KNOWN)
}

/// Starts the background work over contexts: the watcher, which settles a context's tasks and
/// writes their push notifications as their states change (`watch`), the deliverer of those
/// notifications (`push`), and the closer of idle contexts (`[a2a] context_idle_close_ms`).
pub fn start_watcher(a2a: A2a) {
    push::start(a2a.clone());
    watch::start(a2a.clone());
    if a2a.idle_close_ms > 0 {
        start_idle_closer(a2a);
    }
}

/// Closes the contexts this process owns that have been idle (`idle`, or `completed`) for
/// `[a2a] context_idle_close_ms`: their actors are freed, their history and tasks kept, and a
/// new message re-opens them. Looked at every quarter of that time (at most every 15 s).
fn start_idle_closer(a2a: A2a) {
    let every = std::time::Duration::from_millis((a2a.idle_close_ms / 4).clamp(200, 15_000));
    actix_rt::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            let mut shutdown = a2a.shutdown.clone();
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            let roots = match a2a.system.deps().store.list_roots().await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "closing idle A2A contexts: listing roots");
                    continue;
                }
            };
            let now = task::now_ms();
            for r in roots {
                let idle = matches!(
                    r.status,
                    agentd_proto::AgentStatus::Idle | agentd_proto::AgentStatus::Completed
                );
                if !idle
                    || !a2a.serves(&r.agent_type)
                    || r.updated_at_ms.saturating_add(a2a.idle_close_ms) > now
                    || a2a.system.deps().is_owned_elsewhere(&r.id)
                    || !task::is_context(&a2a.system, &r.id).await.unwrap_or(false)
                {
                    continue;
                }
                match a2a
                    .system
                    .control(&r.id, agentd_proto::Control::Close)
                    .await
                {
                    Ok(_) => tracing::info!(context = %r.id, "closed an idle A2A context"),
                    Err(e) => {
                        tracing::warn!(context = %r.id, error = %e, "closing an idle A2A context")
                    }
                }
            }
        }
    });
}
