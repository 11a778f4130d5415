//! Durable pushes into an agent's inbox ([`scripts::inbox_push`](super::scripts::inbox_push),
//! and the one that also starts the envelope's turn), and their fence: once the Redis bus has
//! set it, a push lands only while the lease of the agent's partition holds this process's
//! token, so a process that stalled past its lease cannot write behind its successor's back.

use super::{RedisStore, batch::record_fields, be, de};
use agentd_actors::{Pushed, StoreError, StoreResult, StoreWrite};
use agentd_proto::Envelope;
use agentd_proto::codec::encode;
use std::sync::Arc;

/// For an agent, the lease (key) and the token a push for it must find there, if pushes are
/// fenced (see [`RedisStore::fence_pushes_with`]).
pub type PushFence = Arc<dyn Fn(&str) -> Option<(String, String)> + Send + Sync>;

impl RedisStore {
    /// Fences every durable push from now on: a push for an agent lands only while the lease
    /// `fence` names for it holds the token it names, else it fails with
    /// [`StoreErrorKind::Fenced`](agentd_actors::StoreErrorKind::Fenced). The Redis bus sets
    /// its partition leases and its process id; a second call changes nothing.
    pub fn fence_pushes_with(&self, fence: PushFence) {
        let _ = self.fence.set(fence);
    }

    /// The lease and token the push for `agent_id` must find, if pushes are fenced.
    pub(super) fn fence_for(&self, agent_id: &str) -> Option<(String, String)> {
        self.fence.get().and_then(|f| f(agent_id))
    }

    /// Queues `env` in `agent_id`'s inbox unless its id is in the de-duplication window;
    /// answers whether it was new
    /// ([`ThreadStore::inbox_push`](agentd_actors::ThreadStore::inbox_push)).
    pub(super) async fn push(&self, agent_id: &str, env: &Envelope) -> StoreResult<bool> {
        let bytes = encode(env).map_err(de)?;
        let mut con = self.con.clone();
        let fence = self.fence_for(agent_id);
        let mut call = self.inbox_push.prepare_invoke();
        call.key(self.keys.agent_part(agent_id, "seen"))
            .key(self.keys.agent_part(agent_id, "seenseq"))
            .key(self.keys.agent_part(agent_id, "inbox"))
            .key(self.keys.agent_part(agent_id, "inboxdata"))
            .arg(env.id.to_string())
            .arg(bytes)
            .arg(self.dedup_window);
        fence_args(&mut call, fence);
        let n: i64 = call.invoke_async(&mut con).await.map_err(be)?;
        fenced(n, agent_id)?;
        Ok(n == 1)
    }

    /// [`Self::push`], and for a new envelope the writes `then` that start its turn
    /// ([`ThreadStore::inbox_push_then`](agentd_actors::ThreadStore::inbox_push_then)).
    pub(super) async fn push_then(
        &self,
        agent_id: &str,
        env: &Envelope,
        then: &[StoreWrite],
    ) -> StoreResult<Pushed> {
        // The shape an item starting a turn brings (its input entry, then the agent's own
        // record, an existing one: its roots index entry is there already) runs as one
        // script; with anything else only the push runs (the caller writes the rest).
        let (entry, rec) = match then {
            [
                StoreWrite::Append { agent_id: a, entry },
                StoreWrite::PutAgent(rec),
            ] if &**a == agent_id && rec.id == agent_id => (entry, rec),
            _ => {
                return Ok(Pushed {
                    fresh: self.push(agent_id, env).await?,
                    then_applied: false,
                });
            }
        };
        let mut con = self.con.clone();
        let mut call = self.inbox_push_then_start.prepare_invoke();
        call.key(self.keys.agent_part(agent_id, "seen"))
            .key(self.keys.agent_part(agent_id, "seenseq"))
            .key(self.keys.agent_part(agent_id, "inbox"))
            .key(self.keys.agent_part(agent_id, "inboxdata"))
            .key(self.keys.agent_part(agent_id, "thread"))
            .key(self.keys.agent_part(agent_id, "eids"))
            .key(self.keys.agent(agent_id))
            .arg(env.id.to_string())
            .arg(encode(env).map_err(de)?)
            .arg(self.dedup_window)
            .arg(entry.id.to_string())
            .arg(encode(&**entry).map_err(de)?);
        fence_args(&mut call, self.fence_for(agent_id));
        for (field, value) in record_fields(rec)? {
            call.arg(field).arg(value);
        }
        let n: i64 = call.invoke_async(&mut con).await.map_err(be)?;
        fenced(n, agent_id)?;
        Ok(Pushed {
            fresh: n == 1,
            then_applied: n == 1,
        })
    }
}

/// Adds a push's fence to `call`: the token as the next argument ('' for none) and, with a
/// token, the lease as the last key.
fn fence_args(call: &mut redis::ScriptInvocation<'_>, fence: Option<(String, String)>) {
    match fence {
        Some((lease, token)) => {
            call.arg(token).key(lease);
        }
        None => {
            call.arg("");
        }
    }
}

/// A script's answer `-1`: the fence refused it.
pub(super) fn fenced(n: i64, agent_id: &str) -> StoreResult<()> {
    if n == -1 {
        return Err(StoreError::fenced(format!(
            "the lease of agent `{agent_id}`'s partition is no longer this process's"
        )));
    }
    Ok(())
}
