//! The shared dependencies every actor of one process holds: ports, clock and config.

use crate::clock::Clock;
use crate::config::RuntimeConfig;
use crate::ports::{EventSink, ModelClient, ThreadStore};
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
    /// Limits, types, prices, prompts.
    pub config: Arc<RuntimeConfig>,
}
