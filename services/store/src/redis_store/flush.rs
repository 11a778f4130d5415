//! Live agents' flushes of their own state: one agent's part of a call, and the flushes of one
//! partition's agents made together sent as one call ([`super::group`]), so that a read that
//! gave a partition's agents a message each costs one lease check and one `XACK` for all their
//! turns' ends, not one each. The call is a transaction fenced by the partition's lease
//! ([`super::fenced`]) on one Redis, else the script
//! [`FLUSH_MANY`](super::scripts::flush_many) (on a cluster, with replicas to wait for, and for
//! entries that must be appended once).
//!
//! Grouping keeps every guarantee of a flush of its own: each agent's part is applied alone
//! (its own error fails its part only), an agent has one flush under way at a time (so two of
//! its flushes never meet in one call or pass each other), and the fence is the same lease for
//! the whole call.

use super::fenced::{Outcome, Transaction};
use super::group::{Groups, result_of};
use super::{RedisStore, be, de};
use agentd_ports::{StoreResult, StoreWrite};
use agentd_proto::Envelope;
use agentd_proto::codec::{encode, encode_envelope};
use tokio::sync::oneshot;

/// One agent's part of a flush call: its keys and what it writes, encoded once.
pub(super) struct OwnFlush {
    agent_id: String,
    /// Thread, inbox, inboxdata, record.
    keys: [String; 4],
    /// The thread's new entries in order: known new (appended as they are), the id's 16
    /// bytes, the entry.
    entries: Vec<(bool, Vec<u8>, Vec<u8>)>,
    /// Envelope ids of the inbox items it is done with.
    dones: Vec<Vec<u8>>,
    /// Outputs onto its partition's stream (their parents share the partition).
    here: Vec<Vec<u8>>,
    /// Outputs for parents in other partitions: the parent's partition stream, the envelope's
    /// id, the envelope (into the outbox with the script, onto that stream in a transaction).
    away: Vec<(String, Vec<u8>, Vec<u8>)>,
    /// Ids of the partition stream entries it held and now acknowledges.
    acks: Vec<Vec<u8>>,
    /// Its record, if the run wrote one.
    record: Option<Vec<u8>>,
}

impl OwnFlush {
    /// Whether every entry is known new, so the part is plain writes (no look-up first) and
    /// can go in a transaction ([`super::fenced`]).
    fn is_plain(&self) -> bool {
        self.entries.iter().all(|(new, _, _)| *new)
    }

    /// Its [`FLUSH_MANY`](super::scripts::flush_many) arguments.
    fn script_args(&self, cmd: &mut redis::Cmd) {
        cmd.arg(self.entries.len());
        for (new, id, entry) in &self.entries {
            cmd.arg(if *new { "1" } else { "0" }).arg(id).arg(entry);
        }
        cmd.arg(self.dones.len()).arg(&self.dones);
        cmd.arg(self.here.len()).arg(&self.here);
        cmd.arg(self.away.len());
        for (_, id, env) in &self.away {
            cmd.arg(id).arg(env);
        }
        cmd.arg(self.acks.len()).arg(&self.acks);
        match &self.record {
            Some(record) => cmd.arg("1").arg(record),
            None => cmd.arg("0"),
        };
    }

    /// Its writes as plain commands for a transaction on partition stream `stream` (its
    /// acknowledgements go in the transaction's one `XACK`): what
    /// [`FLUSH_MANY`](super::scripts::flush_many) writes for a part that [`Self::is_plain`],
    /// except that outputs for parents in other partitions go onto their streams at once, not
    /// into the outbox (a transaction is on one Redis, where every key is on the one node).
    fn commands(&self, stream: &str) -> Vec<redis::Cmd> {
        let [thread, inbox, inboxdata, record_key] = &self.keys;
        let mut cmds = Vec::new();
        for run in self.entries.chunks(500) {
            let mut rpush = redis::cmd("RPUSH");
            rpush.arg(thread);
            for (_, id, entry) in run {
                rpush.arg(id).arg(entry);
            }
            cmds.push(rpush);
        }
        if !self.dones.is_empty() {
            cmds.push(redis::cmd("ZREM").arg(inbox).arg(&self.dones).clone());
            cmds.push(redis::cmd("HDEL").arg(inboxdata).arg(&self.dones).clone());
        }
        for env in &self.here {
            cmds.push(
                redis::cmd("XADD")
                    .arg(stream)
                    .arg("*")
                    .arg("m")
                    .arg(env)
                    .clone(),
            );
        }
        for (to, _, env) in &self.away {
            cmds.push(
                redis::cmd("XADD")
                    .arg(to)
                    .arg("*")
                    .arg("m")
                    .arg(env)
                    .clone(),
            );
        }
        if let Some(record) = &self.record {
            cmds.push(redis::cmd("SET").arg(record_key).arg(record).clone());
        }
        cmds
    }
}

/// One agent's flush waiting for its partition's next call.
struct Waiting {
    flush: OwnFlush,
    answer: oneshot::Sender<StoreResult<i64>>,
}

/// The flushes waiting per partition.
#[derive(Default)]
pub(super) struct FlushQueue(Groups<Waiting>);

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
        let mut entries = Vec::new();
        let mut dones = Vec::new();
        let mut acks = Vec::new();
        for w in run {
            match w {
                StoreWrite::Append { entry, .. } | StoreWrite::AppendNew { entry, .. } => {
                    let new = matches!(w, StoreWrite::AppendNew { .. });
                    entries.push((
                        new,
                        entry.id.as_bytes().to_vec(),
                        encode(&**entry).map_err(de)?,
                    ));
                }
                StoreWrite::InboxDone { env_id, .. } => dones.push(env_id.to_string().into_bytes()),
                StoreWrite::Acknowledge { entry, .. } => {
                    debug_assert_eq!(&*entry.stream, stream.as_str(), "another partition's entry");
                    acks.push(entry.id.as_bytes().to_vec());
                }
                _ => {}
            }
        }
        let mut here = Vec::new();
        let mut away = Vec::new();
        for (to, env) in outputs {
            let bytes = encode_envelope(env).map_err(de)?;
            if *to == stream {
                here.push(bytes);
            } else {
                away.push((to.to_string(), env.id.to_string().into_bytes(), bytes));
            }
        }
        let record = run.iter().rev().find_map(|w| match w {
            StoreWrite::PutAgent(rec) => Some(rec),
            _ => None,
        });
        let record = record.map(|rec| super::record_bytes(rec)).transpose()?;
        Ok(OwnFlush {
            agent_id: owner.to_string(),
            keys: [
                self.keys.agent_part(owner, "thread"),
                self.keys.agent_part(owner, "inbox"),
                self.keys.agent_part(owner, "inboxdata"),
                self.keys.agent(owner),
            ],
            entries,
            dones,
            here,
            away,
            acks,
            record,
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
            f.script_args(&mut cmd);
        }
        cmd
    }

    /// Writes `flush` (an agent of partition `k`) in its partition's next flush call (queuing
    /// the task that sends it if none is); answers its result: `1`; `2` if its outputs for
    /// other partitions went onto their parents' streams with it (a transaction), not into the
    /// outbox; or `-1` if the fence refused it (nothing written).
    pub(super) async fn flush_grouped(&self, k: u32, flush: OwnFlush) -> StoreResult<i64> {
        let (tx, rx) = oneshot::channel();
        if self.flushes.0.join(k, Waiting { flush, answer: tx })? {
            // A task of its own: it runs after the flushes made in this turn of the runtime,
            // and a caller that stops waiting does not leave the others waiting.
            let me = self.clone();
            tokio::spawn(async move { me.send_flushes(k).await });
        }
        rx.await
            .map_err(|_| agentd_ports::StoreError::transient("the flush was dropped unanswered"))?
    }

    /// Sends what waits for partition `k` as one call: a fenced transaction ([`super::fenced`])
    /// where this store makes them and every part is plain writes, else the script.
    async fn send_flushes(&self, k: u32) {
        let (batch, results) = match &self.transactions {
            Some(transactions) if self.replicas.min == 0 => {
                let ((batch, spans), ran) = transactions
                    .run(k, || {
                        let batch = self.flushes.0.take(k);
                        let (spans, tx) = self.transaction(k, &batch).unzip();
                        ((batch, spans), tx)
                    })
                    .await;
                match (ran, spans) {
                    (Some(outcome), Some(spans)) => {
                        let results = outcome.map(|o| spans.results(o));
                        (batch, results)
                    }
                    _ => {
                        let results = self.send_script(k, &batch).await;
                        (batch, results)
                    }
                }
            }
            _ => {
                let batch = self.flushes.0.take(k);
                let results = self.send_script(k, &batch).await;
                (batch, results)
            }
        };
        for (i, w) in batch.into_iter().enumerate() {
            let what = format!("the flush of agent `{}`", w.flush.agent_id);
            let _ = w.answer.send(result_of(&results, i, &what));
        }
    }

    /// `batch` (flushes of partition `k`) as one script call.
    async fn send_script(
        &self,
        k: u32,
        batch: &[Waiting],
    ) -> Result<Vec<redis::Value>, agentd_ports::StoreError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let flushes: Vec<&OwnFlush> = batch.iter().map(|w| &w.flush).collect();
        let call = self.flush_call(k, &flushes);
        let mut con = self.con.clone();
        match call.query_async::<Vec<redis::Value>>(&mut con).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                // Redis lost its script cache (a restart): the call ran nothing.
                self.load_flush_scripts(&mut con).await?;
                call.query_async(&mut con).await.map_err(be)
            }
            other => other.map_err(be),
        }
    }

    /// `batch` (flushes of partition `k`) as one fenced transaction, with where each part's
    /// results are in it; `None` if the batch is empty or a part must go through the script.
    fn transaction(&self, k: u32, batch: &[Waiting]) -> Option<(Spans, Transaction)> {
        let first = batch.first()?;
        if !batch.iter().all(|w| w.flush.is_plain()) {
            return None;
        }
        let (lease, token) = self.lease_and_token(&first.flush.agent_id);
        let stream = self.keys.partition(k);
        let mut body = Vec::new();
        let mut parts = Vec::with_capacity(batch.len());
        let mut acks = Vec::new();
        for w in batch {
            let start = body.len();
            body.extend(w.flush.commands(&stream));
            parts.push(Part {
                commands: start..body.len(),
                acks: !w.flush.acks.is_empty(),
                sends: !w.flush.away.is_empty(),
            });
            acks.extend(w.flush.acks.iter());
        }
        let ack = (!acks.is_empty()).then(|| {
            body.push(
                redis::cmd("XACK")
                    .arg(&*stream)
                    .arg(crate::GROUP)
                    .arg(acks)
                    .clone(),
            );
            body.len() - 1
        });
        Some((Spans { parts, ack }, Transaction::new(body, lease, token)))
    }
}

/// Where each part's results are in a flush transaction's, and the index of the one `XACK`.
pub(super) struct Spans {
    parts: Vec<Part>,
    ack: Option<usize>,
}

/// One part of a flush transaction.
struct Part {
    /// Its commands' results.
    commands: std::ops::Range<usize>,
    /// It acknowledges entries (in the one `XACK`).
    acks: bool,
    /// It appends outputs to other partitions' streams.
    sends: bool,
}

impl Spans {
    /// One result per part, as the script answers them — `1` written, `-1` fenced, or the error
    /// of one of its writes (a key of the wrong type; a transaction has no rollback: a part's
    /// other writes stand when one fails) — except `2` for a part written with outputs for
    /// other partitions, which are then on their parents' streams already (see
    /// [`OwnFlush::commands`]).
    fn results(&self, outcome: Outcome) -> Vec<redis::Value> {
        use redis::Value;
        let results = match outcome {
            Outcome::Fenced => return vec![Value::Int(-1); self.parts.len()],
            Outcome::Ran(results) => results,
        };
        let error = |i: usize| match results.get(i) {
            Some(Value::ServerError(e)) => Some(Value::SimpleString(e.to_string())),
            Some(_) => None,
            None => Some(Value::SimpleString(
                "the transaction answered too few results".into(),
            )),
        };
        let ack_error = self.ack.and_then(error);
        self.parts
            .iter()
            .map(|part| {
                part.commands
                    .clone()
                    .find_map(error)
                    .or_else(|| ack_error.clone().filter(|_| part.acks))
                    .unwrap_or(Value::Int(if part.sends { 2 } else { 1 }))
            })
            .collect()
    }
}
