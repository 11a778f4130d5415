//! `agentd-bus`: how events leave the actors.
//!
//! | module | what it holds |
//! |---|---|
//! | [`inproc`] | [`InProcessBus`]: a broadcast of events to in-process subscribers (SSE, tests) |
//!
//! The Redis streams bus (partitions, leases, the command stream) arrives with the Redis issue
//! and implements the same `EventSink` port.

pub mod inproc;

pub use inproc::InProcessBus;
