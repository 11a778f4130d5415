//! The shared dependencies every actor of one process holds: ports, clock, config and the
//! tool catalogue.

use crate::catalogue::ToolCatalogue;
use crate::config::RuntimeConfig;
use crate::ports::Clock;
use crate::ports::{EventSink, ModelClient, ThreadStore, Transport};
use std::sync::Arc;

/// Ports and config shared by the actors of one process (cheap to clone).
#[derive(Clone)]
pub struct Deps {
    /// Durable memory.
    pub store: Arc<dyn ThreadStore>,
    /// The model backend.
    pub model: Arc<dyn ModelClient>,
    /// Where events go.
    pub events: Arc<dyn EventSink>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Limits, types, prices, prompts: plain data, fixed at start.
    pub config: Arc<RuntimeConfig>,
    /// The tools agents may be shown, and the specs built from them. Live: MCP servers' tools
    /// come and go, and its version moves with them.
    pub tools: Arc<ToolCatalogue>,
    /// Cross-process delivery; `None` = every agent lives in this process.
    pub transport: Option<Arc<dyn Transport>>,
}

impl Deps {
    /// Whether another process owns `agent_id`'s partition.
    pub fn is_owned_elsewhere(&self, agent_id: &str) -> bool {
        self.transport.as_ref().is_some_and(|t| !t.owns(agent_id))
    }

    /// Whether `agent_id` is delivered by another process.
    pub fn is_remote(&self, agent_id: &str) -> bool {
        self.transport
            .as_ref()
            .is_some_and(|t| !t.is_local(agent_id))
    }
}
