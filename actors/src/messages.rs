//! The actors' messages, re-exported from beside the actors that handle them (a transitional
//! path for callers not moved yet).

pub use crate::agent::messages::{
    Ack, AddUsage, ApplyControl, BudgetPause, Deliver, Delivery, DependencyDone, Provide, Restore,
    RestoreCheckpoint, Runtime, RuntimeState, SetBudget, SetEnv, Snapshot, StopAgent,
    TakeCheckpoint, answer,
};
pub use crate::channel_router::messages::{ChildOutput, Refused, Route};
pub use crate::parent_router::messages::{CancelWait, Dispatched, ManageSend, WaitResult};
pub use crate::supervisor::messages::{
    Activate, AgentStopped, Finished, Lifecycle, LiveCount, Lookup, ParentRouterFor, PauseTree,
    Shutdown, Spawn, SpawnSpec,
};
pub use agentd_proto::Output;
