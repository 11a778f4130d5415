//! [`ToolReplies`]: the workers' answers to calls of service tools, on `<ns>:tool_replies`.
//!
//! Every process reads the stream in consumer group `agentd` (each entry reaches one of them)
//! and hands each answer on as the command `tool_result`, which runs in the process that owns
//! the call's agent: that process records the first answer and closes the call in one store
//! write. Delivery to workers is at least once, so a second answer to a call is expected: it
//! is logged and acknowledged, never dead-lettered. So is a worker's own error `code`, which
//! is free text (not one of agentd's codes): the entry is read leniently for that.

use crate::dead::DeadLetters;
use crate::streams::{Backoff, GroupReader, ack, ensure_group};
use agentd_ports::{Inbound, ToolCalls};
use agentd_proto::{AgentdError, Command, ErrorCode, ToolAnswerError};
use agentd_store::{RedisConnection, RedisTarget};
use redis::streams::StreamId;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use uuid::Uuid;

/// A reply envelope as workers write it, read leniently.
#[derive(Deserialize)]
struct ReplyEntry {
    /// The call's id (a uuid's text, as clients write it).
    #[serde(default)]
    correlation_id: Option<String>,
    item: ReplyItem,
}

#[derive(Deserialize)]
struct ReplyItem {
    kind: String,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<WorkerError>,
}

#[derive(Deserialize)]
struct WorkerError {
    #[serde(default)]
    message: String,
    /// Free text (any value a worker sends, shown as text).
    #[serde(default)]
    code: Option<Value>,
}

/// Reads `<ns>:tool_replies` and applies the answers.
pub struct ToolReplies {
    /// Where a call's record is read, to tell its agent: the store itself. The agent system
    /// would add nothing to that read, so the inbound port leaves it out and the reader holds
    /// the store's port of its own.
    calls: Arc<dyn ToolCalls>,
    target: RedisTarget,
    key: String,
    consumer: String,
    con: RedisConnection,
    dead: DeadLetters,
    max_bytes: usize,
    stopping: Arc<AtomicBool>,
}

impl ToolReplies {
    /// A reader of `key` as consumer `consumer` (the process id), reading the calls' records
    /// from `calls`.
    pub fn new(
        calls: Arc<dyn ToolCalls>,
        target: &RedisTarget,
        key: String,
        consumer: String,
        max_bytes: usize,
        con: RedisConnection,
        dead: DeadLetters,
    ) -> Self {
        ToolReplies {
            calls,
            target: target.clone(),
            key,
            consumer,
            con,
            dead,
            max_bytes,
            stopping: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A flag that stops the loop when set.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stopping.clone()
    }

    /// Creates the group (and the stream) and runs the loop in the background.
    pub async fn start(self, system: Arc<dyn Inbound>) -> Result<(), AgentdError> {
        let mut con = self.con.clone();
        ensure_group(&mut con, &self.key).await?;
        actix_rt::spawn(async move { self.run(system).await });
        Ok(())
    }

    async fn run(self, system: Arc<dyn Inbound>) {
        let mut backoff = Backoff::new();
        while !self.stopping.load(Ordering::SeqCst) {
            if let Err(e) = self.read(&system).await {
                tracing::warn!(error = %e, "tool reply reader lost Redis; reconnecting");
                backoff.wait().await;
            }
        }
    }

    async fn read(&self, system: &Arc<dyn Inbound>) -> Result<(), AgentdError> {
        let mut reader = GroupReader::connect(&self.target, &self.key, &self.consumer).await?;
        let mut con = self.con.clone();
        while !self.stopping.load(Ordering::SeqCst) {
            for sid in reader.next().await? {
                if let Err(e) = self.apply(system, &sid).await {
                    self.dead.send(&self.key, &sid.id, &e, sid.get("m")).await;
                }
                ack(&mut con, &self.key, &sid.id).await?;
            }
        }
        Ok(())
    }

    /// Applies one entry; `Err` only for an entry that is no answer at all (dead-lettered).
    async fn apply(&self, system: &Arc<dyn Inbound>, sid: &StreamId) -> Result<(), AgentdError> {
        let bad = |why: String| AgentdError::new(ErrorCode::BadEnvelope, why);
        let bytes: Vec<u8> = sid
            .get("m")
            .ok_or_else(|| bad("entry has no `m` field".into()))?;
        if bytes.len() > self.max_bytes {
            return Err(AgentdError::new(
                ErrorCode::PayloadTooLarge,
                format!("a tool reply of {} bytes", bytes.len()),
            ));
        }
        let entry: ReplyEntry =
            rmp_serde::from_slice(&bytes).map_err(|e| bad(format!("not a reply envelope: {e}")))?;
        if entry.item.kind != "reply" {
            return Err(bad(format!("item kind `{}`, not `reply`", entry.item.kind)));
        }
        let call_id = entry
            .correlation_id
            .as_deref()
            .and_then(|id| Uuid::parse_str(id).ok())
            .ok_or_else(
                || bad("a tool reply names its call (a uuid) in `correlation_id`".into()),
            )?;
        let (result, error) = match entry.item.error {
            Some(e) => (
                None,
                Some(ToolAnswerError {
                    message: e.message,
                    code: e.code.map(|c| match c {
                        Value::String(s) => s,
                        other => other.to_string(),
                    }),
                }),
            ),
            None => (Some(entry.item.result.unwrap_or(Value::Null)), None),
        };
        let Some(call) = self.calls.tool_call_get(call_id).await? else {
            tracing::warn!(%call_id, "a tool reply for no known call; dropped");
            return Ok(());
        };
        let cmd = Command::ToolResult {
            agent_id: call.agent_id,
            call_id,
            result,
            error,
        };
        match system.execute(cmd, None).await {
            Ok(_) => {}
            Err(e) if e.code == ErrorCode::ToolCallClosed => {
                // Expected now and then (delivery to workers is at least once): logged, not
                // a warning, and acknowledged.
                tracing::info!(%call_id, tool = %call.tool, reason = %e.message, "a later answer to a closed tool call; acknowledged and ignored");
            }
            Err(e) => tracing::warn!(%call_id, error = %e, "applying a tool reply failed"),
        }
        Ok(())
    }
}
