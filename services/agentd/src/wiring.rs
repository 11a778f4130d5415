//! Builds the ports and the runtime config from settings: which store, which model, which
//! agent types. The only place that knows every implementation.

use crate::builtin;
use crate::settings::{Settings, StoreKind};
use agentd_actors::{Clock, Deps, EventSink, ModelClient, RuntimeConfig, ThreadStore};
use agentd_bus::InProcessBus;
use agentd_models::ScriptedModel;
use agentd_store::{MemoryStore, RedbStore};
use anyhow::Context as _;
use std::path::Path;
use std::sync::Arc;

/// Ports built from settings, plus the event bus (the HTTP API subscribes to it).
pub struct Wired {
    /// What the actors get.
    pub deps: Deps,
    /// The in-process event bus behind `deps.events`.
    pub bus: InProcessBus,
}

/// Builds the store, the model, the types and the config.
pub fn wire(settings: &Settings, clock: Arc<dyn Clock>) -> anyhow::Result<Wired> {
    let store: Arc<dyn ThreadStore> = match settings.store.kind {
        StoreKind::Memory => Arc::new(MemoryStore::new()),
        StoreKind::Embedded => {
            Arc::new(RedbStore::open(&settings.store.data_dir).with_context(|| {
                format!(
                    "opening the embedded store in {}",
                    settings.store.data_dir.display()
                )
            })?)
        }
    };
    let model: Arc<dyn ModelClient> = match settings.model.script.trim() {
        "" => Arc::new(
            ScriptedModel::from_toml_str(builtin::DEMO_SCRIPT, clock.clone())
                .context("built-in demo script")?,
        ),
        path => Arc::new(
            ScriptedModel::from_file(Path::new(path), clock.clone())
                .with_context(|| format!("model script {path}"))?,
        ),
    };
    let dir = settings.agents.dir.trim();
    let types = builtin::load_agent_types((!dir.is_empty()).then(|| Path::new(dir)))
        .map_err(|e| anyhow::anyhow!("agent types: {e}"))?;
    let mut config = RuntimeConfig::with_types(types);
    config.limits = settings.limits.clone();
    config.prices = settings.pricing.models.clone();
    config.default_price = settings.pricing.default;
    config.base_prompt = settings.prompts.base.clone();
    config.subagent_prompt = settings.prompts.subagent.clone();
    config.context_dirs = settings.agents.context_dirs.clone();
    config.arbiters = settings.runtime.arbiters;
    let bus = InProcessBus::default();
    let events: Arc<dyn EventSink> = Arc::new(bus.clone());
    Ok(Wired {
        deps: Deps {
            store,
            model,
            events,
            clock,
            config: Arc::new(config),
        },
        bus,
    })
}
