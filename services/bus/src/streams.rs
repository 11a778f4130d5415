//! What every Redis stream reader of the crate shares: the consumer group, its creation and
//! a process's reading in it ([`GroupReader`]), the envelope
//! in an entry's `m` field, Redis errors as [`AgentdError`]s, and the backoff between
//! reconnections.

use crate::blocking::BlockingConnection;
use agentd_proto::codec::decode_envelope;
use agentd_proto::{AgentdError, Envelope, ErrorCode};
use agentd_store::{RedisConnection, RedisTarget};
use redis::cmd;
use redis::streams::{StreamId, StreamReadReply};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The consumer group every agentd process reads with.
pub(crate) use agentd_store::GROUP;

/// A Redis error as the `Unavailable` error the bus answers.
pub(crate) fn be(e: redis::RedisError) -> AgentdError {
    AgentdError::new(ErrorCode::Unavailable, format!("redis: {e}"))
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Creates consumer group `agentd` on `stream` (and the stream), unless it exists.
pub(crate) async fn ensure_group(
    con: &mut RedisConnection,
    stream: &str,
) -> Result<(), AgentdError> {
    let r: redis::RedisResult<()> = cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg(GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query_async(con)
        .await;
    match r {
        Err(e) if !e.to_string().contains("BUSYGROUP") => Err(be(e)),
        _ => Ok(()),
    }
}

/// One process's reading of a stream in group `agentd`, as consumer `consumer` (its process
/// id): its own pending entries first — entries it took before a reconnect or a restart under
/// the same name and did not acknowledge — then new ones. Each entry reaches one process of
/// the group; it stays pending until that process acknowledges it ([`ack`]).
pub(crate) struct GroupReader {
    reader: BlockingConnection,
    key: String,
    consumer: String,
    /// `0`-based ids while walking the pending list (the last one returned), `>` after.
    cursor: String,
}

impl GroupReader {
    /// Most entries one read returns.
    const BATCH: usize = 100;
    /// How long one read waits for new entries (the caller checks whether to stop between).
    const BLOCK_MS: u64 = 200;

    /// A reader of `key` on a connection of its own (reads block).
    pub(crate) async fn connect(
        target: &RedisTarget,
        key: &str,
        consumer: &str,
    ) -> Result<GroupReader, AgentdError> {
        Ok(GroupReader {
            reader: BlockingConnection::connect(target).await.map_err(be)?,
            key: key.to_string(),
            consumer: consumer.to_string(),
            cursor: "0".to_string(),
        })
    }

    /// Walks the pending list again from its start (an entry whose handling failed is in it).
    pub(crate) fn reread_pending(&mut self) {
        self.cursor = "0".into();
    }

    /// The next entries: pending ones while the pending list lasts (past those returned
    /// before; entries still unacknowledged come again on the next walk), then new ones (none
    /// after [`Self::BLOCK_MS`] without any).
    pub(crate) async fn next(&mut self) -> Result<Vec<StreamId>, AgentdError> {
        loop {
            let reply: Option<StreamReadReply> = cmd("XREADGROUP")
                .arg("GROUP")
                .arg(GROUP)
                .arg(&self.consumer)
                .arg("COUNT")
                .arg(Self::BATCH)
                .arg("BLOCK")
                .arg(Self::BLOCK_MS)
                .arg("STREAMS")
                .arg(&self.key)
                .arg(&self.cursor)
                .query_async(&mut self.reader)
                .await
                .map_err(be)?;
            let entries: Vec<StreamId> = reply
                .map(|r| r.keys)
                .unwrap_or_default()
                .into_iter()
                .flat_map(|k| k.ids)
                .collect();
            if self.cursor != ">" {
                match entries.last() {
                    Some(last) => self.cursor.clone_from(&last.id),
                    None => {
                        self.cursor = ">".into();
                        continue;
                    }
                }
            }
            return Ok(entries);
        }
    }
}

/// Moves to consumer `me` the entries of `stream` that consumers of processes gone from the
/// live members (`members`, the sorted set of heartbeats each process keeps fresh) took and
/// never acknowledged, and forgets those consumers: a process killed while it ran commands
/// leaves them pending under its name, which no process reads again. `me` then finds them in
/// its own pending list (its reader walks it again when this answers more than 0).
pub(crate) async fn claim_from_gone(
    con: &mut RedisConnection,
    stream: &str,
    me: &str,
    members: &str,
) -> Result<usize, AgentdError> {
    let consumers: redis::streams::StreamInfoConsumersReply = cmd("XINFO")
        .arg("CONSUMERS")
        .arg(stream)
        .arg(GROUP)
        .query_async(con)
        .await
        .map_err(be)?;
    let mut claimed = 0;
    for consumer in consumers.consumers {
        if consumer.name == me {
            continue;
        }
        let heartbeat: Option<f64> = cmd("ZSCORE")
            .arg(members)
            .arg(&consumer.name)
            .query_async(con)
            .await
            .map_err(be)?;
        if heartbeat.is_some() {
            continue;
        }
        loop {
            let pending: redis::streams::StreamPendingCountReply = cmd("XPENDING")
                .arg(stream)
                .arg(GROUP)
                .arg("-")
                .arg("+")
                .arg(100)
                .arg(&consumer.name)
                .query_async(con)
                .await
                .map_err(be)?;
            if pending.ids.is_empty() {
                break;
            }
            let mut claim = cmd("XCLAIM");
            claim.arg(stream).arg(GROUP).arg(me).arg(0);
            for entry in &pending.ids {
                claim.arg(&entry.id);
            }
            claim.arg("JUSTID");
            let moved: Vec<String> = claim.query_async(con).await.map_err(be)?;
            claimed += moved.len();
            if moved.len() < pending.ids.len() {
                // Entries trimmed away meanwhile: XCLAIM leaves them out; the next pass
                // finds none left.
                tracing::debug!(stream, consumer = %consumer.name, "some pending entries were gone");
            }
        }
        cmd("XGROUP")
            .arg("DELCONSUMER")
            .arg(stream)
            .arg(GROUP)
            .arg(&consumer.name)
            .query_async::<i64>(con)
            .await
            .map_err(be)?;
        tracing::info!(stream, consumer = %consumer.name, claimed, "took over the pending entries of a process that is gone");
    }
    Ok(claimed)
}

/// Acknowledges entry `id` of `stream` in group `agentd`: it leaves the pending list.
pub(crate) async fn ack(
    con: &mut RedisConnection,
    stream: &str,
    id: &str,
) -> Result<(), AgentdError> {
    cmd("XACK")
        .arg(stream)
        .arg(GROUP)
        .arg(id)
        .query_async::<i64>(con)
        .await
        .map_err(be)?;
    Ok(())
}

/// The envelope in a stream entry's `m` field (at most `max_bytes`), or why there is none.
pub(crate) fn decode_stream_entry(
    sid: &StreamId,
    max_bytes: usize,
) -> Result<Envelope, AgentdError> {
    match sid.get::<Vec<u8>>("m") {
        None => Err(AgentdError::new(
            ErrorCode::BadEnvelope,
            "entry has no `m` field",
        )),
        Some(bytes) => decode_envelope(&bytes, max_bytes),
    }
}

/// The wait before a reader reconnects: 100 ms, doubling after each failure up to 2 s.
pub(crate) struct Backoff(Duration);

impl Backoff {
    const FIRST: Duration = Duration::from_millis(100);
    const MOST: Duration = Duration::from_secs(2);

    pub(crate) fn new() -> Self {
        Backoff(Self::FIRST)
    }

    /// The wait now.
    pub(crate) fn current(&self) -> Duration {
        self.0
    }

    /// Sleeps the wait now, and doubles it for the next failure.
    pub(crate) async fn wait(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(Self::MOST);
    }

    /// Back to the first wait (a connection that works again).
    pub(crate) fn reset(&mut self) {
        self.0 = Self::FIRST;
    }
}
