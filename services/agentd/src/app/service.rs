//! [`Service`]: agentd without its HTTP server — the actors on their ports, and with Redis the
//! readers around them (the partition bus, the command consumer, the tool replies, the tail
//! of the event streams). What [`super::Builder::build`] answers; `serve` puts the HTTP API in
//! front of it.

use crate::settings::Settings;
use crate::sse::RedisEventStreams;
use crate::start_error::StartError;
use crate::wiring::Wired;
use agentd_actors::{AgentSystem, Inbound};
use agentd_bus::{
    CommandConsumer, CommandLimits, DeadLetters, EventLog, InProcessBus, RedisBus, RedisEventsTail,
    ToolReplies,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A started service, HTTP aside.
pub struct Service {
    /// The actors.
    pub system: AgentSystem,
    /// The in-process event bus (tests subscribe to it).
    pub bus: InProcessBus,
    /// The events `/v1/events` shows, with ids.
    pub event_log: Arc<EventLog>,
    /// The Redis bus, when Redis is configured.
    pub redis: Option<Arc<RedisBus>>,
    /// Where the deployment's event streams are, with Redis (a resume reads them).
    pub redis_events: Option<RedisEventStreams>,
    /// The settings it was built from.
    pub settings: Settings,
    commands_stop: Option<Arc<AtomicBool>>,
    replies_stop: Option<Arc<AtomicBool>>,
    events_tail: Option<RedisEventsTail>,
    mcp: Option<Arc<agentd_mcp::McpClient>>,
}

impl Service {
    /// Starts the actors on `wired`'s ports, then (with Redis) the readers that feed them, and
    /// (with `recover`) recovers the agents the store holds.
    pub(super) async fn start(
        settings: Settings,
        wired: Wired,
        recover: bool,
    ) -> Result<Service, StartError> {
        if let Some(mcp) = &wired.mcp {
            mcp.start();
        }
        let system = AgentSystem::start(wired.deps);
        let mut commands_stop = None;
        let mut replies_stop = None;
        if let (Some(bus), Some(store)) = (&wired.redis, &wired.redis_store) {
            // The readers feed the actors through the inbound port, not the facade.
            let inbound: Arc<dyn Inbound> = Arc::new(system.clone());
            bus.start(inbound.clone())
                .await
                .map_err(|e| StartError::bus("starting the Redis bus", e))?;
            let dead = || {
                DeadLetters::new(
                    store.connection(),
                    store.keys().dead(),
                    settings.redis.dead_maxlen,
                )
            };
            let consumer = CommandConsumer::new(
                &settings.redis.target(),
                store.keys().commands(),
                bus.process_id().to_string(),
                store.keys().members(),
                settings.redis.max_envelope_bytes,
                store.connection(),
                dead(),
            )
            .with_limits(CommandLimits {
                running: settings.redis.commands_running,
                taken: settings.redis.commands_taken,
                reply_maxlen: settings.redis.command_replies_maxlen,
            });
            commands_stop = Some(consumer.stop_flag());
            consumer
                .start(inbound.clone())
                .await
                .map_err(|e| StartError::bus("starting the command consumer", e))?;
            let replies = ToolReplies::new(
                system.deps().store.clone(),
                &settings.redis.target(),
                store.keys().tool_replies(),
                bus.process_id().to_string(),
                settings.redis.max_envelope_bytes,
                store.connection(),
                dead(),
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
                .start(inbound)
                .await
                .map_err(|e| StartError::bus("starting the tool reply reader", e))?;
        }
        if recover {
            system.recover().await.map_err(StartError::Recovery)?;
        }
        // With Redis, `/v1/events` follows `<ns>:events` and `<ns>:deltas`: every process's
        // events, not only ours.
        let (redis_events, events_tail) = match &wired.redis_store {
            Some(store) => {
                let streams = RedisEventStreams {
                    target: settings.redis.target(),
                    events: store.keys().events(),
                    deltas: store.keys().deltas(),
                };
                let tail = RedisEventsTail::start(
                    streams.target.clone(),
                    streams.events.clone(),
                    streams.deltas.clone(),
                    wired.event_log.clone(),
                );
                (Some(streams), Some(tail))
            }
            None => (None, None),
        };
        Ok(Service {
            system,
            bus: wired.bus,
            event_log: wired.event_log,
            redis: wired.redis,
            redis_events,
            settings,
            commands_stop,
            replies_stop,
            events_tail,
            mcp: wired.mcp,
        })
    }

    /// Stops every agent (records stay as persisted), after the readers that feed them.
    pub async fn stop(self) {
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
