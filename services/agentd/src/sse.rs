//! `/v1/events`: live events as Server-Sent Events. `?agent_id=` (or `?root_id=`) narrows the
//! stream to that agent and its descendants (sub-agents spawned later join automatically); every
//! event names its agent. Browsers read it with streaming `fetch` so the bearer header can be
//! sent.
//!
//! Every event carries an `id:`. A client whose stream dropped reconnects with the last id it
//! saw (`Last-Event-ID`, or `?last_event_id=`) and first gets what it missed: from the process's
//! ring of recent events ([`EventLog`]), or with Redis, when the ring does not hold the id (the
//! client comes back to another process), from `<ns>:events` and `<ns>:deltas` themselves. An id
//! neither holds any more gets `event: lagged` (`{"missed": null}`) before the live events; a
//! client too slow for the live events gets `event: lagged` with how many it missed.
//!
//! The response starts at once, with a `: connected` comment: the status line and headers
//! never wait for the first event.
//!
//! A stream never ends by itself, so the HTTP server's graceful stop would wait for it until
//! its timeout: every stream ends as soon as [`Shutdown`] is signalled, and its connection
//! closes with it (a client reconnects to another process, or to this one once it is back).

use actix_web::HttpResponse;
use actix_web::web::Bytes;
use agentd_actors::AgentSystem;
use agentd_bus::{Backlog, EventLog, Logged, Replay, StreamPosition};
use agentd_proto::Event;
use futures::StreamExt;
use serde::Deserialize;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// Query of `/v1/events`.
#[derive(Deserialize)]
pub struct EventsQuery {
    /// Only this agent and its descendants.
    pub agent_id: Option<String>,
    /// Same as `agent_id`, named for a tree.
    pub root_id: Option<String>,
    /// Resume after this id (as the `Last-Event-ID` header, which wins when both are given).
    pub last_event_id: Option<String>,
}

/// Where the Redis deployment's event streams are (a resume reads them).
#[derive(Debug, Clone)]
pub struct RedisEventStreams {
    /// Where Redis is.
    pub target: agentd_store::RedisTarget,
    /// `<ns>:events`.
    pub events: String,
    /// `<ns>:deltas`.
    pub deltas: String,
}

/// What `/v1/events` streams from.
#[derive(Clone)]
pub struct EventFeed {
    /// The process's events with ids, the recent ones kept.
    pub log: Arc<EventLog>,
    /// With Redis: the streams a resume reads when the log does not hold its id.
    pub redis: Option<RedisEventStreams>,
}

/// The first piece of every stream, sent at once (an SSE comment, which clients ignore).
const OPENED: &[u8] = b": connected\n\n";

/// Most entries of each stream a resume reads from Redis; a client further behind lagged.
const BACKLOG_LIMIT: usize = 10_000;

/// Tells every event stream that the service stops (`true`); a dropped sender means the same.
pub type Shutdown = tokio::sync::watch::Receiver<bool>;

/// Why the next piece of a stream is what it is.
enum Next {
    Event(Result<Arc<Logged>, RecvError>),
    Idle,
    Shutdown,
}

/// Waits for the next event, 15 s of silence, or shutdown, whichever comes first.
async fn next(
    rx: &mut tokio::sync::broadcast::Receiver<Arc<Logged>>,
    shutdown: &mut Shutdown,
) -> Next {
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

/// Which events a stream shows: all, or an agent's subtree (growing with its spawns).
struct Subtree {
    /// `None`: every event.
    known: Option<HashSet<String>>,
}

impl Subtree {
    fn admits(&mut self, event: &Event) -> bool {
        let Some(known) = &mut self.known else {
            return true;
        };
        if let Event::Spawned {
            agent_id,
            parent_id: Some(p),
            ..
        } = event
            && known.contains(p)
        {
            known.insert(agent_id.clone());
        }
        let subject = match event {
            Event::Forwarded { parent_id, .. } => parent_id.as_str(),
            other => other.agent_id(),
        };
        known.contains(subject)
    }
}

/// One piece of the stream before the live events: a missed event, or the news that some
/// were lost.
enum Missed {
    Event(Arc<Logged>),
    Lagged,
}

/// What a client resuming after `last` missed, and (with Redis) the position the live events
/// must be after not to repeat it.
async fn missed(
    feed: &EventFeed,
    last: &str,
    replay: Option<Replay>,
) -> (VecDeque<Missed>, Option<StreamPosition>) {
    match replay {
        None => (VecDeque::new(), None),
        Some(Replay::After(events)) => (events.into_iter().map(Missed::Event).collect(), None),
        Some(Replay::NotKept) => {
            let lagged = || (VecDeque::from([Missed::Lagged]), None);
            let (Some(redis), Some(after)) = (&feed.redis, StreamPosition::parse(last)) else {
                return lagged();
            };
            match agentd_bus::backlog(
                &redis.target,
                &redis.events,
                &redis.deltas,
                &after,
                BACKLOG_LIMIT,
            )
            .await
            {
                Ok(Backlog::After(events)) => {
                    let until = events
                        .last()
                        .and_then(|l| StreamPosition::parse(&l.id))
                        .unwrap_or(after);
                    (
                        events
                            .into_iter()
                            .map(|l| Missed::Event(Arc::new(l)))
                            .collect(),
                        Some(until),
                    )
                }
                Ok(Backlog::Lagged) => lagged(),
                Err(e) => {
                    tracing::warn!(error = %e, "reading the missed events from Redis");
                    lagged()
                }
            }
        }
    }
}

/// The SSE text of `logged`.
fn frame(logged: &Logged) -> Bytes {
    let data = serde_json::to_string(&logged.event).unwrap_or_default();
    Bytes::from(format!(
        "id: {}\nevent: {}\ndata: {data}\n\n",
        logged.id,
        logged.event.kind()
    ))
}

/// State of one stream.
struct Streaming {
    rx: tokio::sync::broadcast::Receiver<Arc<Logged>>,
    missed: VecDeque<Missed>,
    /// Live events not after this position were replayed from Redis already.
    replayed_until: Option<StreamPosition>,
    subtree: Subtree,
    shutdown: Shutdown,
}

impl Streaming {
    /// The next piece to send; `None` ends the stream.
    async fn next(&mut self) -> Option<Bytes> {
        while let Some(missed) = self.missed.pop_front() {
            match missed {
                Missed::Lagged => {
                    return Some(Bytes::from_static(
                        b"event: lagged\ndata: {\"missed\":null}\n\n",
                    ));
                }
                Missed::Event(logged) if self.subtree.admits(&logged.event) => {
                    return Some(frame(&logged));
                }
                Missed::Event(_) => {}
            }
        }
        loop {
            match next(&mut self.rx, &mut self.shutdown).await {
                Next::Shutdown | Next::Event(Err(RecvError::Closed)) => return None,
                Next::Idle => return Some(Bytes::from_static(b": keep-alive\n\n")),
                Next::Event(Err(RecvError::Lagged(n))) => {
                    return Some(Bytes::from(format!(
                        "event: lagged\ndata: {{\"missed\":{n}}}\n\n"
                    )));
                }
                Next::Event(Ok(logged)) => {
                    if let Some(until) = &self.replayed_until {
                        match StreamPosition::parse(&logged.id) {
                            Some(at) if !at.is_after(until) => continue,
                            _ => self.replayed_until = None,
                        }
                    }
                    if self.subtree.admits(&logged.event) {
                        return Some(frame(&logged));
                    }
                }
            }
        }
    }
}

/// Streams events (first those missed after `last_event_id`) until the client goes away or
/// the service stops.
pub async fn stream(
    system: AgentSystem,
    feed: EventFeed,
    q: EventsQuery,
    last_event_id: Option<String>,
    shutdown: Shutdown,
) -> HttpResponse {
    let (rx, replay) = feed.log.subscribe(last_event_id.as_deref());
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
    let (missed, replayed_until) =
        missed(&feed, last_event_id.as_deref().unwrap_or(""), replay).await;
    let state = Streaming {
        rx,
        missed,
        replayed_until,
        subtree: Subtree {
            known: filter.is_some().then_some(known),
        },
        shutdown,
    };
    let events = futures::stream::unfold(state, |mut state| async move {
        let piece = state.next().await?;
        Some((Ok::<_, actix_web::Error>(piece), state))
    });
    // The server writes the status line and headers with the body's first piece: a comment
    // ready at once starts the response now, not with the first event or keep-alive (up to
    // 15 s later, past the read timeout of many clients and proxies).
    let opened = futures::stream::once(std::future::ready(Ok(Bytes::from_static(OPENED))));
    let body = opened.chain(events);
    // The connection closes with the stream: no idle keep-alive connection holds a stop.
    HttpResponse::Ok()
        .force_close()
        .insert_header(("Content-Type", "text/event-stream"))
        .insert_header(("Cache-Control", "no-cache"))
        .streaming(body)
}
