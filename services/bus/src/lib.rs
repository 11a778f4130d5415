//! `agentd-bus`: how envelopes and events cross process boundaries.
//!
//! | module | what it holds |
//! |---|---|
//! | `inproc` | [`InProcessBus`]: a broadcast of events to in-process subscribers (SSE, tests) |
//! | `redis_bus` | [`RedisBus`]: partition streams, leases, failover; the `Transport` of the ChannelRouter |
//! | `commands` | [`CommandConsumer`]: the `<ns>:commands` stream other services write to |
//! | `redis_events` | [`RedisEvents`]: events to `<ns>:events`; [`Fanout`] to several sinks; [`RedisEventsTail`] back into an [`InProcessBus`] |
//! | `dead` | [`DeadLetters`]: the `<ns>:dead` stream |
//! | `streams` | what every stream reader shares: the consumer group, blocking connections, entry decoding, reconnection backoff |
//!
//! Other crates use the items re-exported here; the modules are the crate's own.

mod commands;
mod dead;
mod inproc;
mod redis_bus;
mod redis_events;
mod streams;
mod tool_replies;

pub use commands::{CommandConsumer, CommandLimits};
pub use dead::DeadLetters;
pub use inproc::InProcessBus;
pub use redis_bus::{RedisBus, RedisBusConfig};
pub use redis_events::{Fanout, RedisEvents, RedisEventsTail};
pub use tool_replies::ToolReplies;
