//! The [`Transport`] the ChannelRouter routes through: which agents are local (owned, fresh,
//! drained), which stream an agent's envelopes go to, and calls and forwards to the agents of
//! other processes.

use super::{RedisBus, partition_target};
use crate::streams::be;
use agentd_ports::{Clock, SystemClock, Transport};
use agentd_proto::codec::encode_envelope;
use agentd_proto::{AgentdError, Envelope, Reply};
use async_trait::async_trait;
use std::time::Duration;

/// The consumer group of a service tool's workers, which agentd creates with the stream.
pub const TOOL_WORKERS: &str = "workers";
/// About how many calls a service tool's stream keeps (`MAXLEN ~`).
const TOOL_STREAM_MAXLEN: usize = 10_000;

impl RedisBus {
    /// Creates the stream of service tool `tool` and its consumer group `workers`, unless they
    /// exist (at start-up for every configured service tool, so workers may start first, and
    /// before each publish); answers the stream's key.
    pub async fn create_tool_group(&self, tool: &str) -> Result<String, AgentdError> {
        let stream = self.keys.tool_stream(tool);
        let mut con = self.con.clone();
        let r: redis::RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&stream)
            .arg(TOOL_WORKERS)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut con)
            .await;
        match r {
            Err(e) if !e.to_string().contains("BUSYGROUP") => Err(be(e)),
            _ => Ok(stream),
        }
    }
}

#[async_trait]
impl Transport for RedisBus {
    fn is_local(&self, agent_id: &str) -> bool {
        let k = self.partition_of(agent_id);
        self.owned.read().map(|o| o.contains(&k)).unwrap_or(false)
            && self.fresh(k)
            && !self
                .draining
                .read()
                .map(|d| d.contains(&k))
                .unwrap_or(false)
    }

    fn owns(&self, agent_id: &str) -> bool {
        let k = self.partition_of(agent_id);
        self.owned.read().map(|o| o.contains(&k)).unwrap_or(false)
    }

    fn may_deliver(&self, agent_id: &str) -> bool {
        self.owns(agent_id) && self.fresh(self.partition_of(agent_id))
    }

    fn fenced(&self, agent_id: &str) -> bool {
        self.owns(agent_id) && !self.fresh(self.partition_of(agent_id))
    }

    fn may_take(&self, agent_id: &str, entry: &agentd_ports::StreamEntry) -> bool {
        self.may_deliver(agent_id) && entry.epoch == self.held.epoch(entry.partition)
    }

    fn stream_for(&self, agent_id: &str) -> Option<String> {
        Some(self.keys.partition(self.partition_of(agent_id)))
    }

    async fn provider_gate(&self, provider: &str) -> Option<u64> {
        let mut con = self.con.clone();
        let until: Option<u64> = redis::cmd("GET")
            .arg(self.keys.provider_gate(provider))
            .query_async(&mut con)
            .await
            .map_err(|e| tracing::warn!(provider, error = %e, "reading the shared rate-limit gate failed"))
            .ok()
            .flatten();
        let now = SystemClock.now_ms();
        until.filter(|u| *u > now)
    }

    async fn close_provider_gate(&self, provider: &str, until_ms: u64) {
        let now = SystemClock.now_ms();
        let Some(ttl) = until_ms.checked_sub(now).filter(|t| *t > 0) else {
            return;
        };
        let mut con = self.con.clone();
        // A later reset already shared wins. (Two processes closing it at once may keep the
        // earlier of their two resets: one wait is then a little shorter, never longer.)
        let key = self.keys.provider_gate(provider);
        let res: Result<(), redis::RedisError> = async {
            let current: Option<u64> = redis::cmd("GET").arg(&key).query_async(&mut con).await?;
            if current.is_none_or(|c| c < until_ms) {
                redis::cmd("SET")
                    .arg(&key)
                    .arg(until_ms)
                    .arg("PX")
                    .arg(ttl)
                    .query_async::<()>(&mut con)
                    .await?;
            }
            Ok(())
        }
        .await;
        if let Err(e) = res {
            tracing::warn!(provider, error = %e, "sharing the rate-limit gate failed");
        }
    }

    async fn publish_tool_call(
        &self,
        call: &agentd_proto::ToolCallRecord,
    ) -> Result<(), AgentdError> {
        let stream = self.create_tool_group(&call.tool).await?;
        let mut con = self.con.clone();
        let mut env = Envelope::new(
            agentd_proto::Address::agent(call.agent_id.as_str()),
            agentd_proto::Address::System,
            agentd_proto::Item::ToolCall(call.item()),
            SystemClock.now_ms(),
        );
        env.id = call.call_id;
        env.correlation_id = Some(call.call_id);
        env.reply_to = Some(self.keys.tool_replies());
        // The calling turn's trace: a worker that reads it joins the trace.
        env.trace = agentd_observe::telemetry::current();
        let bytes = encode_envelope(&env)?;
        redis::cmd("XADD")
            .arg(&stream)
            .arg("MAXLEN")
            .arg("~")
            .arg(TOOL_STREAM_MAXLEN)
            .arg("*")
            .arg("m")
            .arg(bytes)
            .query_async::<String>(&mut con)
            .await
            .map_err(be)?;
        Ok(())
    }

    async fn settle(&self) -> Result<(), AgentdError> {
        self.settle_drained().await
    }

    async fn call(&self, env: Envelope, timeout: Duration) -> Result<Reply, AgentdError> {
        self.call_owner(env, timeout).await
    }

    async fn forward(&self, env: &Envelope) -> Result<(), AgentdError> {
        let target = partition_target(env)?;
        let stream = self.keys.partition_key(self.partition_of(target));
        let bytes = encode_envelope(env)?;
        let mut con = self.con.clone();
        if self.known.exists(target) {
            // Seen to exist a moment ago (see `known`): appended without the check.
            redis::cmd("XADD")
                .arg(&*stream)
                .arg("*")
                .arg("m")
                .arg(bytes)
                .query_async::<String>(&mut con)
                .await
                .map_err(be)?;
            return Ok(());
        }
        let appended: i64 = self
            .scripts
            .forward
            .key(&*stream)
            .key(self.keys.agent(target))
            .arg(bytes)
            .invoke_async(&mut con)
            .await
            .map_err(be)?;
        if appended == 0 {
            return Err(AgentdError::agent_not_found(target));
        }
        self.known.saw(target);
        Ok(())
    }

    fn deleted(&self, agent_id: &str) {
        self.known.forget(agent_id);
    }
}
