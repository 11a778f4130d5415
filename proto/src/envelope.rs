//! The envelope: the one unit that travels between actors, processes and services.

use crate::address::Address;
use crate::command::{Command, Reply};
use crate::control::Control;
use crate::event::Event;
use crate::inbox::InboxItem;
use crate::output::Output;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The protocol version this build writes and accepts.
pub const PROTOCOL_VERSION: u16 = 1;

/// What an envelope carries, tagged by `kind`; the inner enums are tagged by `type`, so a client
/// in any language builds one as a plain map: `{"kind": "inbox", "type": "reset"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Item {
    /// A request from a service.
    Command(Command),
    /// Work for an agent.
    Inbox(InboxItem),
    /// A lifecycle control.
    Control(Control),
    /// Something that happened.
    Event(Event),
    /// The answer to a command.
    Reply(Reply),
    /// A child's output for its parent's router (crosses processes when they differ).
    Output(Output),
    /// A call of a service tool, for its workers (on `<ns>:tools:<name>`); they answer with a
    /// `reply` whose `correlation_id` is the call's id.
    ToolCall(crate::tool_call::ToolCallItem),
}

/// Addressing, identity and causality around one [`Item`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Protocol version ([`PROTOCOL_VERSION`]).
    pub v: u16,
    /// Unique id (v7 for new messages, derived v8 for turn outputs); the de-duplication key.
    pub id: Uuid,
    /// The conversation this belongs to (the first envelope's id).
    #[serde(default)]
    pub correlation_id: Option<Uuid>,
    /// The envelope that caused this one.
    #[serde(default)]
    pub causation_id: Option<Uuid>,
    /// Sender.
    pub from: Address,
    /// Receiver.
    pub to: Address,
    /// Stream (or channel) the reply goes to, if one is wanted.
    #[serde(default)]
    pub reply_to: Option<String>,
    /// Send time, ms since the epoch.
    pub sent_at: u64,
    /// Delivery attempt, 1 on first send.
    #[serde(default = "one")]
    pub attempt: u32,
    /// The payload.
    pub item: Item,
    /// The W3C trace context of the span that sent it (a tool call's, a turn's, an HTTP
    /// request's): the work it causes joins that trace. Optional within version 1: older
    /// readers ignore it, and an envelope without one (or with one this build cannot read)
    /// starts a trace of its own.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::trace::lenient"
    )]
    pub trace: Option<crate::trace::TraceContext>,
}

fn one() -> u32 {
    1
}

impl Envelope {
    /// A new envelope with a fresh v7 id, attempt 1, no correlation.
    pub fn new(from: Address, to: Address, item: Item, sent_at: u64) -> Self {
        Envelope {
            v: PROTOCOL_VERSION,
            id: crate::ids::new_id(),
            correlation_id: None,
            causation_id: None,
            from,
            to,
            reply_to: None,
            sent_at,
            attempt: 1,
            item,
            trace: None,
        }
    }

    /// Whether this is the first send of an envelope its sender made fresh ([`Envelope::new`]
    /// gives every envelope a new v7 id and attempt 1): no copy of it can have reached its
    /// receiver before. A receiver may then take it without looking its id up among what it
    /// took before. A sender that may send one id twice (a resend under an id the caller
    /// chose, a retry) sends it with another id version or an `attempt` above 1, and the
    /// receiver de-duplicates it.
    pub fn is_first_send(&self) -> bool {
        self.attempt == 1 && self.id.get_version_num() == 7
    }

    /// A new envelope caused by `cause`: same correlation, `causation_id = cause.id`.
    pub fn caused_by(
        cause: &Envelope,
        from: Address,
        to: Address,
        item: Item,
        sent_at: u64,
    ) -> Self {
        let mut env = Envelope::new(from, to, item, sent_at);
        env.correlation_id = Some(cause.correlation_id.unwrap_or(cause.id));
        env.causation_id = Some(cause.id);
        env.trace = cause.trace;
        env
    }
}
