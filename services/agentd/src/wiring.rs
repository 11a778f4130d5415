//! Builds the ports and the runtime config from settings: which store, which model, which
//! agent types, which transport. The only place that knows every implementation.

use crate::builtin;
use crate::settings::{
    A2aBackend, ApiBackend, Backend, ModelSettings, ProcessBackend, ProcessProtocol, Settings,
    StoreBackend,
};
use crate::start_error::StartError;
use agentd_actors::{
    AgentTypes, Clock, ConfiguredRun, ConfiguredTool, ContextWindow, Deps, EventSink, ModelClient,
    ProviderRates, RuntimeConfig, Secret, ThreadStore, ToolCatalogue, Transport, WebhookClient,
    check_type_tools, split_exposed,
};
use agentd_bus::{
    CappedStream, EventLog, Fanout, InProcessBus, LocalEvents, RedisBus, RedisBusConfig,
    RedisEvents,
};
use agentd_mcp::McpClient;
use agentd_models::{
    A2aModel, AnthropicModel, ClaudeCodeModel, ClaudeCodeSettings, HttpSettings, HttpWebhooks,
    ModelRouter, OpenAiModel, ProcessModel, ScriptedModel,
};
use agentd_store::{MemoryStore, RedbStore, RedisStore};
use std::path::Path;
use std::sync::Arc;

/// A change a caller makes to the runtime config the settings made.
pub type ConfigChange<'a> = Box<dyn FnOnce(&mut RuntimeConfig) + 'a>;

/// What a caller puts in place of what the settings would build: a store, a model backend,
/// agent types, changes to the runtime config (the tests' failing stores, fake models and
/// limits; the bench's stores). The rest is wired from the settings as for `main`.
#[derive(Default)]
pub struct Overrides<'a> {
    /// The store, in place of `[store]` (and of Redis: no bus, no transport).
    pub store: Option<Arc<dyn ThreadStore>>,
    /// The model backend, in place of `[model]` and `[providers.*]`.
    pub model: Option<Arc<dyn ModelClient>>,
    /// The agent types, in place of the built-in ones and `agents.dir`'s.
    pub types: Option<AgentTypes>,
    /// Applied in order to the runtime config the settings made.
    pub config: Vec<ConfigChange<'a>>,
    /// How many events the in-process bus buffers per subscriber (else its default): a caller
    /// that reads every event of a burst subscribes with room for all of it.
    pub event_buffer: Option<usize>,
}

/// Ports built from settings, plus what the service starts around the actors.
pub struct Wired {
    /// What the actors get.
    pub deps: Deps,
    /// The in-process event bus behind `deps.events` (tests subscribe to it).
    pub bus: InProcessBus,
    /// The events `/v1/events` shows, with ids: `deps.events` feeds it in one process; with
    /// Redis the service's tail of the event streams does.
    pub event_log: Arc<EventLog>,
    /// The Redis bus, when Redis is configured.
    pub redis: Option<Arc<RedisBus>>,
    /// The Redis store, when Redis is configured (for the command consumer's connection).
    pub redis_store: Option<RedisStore>,
    /// The MCP client, when MCP servers are configured (not started: the built `Service` starts it).
    pub mcp: Option<Arc<McpClient>>,
}

/// The model backend of one provider's settings (`section` names it in errors). A match arm
/// per [`Backend`] variant: a new backend is a compile error here until it is built.
pub fn build_provider(
    section: &str,
    m: &ModelSettings,
    data_dir: &Path,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn ModelClient>, StartError> {
    Ok(match &m.backend {
        Backend::Scripted(s) => match s.script.trim() {
            "" => Arc::new(
                ScriptedModel::from_toml_str(builtin::DEMO_SCRIPT, clock)
                    .map_err(|e| StartError::model("built-in demo script", e))?,
            ),
            path => Arc::new(
                ScriptedModel::from_file(Path::new(path), clock)
                    .map_err(|e| StartError::model(format!("{section}.script {path}"), e))?,
            ),
        },
        Backend::OpenAi(api) => Arc::new(
            OpenAiModel::new(
                api_http(section, api, "https://api.openai.com/v1")?,
                api.model.clone(),
            )
            .map_err(|e| StartError::model(format!("{section}: the OpenAI backend"), e))?,
        ),
        Backend::Anthropic(api) => Arc::new(
            AnthropicModel::new(
                api_http(section, api, "https://api.anthropic.com")?,
                api.model.clone(),
                m.limits.max_tokens,
            )
            .map_err(|e| StartError::model(format!("{section}: the Anthropic backend"), e))?,
        ),
        Backend::Process(p) => match p.protocol {
            ProcessProtocol::Jsonl => Arc::new(ProcessModel::new(
                p.command.clone(),
                std::time::Duration::from_millis(p.grace_ms),
                std::time::Duration::from_millis(p.timeout_ms),
            )),
            ProcessProtocol::ClaudeCode => claude_code(section, p, data_dir)?,
        },
        Backend::A2a(a) => a2a_remote(section, a)?,
    })
}

/// The transport settings of an HTTP API backend: its URL (`default_url` when unset) and its
/// key, read now from the variable `api_key_env` names (unset is a start-up error).
fn api_http(
    section: &str,
    api: &ApiBackend,
    default_url: &str,
) -> Result<HttpSettings, StartError> {
    let api_key = match api.api_key_env.trim() {
        "" => String::new(),
        var => std::env::var(var).map_err(|e| {
            StartError::model(
                format!("{section}.api_key_env names `{var}`, which is not set"),
                e,
            )
        })?,
    };
    Ok(HttpSettings {
        base_url: match api.base_url.trim() {
            "" => default_url.to_string(),
            url => url.to_string(),
        },
        api_key,
        timeout: std::time::Duration::from_millis(api.timeout_ms),
        stream: api.stream,
        idle_timeout: std::time::Duration::from_millis(api.idle_timeout_ms),
        max_retries: api.max_retries,
        backoff: std::time::Duration::from_millis(api.backoff_ms),
    })
}

/// The process backend's `claude-code` protocol: one Claude Code CLI per agent, its home
/// under the data directory.
fn claude_code(
    section: &str,
    p: &ProcessBackend,
    data_dir: &Path,
) -> Result<Arc<dyn ModelClient>, StartError> {
    Ok(Arc::new(ClaudeCodeModel::new(ClaudeCodeSettings {
        command: if p.command.is_empty() {
            vec!["claude".to_string()]
        } else {
            p.command.clone()
        },
        home: std::path::absolute(data_dir.join("claude-code"))
            .map_err(|e| StartError::model(format!("{section}: the data directory"), e))?,
        workdir: match p.workdir.trim() {
            "" => None,
            dir => Some(
                std::path::absolute(dir)
                    .map_err(|e| StartError::model(format!("{section}.workdir {dir}"), e))?,
            ),
        },
        model: Some(p.model.trim())
            .filter(|model| !model.is_empty())
            .map(str::to_string),
        grace: std::time::Duration::from_millis(p.grace_ms),
        timeout: std::time::Duration::from_millis(p.timeout_ms),
    })))
}

/// A remote A2A agent, its headers' `${VAR}` references read from the environment now.
fn a2a_remote(section: &str, a: &A2aBackend) -> Result<Arc<dyn ModelClient>, StartError> {
    let env = |name: &str| std::env::var(name).ok();
    let headers = a
        .headers
        .iter()
        .map(|(k, v)| {
            agentd_mcp::expand::expand(v, &env)
                .map(|v| (k.clone(), v))
                .map_err(|e| StartError::model(format!("{section}.headers.{k}"), e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let http = HttpSettings {
        // Not used: every request goes where the card says.
        base_url: String::new(),
        api_key: String::new(),
        timeout: std::time::Duration::from_millis(a.timeout_ms),
        // The remote's card says whether it streams.
        stream: true,
        idle_timeout: std::time::Duration::from_millis(a.idle_timeout_ms),
        max_retries: a.max_retries,
        backoff: std::time::Duration::from_millis(a.backoff_ms),
    };
    Ok(Arc::new(
        A2aModel::new(a.card_url.trim().to_string(), headers, http)
            .map_err(|e| StartError::model(format!("{section}: the A2A backend"), e))?,
    ))
}

/// Every configured provider behind one router: `[model]` as the default, each
/// `[providers.<name>]` by name.
pub fn build_models(settings: &Settings, clock: Arc<dyn Clock>) -> Result<ModelRouter, StartError> {
    let data_dir = &settings.store.data_dir;
    let mut router = ModelRouter::new(build_provider(
        "model",
        &settings.model,
        data_dir,
        clock.clone(),
    )?);
    for (name, p) in &settings.providers {
        let section = format!("providers.{name}");
        router = router.with(
            name.clone(),
            build_provider(&section, p, data_dir, clock.clone())?,
        );
    }
    Ok(router)
}

/// Builds the store, the model, the types, the transport and the config, each from the
/// settings unless `overrides` gives it. Must run inside a tokio runtime when Redis is
/// configured (it connects, and fails at once if it cannot).
pub async fn wire(
    settings: &Settings,
    clock: Arc<dyn Clock>,
    overrides: Overrides<'_>,
) -> Result<Wired, StartError> {
    let bus = overrides
        .event_buffer
        .map_or_else(InProcessBus::default, InProcessBus::new);
    let mut events: Arc<dyn EventSink> = Arc::new(bus.clone());
    let mut transport: Option<Arc<dyn Transport>> = None;
    let mut redis = None;
    let mut redis_store = None;
    let store: Arc<dyn ThreadStore> = match (overrides.store, settings.store()) {
        (Some(store), _) => store,
        (None, StoreBackend::Redis(r)) => {
            let store = RedisStore::connect_to(&r.target(), &r.namespace, r.partitions)
                .await
                .map_err(|e| {
                    StartError::store(format!("connecting to Redis at {}", r.masked_url()), e)
                })?
                .with_dedup_window(r.dedup_window)
                .with_min_replicas(r.min_replicas, r.replica_wait_ms);
            let process_id = match r.process_id.trim() {
                "" => agentd_proto::ids::new_id().to_string(),
                id => id.to_string(),
            };
            let cfg = RedisBusConfig {
                target: r.target(),
                namespace: r.namespace.clone(),
                partitions: r.partitions,
                lease_ms: r.lease_ms,
                batch: r.batch,
                max_envelope_bytes: r.max_envelope_bytes,
                dead_maxlen: r.dead_maxlen,
                max_deliveries: r.max_deliveries,
                hold_ms: r.hold_ms,
                process_id,
            };
            let rb = RedisBus::connect(cfg, store.connection())
                .await
                .map_err(|e| StartError::bus("connecting the Redis bus", e))?;
            store.fence_pushes_with(rb.push_fence());
            let redis_events: Arc<dyn EventSink> = Arc::new(RedisEvents::start(
                store.connection(),
                CappedStream {
                    key: store.keys().events(),
                    maxlen: r.events_maxlen,
                },
                CappedStream {
                    key: store.keys().deltas(),
                    maxlen: r.deltas_maxlen,
                },
            ));
            events = Arc::new(Fanout(vec![events, redis_events]));
            transport = Some(rb.clone());
            redis = Some(rb);
            redis_store = Some(store.clone());
            Arc::new(store)
        }
        (None, StoreBackend::Memory) => Arc::new(MemoryStore::new()),
        (None, StoreBackend::Embedded { data_dir }) => {
            Arc::new(RedbStore::open(data_dir).map_err(|e| {
                StartError::store(
                    format!("opening the embedded store in {}", data_dir.display()),
                    e,
                )
            })?)
        }
    };
    let event_log = Arc::new(EventLog::new(EVENT_HISTORY, clock.now_ms()));
    if redis.is_none() {
        // One process: its own events are all `/v1/events` shows, named as they happen.
        events = Arc::new(LocalEvents {
            bus: bus.clone(),
            log: event_log.clone(),
        });
    }
    let model: Arc<dyn ModelClient> = match overrides.model {
        Some(model) => model,
        None => Arc::new(build_models(settings, clock.clone())?),
    };
    let types = match overrides.types {
        Some(types) => types,
        None => {
            let dir = settings.agents.dir.trim();
            builtin::load_agent_types((!dir.is_empty()).then(|| Path::new(dir)))
                .map_err(StartError::AgentTypes)?
        }
    };
    // MCP servers: references expanded from the environment (an unset one stops start-up);
    // they connect once the service starts, and never hold start-up.
    let mcp_servers = settings
        .mcp
        .resolve(&|var| std::env::var(var).ok())
        .map_err(StartError::Mcp)?;
    let mcp =
        (!mcp_servers.is_empty()).then(|| McpClient::new(mcp_servers, &mcp_tools_named(&types)));
    let mut config = RuntimeConfig::with_types(types);
    let mut tools = build_tools(settings)?;
    if let Some(mcp) = &mcp {
        tools.add_mcp(mcp.clone());
    }
    check_type_tools(&config.types, &tools)
        .map_err(|e| StartError::tools("checking the tools agent types list", e))?;
    config.limits = settings.limits.clone();
    config.prices = settings.pricing.models.clone();
    config.default_price = settings.pricing.default;
    config.base_prompt = settings.prompts.base.clone();
    config.subagent_prompt = settings.prompts.subagent.clone();
    config.context_dirs = settings.agents.context_dirs.clone();
    config.arbiters = settings.runtime.arbiters;
    config.checkpoints_keep = settings.checkpoints.keep;
    config.providers = settings.providers.keys().cloned().collect();
    // Each provider's limits, by the name the actors know it by (`default`: `[model]`).
    for (name, m) in settings.model_providers() {
        let name = name.unwrap_or("default").to_string();
        let l = &m.limits;
        if l.max_concurrent > 0 {
            config
                .provider_limits
                .insert(name.clone(), l.max_concurrent);
        }
        if l.context_tokens > 0 {
            let window = ContextWindow {
                context_tokens: l.context_tokens,
                max_tokens: u64::from(l.max_tokens),
            };
            config.context_windows.insert(name.clone(), window);
        }
        let rates = ProviderRates {
            requests_per_minute: l.requests_per_minute,
            tokens_per_minute: l.tokens_per_minute,
        };
        if rates != ProviderRates::default() {
            config.provider_rates.insert(name, rates);
        }
    }
    for tweak in overrides.config {
        tweak(&mut config);
    }
    if let Some((ty, provider)) = types_needing_providers(&config).into_iter().next() {
        return Err(StartError::invalid(format!(
            "agent type `{ty}` names provider `{provider}`, which is not configured"
        )));
    }
    Ok(Wired {
        deps: Deps {
            store,
            model,
            events,
            clock,
            config: Arc::new(config),
            tools: Arc::new(tools),
            transport,
        },
        bus,
        event_log,
        redis,
        redis_store,
        mcp,
    })
}

/// Events `/v1/events` keeps for clients that resume (`Last-Event-ID`); one further behind is
/// told it lagged.
const EVENT_HISTORY: usize = 10_000;

/// The MCP tools agent types name one by one (not `mcp__<server>__*`), by server, by their own
/// names.
fn mcp_tools_named(types: &AgentTypes) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut named: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for entry in types.iter().flat_map(|t| t.tools.iter()) {
        if let Some((server, tool)) = split_exposed(entry).filter(|(_, tool)| *tool != "*") {
            let tools = named.entry(server.to_string()).or_default();
            if !tools.iter().any(|t| t == tool) {
                tools.push(tool.to_string());
            }
        }
    }
    named
}

/// The tool catalogue: the built-in tools and those of `[tools.<name>]`, whose secrets are
/// read from the environment now (an unset variable is a start-up error; the value is never
/// printed).
fn build_tools(settings: &Settings) -> Result<ToolCatalogue, StartError> {
    let mut tools = Vec::with_capacity(settings.tools.len());
    for (name, t) in &settings.tools {
        let run = match t.kind {
            agentd_proto::ToolKind::Service => ConfiguredRun::Service,
            // Refused when the settings are read.
            agentd_proto::ToolKind::Mcp => {
                return Err(StartError::invalid(format!(
                    "tools.{name}: MCP tools come from [mcp.servers.<name>]"
                )));
            }
            agentd_proto::ToolKind::Builtin => {
                return Err(StartError::invalid(format!(
                    "tools.{name}: built-in tools are agentd's own"
                )));
            }
            agentd_proto::ToolKind::Http => {
                let secret = match t.secret_env.trim() {
                    "" => String::new(),
                    var => std::env::var(var).map_err(|e| {
                        StartError::tools(
                            format!("tools.{name}.secret_env names `{var}`, which is not set"),
                            e,
                        )
                    })?,
                };
                ConfiguredRun::Http {
                    url: t.url.clone(),
                    secret: Secret::new(secret),
                }
            }
        };
        tools.push(ConfiguredTool {
            name: name.clone(),
            description: t.description.clone(),
            parameters: t.parameters.clone(),
            timeout_ms: t.timeout_ms,
            approval: t.approval,
            run,
        });
    }
    let webhooks: Option<Arc<dyn WebhookClient>> = if tools
        .iter()
        .any(|t| matches!(t.run, ConfiguredRun::Http { .. }))
    {
        Some(Arc::new(
            HttpWebhooks::new().map_err(|e| StartError::tools("webhook tools", e))?,
        ))
    } else {
        None
    };
    ToolCatalogue::with_configured(tools, webhooks)
        .map_err(|e| StartError::tools("the configured tools", e))
}

/// Agent types that name a provider the config does not have: `(type, provider)`.
fn types_needing_providers(config: &RuntimeConfig) -> Vec<(String, String)> {
    config
        .types
        .iter()
        .filter_map(|t| {
            t.provider
                .as_ref()
                .filter(|p| !config.providers.contains(*p))
                .map(|p| (t.name.clone(), p.clone()))
        })
        .collect()
}
