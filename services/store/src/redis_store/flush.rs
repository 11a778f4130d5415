//! Live agents' flushes of their own state ([`FLUSH_MANY`](super::scripts::flush_many)): one
//! agent's part of a call, and the flushes of one partition's agents made together sent as one
//! call ([`super::group`]), so that a read that gave a partition's agents a message each costs
//! one lease check and one `XACK` for all their turns' ends, not one each.
//!
//! Grouping keeps every guarantee of a flush of its own: each agent's part is applied alone
//! (its own error fails its part only), an agent has one flush under way at a time (so two of
//! its flushes never meet in one call or pass each other), and the fence is the same lease for
//! the whole call.

use super::group::{Groups, result_of};
use super::{RedisStore, be, de};
use agentd_actors::{StoreResult, StoreWrite};
use agentd_proto::Envelope;
use agentd_proto::codec::{encode, encode_envelope};
use tokio::sync::oneshot;

/// One agent's part of a flush call: its keys and its arguments, made once.
pub(super) struct OwnFlush {
    agent_id: String,
    /// Thread, inbox, inboxdata, record.
    keys: [String; 4],
    args: Vec<Vec<u8>>,
}

/// One agent's flush waiting for its partition's next call.
struct Waiting {
    flush: OwnFlush,
    answer: oneshot::Sender<StoreResult<i64>>,
}

/// The flushes waiting per partition.
#[derive(Default)]
pub(super) struct FlushQueue(Groups<Waiting>);

/// A count as a script argument.
fn count(n: usize) -> Vec<u8> {
    n.to_string().into_bytes()
}

impl RedisStore {
    /// `owner`'s part of a flush call for `run` (its own writes, in order: entries, done marks,
    /// acknowledgements, and its last record, the call being atomic) and `outputs` (its
    /// forwards: those to its own partition's stream, the others into the outbox; see `batch`).
    pub(super) fn own_flush(
        &self,
        owner: &str,
        run: &[&StoreWrite],
        outputs: &[(&str, &Envelope)],
    ) -> StoreResult<OwnFlush> {
        let stream = self.keys.partition(self.keys.partition_of(owner));
        let mut args = Vec::new();
        let entries: Vec<_> = run
            .iter()
            .filter_map(|w| match w {
                StoreWrite::Append { entry, .. } => Some((false, entry)),
                StoreWrite::AppendNew { entry, .. } => Some((true, entry)),
                _ => None,
            })
            .collect();
        args.push(count(entries.len()));
        for (new, entry) in entries {
            args.push(if new { b"1".to_vec() } else { b"0".to_vec() });
            args.push(entry.id.as_bytes().to_vec());
            args.push(encode(&**entry).map_err(de)?);
        }
        let dones: Vec<_> = run
            .iter()
            .filter_map(|w| match w {
                StoreWrite::InboxDone { env_id, .. } => Some(env_id.to_string().into_bytes()),
                _ => None,
            })
            .collect();
        args.push(count(dones.len()));
        args.extend(dones);
        let (here, away): (Vec<_>, Vec<_>) = outputs.iter().partition(|(s, _)| *s == stream);
        args.push(count(here.len()));
        for (_, env) in here {
            args.push(encode_envelope(env).map_err(de)?);
        }
        args.push(count(away.len()));
        for (_, env) in away {
            args.push(env.id.to_string().into_bytes());
            args.push(encode_envelope(env).map_err(de)?);
        }
        let acks: Vec<_> = run
            .iter()
            .filter_map(|w| match w {
                StoreWrite::Acknowledge { entry, .. } => {
                    debug_assert_eq!(&*entry.stream, stream.as_str(), "another partition's entry");
                    Some(entry.id.as_bytes().to_vec())
                }
                _ => None,
            })
            .collect();
        args.push(count(acks.len()));
        args.extend(acks);
        let record = run.iter().rev().find_map(|w| match w {
            StoreWrite::PutAgent(rec) => Some(rec),
            _ => None,
        });
        match record {
            Some(rec) => {
                args.push(b"1".to_vec());
                args.push(super::batch::record_bytes(rec)?);
            }
            None => args.push(b"0".to_vec()),
        }
        Ok(OwnFlush {
            agent_id: owner.to_string(),
            keys: [
                self.keys.agent_part(owner, "thread"),
                self.keys.agent_part(owner, "inbox"),
                self.keys.agent_part(owner, "inboxdata"),
                self.keys.agent(owner),
            ],
            args,
        })
    }

    /// The [`FLUSH_MANY`](super::scripts::flush_many) call (by its SHA-1) of `flushes`, agents
    /// of partition `k`, fenced by the token the partition's lease must hold (if pushes are
    /// fenced).
    pub(super) fn flush_call(&self, k: u32, flushes: &[&OwnFlush]) -> redis::Cmd {
        let token = flushes
            .first()
            .and_then(|f| self.fence_for(&f.agent_id))
            .map(|(_, token)| token)
            .unwrap_or_default();
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.flush_many.get_hash())
            .arg(3 + 4 * flushes.len())
            .arg(self.keys.lease(k))
            .arg(self.keys.partition(k))
            .arg(self.keys.outbox(k));
        for f in flushes {
            cmd.arg(&f.keys);
        }
        cmd.arg(token).arg(flushes.len());
        for f in flushes {
            for a in &f.args {
                cmd.arg(a);
            }
        }
        cmd
    }

    /// Writes `flush` (an agent of partition `k`) in its partition's next flush call (queuing
    /// the task that sends it if none is); answers its result: `1`, or `-1` if the fence
    /// refused its record and acknowledgements.
    pub(super) async fn flush_grouped(&self, k: u32, flush: OwnFlush) -> StoreResult<i64> {
        let (tx, rx) = oneshot::channel();
        if self.flushes.0.join(k, Waiting { flush, answer: tx })? {
            // A task of its own: it runs after the flushes made in this turn of the runtime,
            // and a caller that stops waiting does not leave the others waiting.
            let me = self.clone();
            tokio::spawn(async move { me.send_flushes(k).await });
        }
        rx.await
            .map_err(|_| agentd_actors::StoreError::transient("the flush was dropped unanswered"))?
    }

    /// Sends what waits for partition `k` as one call.
    async fn send_flushes(&self, k: u32) {
        let batch = self.flushes.0.take(k);
        if batch.is_empty() {
            return;
        }
        let flushes: Vec<&OwnFlush> = batch.iter().map(|w| &w.flush).collect();
        let call = self.flush_call(k, &flushes);
        let mut con = self.con.clone();
        let results = match call.query_async::<Vec<redis::Value>>(&mut con).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                // Redis lost its script cache (a restart): the call ran nothing.
                match self.load_flush_scripts(&mut con).await {
                    Ok(()) => call.query_async(&mut con).await.map_err(be),
                    Err(e) => Err(e),
                }
            }
            other => other.map_err(be),
        };
        for (i, w) in batch.into_iter().enumerate() {
            let what = format!("the flush of agent `{}`", w.flush.agent_id);
            let _ = w.answer.send(result_of(&results, i, &what));
        }
    }
}
