//! Calls to an agent whose partition another process owns ([`Transport::call`]). The caller
//! appends a `command` envelope to the agent's partition with `reply_to` = its own reply
//! stream `{<ns>:replies:<process id>}`, and waits; the owner's reader runs the command beside
//! the live agent and appends the reply there; the caller's reply reader hands it to the
//! waiting call.
//!
//! A reply stream lives as long as its process: the reply reader renews its expiry, so a dead
//! caller's stream goes by itself.
//!
//! [`Transport::call`]: agentd_ports::Transport::call

use super::{RedisBus, partition_target};
use crate::streams::{Backoff, be, decode_stream_entry};
use agentd_ports::Inbound;
use agentd_proto::codec::encode_envelope;
use agentd_proto::{AgentdError, Envelope, ErrorCode, Item, Reply};
use redis::cmd;
use redis::streams::{StreamId, StreamReadReply};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Approximate cap of a process's reply stream (its reader deletes what it reads; the cap only
/// matters for replies that arrive once nobody reads them).
const REPLY_MAXLEN: usize = 1_000;

/// Largest reply a process takes from its reply stream.
const REPLY_MAX_BYTES: usize = 64 << 20;

/// A reply stream expires this long after its last renewal: its reader renews it every
/// [`REPLY_STREAM_RENEW`] while the process lives, so only a dead process's stream goes.
const REPLY_STREAM_TTL_MS: u64 = 10 * 60 * 1_000;

/// How often a process renews its reply stream's expiry.
const REPLY_STREAM_RENEW: Duration = Duration::from_secs(60);

impl RedisBus {
    /// Hands `env` (a command) to the owner of its agent's partition and waits up to
    /// `timeout` for the reply (see the module doc).
    pub(super) async fn call_owner(
        &self,
        mut env: Envelope,
        timeout: Duration,
    ) -> Result<Reply, AgentdError> {
        let target = env.to.agent_id().unwrap_or_default().to_string();
        env.reply_to = Some(self.keys.replies(&self.cfg.process_id));
        let bytes = encode_envelope(&env)?;
        if bytes.len() > self.cfg.max_envelope_bytes {
            // The owner would move it to the dead letters, and the caller wait for nothing.
            return Err(AgentdError::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "the call is {} bytes; partitions take at most {}",
                    bytes.len(),
                    self.cfg.max_envelope_bytes
                ),
            ));
        }
        let (tx, rx) = oneshot::channel();
        if let Ok(mut calls) = self.calls.lock() {
            calls.insert(env.id, tx);
        }
        let forget = || {
            if let Ok(mut calls) = self.calls.lock() {
                calls.remove(&env.id);
            }
        };
        if let Err(e) = self.append_to_partition(&env, bytes).await {
            forget();
            return Err(e);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            _ => {
                forget();
                Err(AgentdError::new(
                    ErrorCode::Unavailable,
                    format!(
                        "the process that owns agent `{target}` did not answer within {} ms",
                        timeout.as_millis()
                    ),
                ))
            }
        }
    }

    /// Appends `env` (encoded as `bytes`) to its receiver's partition stream.
    async fn append_to_partition(&self, env: &Envelope, bytes: Vec<u8>) -> Result<(), AgentdError> {
        let target = partition_target(env)?;
        let mut con = self.con.clone();
        cmd("XADD")
            .arg(self.keys.partition(self.partition_of(target)))
            .arg("*")
            .arg("m")
            .arg(bytes)
            .query_async::<String>(&mut con)
            .await
            .map_err(be)?;
        Ok(())
    }

    /// Reads the answers to this process's calls from its own reply stream and hands each to
    /// its waiting caller; what it read is deleted. A reply nobody waits for any more (the
    /// caller timed out) is dropped.
    pub(super) async fn reply_loop(self: Arc<Self>) {
        let key = self.keys.replies(&self.cfg.process_id);
        // The stream is this process's alone (its id is new at every start): from its start.
        let mut last = "0-0".to_string();
        let mut backoff = Backoff::new();
        let mut renewed = Instant::now();
        while !self.stopping.load(Ordering::SeqCst) {
            let mut reader = match self.blocking_reader().await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "reply reader cannot reach Redis; retrying");
                    backoff.wait().await;
                    continue;
                }
            };
            while !self.stopping.load(Ordering::SeqCst) {
                let read: redis::RedisResult<Option<StreamReadReply>> = cmd("XREAD")
                    .arg("COUNT")
                    .arg(100)
                    .arg("BLOCK")
                    .arg(500)
                    .arg("STREAMS")
                    .arg(&key)
                    .arg(&last)
                    .query_async(&mut reader)
                    .await;
                let ids: Vec<StreamId> = match read {
                    Ok(r) => r
                        .map(|r| r.keys)
                        .unwrap_or_default()
                        .into_iter()
                        .flat_map(|k| k.ids)
                        .collect(),
                    Err(e) => {
                        tracing::warn!(error = %e, "reply reader lost Redis; reconnecting");
                        tokio::time::sleep(backoff.current()).await;
                        break;
                    }
                };
                backoff.reset();
                if renewed.elapsed() >= REPLY_STREAM_RENEW {
                    renewed = Instant::now();
                    let mut con = self.con.clone();
                    let _: redis::RedisResult<i64> = cmd("PEXPIRE")
                        .arg(&key)
                        .arg(REPLY_STREAM_TTL_MS)
                        .query_async(&mut con)
                        .await;
                }
                if ids.is_empty() {
                    continue;
                }
                for sid in &ids {
                    last.clone_from(&sid.id);
                    self.complete_call(sid);
                }
                let mut con = self.con.clone();
                let done: Vec<&str> = ids.iter().map(|s| s.id.as_str()).collect();
                let _: redis::RedisResult<i64> =
                    cmd("XDEL").arg(&key).arg(&done).query_async(&mut con).await;
            }
        }
    }

    /// Hands the reply in entry `sid` of this process's reply stream to the call it answers.
    fn complete_call(&self, sid: &StreamId) {
        // Replies come from agentd processes only, and may be larger than what the partition
        // streams take from anyone (a tool's whole result): their own, wider bound.
        let reply = match decode_stream_entry(sid, REPLY_MAX_BYTES) {
            Ok(Envelope {
                causation_id: Some(call),
                item: Item::Reply(reply),
                ..
            }) => (call, reply),
            Ok(_) => {
                tracing::warn!(entry = %sid.id, "a reply-stream entry that answers no call; dropped");
                return;
            }
            Err(e) => {
                tracing::warn!(entry = %sid.id, error = %e, "an undecodable reply; dropped");
                return;
            }
        };
        let waiting = self.calls.lock().ok().and_then(|mut c| c.remove(&reply.0));
        match waiting {
            Some(tx) => {
                let _ = tx.send(reply.1);
            }
            None => tracing::debug!(call = %reply.0, "a reply after its caller stopped waiting"),
        }
    }

    /// Runs a call another process handed over for an agent of this partition and sends its
    /// reply back, as a task: a call may wait for replies that reach this very reader (a
    /// Manage sync wait), so the reader must not wait for it.
    /// Its entry is acknowledged at once: a call lost with this process is answered by the
    /// caller's timeout, and a caller may retry it.
    pub(super) fn run_call(&self, system: &Arc<dyn Inbound>, env: Envelope) {
        let system = system.clone();
        let mut con = self.con.clone();
        let replies = self.keys.replies_prefix();
        let span = tracing::info_span!(
            "call",
            agent_id = env.to.agent_id().unwrap_or_default(),
            message_id = %env.id,
        );
        let task = async move {
            let Item::Command(command) = env.item.clone() else {
                return;
            };
            let result = system.execute(command, None).await;
            // The caller's reply stream goes away by itself once no process reads it (a caller
            // that died); its live reader keeps renewing this.
            let expire = env
                .reply_to
                .as_deref()
                .is_some_and(|k| k.starts_with(&replies))
                .then_some(REPLY_STREAM_TTL_MS);
            let sent =
                crate::commands::send_reply(&mut con, &env, result, REPLY_MAXLEN, expire).await;
            if let Err(e) = sent {
                tracing::warn!(error = %e, "the reply to a call could not be sent");
            }
        };
        actix_rt::spawn(tracing::Instrument::instrument(task, span));
    }
}
