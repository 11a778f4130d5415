//! Starting and stopping one agentd: actors, event bus and HTTP server, wired from settings
//! with the real clock. [`start`] serves `main`, the bench's two-process scenarios
//! (`services/bench`) and one in-process test of providers (`tests/tests/suite/providers.rs`).
//! The other tests start the `agentd` binary itself (`agentd_tests::AgentdProcess`), or assemble
//! an agent system of their own, without HTTP, through `TestSystem::builder` (`tests/src`).

use crate::auth::{Auth, require_token};
use crate::body_deadline::{RequestTimeout, body_deadline};
use crate::errors;
use crate::http::{ApiState, routes};
use crate::settings::Settings;
use crate::start_error::StartError;
use crate::wiring::wire;
use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};
use agentd_actors::{AgentSystem, SystemClock};
use agentd_bus::{CommandConsumer, CommandLimits, DeadLetters, InProcessBus, RedisBus};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A started service.
pub struct Running {
    /// The Redis bus, when Redis is configured.
    pub redis: Option<Arc<RedisBus>>,
    commands_stop: Option<Arc<AtomicBool>>,
    replies_stop: Option<Arc<AtomicBool>>,
    events_tail: Option<agentd_bus::RedisEventsTail>,
    /// Where the HTTP API listens (the real port when `bind` asked for port 0).
    pub addr: SocketAddr,
    /// The actors.
    pub system: AgentSystem,
    /// The event bus.
    pub bus: InProcessBus,
    server: actix_web::dev::ServerHandle,
    shutdown: tokio::sync::watch::Sender<bool>,
    shutdown_timeout: Duration,
    mcp: Option<Arc<agentd_mcp::McpClient>>,
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
        for flag in [&self.commands_stop, &self.replies_stop]
            .into_iter()
            .flatten()
        {
            flag.store(true, Ordering::SeqCst);
        }
        if let Some(tail) = &self.events_tail {
            tail.stop();
        }
        self.system.shutdown().await;
        if let Some(mcp) = &self.mcp {
            mcp.stop();
        }
        if let Some(bus) = &self.redis {
            bus.shutdown().await;
        }
    }
}

/// Starts agentd from `settings` with the real clock. Must run inside an actix `System`.
pub async fn start(settings: &Settings) -> Result<Running, StartError> {
    let wired = wire(settings, Arc::new(SystemClock)).await?;
    if let Some(mcp) = &wired.mcp {
        mcp.start();
    }
    let system = AgentSystem::start(wired.deps);
    let mut commands_stop = None;
    let mut replies_stop = None;
    if let (Some(bus), Some(store)) = (&wired.redis, &wired.redis_store) {
        bus.start(system.clone())
            .await
            .map_err(|e| StartError::bus("starting the Redis bus", e))?;
        let consumer = CommandConsumer::new(
            &settings.redis.target(),
            store.keys().commands(),
            bus.process_id().to_string(),
            store.keys().members(),
            settings.redis.max_envelope_bytes,
            store.connection(),
            DeadLetters::new(
                store.connection(),
                store.keys().dead(),
                settings.redis.dead_maxlen,
            ),
        );
        let consumer = consumer.with_limits(CommandLimits {
            running: settings.redis.commands_running,
            taken: settings.redis.commands_taken,
            reply_maxlen: settings.redis.command_replies_maxlen,
        });
        commands_stop = Some(consumer.stop_flag());
        consumer
            .start(system.clone())
            .await
            .map_err(|e| StartError::bus("starting the command consumer", e))?;
        let replies = agentd_bus::ToolReplies::new(
            &settings.redis.target(),
            store.keys().tool_replies(),
            bus.process_id().to_string(),
            settings.redis.max_envelope_bytes,
            store.connection(),
            DeadLetters::new(
                store.connection(),
                store.keys().dead(),
                settings.redis.dead_maxlen,
            ),
        );
        for tool in system.deps().tools.configured() {
            if tool.kind() == agentd_proto::ToolKind::Service {
                bus.create_tool_group(&tool.name).await.map_err(|e| {
                    StartError::bus(format!("creating the stream of `{}`", tool.name), e)
                })?;
            }
        }
        replies_stop = Some(replies.stop_flag());
        replies
            .start(system.clone())
            .await
            .map_err(|e| StartError::bus("starting the tool reply reader", e))?;
    }
    system.recover().await.map_err(StartError::Recovery)?;
    // With Redis, `/v1/events` follows `<ns>:events` and `<ns>:deltas`: every process's
    // events, not only ours.
    let (redis_events, events_tail) = match &wired.redis_store {
        Some(store) => {
            let streams = crate::sse::RedisEventStreams {
                target: settings.redis.target(),
                events: store.keys().events(),
                deltas: store.keys().deltas(),
            };
            let tail = agentd_bus::RedisEventsTail::start(
                streams.target.clone(),
                streams.events.clone(),
                streams.deltas.clone(),
                wired.event_log.clone(),
            );
            (Some(streams), Some(tail))
        }
        None => (None, None),
    };
    let (shutdown, shutdown_rx) = tokio::sync::watch::channel(false);
    let state = web::Data::new(ApiState {
        system: system.clone(),
        redis: wired.redis.clone(),
        events: crate::sse::EventFeed {
            log: wired.event_log.clone(),
            redis: redis_events,
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
        redis: wired.redis,
        commands_stop,
        replies_stop,
        events_tail,
        addr,
        system,
        bus: wired.bus,
        server: handle,
        shutdown,
        shutdown_timeout,
        mcp: wired.mcp,
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
