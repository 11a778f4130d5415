//! The command stream `<ns>:commands`: other services write MessagePack envelopes (field `m`)
//! holding a `Command`; any agentd process of the group executes it and, if the envelope names
//! a `reply_to` stream, appends the `Reply` there. Bad entries go to `<ns>:dead`; every entry
//! is acknowledged.

use crate::dead::DeadLetters;
use crate::redis_bus::GROUP;
use agentd_actors::AgentSystem;
use agentd_proto::codec::{decode_envelope, encode_envelope};
use agentd_proto::{Address, AgentdError, Envelope, ErrorCode, Item, Reply};
use redis::aio::ConnectionManager;
use redis::streams::StreamReadReply;
use redis::{AsyncConnectionConfig, cmd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Reads and executes commands until stopped.
pub struct CommandConsumer {
    url: String,
    key: String,
    consumer: String,
    max_bytes: usize,
    reply_maxlen: usize,
    con: ConnectionManager,
    dead: DeadLetters,
    stopping: Arc<AtomicBool>,
}

fn be(e: redis::RedisError) -> AgentdError {
    AgentdError::new(ErrorCode::Unavailable, format!("redis: {e}"))
}

impl CommandConsumer {
    /// A consumer of `key` named `consumer` in group `agentd`.
    pub fn new(
        url: &str,
        key: String,
        consumer: String,
        max_bytes: usize,
        con: ConnectionManager,
        dead: DeadLetters,
    ) -> Self {
        CommandConsumer {
            url: url.to_string(),
            key,
            consumer,
            max_bytes,
            reply_maxlen: 10_000,
            con,
            dead,
            stopping: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A flag that stops the loop when set.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stopping.clone()
    }

    /// Creates the group and runs the loop in the background.
    pub async fn start(self, system: AgentSystem) -> Result<(), AgentdError> {
        let mut con = self.con.clone();
        crate::redis_bus::ensure_group(&mut con, &self.key).await?;
        actix_rt::spawn(async move { self.run(system).await });
        Ok(())
    }

    async fn run(self, system: AgentSystem) {
        let mut backoff = Duration::from_millis(100);
        while !self.stopping.load(Ordering::SeqCst) {
            if let Err(e) = self.read(&system).await {
                tracing::warn!(error = %e, "command reader lost Redis; reconnecting");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }

    async fn read(&self, system: &AgentSystem) -> Result<(), AgentdError> {
        let client = redis::Client::open(self.url.as_str()).map_err(be)?;
        let mut reader = client
            .get_multiplexed_async_connection_with_config(
                &AsyncConnectionConfig::new().set_response_timeout(None),
            )
            .await
            .map_err(be)?;
        let mut con = self.con.clone();
        // Our own pending entries first (a restart with the same name), then new ones.
        let mut cursor = "0".to_string();
        while !self.stopping.load(Ordering::SeqCst) {
            let reply: Option<StreamReadReply> = cmd("XREADGROUP")
                .arg("GROUP")
                .arg(GROUP)
                .arg(&self.consumer)
                .arg("COUNT")
                .arg(100)
                .arg("BLOCK")
                .arg(200)
                .arg("STREAMS")
                .arg(&self.key)
                .arg(&cursor)
                .query_async(&mut reader)
                .await
                .map_err(be)?;
            let entries: Vec<_> = reply
                .map(|r| r.keys)
                .unwrap_or_default()
                .into_iter()
                .flat_map(|k| k.ids)
                .collect();
            if entries.is_empty() && cursor != ">" {
                cursor = ">".into();
                continue;
            }
            for sid in entries {
                let raw: Option<Vec<u8>> = sid.get("m");
                let env = match raw.as_deref().map(|b| decode_envelope(b, self.max_bytes)) {
                    None => Err(AgentdError::new(
                        ErrorCode::BadEnvelope,
                        "entry has no `m` field",
                    )),
                    Some(r) => r,
                };
                match env {
                    Err(e) => self.dead.send(&self.key, &sid.id, &e, raw).await,
                    Ok(env) => self.execute(system, env, &mut con).await?,
                }
                cmd("XACK")
                    .arg(&self.key)
                    .arg(GROUP)
                    .arg(&sid.id)
                    .query_async::<i64>(&mut con)
                    .await
                    .map_err(be)?;
            }
        }
        Ok(())
    }

    async fn execute(
        &self,
        system: &AgentSystem,
        env: Envelope,
        con: &mut ConnectionManager,
    ) -> Result<(), AgentdError> {
        let result = match env.item.clone() {
            Item::Command(command) => system.execute(command).await,
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
        send_reply(con, &env, result, self.reply_maxlen).await
    }
}

/// Appends the `Reply` to `request` (its `result`) to the stream the request names in
/// `reply_to`, capped near `maxlen` entries; nothing if it names none.
pub(crate) async fn send_reply(
    con: &mut ConnectionManager,
    request: &Envelope,
    result: Result<serde_json::Value, AgentdError>,
    maxlen: usize,
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
    reply.sent_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let bytes = encode_envelope(&reply)?;
    cmd("XADD")
        .arg(reply_to)
        .arg("MAXLEN")
        .arg("~")
        .arg(maxlen)
        .arg("*")
        .arg("m")
        .arg(bytes)
        .query_async::<String>(con)
        .await
        .map_err(be)?;
    Ok(())
}
