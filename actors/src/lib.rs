//! `agentd-actors`: the actors of agentd and the ports they talk through.
//!
//! | module | what it holds |
//! |---|---|
//! | [`ports`] | `ThreadStore`, `ModelClient`, `EventSink`: what the actors need from outside |
//! | [`clock`] | `Clock`, `SystemClock`, `ManualClock`: time as a port |
//! | [`config`] | limits, agent types (validated titles), prices, prompts |
//! | [`deps`] | the bundle of ports and config each actor holds |
//! | [`messages`] | the typed actix messages between actors |
//! | [`metrics`] | the process metrics registry (Prometheus text) |
//! | [`agent`] | `AgentActor`: one agent, its inbox queue, its turns, its status |
//! | [`checkpoints`] | taking checkpoints and planning restores (seed 001) |
//! | [`turn`] | one turn: model call → tools → repeat; reset and compaction |
//! | [`tools`] | the tool registry: built-in tools (one file each), the versioned catalogue, visibility |
//! | [`parent_router`] | `ParentRouter`: worker aliases, sync waits, forwarding to the parent |
//! | [`channel_router`] | `ChannelRouter`: where every envelope and child output goes |
//! | [`scheduler`] | `Scheduler`: turn slots by priority under a concurrency limit |
//! | [`supervisor`] | `Supervisor`: agent directory, spawn limits, activation, cascades |
//! | [`ops`] | operations shared by the tools and the facade |
//! | [`system`] | `AgentSystem`: the facade services and tests use |

pub mod agent;
pub mod channel_router;
pub mod checkpoints;
pub mod clock;
pub mod config;
pub mod deps;
mod handle;
pub mod hashing;
pub mod messages;
pub mod metrics;
pub mod ops;
pub mod parent_router;
pub mod ports;
pub mod scheduler;
pub mod supervisor;
pub mod system;
#[cfg(test)]
mod testing;
pub mod tools;
pub mod tree_spend;
mod turn;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{AgentType, AgentTypes, Limits, RuntimeConfig};
pub use deps::Deps;
pub use hashing::{FastHashMap, FastHashSet, fnv1a64};
pub use ports::{
    DEDUP_WINDOW, EventSink, ModelClient, ModelError, ModelRequest, ModelResponse, Purpose, Pushed,
    StoreError, StoreErrorKind, StoreResult, StoreWrite, ThreadEntries, ThreadStore, ToolSpec,
    Transport, WorkerAlias,
};
pub use system::AgentSystem;
