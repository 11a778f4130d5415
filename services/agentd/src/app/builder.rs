//! [`Builder`]: the one way to make agentd. `main` serves what it builds from the settings
//! alone; the bench's in-process scenarios give it a store; the tests give it what they fake
//! (a failing store, a scripted or recording model, a manual clock, agent types and limits of
//! their own). Whatever is not given is wired from the settings exactly as for `main`: the
//! event log's fan-out, the tool catalogue, the runtime config, recovery.

use super::service::Service;
use super::{Running, serve};
use crate::settings::Settings;
use crate::start_error::StartError;
use crate::wiring::{Overrides, wire};
use agentd_actors::{AgentTypes, Clock, ModelClient, RuntimeConfig, SystemClock, ThreadStore};
use std::sync::Arc;

/// Settings, a clock and the ports a caller supplies in place of what the settings name.
pub struct Builder<'a> {
    settings: Settings,
    clock: Arc<dyn Clock>,
    overrides: Overrides<'a>,
    recover: bool,
}

impl<'a> Builder<'a> {
    /// Everything from `settings`, on the real clock.
    pub fn new(settings: Settings) -> Self {
        Builder {
            settings,
            clock: Arc::new(SystemClock),
            overrides: Overrides::default(),
            recover: true,
        }
    }

    /// The clock the actors, the store's timestamps and the scripted model read.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// A store in place of `[store]` (no Redis bus then: one process).
    pub fn store(mut self, store: Arc<dyn ThreadStore>) -> Self {
        self.overrides.store = Some(store);
        self
    }

    /// A model backend in place of `[model]` and `[providers.*]`.
    pub fn model(mut self, model: Arc<dyn ModelClient>) -> Self {
        self.overrides.model = Some(model);
        self
    }

    /// Agent types in place of the built-in ones and `agents.dir`'s.
    pub fn types(mut self, types: AgentTypes) -> Self {
        self.overrides.types = Some(types);
        self
    }

    /// A change to the runtime config the settings make; changes apply in the order given.
    pub fn config(mut self, change: impl FnOnce(&mut RuntimeConfig) + 'a) -> Self {
        self.overrides.config.push(Box::new(change));
        self
    }

    /// Room for `events` events per subscriber of the in-process bus (else its default).
    pub fn event_buffer(mut self, events: usize) -> Self {
        self.overrides.event_buffer = Some(events);
        self
    }

    /// Leaves the agents the store holds as they are until the caller runs
    /// `AgentSystem::recover` (a test that looks at a restarted store first).
    pub fn without_recovery(mut self) -> Self {
        self.recover = false;
        self
    }

    /// The service without its HTTP server: actors started, Redis readers running (with
    /// Redis), agents recovered (unless [`Self::without_recovery`]). Must run inside an actix
    /// `System`.
    pub async fn build(self) -> Result<Service, StartError> {
        let wired = wire(&self.settings, self.clock, self.overrides).await?;
        Service::start(self.settings, wired, self.recover).await
    }

    /// The whole service, listening on `server.bind`. Must run inside an actix `System`.
    pub async fn serve(self) -> Result<Running, StartError> {
        serve(self.build().await?).await
    }
}
