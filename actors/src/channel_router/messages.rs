//! The messages the [`ChannelRouter`](super::ChannelRouter) handles.

use crate::agent::messages::Delivery;
use actix::prelude::*;
use agentd_proto::{AgentdError, Envelope};

/// Route an envelope to its receiver, activating a persisted agent if needed (fire and
/// forget: a failure is logged; [`RouteAcked`] answers).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Route(pub Envelope);

/// Like [`Route`], but answers only once the receiver has the item in its durable inbox
/// (`Ok(false)`: it was a duplicate). Transports acknowledge their stream entries after it.
#[derive(Message, Debug)]
#[rtype(result = "Result<bool, AgentdError>")]
pub struct RouteAcked {
    /// The envelope.
    pub env: Envelope,
    /// Sent by a request bounded by a deadline: dropped if its sender stops waiting first
    /// (see `Delivery::abandonable`).
    pub abandonable: bool,
}

/// [`RouteAcked`] for an entry a transport read from a partition stream this process owns: it
/// is delivered here even while the partition is still being drained after a takeover.
#[derive(Message, Debug)]
#[rtype(result = "Result<bool, AgentdError>")]
pub struct RouteFromStream {
    /// The envelope.
    pub env: Envelope,
    /// Its entry ([`Delivery::entry`]).
    pub entry: Option<std::sync::Arc<crate::ports::StreamEntry>>,
}

/// Ends the router when the system shuts down. The router holds the system's handle, which holds
/// the router's address, so it would never end by itself, and with it what the handle owns (the
/// store, the directory).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct StopRouter;

/// A [`Delivery`] a stopping agent did not take, back to the router, which routes it again.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Refused(pub Delivery);

/// A child's output that arrived through a partition stream (`Item::Output` envelope, from
/// another process or from a child of this one): the child's record is read from the store
/// (once per child) and the output handed to the local ParentRouter; answered once that
/// router has handled it.
#[derive(Message, Debug)]
#[rtype(result = "Result<(), AgentdError>")]
pub struct RemoteOutput(pub Envelope);

/// Asks the transport to end the drain of partitions it has emptied
/// ([`crate::ports::Transport::settle`]). Handled atomically by the router (no envelope is
/// routed meanwhile), and only when no lane of a draining agent holds an envelope: everything
/// forwarded to those agents before is in their stream by then, so the check cannot miss it.
#[derive(Message, Debug)]
#[rtype(result = "Result<(), AgentdError>")]
pub struct SettleTransport;
