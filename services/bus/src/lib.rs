//! `agentd-bus`: how envelopes and events cross process boundaries.
//!
//! An adapter of the ports: it compiles against `agentd-ports` (it implements `Transport` and
//! `EventSink`, and feeds the agent system through `Inbound`, an `Arc<dyn Inbound>` the
//! service hands each reader), `agentd-observe` (metrics, the trace context a command joins),
//! the store's Redis connection and `agentd-proto`, never against the actors.
//!
//! | module | what it holds |
//! |---|---|
//! | `inproc` | [`InProcessBus`]: a broadcast of events to in-process subscribers (SSE, tests) |
//! | `redis_bus` | [`RedisBus`]: partition streams, leases, failover; the `Transport` of the ChannelRouter |
//! | `commands` | [`CommandConsumer`]: the `<ns>:commands` stream other services write to |
//! | `event_log` | [`EventLog`]: the events `/v1/events` shows, with ids, the recent ones kept for clients that resume; [`LocalEvents`]: it and the in-process bus, as one process without Redis publishes |
//! | `redis_events` | [`RedisEvents`]: events to `<ns>:events`, text deltas to `<ns>:deltas`; [`Fanout`] to several sinks; [`RedisEventsTail`] back into an [`EventLog`] |
//! | `tool_replies` | [`ToolReplies`]: workers' answers to service tools' calls, on `<ns>:tool_replies` |
//! | `dead` | [`DeadLetters`]: the `<ns>:dead` stream |
//! | `streams` | what every stream reader shares: the consumer group and one process's reading in it (`GroupReader`, `ack`), entry decoding, reconnection backoff |
//! | `blocking` | connections of their own for blocking reads; on a Redis Cluster, one follows its slot's node through `MOVED`/`ASK`/`TRYAGAIN` |
//! | `failpoints` | `before-command-ack`: where a test may stop the process before a command's entry is acknowledged (the `failpoints` feature) |
//!
//! Other crates use the items re-exported here; the modules are the crate's own.

mod blocking;
mod commands;
mod dead;
mod event_log;
mod failpoints;
mod inproc;
mod redis_bus;
mod redis_events;
mod streams;
mod tool_replies;

pub use commands::{CommandConsumer, CommandLimits};
pub use dead::DeadLetters;
pub use event_log::{EventLog, LocalEvents, Logged, Replay};
pub use inproc::InProcessBus;
pub use redis_bus::{Readiness, RedisBus, RedisBusConfig};
pub use redis_events::{
    Backlog, CappedStream, Fanout, RedisEvents, RedisEventsTail, StreamPosition, backlog,
};
pub use tool_replies::ToolReplies;
