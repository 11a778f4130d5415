//! Flush calls as transactions fenced by `WATCH`, on one Redis: the writes of a partition's
//! flushes go as `MULTI` … `EXEC` on a connection of the partition's own (up to [`WRITERS`]),
//! which watches the partition's lease. A transaction is sent only if the lease's value read
//! right after that `WATCH` was this process's token, and Redis runs it only if no watched key
//! changed since; so a process that lost the lease writes nothing, as with the fenced script,
//! without handing every byte of the writes to Lua (which costs more than the writes:
//! BENCHMARKS.md, "Where Redis's time goes"). One Redis has no slots, so a transaction also
//! appends a child's outputs to its parents' partition streams (see `flush`).
//!
//! Each transaction is followed, in the same round trip, by the `WATCH` and `GET` of the
//! next one, so a call is one round trip. A transaction that finds the lease changed (`EXEC`
//! answers nil: the lease was renewed, which touches it, or taken) writes nothing and is sent
//! again if the lease still names this process. A connection is used by one transaction at a
//! time, and dropped after an error or a refusal (a new one watches afresh).
//!
//! On a Redis Cluster, with replicas to wait for (a `WAIT` covers its own connection's
//! writes), and for entries that must be appended once, flushes stay with the script.

use super::be;
use crate::RedisTarget;
use agentd_ports::{StoreError, StoreResult};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Sends of one transaction before a lease that keeps changing is reported as an error.
const ATTEMPTS: usize = 4;

/// What a fenced transaction came to.
pub(super) enum Outcome {
    /// Run: one result per command of its body.
    Ran(Vec<Value>),
    /// The lease does not name this process: nothing was written.
    Fenced,
}

/// A transaction to run, fenced by `lease` holding `token` (none if empty): `MULTI`, its
/// commands and `EXEC`, then (fenced) the `WATCH` and `GET` of the next one, as one pipeline
/// made once, however often it is sent.
pub(super) struct Transaction {
    pipe: redis::Pipeline,
    /// How many commands are between `MULTI` and `EXEC`.
    commands: usize,
    lease: String,
    token: String,
}

impl Transaction {
    pub(super) fn new(body: Vec<Cmd>, lease: String, token: String) -> Self {
        let commands = body.len();
        let mut pipe = redis::pipe();
        pipe.cmd("MULTI");
        for cmd in body {
            pipe.add_command(cmd);
        }
        pipe.cmd("EXEC");
        if !token.is_empty() {
            pipe.cmd("WATCH").arg(&lease).cmd("GET").arg(&lease);
        }
        Transaction {
            pipe,
            commands,
            lease,
            token,
        }
    }
}

/// One partition's connection and what its watch saw.
#[derive(Default)]
struct Writer {
    con: Option<MultiplexedConnection>,
    /// The lease's value read right after the watch now standing, if one stands.
    watched: Option<Option<String>>,
}

/// The fenced writers of one store: per partition it flushed, up to [`WRITERS`], made when
/// first needed.
pub(super) struct Transactions {
    /// The one Redis's URL.
    url: String,
    writers: Mutex<HashMap<u32, Vec<Arc<tokio::sync::Mutex<Writer>>>>>,
}

/// Most connections one partition's transactions use at once. A transaction waits for the one
/// before it on its connection (the watch it runs under is set by that one's end), so a
/// partition whose agents flush faster than one round trip apart would have them wait, and
/// agents that wait to flush take fewer new messages in their stream entries (BENCHMARKS.md).
const WRITERS: usize = 4;

impl Transactions {
    /// The fenced writers for `target`; `None` for a cluster (see the module doc).
    pub(super) fn new(target: &RedisTarget) -> Option<Self> {
        match target {
            RedisTarget::Single { url } => Some(Transactions {
                url: url.clone(),
                writers: Mutex::default(),
            }),
            RedisTarget::Cluster { .. } => None,
        }
    }

    /// A writer of partition `k`'s, locked: a free one, a new one while there are fewer than
    /// [`WRITERS`], else the first to come free.
    async fn writer(&self, k: u32) -> StoreResult<tokio::sync::OwnedMutexGuard<Writer>> {
        let busy = {
            let mut writers = self
                .writers
                .lock()
                .map_err(|_| StoreError::transient("the fenced writers' lock is poisoned"))?;
            let pool = writers.entry(k).or_default();
            if let Some(free) = pool.iter().find_map(|w| w.clone().try_lock_owned().ok()) {
                return Ok(free);
            }
            if pool.len() < WRITERS {
                let new = Arc::new(tokio::sync::Mutex::new(Writer::default()));
                pool.push(new.clone());
                return new
                    .try_lock_owned()
                    .map_err(|_| StoreError::transient("a new fenced writer was taken"));
            }
            pool.clone()
        };
        let waits = busy.into_iter().map(|w| Box::pin(w.lock_owned()));
        Ok(futures::future::select_all(waits).await.0)
    }

    /// Runs a transaction on partition `k`'s connection once it is free: `take` is called
    /// then (so what waited meanwhile goes in this transaction) and answers what it took and the
    /// transaction to run, if any; answers what `take` took and, with a transaction, its
    /// outcome.
    pub(super) async fn run<T>(
        &self,
        k: u32,
        take: impl FnOnce() -> (T, Option<Transaction>),
    ) -> (T, Option<StoreResult<Outcome>>) {
        let mut w = match self.writer(k).await {
            Ok(w) => w,
            Err(e) => return (take().0, Some(Err(e))),
        };
        let (taken, tx) = take();
        let Some(tx) = tx else {
            return (taken, None);
        };
        let outcome = self.run_locked(&mut w, &tx).await;
        if !matches!(outcome, Ok(Outcome::Ran(_))) {
            // After an error the connection's state (its watch, replies still due) is unknown;
            // a refused one's partition is another process's now, and its connection would
            // stay open for nothing. A later transaction connects again.
            *w = Writer::default();
        }
        (taken, Some(outcome))
    }

    async fn run_locked(&self, w: &mut Writer, tx: &Transaction) -> StoreResult<Outcome> {
        let Transaction {
            pipe,
            commands,
            lease,
            token,
        } = tx;
        let fenced = !token.is_empty();
        for _ in 0..ATTEMPTS {
            let con = match &mut w.con {
                Some(con) => con,
                None => {
                    let con = crate::redis_connection::connect_own(&self.url)
                        .await
                        .map_err(be)?;
                    w.watched = None;
                    w.con.insert(con)
                }
            };
            if fenced && w.watched.is_none() {
                let mut arm = redis::pipe();
                arm.cmd("WATCH").arg(lease).cmd("GET").arg(lease);
                let replies = con.req_packed_commands(&arm, 0, 2).await.map_err(be)?;
                w.watched = Some(lease_value(replies.get(1))?);
            }
            if fenced
                && w.watched
                    .as_ref()
                    .is_some_and(|v| v.as_deref() != Some(token.as_str()))
            {
                // Not this process's lease (the connection is dropped with its watch).
                return Ok(Outcome::Fenced);
            }
            let count = pipe.len();
            let mut replies = con.req_packed_commands(pipe, 0, count).await.map_err(be)?;
            if fenced {
                w.watched = Some(lease_value(replies.last())?);
                replies.truncate(commands + 2);
            }
            match replies.pop() {
                Some(Value::Array(results)) => return Ok(Outcome::Ran(results)),
                // The lease changed since the watch: nothing ran. Again, under the new watch.
                Some(Value::Nil) => continue,
                Some(Value::ServerError(e)) => {
                    // `EXECABORT`: a command was refused when queued; nothing ran.
                    let refused = replies.iter().find_map(|r| match r {
                        Value::ServerError(e) => Some(e.to_string()),
                        _ => None,
                    });
                    return Err(StoreError::new(
                        agentd_ports::StoreErrorKind::Rejected,
                        format!(
                            "redis: a flush transaction was refused: {e}{}",
                            refused.map(|r| format!(" ({r})")).unwrap_or_default()
                        ),
                    ));
                }
                other => {
                    return Err(StoreError::transient(format!(
                        "redis: a flush transaction answered {other:?}"
                    )));
                }
            }
        }
        Err(StoreError::transient(format!(
            "redis: the lease `{lease}` changed during each of {ATTEMPTS} flush transactions"
        )))
    }
}

/// A lease's value as `GET` answered it.
fn lease_value(reply: Option<&Value>) -> StoreResult<Option<String>> {
    match reply {
        Some(Value::Nil) => Ok(None),
        Some(v) => redis::from_redis_value_ref::<String>(v)
            .map(Some)
            .map_err(|e| StoreError::transient(format!("redis: a lease read answered {e}"))),
        None => Err(StoreError::transient("redis: a lease read went unanswered")),
    }
}
