//! Durable pushes into agents' inboxes, and their fence: once the Redis bus has set it, a push
//! lands only while the lease of the agent's partition holds this process's token, so a process
//! that stalled past its lease cannot write behind its successor's back.
//!
//! Pushes for agents of one partition made together are grouped ([`super::group`]) into one
//! [`PUSH_MANY`](super::scripts::push_many) call. Each push still gets its own answer (fresh,
//! duplicate, fenced, or its own error).

use super::group::{Groups, result_of};
use super::{RedisStore, be, de, fenced, record_bytes};
use agentd_ports::{Pushed, StoreError, StoreResult, StoreWrite};
use agentd_proto::Envelope;
use agentd_proto::codec::encode;
use std::sync::Arc;
use tokio::sync::oneshot;

/// For an agent, the lease (key) and the token a push for it must find there, if pushes are
/// fenced (see [`RedisStore::fence_pushes_with`]).
pub type PushFence = Arc<dyn Fn(&str) -> Option<(String, String)> + Send + Sync>;

/// The first writes of the turn a pushed envelope starts: its input entry's id and bytes,
/// whether that entry is known new (the turn's first run), and its agent's record.
type TurnStart = (uuid::Uuid, Vec<u8>, bool, Vec<u8>);

/// One push waiting for its partition's next call.
struct Waiting {
    agent_id: String,
    env_id: String,
    bytes: Vec<u8>,
    /// The turn's first writes, applied if the envelope is new.
    start: Option<TurnStart>,
    answer: oneshot::Sender<StoreResult<i64>>,
}

/// The pushes waiting per partition.
#[derive(Default)]
pub(super) struct PushQueue {
    groups: Groups<Waiting>,
    /// Held while a task takes its batch and puts its call on the connection: calls go out in
    /// the order their batches were taken, whichever thread runs the task (several Arbiters,
    /// a multi-threaded runtime), so two pushes of one agent reach Redis in the order made.
    order: tokio::sync::Mutex<()>,
}

impl RedisStore {
    /// Fences every durable push from now on: a push for an agent lands only while the lease
    /// `fence` names for it holds the token it names, else it fails with
    /// [`StoreErrorKind::Fenced`](agentd_ports::StoreErrorKind::Fenced). The Redis bus sets
    /// its partition leases and its process id; a second call changes nothing.
    pub fn fence_pushes_with(&self, fence: PushFence) {
        let _ = self.fence.set(fence);
    }

    /// The lease and token the push for `agent_id` must find, if pushes are fenced.
    pub(super) fn fence_for(&self, agent_id: &str) -> Option<(String, String)> {
        self.fence.get().and_then(|f| f(agent_id))
    }

    /// [`Self::fence_for`], or (no fence) the agent's partition's lease with no token, which a
    /// fenced script then does not check.
    pub(super) fn lease_and_token(&self, agent_id: &str) -> (String, String) {
        self.fence_for(agent_id).unwrap_or_else(|| {
            let k = self.keys.partition_of(agent_id);
            (self.keys.lease(k), String::new())
        })
    }

    /// Queues `env` in `agent_id`'s inbox unless its id is in the de-duplication window;
    /// answers whether it was new
    /// ([`Inboxes::inbox_push`](agentd_ports::Inboxes::inbox_push)).
    pub(super) async fn push(&self, agent_id: &str, env: &Envelope) -> StoreResult<bool> {
        let bytes = encode(env).map_err(de)?;
        let n = self.push_grouped(agent_id, env, bytes, None).await?;
        fenced(n, agent_id)?;
        Ok(n == 1)
    }

    /// [`Self::push`], and for a new envelope the writes `then` that start its turn
    /// ([`Inboxes::inbox_push_then`](agentd_ports::Inboxes::inbox_push_then)).
    pub(super) async fn push_then(
        &self,
        agent_id: &str,
        env: &Envelope,
        then: &[StoreWrite],
    ) -> StoreResult<Pushed> {
        // The shape an item starting a turn brings (its input entry, then the agent's own
        // record, an existing one: its roots index entry is there already) is applied with the
        // push; with anything else only the push runs (the caller writes the rest).
        let (entry, new, rec) = match then {
            [
                StoreWrite::Append { agent_id: a, entry },
                StoreWrite::PutAgent(rec),
            ] if &**a == agent_id && rec.id == agent_id => (entry, false, rec),
            [
                StoreWrite::AppendNew { agent_id: a, entry },
                StoreWrite::PutAgent(rec),
            ] if &**a == agent_id && rec.id == agent_id => (entry, true, rec),
            _ => {
                return Ok(Pushed {
                    fresh: self.push(agent_id, env).await?,
                    then_applied: false,
                });
            }
        };
        let start = (
            entry.id,
            encode(&**entry).map_err(de)?,
            new,
            record_bytes(rec)?,
        );
        let bytes = encode(env).map_err(de)?;
        let n = self.push_grouped(agent_id, env, bytes, Some(start)).await?;
        fenced(n, agent_id)?;
        Ok(Pushed {
            fresh: n == 1,
            then_applied: n == 1,
        })
    }

    /// Queues one push for its partition's next call (queuing the task that sends it if none
    /// is) and answers its result (`1`, `0`, `-1`: see
    /// [`PUSH_MANY`](super::scripts::push_many)).
    async fn push_grouped(
        &self,
        agent_id: &str,
        env: &Envelope,
        bytes: Vec<u8>,
        start: Option<TurnStart>,
    ) -> StoreResult<i64> {
        let k = self.keys.partition_of(agent_id);
        let (tx, rx) = oneshot::channel();
        let waiting = Waiting {
            agent_id: agent_id.to_string(),
            env_id: env.id.to_string(),
            bytes,
            start,
            answer: tx,
        };
        if self.pushes.groups.join(k, waiting)? {
            // A task of its own: it runs after the pushes made in this turn of the runtime, and
            // a caller that stops waiting does not leave the others waiting.
            let me = self.clone();
            tokio::spawn(async move { me.send_pushes(k).await });
        }
        rx.await
            .map_err(|_| StoreError::transient("the push was dropped unanswered"))?
    }

    /// Sends what waits for partition `k` as one call.
    async fn send_pushes(&self, k: u32) {
        let order = self.pushes.order.lock().await;
        let batch = self.pushes.groups.take(k);
        if batch.is_empty() {
            return;
        }
        let mut con = self.con.clone();
        if !self
            .flush_scripts_loaded
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            // Loaded before the first call (a failure shows in the call's own answer).
            let _ = self.load_flush_scripts(&mut con).await;
        }
        let call = self.push_call(k, &batch);
        let mut call = std::pin::pin!(call.invoke_async::<Vec<redis::Value>>(&mut con));
        // Its first poll puts the call on the connection; the next task's call goes after it.
        let first = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(std::future::Future::poll(call.as_mut(), cx))
        })
        .await;
        drop(order);
        let results = match first {
            std::task::Poll::Ready(r) => r,
            std::task::Poll::Pending => call.await,
        }
        .map_err(be);
        for (i, w) in batch.into_iter().enumerate() {
            let what = format!("the push into agent `{}`'s inbox", w.agent_id);
            let _ = w.answer.send(result_of(&results, i, &what));
        }
    }

    /// The [`PUSH_MANY`](super::scripts::push_many) call for `batch` (agents of partition `k`).
    fn push_call<'s>(&'s self, k: u32, batch: &[Waiting]) -> redis::ScriptInvocation<'s> {
        let fence = batch.first().and_then(|w| self.fence_for(&w.agent_id));
        let mut call = self.push_many.prepare_invoke();
        match &fence {
            Some((lease, token)) => call.key(lease).arg(token),
            None => call.key(self.keys.lease(k)).arg(""),
        };
        call.arg(self.dedup_window).arg(batch.len());
        for w in batch {
            call.key(self.keys.agent_part(&w.agent_id, "seen"))
                .key(self.keys.agent_part(&w.agent_id, "seenseq"))
                .key(self.keys.agent_part(&w.agent_id, "inbox"))
                .key(self.keys.agent_part(&w.agent_id, "inboxdata"));
            call.arg(match &w.start {
                None => "0",
                Some((_, _, false, _)) => "1",
                Some((_, _, true, _)) => "2",
            })
            .arg(&w.env_id)
            .arg(&w.bytes);
            if let Some((entry_id, entry, _, record)) = &w.start {
                call.key(self.keys.agent_part(&w.agent_id, "thread"))
                    .key(self.keys.agent(&w.agent_id));
                call.arg(entry_id.as_bytes().as_slice())
                    .arg(entry)
                    .arg(record);
            }
        }
        call
    }
}
