//! The transport port: how envelopes reach agents that live in another process.

use agentd_proto::{AgentdError, Envelope, ErrorCode, Reply};
use async_trait::async_trait;

/// How envelopes reach agents that live in another process (Redis partition streams). The
/// ChannelRouter asks it first; without a transport every agent is local.
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    /// Whether this process delivers to `agent_id` itself (it owns the agent's partition and
    /// has drained what was queued for it before).
    fn is_local(&self, agent_id: &str) -> bool;
    /// Whether this process owns `agent_id`'s partition (even while still draining it).
    fn owns(&self, agent_id: &str) -> bool {
        self.is_local(agent_id)
    }
    /// Whether this process may queue deliveries for `agent_id` now: it owns the agent's
    /// partition and still holds its lease. An agent asks right before its durable push: a
    /// delivery that waited in its mailbox while the process stalled past its lease must not
    /// be queued here once the partition's next owner may be taking the same entries.
    fn may_deliver(&self, agent_id: &str) -> bool {
        self.owns(agent_id)
    }
    /// Whether this process has fenced itself off `agent_id`'s partition: it owns it but has
    /// not renewed its lease in time (it cannot reach Redis, or the partition's node is failing
    /// over), so another process may take the partition over soon. A turn of the agent stops at
    /// its next step (no model call, no tool run) and runs again once the lease is renewed.
    fn fenced(&self, agent_id: &str) -> bool {
        let _ = agent_id;
        false
    }
    /// Whether entry `entry`, read from `agent_id`'s partition stream, may be taken now:
    /// [`Self::may_deliver`], and the partition's ownership has not lapsed since the entry was
    /// read (its older entries left pending are delivered again first, so this one must wait
    /// for its own turn after them).
    fn may_take(&self, agent_id: &str, entry: &super::StreamEntry) -> bool {
        let _ = entry;
        self.may_deliver(agent_id)
    }
    /// Hands `env` to the process that owns its receiver; returns once it is durably queued.
    /// `agent_not_found` (nothing queued) if the receiver does not exist: senders need not look
    /// it up first. (A receiver another process deleted a moment ago may not be noticed: its
    /// owner then dead-letters the envelope, as one that arrived just before the delete.)
    async fn forward(&self, env: &Envelope) -> Result<(), AgentdError>;
    /// Agent `agent_id` was deleted through this process: what the transport remembers of it
    /// goes (a forward to it is refused at once from now on).
    fn deleted(&self, agent_id: &str) {
        let _ = agent_id;
    }
    /// Runs a command in the process that owns the agent `env` is addressed to and answers its
    /// reply. Calls that act on a live agent (a tool run as it, its budget, environment,
    /// checkpoints, answers it waits for) must run where the agent lives: a second copy of the
    /// agent elsewhere would overwrite the first one's state, and replies to its tool calls go
    /// to its owner. `unavailable` if no answer came within `timeout` (the owner may have
    /// died: a caller may retry) or if this transport cannot reach other processes.
    async fn call(
        &self,
        env: Envelope,
        timeout: std::time::Duration,
    ) -> Result<Reply, AgentdError> {
        let _ = (env, timeout);
        Err(AgentdError::new(
            ErrorCode::Unavailable,
            "this transport cannot run calls in other processes",
        ))
    }
    /// The durable stream an envelope for `agent_id` is appended to, read by whichever process
    /// owns the agent, this one included (see [`StoreWrite::Forward`](super::StoreWrite::Forward)); `None` if this
    /// transport has no such stream.
    fn stream_for(&self, agent_id: &str) -> Option<String> {
        let _ = agent_id;
        None
    }
    /// Ends the drain of owned partitions that hold nothing undelivered any more. The
    /// ChannelRouter calls it between two routed messages (see `SettleTransport`), so nothing
    /// it forwarded earlier can still wait in a stream when the partition's agents start to
    /// get direct deliveries: that would put a newer message before an older one.
    async fn settle(&self) -> Result<(), AgentdError> {
        Ok(())
    }
    /// When the rate-limit gate of `provider`, shared by the processes of a deployment, opens
    /// (ms since the epoch), if another process closed it; `None` if it is open or this
    /// transport shares none.
    async fn provider_gate(&self, provider: &str) -> Option<u64> {
        let _ = provider;
        None
    }
    /// Closes the shared gate of `provider` until `until_ms` (best effort: a failure to share
    /// it is logged, the local gate holds either way).
    async fn close_provider_gate(&self, provider: &str, until_ms: u64) {
        let _ = (provider, until_ms);
    }

    /// Hands call `call` of a service tool to the tool's workers (with Redis: an entry of
    /// `<ns>:tools:<name>`, whose consumer group `workers` this creates; answers come on
    /// `<ns>:tool_replies`). Delivery is at least once: workers de-duplicate by the call id.
    async fn publish_tool_call(
        &self,
        call: &agentd_proto::ToolCallRecord,
    ) -> Result<(), AgentdError>;
}
