//! `agentd-proto`: the wire vocabulary every agentd component and every outside client shares.
//!
//! Nothing here does I/O, so any crate (and any language, through MessagePack maps) can depend on
//! these shapes without pulling in actors, Redis or HTTP.
//!
//! | module | what it holds |
//! |---|---|
//! | [`error`] | [`ErrorCode`] (stable snake_case codes) and [`AgentdError`] |
//! | [`address`] | [`Address`]: who sends and who receives an envelope |
//! | [`envelope`] | [`Envelope`] and [`Item`], the unit that travels between actors and processes |
//! | [`command`] | [`Command`]: what other services may ask of agentd |
//! | [`inbox`] | [`InboxItem`]: what an agent handles in arrival order |
//! | [`control`] | [`Control`]: lifecycle controls |
//! | [`event`] | [`Event`]: what agentd tells observers |
//! | [`status`] | [`AgentStatus`] and its one transition table |
//! | [`checkpoint`] | [`Checkpoint`]: a saved state an agent can be restored to |
//! | [`checkpoint_reason`] | [`CheckpointReason`]: why a checkpoint was taken (events name it) |
//! | [`record`] | [`AgentRecord`] and the [`Channel`] descriptor of a thread |
//! | [`remote_a2a`] | [`RemoteA2aSession`]: the conversation with a remote A2A agent a record keeps |
//! | [`thread`] | [`ThreadEntry`], [`Role`], [`ToolCall`] |
//! | [`conversation`] | the rule that pairs each tool call with one result, and what keeps it |
//! | [`tool_call`] | [`ToolCallRecord`]: a tool call answered outside a turn (service tools) |
//! | [`time`] | RFC 3339 timestamps beside the millisecond ones |
//! | [`usage`] | [`Usage`] in four kinds, [`Price`] tables and [`Budget`]s |
//! | [`limits`] | [`InputLimits`]: titles, prompts and messages callers may hand agentd |
//! | [`markers`] | protocol markers in agent output, parsed strictly |
//! | [`manage`] | arguments and options of the `Manage` tool (seed 000) |
//! | [`output`] | [`Output`]: what a child produces for its parent |
//! | [`view`] | [`Inspection`], [`AgentTrees`], [`WorkQueue`]: what agentd answers about agents |
//! | [`strict`] | reading requests strictly: a nested object only from a map, never from a sequence |
//! | [`codec`] | MessagePack encode/decode with size and version checks |
//! | [`trace`] | [`TraceContext`]: W3C trace context, carried by envelopes and kept by records |
//! | [`ids`] | id generation: v7 for new things, v8 (XXH3-128) for derived (replay-stable) ids |

pub mod address;
pub mod checkpoint;
pub mod checkpoint_reason;
pub mod codec;
pub mod command;
pub mod control;
pub mod conversation;
pub mod envelope;
pub mod error;
pub mod event;
pub mod ids;
pub mod inbox;
pub mod limits;
pub mod manage;
pub mod markers;
pub mod output;
pub mod record;
pub mod remote_a2a;
pub mod status;
pub mod strict;
pub mod thread;
pub mod time;
pub mod tool_call;
pub mod trace;
pub mod usage;
pub mod view;

pub use address::Address;
pub use checkpoint::Checkpoint;
pub use checkpoint_reason::CheckpointReason;
pub use codec::{DEFAULT_MAX_ENVELOPE_BYTES, decode_envelope, encode_envelope};
pub use command::{Command, Reply, SpawnRequest};
pub use control::{Control, ItemCancel};
pub use envelope::{Envelope, Item, PROTOCOL_VERSION};
pub use error::{AgentdError, ErrorCode};
pub use event::{CompactionTrigger, DependencyOutcome, Event, OnDependencyFailure};
pub use inbox::InboxItem;
pub use limits::InputLimits;
pub use manage::{AsyncForward, ManageCommand, ManageMode, ManageOptions, ManageRequest};
pub use markers::Marker;
pub use output::Output;
pub use record::{
    AgentCli, AgentId, AgentRecord, Channel, ManageChannel, SharedName, prompt_preview,
};
pub use remote_a2a::RemoteA2aSession;
pub use status::AgentStatus;
pub use thread::{Role, ThreadEntry, ToolCall};
pub use tool_call::{
    ApprovalDecision, ToolAnswer, ToolAnswerError, ToolCallClose, ToolCallItem, ToolCallRecord,
    ToolCallStatus, ToolCallView, ToolKind,
};
pub use trace::TraceContext;
pub use usage::{Budget, Price, Priority, Usage};
pub use view::{
    AgentList, AgentSummary, AgentTrees, AgentView, Inspection, LiveState, QueueState, QueueTask,
    TreeNode, WorkQueue,
};
