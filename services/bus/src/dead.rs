//! The dead-letter stream `<ns>:dead`: entries that could not be decoded or delivered, with the
//! reason, so nothing is silently dropped and the consumer keeps going.

use agentd_proto::AgentdError;
use agentd_store::RedisConnection;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes dead letters and counts them.
#[derive(Clone)]
pub struct DeadLetters {
    con: RedisConnection,
    key: String,
    maxlen: usize,
    count: Arc<AtomicU64>,
}

impl DeadLetters {
    /// Dead letters go to `key`, capped at about `maxlen` entries.
    pub fn new(con: RedisConnection, key: String, maxlen: usize) -> Self {
        DeadLetters {
            con,
            key,
            maxlen,
            count: Arc::new(AtomicU64::new(0)),
        }
    }

    /// How many entries this process moved aside.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Moves an entry aside with its reason (logged; a failure to write is logged too).
    pub async fn send(
        &self,
        stream: &str,
        entry_id: &str,
        err: &AgentdError,
        raw: Option<Vec<u8>>,
    ) {
        self.count.fetch_add(1, Ordering::Relaxed);
        agentd_observe::metrics::global().inc(
            "agentd_dead_letters_total",
            "Entries moved to the dead-letter stream.",
            &[("stream", stream)],
            1.0,
        );
        tracing::warn!(stream, entry_id, code = %err.code, error = %err.message, "entry moved to the dead-letter stream");
        let mut con = self.con.clone();
        let r: redis::RedisResult<String> = redis::cmd("XADD")
            .arg(&self.key)
            .arg("MAXLEN")
            .arg("~")
            .arg(self.maxlen)
            .arg("*")
            .arg("stream")
            .arg(stream)
            .arg("entry")
            .arg(entry_id)
            .arg("code")
            .arg(err.code.as_str())
            .arg("reason")
            .arg(&err.message)
            .arg("m")
            .arg(raw.unwrap_or_default())
            .query_async(&mut con)
            .await;
        if let Err(e) = r {
            tracing::error!(error = %e, "writing the dead letter failed");
        }
    }
}
