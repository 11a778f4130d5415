//! `agentd-actors`: the actors of agentd and the ports they talk through.
//!
//! | module | what it holds |
//! |---|---|
//! | [`system`] | [`AgentSystem`]: the facade services and tests use |
//! | [`ports`] | `ThreadStore`, `ModelClient`, `EventSink`, `Transport`: what the actors need from outside |
//! | [`clock`] | `Clock`, `SystemClock`, `ManualClock`: time as a port |
//! | [`config`] | limits, agent types (validated titles), prices, prompts |
//! | [`deps`] | the bundle of ports and config the actors of a process share |
//! | [`metrics`] | the process metrics registry (Prometheus text) |
//! | [`hashing`] | the fast hash maps and the partition hash |
//! | `handle` | `SystemHandle`: what every actor of a process holds, behind one pointer |
//! | `agent` | `AgentActor`: one agent's phase, inbox queue, write-behind buffer, turns |
//! | `turn` | one turn: model call → tools → repeat; reset and compaction |
//! | `tools` | the tool registry: built-in tools (one file each), MCP tools, the versioned catalogue, visibility |
//! | `supervisor` | `Supervisor`: the live-agent directory, spawn, activation, lifecycle cascades |
//! | `channel_router` | `ChannelRouter`: where every envelope and child output goes |
//! | `parent_router` | `ParentRouter`: worker aliases, sync waits, forwarding to the parent |
//! | `scheduler` | `Scheduler`: turn slots by priority under concurrency limits |
//! | `ops` | operations shared by the tools and the facade |
//! | `checkpoints` | taking checkpoints and planning restores (seed 001) |
//! | `tree_spend` | what each agent tree has spent (tree budgets) |
//! | `errors` | failures of actix and serde as `AgentdError`s |
//!
//! "Seed 000" … "seed 004" in comments name the reference documents summarised in
//! `docs/reference.md`; `docs/architecture.md` maps this crate and states its invariants.

mod agent;
mod channel_router;
mod checkpoints;
pub mod clock;
pub mod config;
pub mod deps;
mod errors;
mod handle;
pub mod hashing;
pub mod metrics;
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

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{AgentType, AgentTypes, ContextWindow, Limits, ProviderRates, RuntimeConfig};
pub use deps::Deps;
pub use hashing::{FastHashMap, FastHashSet, fnv1a64};
pub use ports::{
    AnswerObserver, CliRun, CliStep, CliTools, DEDUP_WINDOW, EventSink, McpCallResult,
    McpServerStatus, McpToolDef, McpTools, ModelClient, ModelError, ModelRequest, ModelResponse,
    Purpose, Pushed, StoreError, StoreErrorKind, StoreResult, StoreWrite, ThreadEntries,
    ThreadStore, ToolSpec, Transport, WebhookCall, WebhookClient, WebhookError, WorkerAlias,
};
pub use system::AgentSystem;
/// The token a [`ModelRequest`] is cancelled by (re-exported so backends and tests name one
/// version of it).
pub use tokio_util::sync::CancellationToken;
pub use tools::mcp::{is_valid_exposed_name, split_exposed};
pub use tools::{
    Approval, ConfiguredRun, ConfiguredTool, Secret, ToolCatalogue, ToolPattern, check_type_tools,
    is_valid_server_name,
};
