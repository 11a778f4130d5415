//! Redis key names, in one place. `{…}` is a Redis Cluster hash tag: every key of one agent
//! shares the slot of `{<agent id>}`, so one Lua script can update them atomically.

/// Builds the keys of one namespace.
#[derive(Debug, Clone)]
pub struct Keys {
    ns: String,
}

impl Keys {
    /// Keys under namespace `ns` (default `agentd`).
    pub fn new(ns: &str) -> Self {
        Keys { ns: ns.to_string() }
    }

    /// The namespace.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// The agent record (hash).
    pub fn agent(&self, id: &str) -> String {
        format!("{}:agent:{{{id}}}", self.ns)
    }

    /// A per-agent key `<ns>:agent:{<id>}:<suffix>`.
    pub fn agent_part(&self, id: &str, suffix: &str) -> String {
        format!("{}:agent:{{{id}}}:{suffix}", self.ns)
    }

    /// The A2A tasks of a context agent (hash: task id → the A2A layer's encoding).
    pub fn a2a_tasks(&self, id: &str) -> String {
        self.agent_part(id, "a2atasks")
    }

    /// Every per-agent key, for deletion.
    pub fn all_of_agent(&self, id: &str) -> Vec<String> {
        let mut keys = vec![self.agent(id)];
        for s in AGENT_PARTS {
            keys.push(self.agent_part(id, s));
        }
        keys
    }

    /// Roots by creation time (sorted set).
    pub fn roots(&self) -> String {
        format!("{}:roots", self.ns)
    }

    /// The command stream other services write to.
    pub fn commands(&self) -> String {
        format!("{}:commands", self.ns)
    }

    /// The event stream.
    pub fn events(&self) -> String {
        format!("{}:events", self.ns)
    }

    /// The stream of text deltas (answers being streamed), short and apart from the events.
    pub fn deltas(&self) -> String {
        format!("{}:deltas", self.ns)
    }

    /// The dead-letter stream.
    pub fn dead(&self) -> String {
        format!("{}:dead", self.ns)
    }

    /// Live processes (sorted set: process id → heartbeat ms).
    pub fn members(&self) -> String {
        format!("{}:members", self.ns)
    }

    /// The inbox stream of partition `k`.
    pub fn partition(&self, k: u32) -> String {
        format!("{}:p:{{{k}}}", self.ns)
    }

    /// Where the answers to the calls process `process_id` hands to other processes arrive
    /// (see `Transport::call`).
    pub fn replies(&self, process_id: &str) -> String {
        format!("{}{{{process_id}}}", self.replies_prefix())
    }

    /// What every process's reply stream key starts with.
    pub fn replies_prefix(&self) -> String {
        format!("{}:replies:", self.ns)
    }

    /// The rate-limit gate of model provider `provider`: when it opens (ms since the epoch),
    /// expiring then.
    pub fn provider_gate(&self, provider: &str) -> String {
        format!("{}:ratelimit:{provider}", self.ns)
    }

    /// Tool calls of service tools by call id (hash: id → JSON record).
    pub fn tool_calls(&self) -> String {
        format!("{}:{{tool_calls}}", self.ns)
    }

    /// The status of each tool call (hash: id → status), beside [`Self::tool_calls`] in one
    /// slot, so one script checks and closes a call.
    pub fn tool_call_status(&self) -> String {
        format!("{}:{{tool_calls}}:status", self.ns)
    }

    /// The stream workers of service tool `tool` read its calls from (consumer group
    /// `workers`).
    pub fn tool_stream(&self, tool: &str) -> String {
        format!("{}:tools:{tool}", self.ns)
    }

    /// The stream workers answer service calls on, read by every process.
    pub fn tool_replies(&self) -> String {
        format!("{}:tool_replies", self.ns)
    }

    /// The lease of partition `k`.
    pub fn lease(&self, k: u32) -> String {
        format!("{}:lease:{{{k}}}", self.ns)
    }
}

/// Suffixes of the per-agent keys besides the record.
pub const AGENT_PARTS: [&str; 12] = [
    "thread",
    "eids",
    "children",
    "dependents",
    "childseq",
    "workers",
    "inbox",
    "inboxdata",
    "seen",
    "seenseq",
    "checkpoints",
    "a2atasks",
];
