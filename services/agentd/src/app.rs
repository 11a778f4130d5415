//! Starting and stopping one agentd: actors, event bus and HTTP server. `main` and the
//! end-to-end tests use the same function, so the tests exercise the real wiring.

use crate::http::{ApiState, routes};
use crate::settings::Settings;
use crate::wiring::wire;
use actix_web::{App, HttpServer, web};
use agentd_actors::{AgentSystem, Clock, SystemClock};
use agentd_bus::InProcessBus;
use anyhow::Context as _;
use std::net::SocketAddr;
use std::sync::Arc;

/// A started service.
pub struct Running {
    /// Where the HTTP API listens (the real port when `bind` asked for port 0).
    pub addr: SocketAddr,
    /// The actors.
    pub system: AgentSystem,
    /// The event bus.
    pub bus: InProcessBus,
    server: actix_web::dev::ServerHandle,
}

impl Running {
    /// Stops taking requests, then stops every agent (records stay as persisted).
    pub async fn stop(self) {
        self.server.stop(true).await;
        self.system.shutdown().await;
    }
}

/// Starts agentd from `settings` with the real clock. Must run inside an actix `System`.
pub async fn start(settings: &Settings) -> anyhow::Result<Running> {
    start_with_clock(settings, Arc::new(SystemClock)).await
}

/// Starts agentd with a given clock (tests use a manual one).
pub async fn start_with_clock(
    settings: &Settings,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<Running> {
    let wired = wire(settings, clock)?;
    let system = AgentSystem::start(wired.deps);
    let state = web::Data::new(ApiState {
        system: system.clone(),
    });
    let limit = settings.server.max_body_bytes;
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .app_data(web::JsonConfig::default().limit(limit))
            .configure(routes)
    })
    .workers(2)
    .disable_signals()
    .bind(settings.server.bind.as_str())
    .with_context(|| format!("binding {}", settings.server.bind))?;
    let addr = server
        .addrs()
        .first()
        .copied()
        .context("the server bound no address")?;
    let server = server.run();
    let handle = server.handle();
    actix_rt::spawn(server);
    Ok(Running {
        addr,
        system,
        bus: wired.bus,
        server: handle,
    })
}
