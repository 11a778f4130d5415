//! The watcher: each process reads the A2A contexts it owns whenever they may have changed,
//! so that a task's state is settled beside it (its answer kept whatever later happens to the
//! thread) and its push notifications are written and handed to the deliverer (`push`) as
//! the state changes.
//!
//! An agent publishes a status change before the batch that records it is written, and an
//! agent that runs one queued item after another stays `running` between them, with no event.
//! So an event says that a context is worth reading, not what the store shows: the watcher
//! *follows* a context from its agent's status change on — it reads it at once, then every
//! [`FOLLOW_PUSH`] while it is active if a task of it has push configs (every [`FOLLOW`] if
//! not) — and lets it go once a read finds in the store, at rest, the status the last event
//! announced. A read takes the record last, and an agent writes its record with its turn's last
//! entry and its item's done mark, so a record at rest means the store holds what the context
//! rests on. Contexts another process owns are followed by their owner (it runs their agents,
//! so their events are its own); the deliverer's sweep covers what no follow saw (a takeover,
//! a crash).

use super::{A2a, task};
use agentd_proto::{AgentStatus, Event};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use tokio::sync::broadcast::error::RecvError;

/// How often an active context with push configs is read.
const FOLLOW_PUSH: Duration = Duration::from_millis(250);
/// How often an active context without push configs is read (its answers are settled).
const FOLLOW: Duration = Duration::from_secs(1);
/// How long a context at rest whose store never shows the status its last event announced is
/// followed (an event the watcher missed, …): the sweep covers it after that.
const GIVE_UP: Duration = Duration::from_secs(30);

/// A context followed.
struct Followed {
    /// The status its agent's last event announced (`None`: unknown, events were missed).
    announced: Option<AgentStatus>,
    /// When that event came.
    since: Instant,
    /// When it is read next.
    next: Instant,
    /// An event came while a read of it was under way: read again once that ends.
    again: bool,
}

/// What a read of a context found.
enum Found {
    /// Its agent's status in the store, and whether a task of it has push configs.
    Context { status: AgentStatus, has_push: bool },
    /// No such agent (deleted).
    Gone,
    /// The read failed (logged).
    Failed,
}

impl Followed {
    fn new(announced: AgentStatus, now: Instant) -> Self {
        Followed {
            announced: Some(announced),
            since: now,
            next: now,
            again: false,
        }
    }

    /// Whether the context may be let go after a read that found `status`: at rest, and the
    /// store caught up with what the last event announced (or gave up waiting for it).
    fn settled(&self, status: AgentStatus, now: Instant) -> bool {
        let at_rest = !matches!(status, AgentStatus::Running | AgentStatus::Queued);
        let caught_up = self.announced.is_none_or(|a| a == status);
        at_rest && (caught_up || now.duration_since(self.since) > GIVE_UP)
    }
}

/// Starts the watcher (see the module doc).
pub fn start(a2a: A2a) {
    actix_rt::spawn(async move {
        let (mut rx, _) = a2a.events.log.subscribe_with_ring();
        let mut contexts: HashSet<String> = HashSet::new();
        let mut followed: HashMap<String, Followed> = HashMap::new();
        let mut reading: HashSet<String> = HashSet::new();
        let mut reads = FuturesUnordered::new();
        let mut tick = tokio::time::interval(FOLLOW_PUSH);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let mut shutdown = a2a.shutdown.clone();
            tokio::select! {
                got = rx.recv() => match got {
                    Ok(l) => {
                        let Event::StatusChanged { agent_id, to, .. } = &l.event else {
                            continue;
                        };
                        if a2a.system.deps().is_owned_elsewhere(agent_id) {
                            continue;
                        }
                        if !contexts.contains(agent_id) {
                            match task::is_context(&a2a.system, agent_id).await {
                                Ok(true) => {
                                    contexts.insert(agent_id.clone());
                                }
                                _ => continue,
                            }
                        }
                        let now = Instant::now();
                        let f = followed
                            .entry(agent_id.clone())
                            .or_insert_with(|| Followed::new(*to, now));
                        f.announced = Some(*to);
                        f.since = now;
                        f.next = now;
                        f.again = reading.contains(agent_id);
                    }
                    Err(RecvError::Lagged(_)) => {
                        // Events were missed: what the contexts followed announced is unknown.
                        let now = Instant::now();
                        for f in followed.values_mut() {
                            f.announced = None;
                            f.next = now;
                        }
                    }
                    Err(RecvError::Closed) => return,
                },
                Some((ctx, found)) = reads.next(), if !reads.is_empty() => {
                    reading.remove(&ctx);
                    let now = Instant::now();
                    let done = match (followed.get_mut(&ctx), found) {
                        (None, _) => false,
                        (Some(_), Found::Gone) => {
                            contexts.remove(&ctx);
                            true
                        }
                        (Some(f), Found::Failed) => {
                            f.next = now + FOLLOW;
                            false
                        }
                        (Some(f), Found::Context { status, has_push }) => {
                            if f.again {
                                f.again = false;
                                f.next = now;
                                false
                            } else if f.settled(status, now) {
                                true
                            } else {
                                f.next = now + if has_push { FOLLOW_PUSH } else { FOLLOW };
                                false
                            }
                        }
                    };
                    if done {
                        followed.remove(&ctx);
                    }
                }
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            let now = Instant::now();
            for (ctx, f) in &followed {
                if f.next <= now && reading.insert(ctx.clone()) {
                    reads.push(read(a2a.clone(), ctx.clone()));
                }
            }
        }
    });
}

/// Reads context `ctx`: its tasks brought up to date (settled states and push notifications
/// written), and its notifications handed to the deliverer if some wait.
async fn read(a2a: A2a, ctx: String) -> (String, Found) {
    let found = match task::reconcile(&a2a.system, &ctx).await {
        Ok(Some((seen, _))) => {
            if seen.push_pending {
                a2a.pusher.poke(&ctx);
            }
            Found::Context {
                status: seen.rec.status,
                has_push: seen.has_push,
            }
        }
        Ok(None) => Found::Gone,
        Err(e) => {
            tracing::warn!(context = %ctx, error = %e, "settling A2A tasks");
            Found::Failed
        }
    };
    (ctx, found)
}
