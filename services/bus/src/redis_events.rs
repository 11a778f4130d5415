//! Events to `<ns>:events` (bounded with `MAXLEN ~`), written by a background task so that
//! publishing never blocks an actor.

use crate::streams::{Backoff, blocking_connection};
use agentd_actors::EventSink;
use agentd_proto::Event;
use agentd_proto::codec::encode;
use redis::aio::ConnectionManager;
use tokio::sync::mpsc;

/// Most events written in one pipeline.
const EVENTS_PER_PIPELINE: usize = 256;

/// An `EventSink` that appends to a Redis stream.
pub struct RedisEvents {
    tx: mpsc::UnboundedSender<Event>,
}

impl RedisEvents {
    /// Starts the writer task (on the current actix/tokio runtime).
    pub fn start(con: ConnectionManager, key: String, maxlen: usize) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
        actix_rt::spawn(async move {
            let mut con = con;
            let mut batch = Vec::with_capacity(EVENTS_PER_PIPELINE);
            // Everything published while the last write was in flight goes as one pipeline
            // (one round trip), in publishing order.
            while rx.recv_many(&mut batch, EVENTS_PER_PIPELINE).await > 0 {
                let mut pipe = redis::pipe();
                for event in batch.drain(..) {
                    let Ok(bytes) = encode(&event) else { continue };
                    pipe.cmd("XADD")
                        .arg(&key)
                        .arg("MAXLEN")
                        .arg("~")
                        .arg(maxlen)
                        .arg("*")
                        .arg("type")
                        .arg(event.kind())
                        .arg("agent_id")
                        .arg(event.agent_id())
                        .arg("e")
                        .arg(bytes)
                        .ignore();
                }
                let r: redis::RedisResult<()> = pipe.query_async(&mut con).await;
                if let Err(e) = r {
                    tracing::warn!(error = %e, "events not written to Redis");
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

/// Follows `<ns>:events` (every process's events) and republishes them to an in-process bus,
/// so `/v1/events` of any process shows the whole cluster. It starts at the stream's end,
/// and after a lost connection it goes on from the last entry it saw, so nothing in between is
/// missed. While the bus has no subscriber it reads no events (reading and decoding every
/// event of the cluster would be work for nobody, and it grows with the cluster): it only
/// notes the stream's newest id every `IDLE_POLL`, and a subscriber that arrives gets
/// everything after the id noted before it subscribed. Entries it cannot decode are logged
/// and skipped (events are observations).
pub struct RedisEventsTail {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl RedisEventsTail {
    /// Starts following `key` on its own connection to `url`, publishing into `bus`.
    pub fn start(url: String, key: String, bus: crate::InProcessBus) -> Self {
        use agentd_actors::EventSink as _;
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        actix_rt::spawn(async move {
            let mut last = "$".to_string();
            let mut backoff = Backoff::new();
            while !stopping.load(Ordering::SeqCst) {
                let listening = || bus.has_subscribers();
                let r = follow(&url, &key, &mut last, &stopping, listening, |event| {
                    bus.publish(&event)
                })
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
async fn newest_id(
    reader: &mut redis::aio::MultiplexedConnection,
    key: &str,
) -> redis::RedisResult<String> {
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

async fn follow(
    url: &str,
    key: &str,
    last: &mut String,
    stopping: &std::sync::atomic::AtomicBool,
    listening: impl Fn() -> bool,
    mut publish: impl FnMut(Event),
) -> redis::RedisResult<()> {
    let mut reader = blocking_connection(url).await?;
    if last == "$" {
        // Pin the starting point to a real id, so a reconnect resumes exactly after it.
        *last = newest_id(&mut reader, key).await?;
    }
    while !stopping.load(std::sync::atomic::Ordering::SeqCst) {
        if !listening() {
            tokio::time::sleep(IDLE_POLL).await;
            let newest = newest_id(&mut reader, key).await?;
            // Still nobody listening once the id came back: it was noted before anyone now
            // listening subscribed, so they miss nothing after it. Otherwise the id noted in
            // the round before (earlier still) stays the starting point.
            if !listening() {
                *last = newest;
            }
            continue;
        }
        let reply: Option<redis::streams::StreamReadReply> = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(256)
            .arg("BLOCK")
            .arg(500)
            .arg("STREAMS")
            .arg(key)
            .arg(last.as_str())
            .query_async(&mut reader)
            .await?;
        for sid in reply
            .map(|r| r.keys)
            .unwrap_or_default()
            .into_iter()
            .flat_map(|k| k.ids)
        {
            *last = sid.id.clone();
            let raw: Option<Vec<u8>> = sid.get("e");
            match raw.as_deref().map(agentd_proto::codec::decode::<Event>) {
                Some(Ok(event)) => publish(event),
                Some(Err(e)) => {
                    tracing::warn!(id = %sid.id, error = %e, "undecodable event skipped")
                }
                None => tracing::warn!(id = %sid.id, "event entry without `e` skipped"),
            }
        }
    }
    Ok(())
}
