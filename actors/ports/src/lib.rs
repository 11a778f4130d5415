//! `agentd-ports`: the ports the actors talk through, in a crate of their own. Actors know
//! storage, models, time and event transport only through these traits, so the same actors run
//! on memory, redb or Redis, and on a scripted or a real model; and an adapter (the stores, the
//! bus, the model clients, the MCP client) compiles against these traits, `agentd-proto` and
//! `agentd-observe`, not against the actors. One port goes the other way: [`Inbound`], what a
//! transport asks of the agent system (the actors implement it). `agentd-actors` re-exports
//! all of it (`agentd_actors::ports`, and the names its users know at its root).
//!
//! | module | port |
//! |---|---|
//! | [`store`] | `ThreadStore`: the store's concerns (records, threads, tree, inboxes, batches, …), one trait each, and its typed `StoreError` |
//! | [`model`] | `ModelClient`: one model call in, one answer out |
//! | [`transport`] | `Transport`: envelopes for agents of other processes |
//! | [`inbound`] | `Inbound`: what a transport asks of the agent system (route what it read, run commands, take over and give up agents) |
//! | [`stream_entry`] | `StreamEntry`: a partition stream entry delivered to an agent, which may hold it instead of pushing it |
//! | [`events`] | `EventSink`: where events go |
//! | [`mcp`] | `McpTools`: the tools of the configured MCP servers; the names they are exposed under (`mcp__<server>__<tool>`), which the catalogue and the MCP client both check |
//! | [`clock`] | `Clock`: time as a port (`SystemClock`, and `ManualClock` for tests) |
//! | [`webhook`] | `WebhookClient`: the calls of webhook tools |
//! | [`hashing`] | the hash maps of the per-message path and the stable hash that places agents (shared by the actors and the stores) |

pub mod hashing;
pub use hashing::{FastHashMap, FastHashSet, fnv1a64};
pub mod clock;
mod events;
mod inbound;
mod mcp;
mod model;
mod store;
mod stream_entry;
mod transport;
mod webhook;

pub use clock::{Clock, ManualClock, SharedClock, Sleep, SystemClock};
pub use events::EventSink;
pub use inbound::{AgentFilter, Inbound, Routed};
pub use mcp::{
    McpCallResult, McpServerStatus, McpToolDef, McpTools, PREFIX, SEPARATOR, is_valid_exposed_name,
    is_valid_server_name, split_exposed,
};
pub use model::{
    AnswerObserver, CliRun, CliStep, CliTools, ModelCapabilities, ModelClient, ModelError,
    ModelRequest, ModelResponse, Purpose, ThreadEntries, ToolSpec,
};
pub use store::{
    AgentRecords, AgentValues, Batches, Checkpoints, Claim, ClaimEnd, DEDUP_WINDOW, ExternalClaim,
    ExternalIds, ExternalKey, IdempotencyClaims, Inboxes, OUTCOME_PREFIX, Pushed, RUN_PREFIX,
    Retention, Run, RunOrigin, RunOutcome, RunState, Runs, StoreError, StoreErrorKind, StoreKind,
    StoreResult, StoreWrite, StoredRun, ThreadStore, Threads, ToolCallClosing, ToolCalls, Tree,
    WorkerAlias, forwards_not_taken, is_run_key, is_transient, outbox_not_kept,
};
pub use stream_entry::{EntryWatch, StreamEntry};
pub use transport::Transport;
pub use webhook::{WebhookCall, WebhookClient, WebhookError};
