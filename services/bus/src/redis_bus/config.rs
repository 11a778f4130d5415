//! The settings of the Redis bus.

/// Settings of the Redis bus.
#[derive(Debug, Clone)]
pub struct RedisBusConfig {
    /// Where Redis is: one server, or a cluster's seed nodes.
    pub target: agentd_store::RedisTarget,
    /// Key namespace.
    pub namespace: String,
    /// Number of partition streams.
    pub partitions: u32,
    /// Lease time of a partition, ms.
    pub lease_ms: u64,
    /// Entries read per `XREADGROUP`.
    pub batch: usize,
    /// Largest envelope accepted, bytes.
    pub max_envelope_bytes: usize,
    /// Approximate cap of `<ns>:dead`.
    pub dead_maxlen: usize,
    /// Deliveries of one entry that failed with a store error (Redis answering, the write
    /// failing) before the entry is dead-lettered instead of holding up its partition. An
    /// outage does not count: while Redis is unreachable, nothing is delivered.
    pub max_deliveries: u64,
    /// How long an agent may hold an entry it read before adopting it into its durable inbox,
    /// ms (see `agentd_ports::StreamEntry`); 0: no entry is offered to be held.
    pub hold_ms: u64,
    /// This process's id (consumer name and lease value).
    pub process_id: String,
}
