//! The Manage tool's messages to a parent's router: [`ManageSend`] routes a message to a
//! worker's child thread; a sync call then waits for the [`WaitResult`] and may give up with
//! [`CancelWait`], sent to the [`Wait`]'s own recipient (the tool never names the router's type).

use actix::WeakRecipient;
use actix::prelude::*;
use agentd_proto::{AgentRecord, AgentdError, ManageOptions};
use std::sync::Arc;
use tokio::sync::oneshot;
use uuid::Uuid;

/// The outcome of a sync Manage wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitResult {
    /// `ok`, `failed` or `timeout`.
    pub status: &'static str,
    /// Assistant messages collected.
    pub messages: Vec<String>,
    /// The child's error, for `failed`.
    pub error: Option<String>,
}

/// What a Manage `send_message` did.
#[derive(Debug)]
pub struct Dispatched {
    /// The child agent (= child thread).
    pub child_id: String,
    /// Whether the child was created by this call.
    pub created: bool,
    /// In sync mode: the wait, whose result arrives later.
    pub wait: Option<Wait>,
}

/// A sync Manage call's wait on its worker's answer.
#[derive(Debug)]
pub struct Wait {
    /// The wait's id at its router.
    pub id: u64,
    /// Where the result arrives.
    pub result: oneshot::Receiver<WaitResult>,
    /// Who gives the wait up (the router that holds it).
    pub cancel: Arc<WeakRecipient<CancelWait>>,
}

/// Route a Manage message to a worker's child thread (get-or-create by alias).
#[derive(Message, Debug)]
#[rtype(result = "Result<Dispatched, AgentdError>")]
pub struct ManageSend {
    /// The parent (caller) record.
    pub parent: Arc<AgentRecord>,
    /// Worker agent type name.
    pub worker_type: String,
    /// Trimmed worker title.
    pub worker_title: String,
    /// Thread alias.
    pub alias: String,
    /// The message.
    pub message: String,
    /// Options in force for this call.
    pub options: ManageOptions,
    /// The envelope/turn that caused this call.
    pub cause: Uuid,
    /// The message's envelope id, derived from the tool call's: a call run again sends the
    /// same envelope, which the worker takes once.
    pub message_id: Uuid,
    /// The call may have run before (its turn runs again after a crash or a retry): the
    /// message is sent as a resend, and a sync wait first takes what the worker already
    /// answered to it (the parent's router reads the worker's thread).
    pub again: bool,
    /// The trace context of the call (its `execute_tool` span, or its turn's): the worker's
    /// turn is its child.
    pub trace: Option<agentd_proto::TraceContext>,
}

/// Give up a sync wait; answers the messages collected so far, or `None` if it already ended.
#[derive(Message, Debug)]
#[rtype(result = "Option<Vec<String>>")]
pub struct CancelWait(pub u64);
