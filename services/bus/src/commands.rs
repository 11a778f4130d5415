//! The command stream `<ns>:commands`: other services write MessagePack envelopes (field `m`)
//! holding a `Command`; any agentd process of the group executes it and, if the envelope names
//! a `reply_to` stream, appends the `Reply` there. Bad entries go to `<ns>:dead`; every entry
//! is acknowledged. A command that cannot be read (a field its type does not have, a missing or
//! mistyped one) in an envelope that can is dead-lettered as `invalid_argument` and that error
//! is its reply.
//!
//! Commands run concurrently (up to [`CommandLimits::running`] per process), so one that waits
//! — a Manage sync call waits for its worker's answer — does not hold up the others; commands
//! for one agent still run one after another, in the order they were written (a command
//! waiting for the one before it takes no running place; at most [`CommandLimits::taken`] are
//! taken in all). An entry is acknowledged once its command ran and its reply was sent.

use crate::dead::DeadLetters;
use crate::streams::{
    Backoff, GroupReader, ack, be, claim_from_gone, decode_stream_entry, ensure_group, now_ms,
};
use agentd_ports::Inbound;
use agentd_proto::codec::encode_envelope;
use agentd_proto::{Address, AgentdError, Envelope, ErrorCode, Item, PROTOCOL_VERSION, Reply};
use agentd_store::{RedisConnection, RedisTarget};
use redis::streams::StreamId;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Semaphore, oneshot};

/// How often a process looks for commands that a process gone from the live members took
/// and did not finish (see [`claim_from_gone`]).
const CLAIM_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads and executes commands until stopped.
#[derive(Clone)]
pub struct CommandConsumer {
    target: RedisTarget,
    key: String,
    consumer: String,
    /// The live processes' heartbeats (`{<ns>:members}`): the commands a process gone from it
    /// took and did not finish are run again here.
    members: String,
    max_bytes: usize,
    limits: CommandLimits,
    con: RedisConnection,
    dead: DeadLetters,
    stopping: Arc<AtomicBool>,
}

/// How much of the command stream one process takes on (`redis.commands_*` settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandLimits {
    /// Most commands one process runs at once.
    pub running: usize,
    /// Most commands one process has taken from the stream and not finished (running, or
    /// waiting for the command before them for the same agent); the reader reads on only
    /// below it. At least `running`.
    pub taken: usize,
    /// Approximate cap (`MAXLEN ~`) of a reply stream.
    pub reply_maxlen: usize,
}

impl Default for CommandLimits {
    fn default() -> Self {
        CommandLimits {
            running: 64,
            taken: 1_024,
            reply_maxlen: 10_000,
        }
    }
}

/// The commands under way in this process.
struct Running {
    /// Free places under [`CommandLimits::taken`].
    taken: Arc<Semaphore>,
    /// Free places under [`CommandLimits::running`].
    running: Arc<Semaphore>,
    /// Per agent, when the last command started for it ends (the next one waits for that).
    last_for: HashMap<String, oneshot::Receiver<()>>,
    /// Entries whose command runs: walking the pending list again (after a reconnect or a
    /// failed reply) finds them, and they must not start twice.
    ids: Arc<Mutex<HashSet<String>>>,
    /// A command's reply or acknowledgement failed: the reader reads its pending list again.
    reread: Arc<AtomicBool>,
}

impl Running {
    fn new(limits: CommandLimits) -> Self {
        Running {
            taken: Arc::new(Semaphore::new(limits.taken.max(limits.running).max(1))),
            running: Arc::new(Semaphore::new(limits.running.max(1))),
            last_for: HashMap::new(),
            ids: Arc::default(),
            reread: Arc::default(),
        }
    }
}

impl CommandConsumer {
    /// A consumer of `key` named `consumer` in group `agentd`, among the processes whose
    /// heartbeats are in `members`.
    pub fn new(
        target: &RedisTarget,
        key: String,
        consumer: String,
        members: String,
        max_bytes: usize,
        con: RedisConnection,
        dead: DeadLetters,
    ) -> Self {
        CommandConsumer {
            target: target.clone(),
            key,
            consumer,
            members,
            max_bytes,
            limits: CommandLimits::default(),
            con,
            dead,
            stopping: Arc::new(AtomicBool::new(false)),
        }
    }

    /// With `limits` instead of the defaults.
    pub fn with_limits(mut self, limits: CommandLimits) -> Self {
        self.limits = limits;
        self
    }

    /// A flag that stops the loop when set.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stopping.clone()
    }

    /// Creates the group and runs the loop in the background.
    pub async fn start(self, system: Arc<dyn Inbound>) -> Result<(), AgentdError> {
        let mut con = self.con.clone();
        ensure_group(&mut con, &self.key).await?;
        actix_rt::spawn(async move { self.run(system).await });
        Ok(())
    }

    async fn run(self, system: Arc<dyn Inbound>) {
        let mut backoff = Backoff::new();
        let mut running = Running::new(self.limits);
        while !self.stopping.load(Ordering::SeqCst) {
            if let Err(e) = self.read(&system, &mut running).await {
                tracing::warn!(error = %e, "command reader lost Redis; reconnecting");
                backoff.wait().await;
            }
        }
    }

    async fn read(
        &self,
        system: &Arc<dyn Inbound>,
        running: &mut Running,
    ) -> Result<(), AgentdError> {
        let mut reader = GroupReader::connect(&self.target, &self.key, &self.consumer).await?;
        let mut con = self.con.clone();
        let mut next_claim = std::time::Instant::now();
        while !self.stopping.load(Ordering::SeqCst) {
            if std::time::Instant::now() >= next_claim {
                next_claim += CLAIM_EVERY;
                if claim_from_gone(&mut con, &self.key, &self.consumer, &self.members).await? > 0 {
                    reader.reread_pending();
                }
            }
            if running.reread.swap(false, Ordering::SeqCst) {
                reader.reread_pending();
            }
            for sid in reader.next().await? {
                if running.ids.lock().is_ok_and(|ids| ids.contains(&sid.id)) {
                    // Re-read from our pending list while it still runs.
                    continue;
                }
                match decode_stream_entry(&sid, self.max_bytes) {
                    Err(e) => {
                        self.refuse(&sid, e, &mut con).await;
                        ack(&mut con, &self.key, &sid.id).await?;
                    }
                    Ok(env) => self.run_command(system, env, sid.id, running).await,
                }
            }
        }
        Ok(())
    }

    /// Moves an entry that could not be decoded to the dead letters with the reason. When the
    /// envelope itself is sound and only its command is not (a field its type does not have, a
    /// missing or mistyped one), the reason is `invalid_argument` naming what is wrong, and the
    /// sender gets it as the reply it asked for: a service learns of its typo at once instead
    /// of waiting for a reply that never comes.
    async fn refuse(&self, sid: &StreamId, undecodable: AgentdError, con: &mut RedisConnection) {
        let raw: Option<Vec<u8>> = sid.get("m");
        let head = raw
            .as_deref()
            .filter(|bytes| bytes.len() <= self.max_bytes)
            .and_then(|bytes| agentd_proto::codec::decode::<RequestHead>(bytes).ok())
            .filter(|head| {
                head.v == PROTOCOL_VERSION
                    && head.item.get("kind").and_then(|k| k.as_str()) == Some("command")
            });
        let err = match &head {
            Some(head) => match serde_json::from_value::<Item>(head.item.clone()) {
                Err(why) => AgentdError::new(
                    ErrorCode::InvalidArgument,
                    format!("invalid command: {why}"),
                ),
                // Read as a value, the command loses a key given twice (the last one stays):
                // if its entry holds one, that is what is wrong with it.
                Ok(_) => match raw
                    .as_deref()
                    .and_then(|bytes| agentd_proto::codec::decode::<ItemKeys>(bytes).err())
                {
                    Some(twice) => AgentdError::new(
                        ErrorCode::InvalidArgument,
                        format!("invalid command: {}", twice.message),
                    ),
                    // The command reads well: what is wrong is around it.
                    None => undecodable,
                },
            },
            None => undecodable,
        };
        self.dead.send(&self.key, &sid.id, &err, raw).await;
        let Some(head) = head.filter(|_| err.code == ErrorCode::InvalidArgument) else {
            return;
        };
        let request = Envelope {
            v: head.v,
            id: head.id,
            correlation_id: head.correlation_id,
            causation_id: None,
            from: head.from,
            to: Address::System,
            reply_to: head.reply_to,
            sent_at: 0,
            attempt: 1,
            item: Item::Reply(Reply::from(Ok(serde_json::Value::Null))),
            trace: None,
        };
        if let Err(e) = send_reply(con, &request, Err(err), self.limits.reply_maxlen, None).await {
            tracing::warn!(entry = %sid.id, error = %e, "the refusal of a malformed command could not be sent; it is in the dead letters");
        }
    }

    /// Takes `env`'s command (once fewer than [`CommandLimits::taken`] are taken) as a task
    /// that runs it after the command before it for the same agent (if that still runs) and
    /// once fewer than [`CommandLimits::running`] run; the task acknowledges entry `id` once
    /// the command ran and its reply is sent (if sending fails the entry stays pending and the
    /// reader reads its pending list again).
    async fn run_command(
        &self,
        system: &Arc<dyn Inbound>,
        env: Envelope,
        id: String,
        running: &mut Running,
    ) {
        let Ok(taken) = running.taken.clone().acquire_owned().await else {
            return; // never closed
        };
        let runners = running.running.clone();
        let target = match &env.item {
            Item::Command(c) => c.target().map(str::to_string),
            _ => None,
        };
        let (done, finished) = oneshot::channel::<()>();
        let before = target.and_then(|t| running.last_for.insert(t, finished));
        running
            .last_for
            .retain(|_, rx| matches!(rx.try_recv(), Err(oneshot::error::TryRecvError::Empty)));
        let ids = running.ids.clone();
        let reread = running.reread.clone();
        if let Ok(mut ids) = ids.lock() {
            ids.insert(id.clone());
        }
        let me = self.clone();
        let system = system.clone();
        actix_rt::spawn(async move {
            if let Some(before) = before {
                let _ = before.await;
            }
            let Ok(run) = runners.acquire_owned().await else {
                return; // never closed
            };
            let mut con = me.con.clone();
            let res = match me.execute(&system, env, &mut con).await {
                Ok(()) => ack(&mut con, &me.key, &id).await,
                Err(e) => Err(e),
            };
            if let Ok(mut ids) = ids.lock() {
                ids.remove(&id);
            }
            if let Err(e) = res {
                tracing::warn!(entry = %id, error = %e, "a command's reply or acknowledgement failed; it stays pending and runs again");
                reread.store(true, Ordering::SeqCst);
            }
            drop(done);
            drop((run, taken));
        });
    }

    async fn execute(
        &self,
        system: &Arc<dyn Inbound>,
        env: Envelope,
        con: &mut RedisConnection,
    ) -> Result<(), AgentdError> {
        let result = match env.item.clone() {
            // A command that carries a trace context joins that trace.
            // Run as request `env.id`: an entry read again (a crash before its acknowledgement)
            // repeats none of what the first run queued.
            Item::Command(command) => {
                let kind = crate::failpoints::kind_of(&command);
                let run = system.execute(command, Some(env.id));
                let result = agentd_observe::telemetry::scope(env.trace, run).await;
                crate::failpoints::before_command_ack(&kind);
                result
            }
            _ => Err(AgentdError::new(
                ErrorCode::BadEnvelope,
                "the command stream takes `command` items",
            )),
        };
        if let Err(e) = &result
            && e.code == ErrorCode::BadEnvelope
        {
            self.dead
                .send(&self.key, &env.id.to_string(), e, None)
                .await;
        }
        send_reply(con, &env, result, self.limits.reply_maxlen, None).await
    }
}

/// What answering an entry takes, read from an envelope whose item could not be decoded: the
/// item is kept as any value, so its own error can be told from the envelope's.
#[derive(serde::Deserialize)]
struct RequestHead {
    v: u16,
    id: uuid::Uuid,
    #[serde(default)]
    correlation_id: Option<uuid::Uuid>,
    from: Address,
    #[serde(default)]
    reply_to: Option<String>,
    item: serde_json::Value,
}

/// An envelope's item read with every key once ([`agentd_proto::strict::UniqueKeys`]); the
/// rest of the envelope is not read.
#[derive(serde::Deserialize)]
struct ItemKeys {
    #[allow(dead_code)]
    item: agentd_proto::strict::UniqueKeys,
}

/// Appends the `Reply` to `request` (its `result`) to the stream the request names in
/// `reply_to`, capped near `maxlen` entries; nothing if it names none. With `expire_ms`, the
/// stream's expiry is renewed in the same transaction, so whoever reads the reply finds the
/// expiry set.
pub(crate) async fn send_reply(
    con: &mut RedisConnection,
    request: &Envelope,
    result: Result<serde_json::Value, AgentdError>,
    maxlen: usize,
    expire_ms: Option<u64>,
) -> Result<(), AgentdError> {
    let Some(reply_to) = request.reply_to.as_deref() else {
        return Ok(());
    };
    let mut reply = Envelope::caused_by(
        request,
        Address::System,
        request.from.clone(),
        Item::Reply(Reply::from(result)),
        request.sent_at,
    );
    reply.sent_at = now_ms();
    let bytes = encode_envelope(&reply)?;
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("XADD")
        .arg(reply_to)
        .arg("MAXLEN")
        .arg("~")
        .arg(maxlen)
        .arg("*")
        .arg("m")
        .arg(bytes)
        .ignore();
    if let Some(ms) = expire_ms {
        pipe.cmd("PEXPIRE").arg(reply_to).arg(ms).ignore();
    }
    agentd_store::assert_one_slot(&pipe);
    pipe.query_async::<()>(con).await.map_err(be)?;
    Ok(())
}
