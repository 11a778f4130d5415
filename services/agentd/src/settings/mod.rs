//! Typed settings, layered: built-in `deploy/default.toml` < `--config FILE` < environment
//! variables `AGENTD__SECTION__KEY`. Unknown keys are an error, so a typo never silently
//! falls back to a default.

mod model;
mod service;
mod tools;

pub use model::{ModelSettings, PricingSettings, ProviderSettings};
pub use service::{
    AgentsSettings, AuthSettings, CheckpointSettings, LogSettings, PromptSettings, RedisSettings,
    RuntimeSettings, ServerSettings, StoreKind, StoreSettings,
};
pub use tools::{McpSettings, ToolSettings};

use agentd_actors::Limits;
use config::{Config, Environment, File, FileFormat};
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
    /// Further model providers by name (agent types and spawns choose one).
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSettings>,
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
    /// OpenTelemetry export (off unless an endpoint is set).
    #[serde(default)]
    pub telemetry: crate::telemetry::TelemetrySettings,
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
    /// The store the service runs on, as its logs name it: `Redis` when `redis.url` is set
    /// (`store.kind` is then unused), else `store.kind`'s.
    pub fn store_name(&self) -> &'static str {
        if self.redis.enabled() {
            return "Redis";
        }
        match self.store.kind {
            StoreKind::Embedded => "Embedded",
            StoreKind::Memory => "Memory",
        }
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
        let settings: Settings = builder.build()?.try_deserialize()?;
        settings.validate()?;
        Ok(settings)
    }

    /// Loads defaults < `overrides` (TOML text), without the environment: for tests and tools
    /// that must not pick up the caller's environment.
    pub fn from_overrides(overrides: &str) -> Result<Settings, SettingsError> {
        let settings: Settings = Config::builder()
            .add_source(File::from_str(DEFAULT_TOML, FileFormat::Toml))
            .add_source(File::from_str(overrides, FileFormat::Toml))
            .build()?
            .try_deserialize()?;
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
        if self.redis.enabled() {
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
        let providers = self
            .providers
            .iter()
            .map(|(name, p)| (format!("providers.{name}"), p.over(&self.model)));
        // Names, transports and timeouts; `${VAR}` references are checked when wiring, where
        // the environment is read.
        self.mcp.resolve(&|_| Some(String::new()))?;
        for (section, m) in
            std::iter::once(("model".to_string(), self.model.clone())).chain(providers)
        {
            if !matches!(
                m.backend.as_str(),
                "scripted" | "openai" | "anthropic" | "process" | "a2a"
            ) {
                return Err(SettingsError::Invalid(format!(
                    "{section}.backend `{}` is not one of scripted, openai, anthropic, process, a2a",
                    m.backend
                )));
            }
            if !matches!(m.protocol.as_str(), "jsonl" | "claude-code") {
                return Err(SettingsError::Invalid(format!(
                    "{section}.protocol `{}` is not one of jsonl, claude-code",
                    m.protocol
                )));
            }
            if m.backend == "a2a" && m.card_url.trim().is_empty() {
                return Err(SettingsError::Invalid(format!(
                    "{section}.backend is a2a: set {section}.card_url (the remote's Agent Card)"
                )));
            }
            if m.backend == "process" && m.protocol == "jsonl" && m.command.is_empty() {
                return Err(SettingsError::Invalid(format!(
                    "{section}.backend is process: set {section}.command"
                )));
            }
        }
        for (name, tool) in &self.tools {
            tool.validate(name)?;
        }
        Ok(())
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_load_and_overrides_apply() {
        let s =
            Settings::from_overrides("[server]\nbind = \"127.0.0.1:0\"\n[limits]\nmax_depth = 2\n");
        let s = s.map_err(|e| e.to_string());
        assert!(s.is_ok(), "{s:?}");
        if let Ok(s) = s {
            assert_eq!(s.server.bind, "127.0.0.1:0");
            assert_eq!(s.limits.max_depth, 2);
            assert_eq!(s.limits.max_children, 64);
            assert_eq!(s.store.kind, StoreKind::Embedded);
        }
    }

    #[test]
    fn replicas_are_not_waited_for_by_default_and_a_wait_has_an_end() {
        let s = Settings::from_overrides("").map_err(|e| e.to_string());
        assert!(
            matches!(&s, Ok(s) if (s.redis.min_replicas, s.redis.replica_wait_ms) == (0, 1000)),
            "{s:?}"
        );
        let s = Settings::from_overrides(
            "[redis]\nurl = \"redis://127.0.0.1:1/\"\nmin_replicas = 1\nreplica_wait_ms = 0\n",
        );
        let e = s.map(|_| ()).map_err(|e| e.to_string());
        assert!(
            matches!(&e, Err(m) if m.contains("redis.replica_wait_ms")),
            "{e:?}"
        );
    }

    #[test]
    fn command_limits_default_and_must_leave_room_to_run() {
        let s = Settings::from_overrides("").map_err(|e| e.to_string());
        assert!(s.is_ok(), "{s:?}");
        if let Ok(s) = s {
            assert_eq!(
                (
                    s.redis.commands_running,
                    s.redis.commands_taken,
                    s.redis.command_replies_maxlen
                ),
                (64, 1024, 10_000)
            );
        }
        for bad in [
            "commands_running = 0",
            "commands_running = 8\ncommands_taken = 4",
        ] {
            let s = Settings::from_overrides(&format!(
                "[redis]\nurl = \"redis://127.0.0.1:1/\"\n{bad}\n"
            ));
            let e = s.map(|_| ()).map_err(|e| e.to_string());
            assert!(
                matches!(&e, Err(m) if m.contains("redis.commands_running")),
                "{bad}: {e:?}"
            );
        }
    }

    #[test]
    fn a_redis_cluster_is_its_url_and_seed_nodes() {
        let s = Settings::from_overrides(
            "[redis]\nurl = \"redis://h1:7000/\"\ncluster = true\n\
             cluster_nodes = \"redis://h2:7000/, redis://h3:7000/\"\n",
        )
        .map_err(|e| e.to_string());
        assert_eq!(
            s.map(|s| s.redis.target()),
            Ok(agentd_store::RedisTarget::cluster([
                "redis://h1:7000/",
                "redis://h2:7000/",
                "redis://h3:7000/"
            ]))
        );
        let one = Settings::from_overrides("[redis]\nurl = \"redis://h1:7000/\"\n")
            .map(|s| s.redis.target())
            .map_err(|e| e.to_string());
        assert_eq!(
            one,
            Ok(agentd_store::RedisTarget::single("redis://h1:7000/"))
        );
        for (bad, says) in [
            (
                "cluster_nodes = [\"redis://h2:7000/\"]",
                "set redis.cluster = true",
            ),
            (
                "cluster = true\ncluster_nodes = [\"h2:7000\"]",
                "must start with redis://",
            ),
        ] {
            let e =
                Settings::from_overrides(&format!("[redis]\nurl = \"redis://h1:7000/\"\n{bad}\n"))
                    .map(|_| ())
                    .map_err(|e| e.to_string());
            assert!(matches!(&e, Err(m) if m.contains(says)), "{bad}: {e:?}");
        }
    }

    #[test]
    fn redis_passwords_are_masked() {
        let mut s = Settings::from_overrides("").map_err(|e| e.to_string());
        if let Ok(s) = s.as_mut() {
            s.redis.url = "rediss://app:s3cret@db:6380/0".into();
            assert_eq!(s.redis.masked_url(), "rediss://app:***@db:6380/0");
            assert!(!s.redis.masked_url().contains("s3cret"));
        }
        assert!(s.is_ok());
    }

    #[test]
    fn an_a2a_provider_takes_kind_a_card_and_headers_and_needs_the_card() {
        let s = Settings::from_overrides(
            "[providers.far]\nkind = \"a2a\"\ncard_url = \"http://127.0.0.1:1/card\"\n\
             headers = { Authorization = \"Bearer ${T}\" }\n",
        )
        .map_err(|e| e.to_string());
        assert!(s.is_ok(), "{s:?}");
        if let Ok(s) = s {
            let far = s.providers["far"].over(&s.model);
            assert_eq!(far.backend, "a2a");
            assert_eq!(far.card_url, "http://127.0.0.1:1/card");
            assert_eq!(far.headers["Authorization"], "Bearer ${T}");
        }
        let err = Settings::from_overrides("[providers.far]\nbackend = \"a2a\"\n")
            .err()
            .map(|e| e.to_string());
        assert!(
            err.unwrap_or_default().contains("providers.far.card_url"),
            "a card is required"
        );
    }

    #[test]
    fn providers_inherit_the_model_section() {
        let s = Settings::from_overrides(
            "[model]\ntimeout_ms = 999\n[providers.fast]\nbackend = \"process\"\ncommand = [\"cat\"]\nmax_concurrent = 2\n",
        )
        .map_err(|e| e.to_string());
        assert!(s.is_ok(), "{s:?}");
        if let Ok(s) = s {
            let fast = s.providers["fast"].over(&s.model);
            assert_eq!(fast.backend, "process");
            assert_eq!(fast.timeout_ms, 999);
            assert_eq!(fast.max_concurrent, 2);
        }
        let err = Settings::from_overrides("[providers.bad]\nbackend = \"nope\"\n")
            .err()
            .map(|e| e.to_string());
        assert!(err.unwrap_or_default().contains("providers.bad.backend"));
    }

    #[test]
    fn configured_tools_load_and_are_checked() {
        let s = Settings::from_overrides(
            r#"
[tools.lookup_order]
kind = "service"
description = "Look an order up by id."
parameters = { type = "object", properties = { order_id = { type = "string" } }, required = ["order_id"] }
timeout_ms = 600000
approval = "never"

[tools.notify]
kind = "http"
url = "http://127.0.0.1:9100/notify"
secret_env = "NOTIFY_SECRET"
approval = "always"
"#,
        )
        .map_err(|e| e.to_string());
        assert!(s.is_ok(), "{s:?}");
        if let Ok(s) = s {
            let order = &s.tools["lookup_order"];
            assert_eq!(
                order.parameters["required"],
                serde_json::json!(["order_id"])
            );
            assert_eq!(order.timeout_ms, 600_000);
            assert_eq!(s.tools["notify"].approval, agentd_actors::Approval::Always);
            assert_eq!(s.tools["notify"].timeout_ms, 60_000);
        }
        for (bad, says) in [
            ("[tools.mcp__x]\nkind = \"service\"\n", "mcp__"),
            ("[tools.current_time]\nkind = \"service\"\n", "built-in"),
            ("[tools.hook]\nkind = \"http\"\n", "url"),
            (
                "[tools.svc]\nkind = \"service\"\nurl = \"http://x\"\n",
                "kind = \"http\"",
            ),
            ("[tools.svc]\nkind = \"grpc\"\n", "grpc"),
            ("[tools.svc]\nkind = \"builtin\"\n", "agentd's own"),
        ] {
            let e = Settings::from_overrides(bad).err().map(|e| e.to_string());
            assert!(
                e.as_deref().is_some_and(|e| e.contains(says)),
                "{bad}: {e:?}"
            );
        }
    }

    #[test]
    fn the_claude_code_protocol_needs_no_command_and_others_are_refused() {
        let s = Settings::from_overrides(
            "[providers.claude]\nbackend = \"process\"\nprotocol = \"claude-code\"\n",
        )
        .map_err(|e| e.to_string());
        assert!(s.is_ok(), "{s:?}");
        if let Ok(s) = s {
            assert_eq!(s.model.protocol, "jsonl", "the default protocol");
            assert_eq!(s.providers["claude"].over(&s.model).protocol, "claude-code");
        }
        let err = Settings::from_overrides("[model]\nbackend = \"process\"\n")
            .err()
            .map(|e| e.to_string());
        assert!(err.unwrap_or_default().contains("set model.command"));
        let err = Settings::from_overrides("[model]\nprotocol = \"acp\"\n")
            .err()
            .map(|e| e.to_string());
        assert!(err.unwrap_or_default().contains("model.protocol"));
    }

    #[test]
    fn mcp_servers_keep_their_key_case_and_bad_names_are_refused() {
        let s = Settings::from_overrides(
            "[mcp.servers.files]\ncommand = [\"srv\"]\nenv = { GITHUB_TOKEN = \"${T}\" }\n\
             approval = [\"write_file\"]\n[mcp.servers.search]\nurl = \"http://127.0.0.1:9/mcp\"\n\
             headers = { Authorization = \"Bearer ${T}\" }\ntimeout_ms = 5\n",
        )
        .map_err(|e| e.to_string());
        assert!(s.is_ok(), "{s:?}");
        if let Ok(s) = s {
            let files = &s.mcp.servers["files"];
            assert!(files.env.contains_key("GITHUB_TOKEN"), "{:?}", files.env);
            assert!(
                s.mcp.servers["search"]
                    .headers
                    .contains_key("Authorization")
            );
            let servers = s.mcp.resolve(&|v| (v == "T").then(|| "tok".to_string()));
            assert_eq!(servers.map(|s| s.len()).ok(), Some(2));
            let unset = s.mcp.resolve(&|_| None).err().map(|e| e.to_string());
            assert!(unset.unwrap_or_default().contains("${T}, which is not set"));
            let shown = toml::to_string(&s.mcp.masked()).unwrap_or_default();
            assert!(!shown.contains("Bearer"), "{shown}");
        }
        for bad in ["Files", "a__b", "-x"] {
            let err = Settings::from_overrides(&format!(
                "[mcp.servers.\"{bad}\"]\ncommand = [\"srv\"]\n"
            ))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
            assert!(err.contains("a server name must match"), "{bad}: {err}");
        }
        let err =
            Settings::from_overrides("[mcp.servers.x]\ncommand = [\"a\"]\nurl = \"http://h\"\n")
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
        assert!(err.contains("either command"), "{err}");
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = Settings::from_overrides("[limits]\nmax_deptth = 2\n")
            .err()
            .map(|e| e.to_string());
        assert!(err.unwrap_or_default().contains("max_deptth"));
    }
}
