//! The inbound port: what a transport (the Redis bus: its partition readers, its command
//! stream, its tool replies, its lease rounds) asks of the agent system of its process.
//!
//! The other ports are what the actors call on the outside; this one is the other way round,
//! so that an adapter that feeds the actors compiles against it and `agentd-proto`, not
//! against all of `agentd-actors`. `agentd_actors::AgentSystem` implements it; the service
//! hands the bus an `Arc<dyn Inbound>` of its system. Tests may hand a fake.
//!
//! What the port leaves out: a service tool call's record (to tell which agent an answer from a
//! worker is for) is read from the store's [`ToolCalls`](crate::ToolCalls), which the service
//! gives the reader of tool replies at construction; the agent system adds nothing to that
//! read, and the store is a port already.

use crate::StreamEntry;
use agentd_proto::{AgentdError, Command, Control, Envelope};
use async_trait::async_trait;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use uuid::Uuid;

/// The answer of [`Inbound::route_from_stream`]: a future that owns what it needs (no borrow of
/// the system), made when the envelope was queued.
pub type Routed = Pin<Box<dyn Future<Output = Result<bool, AgentdError>> + Send>>;

/// Which agents [`Inbound::passivate`] and [`Inbound::recover_where`] act on: those whose id it
/// holds for (a transport selects the agents of some partitions).
pub type AgentFilter = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// What a transport asks of the agent system of its process.
///
/// Invariants a transport relies on:
/// - An envelope handed to [`Self::route_from_stream`] is queued at the router when the method
///   is called, not when its answer is polled: envelopes handed over one after another keep
///   their order (a reader hands a whole batch over before it waits for any answer).
/// - A stream entry is acknowledged only after its item is in the receiver's durable inbox
///   (the answer of [`Self::route_from_stream`] is `Ok`), unless the receiver holds it in its
///   entry ([`StreamEntry::is_taken`] once answered): then the agent's own write that records
///   the item's end acknowledges it, and the transport leaves it pending.
#[async_trait]
pub trait Inbound: Send + Sync + 'static {
    /// Hands `env`, read from a partition stream this process owns, to its receiver (it is
    /// delivered here even while that partition still drains after a takeover). The future
    /// answers once the item is in the receiver's durable inbox (`Ok(false)`: a duplicate), or
    /// held by its agent in its stream entry `entry` ([`StreamEntry::is_taken`] once
    /// answered), so a transport acknowledges its entry after it, unless an agent holds it.
    /// The envelope is queued at the router when this is called, not when the future is
    /// polled: envelopes handed over one after another keep their order.
    fn route_from_stream(&self, env: Envelope, entry: Option<Arc<StreamEntry>>) -> Routed;

    /// Executes a command from another service and answers its result as JSON. A command that
    /// acts on a live agent whose partition another process owns runs there, and its answer
    /// comes back from there. With `request` (a command of the command stream, which may be
    /// read again after a crash before it was acknowledged), what the command adds takes an id
    /// derived from the request's — a message, a reset or a compaction is queued once, and a
    /// spawn without an idempotency key takes the request's id as its key — so a second
    /// delivery repeats none of it.
    async fn execute(&self, cmd: Command, request: Option<Uuid>) -> Result<Value, AgentdError>;

    /// Takes a child's output that arrived through a partition stream (an `Item::Output`
    /// envelope) to its parent's router here, or on to the process that owns the parent;
    /// answers once that router has handled it.
    async fn take_output(&self, env: Envelope) -> Result<(), AgentdError>;

    /// Asks the transport, between two routed envelopes, to end the drain of the partitions it
    /// has emptied ([`Transport::settle`](crate::Transport::settle)): the router calls it back
    /// once everything it was handed before is routed.
    async fn settle_transport(&self) -> Result<(), AgentdError>;

    /// Applies lifecycle control `control` to `agent_id` (cascading where the design says so):
    /// what a partition entry carries that the router does not take as it is (`close`,
    /// `delete`).
    async fn control(&self, agent_id: &str, control: Control) -> Result<(), AgentdError>;

    /// Stops the live agents for which `filter` holds (their partition moved to another
    /// process); answers how many were stopped. Their durable inboxes stay.
    async fn passivate(&self, filter: AgentFilter) -> usize;

    /// Re-activates the agents `filter` selects that had work (running, queued, waiting for a
    /// rate limit, a service call, a review, or their dependencies, or with a pending inbox):
    /// a transport calls it for the partitions it has just taken, because an agent stopped
    /// when its partition moved (or whose previous owner died) keeps its acknowledged work
    /// only in its durable inbox, and nothing else would activate it again until another
    /// message arrives. Answers how many agents were activated.
    async fn recover_where(&self, filter: AgentFilter) -> Result<usize, AgentdError>;
}
