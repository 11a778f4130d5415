//! Events to `<ns>:events` (bounded with `MAXLEN ~`), written by a background task so that
//! publishing never blocks an actor.

use agentd_actors::EventSink;
use agentd_proto::Event;
use agentd_proto::codec::encode;
use redis::aio::ConnectionManager;
use tokio::sync::mpsc;

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
            while let Some(event) = rx.recv().await {
                let kind = serde_json::to_value(&event)
                    .ok()
                    .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
                    .unwrap_or_default();
                let Ok(bytes) = encode(&event) else { continue };
                let r: redis::RedisResult<String> = redis::cmd("XADD")
                    .arg(&key)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(maxlen)
                    .arg("*")
                    .arg("type")
                    .arg(kind)
                    .arg("agent_id")
                    .arg(event.agent_id())
                    .arg("e")
                    .arg(bytes)
                    .query_async(&mut con)
                    .await;
                if let Err(e) = r {
                    tracing::warn!(error = %e, "event not written to Redis");
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
}
