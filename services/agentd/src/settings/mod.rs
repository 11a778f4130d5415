//! Typed settings, layered: built-in `deploy/default.toml` < `--config FILE` < environment
//! variables `AGENTD__SECTION__KEY`. Unknown keys are an error, so a typo never silently
//! falls back to a default.
//!
//! | module | what it holds |
//! |---|---|
//! | `model` | `[model]` and `[providers.*]`: each backend's own keys, what providers inherit, prices |
//! | `service` | the service's sections: server, store, Redis, auth, agents, prompts, runtime, log |
//! | `tools` | `[tools.*]` and `[mcp]` |
//! | `telemetry` | `[telemetry]`: OpenTelemetry export |

mod model;
mod service;
mod telemetry;
mod tools;

pub use model::{
    A2aBackend, ApiBackend, Backend, ModelSettings, NOT_INHERITED, PricingSettings, ProcessBackend,
    ProcessProtocol, ProviderLimits, ScriptedBackend,
};
pub use service::{
    AgentsSettings, AuthSettings, CheckpointSettings, LogSettings, PromptSettings, RedisSettings,
    RuntimeSettings, ServerSettings, StoreBackend, StoreKind, StoreSettings,
};
pub use telemetry::TelemetrySettings;
pub use tools::{McpSettings, ToolSettings};

use agentd_actors::Limits;
use config::{Config, Environment, File, FileFormat, Source as _, Value, ValueKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The built-in defaults (the same file operators read).
pub const DEFAULT_TOML: &str = include_str!("../../../../deploy/default.toml");

/// Why settings could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A layer could not be read or merged, or a value has the wrong type or an unknown key.
    #[error("configuration: {0}")]
    Config(#[from] config::ConfigError),
    /// A value is out of range or inconsistent.
    #[error("configuration: {0}")]
    Invalid(String),
}

/// Everything agentd reads at start-up.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// HTTP API.
    pub server: ServerSettings,
    /// API authentication.
    pub auth: AuthSettings,
    /// Store.
    pub store: StoreSettings,
    /// Redis (store and bus) when configured.
    pub redis: RedisSettings,
    /// The default model provider.
    pub model: ModelSettings,
    /// Further model providers by name (agent types and spawns choose one), each with what it
    /// inherits from `[model]` (see [`model::prepare`]).
    #[serde(default)]
    pub providers: BTreeMap<String, ModelSettings>,
    /// Checkpoints.
    pub checkpoints: CheckpointSettings,
    /// Agent types.
    pub agents: AgentsSettings,
    /// Limits.
    pub limits: Limits,
    /// Prompts.
    pub prompts: PromptSettings,
    /// Runtime.
    pub runtime: RuntimeSettings,
    /// Prices.
    pub pricing: PricingSettings,
    /// Logs.
    pub log: LogSettings,
    /// MCP servers.
    #[serde(default)]
    pub mcp: McpSettings,
    /// Tools answered by other services or webhooks, by name (agent types list them in
    /// `tools`).
    #[serde(default)]
    pub tools: BTreeMap<String, ToolSettings>,
    /// The A2A protocol (docs/a2a.md).
    #[serde(default)]
    pub a2a: A2aSettings,
    /// agentd as an MCP server (docs/mcp-server.md).
    #[serde(default)]
    pub mcp_server: McpServerSettings,
    /// OpenTelemetry export (off unless an endpoint is set).
    #[serde(default)]
    pub telemetry: TelemetrySettings,
}

/// `[a2a]`: which agent types are A2A agents.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aSettings {
    /// The agent types served as A2A agents at `/a2a/<type>` (none: A2A is off). A list, or
    /// (from the environment) one string of names separated by commas.
    #[serde(default, deserialize_with = "names")]
    pub expose: Vec<String>,
    /// The base of the Agent Cards' absolute URLs (e.g. `https://agents.example.com`);
    /// empty: the scheme and host each request arrived with.
    #[serde(default)]
    pub public_url: String,
    /// A context (a root agent of an exposed type with A2A tasks) idle this long, ms, is
    /// closed (its actor freed, its history and tasks kept; a new message re-opens it). 0: never.
    #[serde(default)]
    pub context_idle_close_ms: u64,
}

/// `[mcp_server]`: which agent types MCP hosts can call, as tools `ask_<type>` at `/mcp`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerSettings {
    /// The agent types served as tools `ask_<type>` at `/mcp` on the API's port (none: the
    /// MCP server is off). A list, or (from the environment) one string of names separated by
    /// commas.
    #[serde(default, deserialize_with = "names")]
    pub expose: Vec<String>,
    /// The `Host` names `/mcp` answers (a defence against DNS rebinding; `name` or
    /// `name:port`). Empty: the loopback names when the API has no token, any host when it has
    /// one (the token guards it then).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
}

/// A list of names, or one string of them separated by commas.
fn names<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Names {
        List(Vec<String>),
        One(String),
    }
    let list = match Names::deserialize(d)? {
        Names::List(l) => l,
        Names::One(s) => s.split(',').map(str::to_string).collect(),
    };
    Ok(list
        .into_iter()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect())
}

impl Settings {
    /// The store the service runs on: `store.kind`'s; unset, Redis when `redis.url` is set,
    /// else the embedded store. (A `store.kind` that `redis.url` contradicts does not pass
    /// [`Settings::load`].)
    pub fn store(&self) -> StoreBackend<'_> {
        match (self.store.kind, self.redis.has_url()) {
            (Some(StoreKind::Redis), _) | (None, true) => StoreBackend::Redis(&self.redis),
            (Some(StoreKind::Memory), _) => StoreBackend::Memory,
            (Some(StoreKind::Embedded), _) | (None, false) => StoreBackend::Embedded {
                data_dir: &self.store.data_dir,
            },
        }
    }

    /// The store the service runs on, as its logs name it: its kind, capitalized.
    pub fn store_name(&self) -> String {
        let kind = self.store().kind().name();
        let mut chars = kind.chars();
        chars.next().map_or_else(String::new, |first| {
            first.to_uppercase().chain(chars).collect()
        })
    }

    /// Every model provider with the section that configures it: `[model]` as `model`, then
    /// `[providers.<name>]` as `providers.<name>`, with its name.
    pub fn model_providers(&self) -> impl Iterator<Item = (Option<&str>, &ModelSettings)> {
        std::iter::once((None, &self.model)).chain(
            self.providers
                .iter()
                .map(|(name, p)| (Some(name.as_str()), p)),
        )
    }

    /// Loads defaults < `file` < environment.
    pub fn load(file: Option<&Path>) -> Result<Settings, SettingsError> {
        let mut builder =
            Config::builder().add_source(File::from_str(DEFAULT_TOML, FileFormat::Toml));
        if let Some(path) = file {
            builder = builder.add_source(File::from(path).format(FileFormat::Toml).required(true));
        }
        builder = builder.add_source(
            Environment::with_prefix("AGENTD")
                .prefix_separator("__")
                .separator("__")
                .try_parsing(true),
        );
        Settings::from_config(builder.build()?)
    }

    /// Loads defaults < `overrides` (TOML text), without the environment: for tests and tools
    /// that must not pick up the caller's environment.
    pub fn from_overrides(overrides: &str) -> Result<Settings, SettingsError> {
        Settings::from_config(
            Config::builder()
                .add_source(File::from_str(DEFAULT_TOML, FileFormat::Toml))
                .add_source(File::from_str(overrides, FileFormat::Toml))
                .build()?,
        )
    }

    /// The layers merged, the model providers prepared ([`model::prepare`]: `kind` read as
    /// `backend`, what providers inherit, keys of other backends refused), then typed and
    /// checked.
    fn from_config(config: Config) -> Result<Settings, SettingsError> {
        // `collect` keeps each value's origin (a file, the environment) for the messages.
        let mut raw = config.collect()?;
        model::prepare(&mut raw).map_err(SettingsError::Invalid)?;
        let settings = Settings::deserialize(Value::new(None, ValueKind::Table(raw)))?;
        settings.validate()?;
        Ok(settings)
    }

    fn validate(&self) -> Result<(), SettingsError> {
        self.telemetry.validate().map_err(SettingsError::Invalid)?;
        if self.server.bind.parse::<std::net::SocketAddr>().is_err() {
            return Err(SettingsError::Invalid(format!(
                "server.bind `{}` is not an address like 127.0.0.1:7878",
                self.server.bind
            )));
        }
        let token = self.auth.resolve()?;
        let loopback = self
            .server
            .bind
            .parse::<std::net::SocketAddr>()
            .map(|a| a.ip().is_loopback())
            .unwrap_or(false);
        if token.is_none() && (self.auth.required || !loopback) {
            return Err(SettingsError::Invalid(format!(
                "the API binds to {} or auth.required is set: configure auth.token or auth.token_file",
                self.server.bind
            )));
        }
        if self.server.request_timeout_ms == 0 {
            return Err(SettingsError::Invalid(
                "server.request_timeout_ms must be > 0".into(),
            ));
        }
        if !matches!(self.log.format.as_str(), "human" | "json") {
            return Err(SettingsError::Invalid(format!(
                "log.format `{}` must be human or json",
                self.log.format
            )));
        }
        // A kind said explicitly must agree with `redis.url`: every store but Redis
        // contradicts a URL, and Redis needs one.
        if let Some(kind) = self.store.kind {
            let redis = matches!(self.store(), StoreBackend::Redis(_));
            if redis && !self.redis.has_url() {
                return Err(SettingsError::Invalid(
                    "store.kind is redis: set redis.url (redis://host:6379/0, or a node of the \
                     cluster)"
                        .into(),
                ));
            }
            if !redis && self.redis.has_url() {
                return Err(SettingsError::Invalid(format!(
                    "store.kind is {} but redis.url is set: redis.url no longer overrides \
                     store.kind. Set store.kind = \"redis\" (or leave it unset) to run on \
                     Redis, or leave redis.url empty",
                    kind.name()
                )));
            }
        }
        if let StoreBackend::Redis(_) = self.store() {
            if !(self.redis.url.starts_with("redis://") || self.redis.url.starts_with("rediss://"))
            {
                return Err(SettingsError::Invalid(format!(
                    "redis.url `{}` must start with redis:// or rediss://",
                    self.redis.masked_url()
                )));
            }
            if let Some(node) = self
                .redis
                .cluster_nodes
                .iter()
                .find(|n| !(n.starts_with("redis://") || n.starts_with("rediss://")))
            {
                return Err(SettingsError::Invalid(format!(
                    "redis.cluster_nodes: `{node}` must start with redis:// or rediss://"
                )));
            }
            if !self.redis.cluster && !self.redis.cluster_nodes.is_empty() {
                return Err(SettingsError::Invalid(
                    "redis.cluster_nodes names seed nodes of a Redis Cluster: set redis.cluster = true too".into(),
                ));
            }
            if self.redis.partitions == 0 || self.redis.lease_ms < 100 {
                return Err(SettingsError::Invalid(
                    "redis.partitions must be > 0 and redis.lease_ms >= 100".into(),
                ));
            }
            if self.redis.commands_running == 0
                || self.redis.commands_taken < self.redis.commands_running
            {
                return Err(SettingsError::Invalid(
                    "redis.commands_running must be > 0 and redis.commands_taken >= it".into(),
                ));
            }
            // `WAIT n 0` would block for ever.
            if self.redis.min_replicas > 0 && self.redis.replica_wait_ms == 0 {
                return Err(SettingsError::Invalid(
                    "redis.replica_wait_ms must be > 0 when redis.min_replicas > 0".into(),
                ));
            }
        }
        let l = &self.limits;
        if l.max_title_chars == 0 || l.max_prompt_bytes == 0 || l.max_message_bytes == 0 {
            return Err(SettingsError::Invalid(
                "limits.max_title_chars, max_prompt_bytes and max_message_bytes must be > 0".into(),
            ));
        }
        // Names, transports and timeouts; `${VAR}` references are checked when wiring, where
        // the environment is read.
        self.mcp.resolve(&|_| Some(String::new()))?;
        for (name, m) in self.model_providers() {
            let section = name.map_or_else(|| "model".to_string(), |n| format!("providers.{n}"));
            m.check(&section).map_err(SettingsError::Invalid)?;
        }
        for (name, tool) in &self.tools {
            tool.validate(name)?;
        }
        Ok(())
    }
}
#[cfg(test)]
mod tests;
