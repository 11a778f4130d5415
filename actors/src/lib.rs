//! `agentd-actors`: the actors of agentd, and (re-exported from `agentd-ports`) the ports they
//! talk through.
//!
//! The modules, floor by floor from the top (a module names only its own floor or lower ones;
//! `tests/tests/suite/architecture.rs` checks it, `docs/architecture.md` draws it):
//!
//! | floor | module | what it holds |
//! |---|---|---|
//! | 9 | [`system`] | [`AgentSystem`]: the facade services and tests use |
//! | 9 | `testing` | helpers of the unit tests (records as spawns make them; built for tests only) |
//! | 8 | `ops` | operations shared by the tools and the facade; implements `tools::Agents` |
//! | 7 | `agent` | `AgentActor`: one agent's activity, inbox queue, write-behind buffer, turns |
//! | 7 | `supervisor` | `Supervisor`: the live-agent directory, spawn, activation, cascades; `SystemHandle` and the sends straight to a live actor |
//! | 7 | `channel_router` | `ChannelRouter`: where every envelope and child output goes |
//! | 7 | `parent_router` | `ParentRouter`: worker aliases, sync waits, forwarding to the parent |
//! | 6 | `turn` | one turn: model call → tools → repeat; reset and compaction |
//! | 5 | `tools` | how tools run (one file per built-in tool), visibility, schemas; the `Agents` port |
//! | 4 | `messages` | the messages several floors send: spawn, Manage calls, child outputs |
//! | 4 | `scheduler` | `Scheduler`: turn slots by priority under concurrency limits |
//! | 4 | `checkpoints` | taking checkpoints and planning restores (seed 001) |
//! | 4 | `lineage`, `context_files`, `depends_on` | who may act on whom; a spawn's first message with its files; the rules of `depends_on` |
//! | 3 | [`deps`] | the ports, config and tool catalogue the actors of a process share |
//! | 2 | [`catalogue`] | what tools exist: built-in, configured and MCP tools, the catalogue's versions |
//! | 1 | [`config`] | limits, agent types (validated titles), prices, prompts: plain data |
//! | 1 | [`ports`] | `ThreadStore`, `ModelClient`, `EventSink`, `Transport`, `Clock`: what the actors need from outside, and `Inbound`, what a transport asks of them (the `agentd-ports` crate, re-exported) |
//! | 1 | `rate_gate`, `tree_spend` | providers' rate limits; what each agent tree has spent |
//! | 0 | [`hashing`], `errors` | hash maps (`agentd-ports`'s), actix/serde failures as `AgentdError`s |
//! | 0 | [`failpoints`] | where a test may stop the process as `kill -9` would (the `failpoints` feature; the command stream's is the bus's own) |
//! | 0 | [`deadline`] | the deadline of the request being served, where its caller stops waiting |
//! | — | the root | re-exports: [`AgentSystem`], and the names of `agentd-ports` the service and the tests use everywhere (below) |
//!
//! Beside them, the crates the actors share with the adapters, named directly: `agentd-ports`
//! (through [`ports`]) and `agentd-observe` (`agentd_observe::telemetry`: the trace context of
//! the work at hand, GenAI spans and metrics; `agentd_observe::metrics`: the metrics registry).
//! The root re-exports the port names the service and the tests use everywhere (the store's
//! concerns, `ModelClient`, `Clock`, `SystemClock`, `ManualClock`, the MCP names' rules, …);
//! `agentd-observe` is not re-exported: its users depend on it.
//!
//! "Seed 000" … "seed 004" in comments name the reference documents summarised in
//! `docs/reference.md`; `docs/architecture.md` maps this crate and states its invariants.

mod agent;
pub mod catalogue;
mod channel_router;
mod checkpoints;
pub mod config;
mod context_files;
pub mod deadline;
mod depends_on;
pub mod deps;
mod errors;
pub mod failpoints;
pub mod hashing;
mod lineage;
mod messages;
mod ops;
mod parent_router;
pub mod ports;
mod rate_gate;
mod scheduler;
mod supervisor;
pub mod system;
#[cfg(test)]
mod testing;
mod tools;
mod tree_spend;
mod turn;

pub use catalogue::{
    Approval, ConfiguredRun, ConfiguredTool, Secret, ToolCatalogue, ToolPattern, check_type_tools,
};
pub use config::{AgentType, AgentTypes, ContextWindow, Limits, ProviderRates, RuntimeConfig};
pub use deps::Deps;
pub use hashing::{FastHashMap, FastHashSet, fnv1a64};
pub use ports::{
    AgentRecords, AgentValues, AnswerObserver, Batches, Checkpoints, Claim, ClaimEnd, CliRun,
    CliStep, CliTools, Clock, DEDUP_WINDOW, EventSink, ExternalClaim, ExternalIds, ExternalKey,
    IdempotencyClaims, Inbound, Inboxes, ManualClock, McpCallResult, McpServerStatus, McpToolDef,
    McpTools, ModelCapabilities, ModelClient, ModelError, ModelRequest, ModelResponse, Purpose,
    Pushed, Retention, Run, RunOrigin, RunOutcome, RunState, Runs, StoreError, StoreErrorKind,
    StoreKind, StoreResult, StoreWrite, StoredRun, SystemClock, ThreadEntries, ThreadStore,
    Threads, ToolCallClosing, ToolCalls, ToolSpec, Transport, Tree, WebhookCall, WebhookClient,
    WebhookError, WorkerAlias, is_valid_exposed_name, is_valid_server_name, split_exposed,
};
pub use system::AgentSystem;
/// The token a [`ModelRequest`] is cancelled by (re-exported so backends and tests name one
/// version of it).
pub use tokio_util::sync::CancellationToken;
