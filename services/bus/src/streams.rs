//! What every Redis stream reader of the crate shares: the consumer group and its creation, a
//! connection for blocking reads, the envelope in an entry's `m` field, Redis errors as
//! [`AgentdError`]s, and the backoff between reconnections.

use agentd_proto::codec::decode_envelope;
use agentd_proto::{AgentdError, Envelope, ErrorCode};
use redis::aio::{ConnectionManager, MultiplexedConnection};
use redis::streams::StreamId;
use redis::{AsyncConnectionConfig, cmd};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The consumer group every agentd process reads with.
pub(crate) const GROUP: &str = "agentd";

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

/// A connection of its own for blocking reads (`XREAD`, `XREADGROUP` with `BLOCK`): they must
/// not hit the default response timeout, nor hold up the commands of a shared connection.
pub(crate) async fn blocking_connection(url: &str) -> redis::RedisResult<MultiplexedConnection> {
    let client = redis::Client::open(url)?;
    let config = AsyncConnectionConfig::new().set_response_timeout(None);
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// Creates consumer group `agentd` on `stream` (and the stream), unless it exists.
pub(crate) async fn ensure_group(
    con: &mut ConnectionManager,
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
