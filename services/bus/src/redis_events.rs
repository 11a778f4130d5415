//! Events to `<ns>:events` (bounded with `MAXLEN ~`), and the text of answers being streamed
//! (`text_delta`) to their own short stream `<ns>:deltas`, so a fast stream of deltas never
//! evicts lifecycle events from `<ns>:events`; both written by a background task so that
//! publishing never blocks an actor. [`RedisEventsTail`] follows both streams back into a
//! process's [`EventLog`], under ids that say where it stands in each ([`StreamPosition`]).

use crate::blocking::BlockingConnection;
use crate::event_log::{EventLog, Logged};
use crate::streams::Backoff;
use agentd_ports::EventSink;
use agentd_proto::Event;
use agentd_proto::codec::encode;
use agentd_store::{RedisConnection, RedisTarget};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Most events written in one pipeline.
const EVENTS_PER_PIPELINE: usize = 256;

/// How long the writer gathers events after the first of a pipeline: the work that published
/// it (a turn's end, whose flush is what its waiter waits for) goes to Redis first, and what
/// it publishes next joins the same pipeline.
const GATHER: std::time::Duration = std::time::Duration::from_millis(1);

/// A Redis stream and its approximate cap.
#[derive(Debug, Clone)]
pub struct CappedStream {
    /// Its key.
    pub key: String,
    /// `MAXLEN ~` of every `XADD`.
    pub maxlen: usize,
}

/// An `EventSink` that appends to the Redis event streams.
pub struct RedisEvents {
    tx: mpsc::UnboundedSender<Event>,
}

impl RedisEvents {
    /// Starts the writer task (on the current actix/tokio runtime): `text_delta` events go to
    /// `deltas`, every other event to `events`.
    pub fn start(con: RedisConnection, events: CappedStream, deltas: CappedStream) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
        actix_rt::spawn(async move {
            let mut con = con;
            let mut batch = Vec::with_capacity(EVENTS_PER_PIPELINE);
            // Everything published while the last write was in flight, or within `GATHER` of
            // the first, goes as one pipeline (one round trip), in publishing order.
            while rx.recv_many(&mut batch, EVENTS_PER_PIPELINE).await > 0 {
                if batch.len() < EVENTS_PER_PIPELINE {
                    tokio::time::sleep(GATHER).await;
                    while batch.len() < EVENTS_PER_PIPELINE {
                        let Ok(event) = rx.try_recv() else { break };
                        batch.push(event);
                    }
                }
                // One pipeline per stream (each one slot); the two streams are read apart.
                let mut pipes = [(&events, redis::pipe()), (&deltas, redis::pipe())];
                for event in batch.drain(..) {
                    let Ok(bytes) = encode(&event) else { continue };
                    let (stream, pipe) = match event {
                        Event::TextDelta { .. } => &mut pipes[1],
                        _ => &mut pipes[0],
                    };
                    pipe.cmd("XADD")
                        .arg(&stream.key)
                        .arg("MAXLEN")
                        .arg("~")
                        .arg(stream.maxlen)
                        .arg("*")
                        .arg("type")
                        .arg(event.kind())
                        .arg("agent_id")
                        .arg(event.agent_id())
                        .arg("e")
                        .arg(bytes)
                        .ignore();
                }
                for (_, pipe) in &pipes {
                    if pipe.cmd_iter().next().is_none() {
                        continue;
                    }
                    agentd_store::assert_one_slot(pipe);
                    let r: redis::RedisResult<()> = pipe.query_async(&mut con).await;
                    if let Err(e) = r {
                        tracing::warn!(error = %e, "events not written to Redis");
                    }
                }
            }
        });
        RedisEvents { tx }
    }
}

impl EventSink for RedisEvents {
    fn publish(&self, event: &Event) {
        let _ = self.tx.send(event.clone());
    }
}

/// Publishes every event to several sinks (in-process subscribers and Redis).
pub struct Fanout(pub Vec<std::sync::Arc<dyn EventSink>>);

impl EventSink for Fanout {
    fn publish(&self, event: &Event) {
        for sink in &self.0 {
            sink.publish(event);
        }
    }

    fn is_listened(&self) -> bool {
        self.0.iter().any(|sink| sink.is_listened())
    }
}

/// A Redis stream entry id (`<ms>-<seq>`), comparable.
fn entry_id(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// Where a follower of the two streams stands: the last entry it took of `<ns>:events` and of
/// `<ns>:deltas`. It is the SSE id of the event it was taken with, written `<events>,<deltas>`
/// (e.g. `1732550000000-3,1732550000120-0`), so a client that resumes with it misses neither
/// stream's entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamPosition {
    /// Last entry id of the event stream (`0-0` before any).
    pub events: String,
    /// Last entry id of the delta stream (`0-0` before any).
    pub deltas: String,
}

impl StreamPosition {
    /// Reads an id written by [`std::fmt::Display`]; `None` if it is not one.
    pub fn parse(id: &str) -> Option<StreamPosition> {
        let (events, deltas) = id.trim().split_once(',')?;
        entry_id(events)?;
        entry_id(deltas)?;
        Some(StreamPosition {
            events: events.to_string(),
            deltas: deltas.to_string(),
        })
    }

    /// Whether an event taken at `self` comes after one taken at `earlier`.
    pub fn is_after(&self, earlier: &StreamPosition) -> bool {
        entry_id(&self.events) > entry_id(&earlier.events)
            || entry_id(&self.deltas) > entry_id(&earlier.deltas)
    }
}

impl std::fmt::Display for StreamPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{}", self.events, self.deltas)
    }
}

/// The entries of both streams in `reply`s, oldest first (the streams share Redis's clock, so
/// entry ids order them across streams), each with the position it leaves the reader at.
/// Entries that cannot be decoded are logged and skipped (events are observations).
fn merged(
    position: &mut StreamPosition,
    events_key: &str,
    replies: Vec<(String, Vec<redis::streams::StreamId>)>,
) -> Vec<Logged> {
    let mut entries: Vec<(bool, redis::streams::StreamId)> = replies
        .into_iter()
        .flat_map(|(key, ids)| {
            let is_event = key == events_key;
            ids.into_iter().map(move |sid| (is_event, sid))
        })
        .collect();
    entries.sort_by_key(|(_, sid)| entry_id(&sid.id));
    let mut out = Vec::with_capacity(entries.len());
    for (is_event, sid) in entries {
        if is_event {
            position.events = sid.id.clone();
        } else {
            position.deltas = sid.id.clone();
        }
        let raw: Option<Vec<u8>> = sid.get("e");
        match raw.as_deref().map(agentd_proto::codec::decode::<Event>) {
            Some(Ok(event)) => out.push(Logged {
                id: position.to_string(),
                event,
            }),
            Some(Err(e)) => tracing::warn!(id = %sid.id, error = %e, "undecodable event skipped"),
            None => tracing::warn!(id = %sid.id, "event entry without `e` skipped"),
        }
    }
    out
}

/// What a client resuming after a position gets from the streams themselves.
#[derive(Debug)]
pub enum Backlog {
    /// The entries after the position (at most the limit asked for), oldest first.
    After(Vec<Logged>),
    /// The event stream no longer holds the position's entry (trimmed by its cap): events
    /// were lost to this client.
    Lagged,
}

/// Reads what `<ns>:events` and `<ns>:deltas` hold after `after`, at most `limit` entries of
/// each (a client further behind is told it lagged).
pub async fn backlog(
    target: &RedisTarget,
    events_key: &str,
    deltas_key: &str,
    after: &StreamPosition,
    limit: usize,
) -> redis::RedisResult<Backlog> {
    let mut con = BlockingConnection::connect(target).await?;
    let first: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(events_key)
        .arg("-")
        .arg("+")
        .arg("COUNT")
        .arg(1)
        .query_async(&mut con)
        .await?;
    let trimmed = first
        .ids
        .first()
        .is_some_and(|oldest| entry_id(&oldest.id) > entry_id(&after.events))
        && after.events != "0-0";
    if trimmed {
        return Ok(Backlog::Lagged);
    }
    let mut replies = Vec::new();
    for (key, from) in [(events_key, &after.events), (deltas_key, &after.deltas)] {
        let range: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(key)
            .arg(format!("({from}"))
            .arg("+")
            .arg("COUNT")
            .arg(limit + 1)
            .query_async(&mut con)
            .await?;
        if key == events_key && range.ids.len() > limit {
            return Ok(Backlog::Lagged);
        }
        replies.push((key.to_string(), range.ids));
    }
    let mut position = after.clone();
    Ok(Backlog::After(merged(&mut position, events_key, replies)))
}

/// Follows `<ns>:events` (every process's events) and `<ns>:deltas` and appends them to a
/// process's [`EventLog`], so `/v1/events` of any process shows the whole cluster. It starts
/// at the streams' ends, and after a lost connection it goes on from the last entries it saw,
/// so nothing in between is missed. While the log has no subscriber it reads no events
/// (reading and decoding every event of the cluster would be work for nobody, and it grows
/// with the cluster): it only notes the streams' newest ids every `IDLE_POLL`, and a
/// subscriber that arrives gets everything after the ids noted before it subscribed (one that
/// resumes from further back reads the streams themselves, [`backlog`]).
pub struct RedisEventsTail {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl RedisEventsTail {
    /// Starts following `events_key` and `deltas_key` on a connection of its own to `target`
    /// (one per stream on a cluster, where they live in two slots), appending to `log`.
    pub fn start(
        target: RedisTarget,
        events_key: String,
        deltas_key: String,
        log: Arc<EventLog>,
    ) -> Self {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        actix_rt::spawn(async move {
            let mut position: Option<StreamPosition> = None;
            let mut backoff = Backoff::new();
            let keys = [events_key.as_str(), deltas_key.as_str()];
            while !stopping.load(Ordering::SeqCst) {
                let listening = || log.has_subscribers();
                let r = follow(
                    &target,
                    keys,
                    &mut position,
                    &stopping,
                    listening,
                    |logged| log.append(logged.id, logged.event),
                )
                .await;
                if let Err(e) = r {
                    tracing::warn!(error = %e, "event stream reader lost Redis; reconnecting");
                    backoff.wait().await;
                }
            }
        });
        RedisEventsTail { stop }
    }

    /// Stops following (within one blocking read).
    pub fn stop(&self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// How often an idle tail (no subscriber) notes the stream's newest id.
const IDLE_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// The id of the newest entry of `key` (`0-0` if it is empty).
async fn newest_id(reader: &mut BlockingConnection, key: &str) -> redis::RedisResult<String> {
    let newest: redis::streams::StreamRangeReply = redis::cmd("XREVRANGE")
        .arg(key)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(reader)
        .await?;
    Ok(newest
        .ids
        .first()
        .map(|sid| sid.id.clone())
        .unwrap_or_else(|| "0-0".into()))
}

/// The tail's connections: one for both streams on one Redis; on a cluster, where the two
/// streams are in two slots, one each.
enum TailReaders {
    One(BlockingConnection),
    Two {
        events: BlockingConnection,
        deltas: BlockingConnection,
    },
}

impl TailReaders {
    /// Most entries of a stream one read returns.
    const COUNT: usize = 256;

    async fn connect(target: &RedisTarget) -> redis::RedisResult<Self> {
        Ok(if target.is_cluster() {
            TailReaders::Two {
                events: BlockingConnection::connect(target).await?,
                deltas: BlockingConnection::connect(target).await?,
            }
        } else {
            TailReaders::One(BlockingConnection::connect(target).await?)
        })
    }

    /// The newest ids of both streams.
    async fn newest(&mut self, [events, deltas]: [&str; 2]) -> redis::RedisResult<StreamPosition> {
        let (events_reader, deltas_reader) = match self {
            TailReaders::One(reader) => {
                return Ok(StreamPosition {
                    events: newest_id(reader, events).await?,
                    deltas: newest_id(reader, deltas).await?,
                });
            }
            TailReaders::Two { events, deltas } => (events, deltas),
        };
        Ok(StreamPosition {
            events: newest_id(events_reader, events).await?,
            deltas: newest_id(deltas_reader, deltas).await?,
        })
    }

    /// The entries of both streams after `at` (waiting a while for some): one `XREAD` of both
    /// on one Redis; on a cluster a blocking read of the events, then what the deltas hold (so
    /// a delta waits at most one block time).
    async fn read(
        &mut self,
        keys: [&str; 2],
        at: &StreamPosition,
    ) -> redis::RedisResult<Vec<(String, Vec<redis::streams::StreamId>)>> {
        let xread = |block_ms: Option<u64>| {
            let mut read = redis::cmd("XREAD");
            read.arg("COUNT").arg(Self::COUNT);
            if let Some(ms) = block_ms {
                read.arg("BLOCK").arg(ms);
            }
            read.arg("STREAMS");
            read
        };
        let replies = match self {
            TailReaders::One(reader) => {
                let reply: Option<redis::streams::StreamReadReply> = xread(Some(500))
                    .arg(keys[0])
                    .arg(keys[1])
                    .arg(at.events.as_str())
                    .arg(at.deltas.as_str())
                    .query_async(reader)
                    .await?;
                reply.map(|r| r.keys).unwrap_or_default()
            }
            TailReaders::Two { events, deltas } => {
                let from_events: Option<redis::streams::StreamReadReply> = xread(Some(100))
                    .arg(keys[0])
                    .arg(at.events.as_str())
                    .query_async(events)
                    .await?;
                let from_deltas: Option<redis::streams::StreamReadReply> = xread(None)
                    .arg(keys[1])
                    .arg(at.deltas.as_str())
                    .query_async(deltas)
                    .await?;
                [from_events, from_deltas]
                    .into_iter()
                    .flatten()
                    .flat_map(|r| r.keys)
                    .collect()
            }
        };
        Ok(replies.into_iter().map(|k| (k.key, k.ids)).collect())
    }
}

async fn follow(
    target: &RedisTarget,
    keys: [&str; 2],
    position: &mut Option<StreamPosition>,
    stopping: &std::sync::atomic::AtomicBool,
    listening: impl Fn() -> bool,
    mut publish: impl FnMut(Logged),
) -> redis::RedisResult<()> {
    let mut readers = TailReaders::connect(target).await?;
    // Pin the starting point to real ids, so a reconnect resumes exactly after them.
    let mut at = match position.take() {
        Some(at) => at,
        None => readers.newest(keys).await?,
    };
    let result = async {
        while !stopping.load(std::sync::atomic::Ordering::SeqCst) {
            if !listening() {
                tokio::time::sleep(IDLE_POLL).await;
                let newest = readers.newest(keys).await?;
                // Still nobody listening once the ids came back: they were noted before anyone
                // now listening subscribed, so they miss nothing after them. Otherwise the ids
                // noted in the round before (earlier still) stay the starting point.
                if !listening() {
                    at = newest;
                }
                continue;
            }
            let replies = readers.read(keys, &at).await?;
            for logged in merged(&mut at, keys[0], replies) {
                publish(logged);
            }
        }
        Ok(())
    }
    .await;
    *position = Some(at);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_print_parse_and_order() {
        let p = StreamPosition {
            events: "5-1".into(),
            deltas: "7-0".into(),
        };
        assert_eq!(p.to_string(), "5-1,7-0");
        assert_eq!(StreamPosition::parse("5-1,7-0"), Some(p.clone()));
        assert_eq!(StreamPosition::parse("5-1"), None);
        assert_eq!(StreamPosition::parse("x,7-0"), None);
        let later_delta = StreamPosition::parse("5-1,10-0").unwrap_or(p.clone());
        assert!(later_delta.is_after(&p));
        assert!(!p.is_after(&later_delta));
        assert!(!p.is_after(&p));
        let later_event = StreamPosition::parse("12-0,7-0").unwrap_or(p.clone());
        assert!(later_event.is_after(&p));
    }
}
