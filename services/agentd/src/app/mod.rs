//! Making agentd and serving it. [`Builder`] makes the whole service from settings, a clock
//! and whatever ports the caller supplies in its place (`main`: none; the bench: a store; the
//! tests: stores, models, clocks, types and limits of their own); [`serve`] puts the HTTP API
//! in front of it. The tests that need the real process start the `agentd` binary itself
//! (`agentd_tests::AgentdProcess`).
//!
//! | module | what it holds |
//! |---|---|
//! | [`builder`] | [`Builder`]: settings, clock and overrides in; a [`Service`] or a [`Running`] service out |
//! | [`service`] | [`Service`]: the actors on their ports and, with Redis, the readers that feed them |

mod builder;
mod service;

pub use builder::Builder;
pub use service::Service;

use crate::auth::{Auth, require_token};
use crate::body_deadline::{RequestTimeout, body_deadline};
use crate::errors;
use crate::http::{ApiState, routes};
use crate::settings::Settings;
use crate::start_error::StartError;
use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};
use agentd_actors::AgentSystem;
use agentd_bus::{InProcessBus, RedisBus};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A started service with its HTTP server.
pub struct Running {
    /// The Redis bus, when Redis is configured.
    pub redis: Option<Arc<RedisBus>>,
    /// Where the HTTP API listens (the real port when `bind` asked for port 0).
    pub addr: SocketAddr,
    /// The actors.
    pub system: AgentSystem,
    /// The event bus.
    pub bus: InProcessBus,
    service: Service,
    server: actix_web::dev::ServerHandle,
    shutdown: tokio::sync::watch::Sender<bool>,
    shutdown_timeout: Duration,
}

impl Running {
    /// Stops taking requests, then stops every agent (records stay as persisted). Event
    /// streams end first (they never end by themselves); requests in flight get
    /// `server.shutdown_timeout_ms`, after which the agents are stopped all the same, so a
    /// slow client cannot hold the leases and the inboxes of a stopping process.
    pub async fn stop(self) {
        self.shutdown.send_replace(true);
        if tokio::time::timeout(self.shutdown_timeout, self.server.stop(true))
            .await
            .is_err()
        {
            tracing::warn!(
                timeout_ms = self.shutdown_timeout.as_millis() as u64,
                "requests still in flight after server.shutdown_timeout_ms; stopping agents"
            );
        }
        self.service.stop().await;
    }
}

/// Puts the HTTP API (and the A2A routes `[a2a] expose` asks for, and `/mcp` for
/// `[mcp_server] expose`) in front of `service` on `server.bind`.
pub async fn serve(service: Service) -> Result<Running, StartError> {
    let settings = &service.settings;
    let (shutdown, shutdown_rx) = tokio::sync::watch::channel(false);
    let state = web::Data::new(ApiState {
        system: service.system.clone(),
        redis: service.redis.clone(),
        events: crate::sse::EventFeed {
            log: service.event_log.clone(),
            redis: service.redis_events.clone(),
        },
        shutdown: shutdown_rx,
        trace_url: Some(settings.telemetry.trace_url.clone()).filter(|u| !u.is_empty()),
        request_wait: (matches!(settings.store(), crate::settings::StoreBackend::Redis(_))
            && settings.redis.request_wait_ms > 0)
            .then(|| Duration::from_millis(settings.redis.request_wait_ms)),
    });
    let shutdown_timeout = Duration::from_millis(settings.server.shutdown_timeout_ms);
    let auth = web::Data::new(Auth {
        token: settings.auth.resolve()?,
    });
    let a2a = a2a_state(settings, &state, auth.token.is_some())?;
    if let Some(a) = &a2a {
        crate::a2a::start_watcher(a.get_ref().clone());
    }
    let mcp = crate::mcp_server::state(
        settings,
        &state.system,
        &state.events,
        &state.shutdown,
        auth.token.is_some(),
    )?;
    let limit = settings.server.max_body_bytes;
    let request_timeout = web::Data::new(RequestTimeout(Duration::from_millis(
        settings.server.request_timeout_ms,
    )));
    let server = HttpServer::new(move || {
        App::new()
            .wrap(from_fn(crate::telemetry::trace_context))
            .wrap(from_fn(body_deadline))
            .wrap(from_fn(require_token))
            .wrap(from_fn(errors::json_errors))
            .app_data(auth.clone())
            .app_data(request_timeout.clone())
            .app_data(state.clone())
            .app_data(
                web::JsonConfig::default()
                    .limit(limit)
                    .error_handler(errors::json_error),
            )
            .app_data(web::PayloadConfig::new(limit))
            .app_data(web::QueryConfig::default().error_handler(errors::query_error))
            .app_data(web::PathConfig::default().error_handler(errors::path_error))
            .configure(|cfg| {
                if let Some(a) = &a2a {
                    cfg.app_data(a.clone());
                    crate::a2a::routes(cfg);
                }
                if let Some(m) = &mcp {
                    cfg.app_data(m.clone());
                    crate::mcp_server::routes(cfg);
                }
            })
            .configure(crate::openapi::routes)
            .configure(routes)
            .default_service(web::to(errors::not_found))
    })
    .workers(2)
    .disable_signals()
    // The workers' own bound (whole seconds); `Running::stop` bounds the wait to the ms.
    .shutdown_timeout(settings.server.shutdown_timeout_ms.div_ceil(1000))
    .bind(settings.server.bind.as_str())
    .map_err(|source| StartError::Bind {
        addr: settings.server.bind.clone(),
        source,
    })?;
    let addr = server
        .addrs()
        .first()
        .copied()
        .ok_or_else(|| StartError::Bind {
            addr: settings.server.bind.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::AddrNotAvailable,
                "the server bound no address",
            ),
        })?;
    let server = server.run();
    let handle = server.handle();
    actix_rt::spawn(server);
    Ok(Running {
        redis: service.redis.clone(),
        addr,
        system: service.system.clone(),
        bus: service.bus.clone(),
        service,
        server: handle,
        shutdown,
        shutdown_timeout,
    })
}

/// The A2A routes' state when `[a2a] expose` names agent types (each must exist).
fn a2a_state(
    settings: &Settings,
    api: &web::Data<ApiState>,
    token_required: bool,
) -> Result<Option<web::Data<crate::a2a::A2a>>, StartError> {
    let exposed = settings.a2a.expose.clone();
    if exposed.is_empty() {
        return Ok(None);
    }
    for t in &exposed {
        let Some(ty) = api.system.deps().config.types.get(t) else {
            return Err(StartError::invalid(format!(
                "[a2a] expose names `{t}`, which is not an agent type"
            )));
        };
        let mut ids = std::collections::HashSet::new();
        for s in &ty.a2a.skills {
            if s.id.trim().is_empty() || !ids.insert(s.id.as_str()) {
                return Err(StartError::invalid(format!(
                    "agent type `{t}`: every [[a2a.skills]] needs an `id` of its own (`{}`)",
                    s.id
                )));
            }
        }
    }
    Ok(Some(web::Data::new(crate::a2a::A2a {
        system: api.system.clone(),
        events: api.events.clone(),
        exposed,
        public_url: settings.a2a.public_url.clone(),
        token_required,
        shutdown: api.shutdown.clone(),
        pusher: crate::a2a::Pusher::default(),
        idle_close_ms: settings.a2a.context_idle_close_ms,
    })))
}
