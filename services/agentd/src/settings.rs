//! Typed settings, layered: built-in `deploy/default.toml` < `--config FILE` < environment
//! variables `AGENTD__SECTION__KEY`. Unknown keys are an error, so a typo never silently
//! falls back to a default.

use agentd_actors::Limits;
use agentd_mcp::{McpServerConfig, McpServerSettings};
use agentd_proto::Price;
use config::{Config, Environment, File, FileFormat};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The built-in defaults (the same file operators read).
pub const DEFAULT_TOML: &str = include_str!("../../../deploy/default.toml");

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

/// HTTP API settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    /// Address to bind.
    pub bind: String,
    /// Largest request body, bytes.
    pub max_body_bytes: usize,
    /// How long a stop waits for requests in flight before it goes on stopping agents, ms
    /// (event streams end at once and do not count).
    pub shutdown_timeout_ms: u64,
}

/// Which store backs threads and records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    /// Durable redb file under `data_dir`.
    Embedded,
    /// In memory (tests, throwaway runs).
    Memory,
}

/// Store settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSettings {
    /// Backend.
    pub kind: StoreKind,
    /// Directory of the embedded store.
    pub data_dir: PathBuf,
}

/// Redis settings (empty `url` = no Redis).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSettings {
    /// `redis://` or `rediss://` URL; empty disables Redis.
    pub url: String,
    /// Key namespace.
    pub namespace: String,
    /// Partition streams.
    pub partitions: u32,
    /// Lease time, ms.
    pub lease_ms: u64,
    /// Entries per read.
    pub batch: usize,
    /// Cap of `<ns>:events`.
    pub events_maxlen: usize,
    /// Cap of `<ns>:deltas` (the text of answers being streamed; short, so deltas never
    /// crowd lifecycle events out of `<ns>:events`).
    pub deltas_maxlen: usize,
    /// Cap of `<ns>:dead`.
    pub dead_maxlen: usize,
    /// Largest envelope, bytes.
    pub max_envelope_bytes: usize,
    /// Deliveries of one entry that failed with a store error before it is dead-lettered.
    pub max_deliveries: u64,
    /// Envelope ids remembered per agent for de-duplication.
    pub dedup_window: usize,
    /// Process id; empty = random.
    pub process_id: String,
    /// Most commands from `<ns>:commands` this process runs at once.
    pub commands_running: usize,
    /// Most commands this process has taken from `<ns>:commands` and not finished (running or
    /// waiting for an earlier command for the same agent); at least `commands_running`.
    pub commands_taken: usize,
    /// Approximate cap (`MAXLEN ~`) of a command's reply stream.
    pub command_replies_maxlen: usize,
}

impl RedisSettings {
    /// Whether Redis is configured.
    pub fn enabled(&self) -> bool {
        !self.url.trim().is_empty()
    }

    /// The URL with any password replaced by `***`, for logs and `check-config`.
    pub fn masked_url(&self) -> String {
        match (self.url.find("://"), self.url.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                let creds = &self.url[scheme + 3..at];
                let user = creds.split(':').next().unwrap_or("");
                format!("{}{user}:***{}", &self.url[..scheme + 3], &self.url[at..])
            }
            _ => self.url.clone(),
        }
    }
}

/// API authentication.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// Require the bearer token even on loopback.
    pub required: bool,
    /// The token (prefer `AGENTD__AUTH__TOKEN` or `token_file`).
    pub token: String,
    /// File holding the token.
    pub token_file: String,
}

impl AuthSettings {
    /// The configured token, read from `token_file` if `token` is empty.
    pub fn resolve(&self) -> Result<Option<String>, SettingsError> {
        if !self.token.trim().is_empty() {
            return Ok(Some(self.token.trim().to_string()));
        }
        if self.token_file.trim().is_empty() {
            return Ok(None);
        }
        std::fs::read_to_string(self.token_file.trim())
            .map(|t| Some(t.trim().to_string()).filter(|t| !t.is_empty()))
            .map_err(|e| {
                SettingsError::Invalid(format!("auth.token_file {}: {e}", self.token_file))
            })
    }
}

/// Model settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSettings {
    /// Backend: `scripted`, `openai` (any OpenAI-compatible endpoint) or `anthropic`.
    pub backend: String,
    /// Script of the scripted backend; empty = built-in demo.
    pub script: String,
    /// Base URL of an HTTP backend; empty = the provider's public API.
    pub base_url: String,
    /// Model name used unless the agent type names one.
    pub model: String,
    /// Name of the environment variable holding the API key (the key itself is never in a file).
    pub api_key_env: String,
    /// Whole-request timeout of an answer asked for whole, ms (the process backend: the wait
    /// for its answer).
    pub timeout_ms: u64,
    /// HTTP backends ask for streamed answers (text reaches `/v1/events` as it arrives);
    /// `false` asks for whole answers.
    pub stream: bool,
    /// Longest silence of a streamed answer, ms: before its first chunk and between two
    /// chunks (it replaces `timeout_ms` for streams, so a long answer that keeps coming is
    /// never cut).
    pub idle_timeout_ms: u64,
    /// Retries after a 5xx or a connection error.
    pub max_retries: u32,
    /// First retry backoff, ms (doubled per retry, jittered).
    pub backoff_ms: u64,
    /// `max_tokens` of Anthropic requests.
    pub max_tokens: u32,
    /// Program and arguments of the process backend (one process per agent); empty with the
    /// `claude-code` protocol = `["claude"]`.
    pub command: Vec<String>,
    /// What the process backend's processes speak: `jsonl` (agentd's own JSON lines) or
    /// `claude-code` (the Claude Code CLI's stream-json).
    pub protocol: String,
    /// Working directory of the Claude Code CLIs (`claude-code` protocol); empty = a directory
    /// of each agent's own under the data directory.
    pub workdir: String,
    /// Grace period of the process backend's signals (SIGTSTP→SIGSTOP, SIGTERM→SIGKILL), ms.
    pub grace_ms: u64,
    /// Turns of this provider's agents running at once (0 = no provider limit).
    pub max_concurrent: usize,
    /// The model's context window in tokens (0 = not said: no check before a call).
    pub context_tokens: u64,
    /// Calls per minute agentd makes to this provider (0 = no limit).
    pub requests_per_minute: u32,
    /// Estimated input tokens per minute agentd sends this provider (0 = no limit).
    pub tokens_per_minute: u32,
}

/// A named model provider (`[providers.<name>]`): every key is optional and defaults to the
/// `[model]` section's, so a provider names only what differs (backend, model, key, limit).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderSettings {
    /// See [`ModelSettings::backend`].
    pub backend: Option<String>,
    /// See [`ModelSettings::script`].
    pub script: Option<String>,
    /// See [`ModelSettings::base_url`].
    pub base_url: Option<String>,
    /// See [`ModelSettings::model`].
    pub model: Option<String>,
    /// See [`ModelSettings::api_key_env`].
    pub api_key_env: Option<String>,
    /// See [`ModelSettings::timeout_ms`].
    pub timeout_ms: Option<u64>,
    /// See [`ModelSettings::stream`].
    pub stream: Option<bool>,
    /// See [`ModelSettings::idle_timeout_ms`].
    pub idle_timeout_ms: Option<u64>,
    /// See [`ModelSettings::max_retries`].
    pub max_retries: Option<u32>,
    /// See [`ModelSettings::backoff_ms`].
    pub backoff_ms: Option<u64>,
    /// See [`ModelSettings::max_tokens`].
    pub max_tokens: Option<u32>,
    /// See [`ModelSettings::command`].
    pub command: Option<Vec<String>>,
    /// See [`ModelSettings::protocol`].
    pub protocol: Option<String>,
    /// See [`ModelSettings::workdir`].
    pub workdir: Option<String>,
    /// See [`ModelSettings::grace_ms`].
    pub grace_ms: Option<u64>,
    /// See [`ModelSettings::max_concurrent`].
    pub max_concurrent: Option<usize>,
    /// See [`ModelSettings::context_tokens`].
    pub context_tokens: Option<u64>,
    /// See [`ModelSettings::requests_per_minute`].
    pub requests_per_minute: Option<u32>,
    /// See [`ModelSettings::tokens_per_minute`].
    pub tokens_per_minute: Option<u32>,
}

impl ProviderSettings {
    /// The provider's full settings: its own keys over `base`'s.
    pub fn over(&self, base: &ModelSettings) -> ModelSettings {
        ModelSettings {
            backend: self.backend.clone().unwrap_or_else(|| base.backend.clone()),
            script: self.script.clone().unwrap_or_else(|| base.script.clone()),
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| base.base_url.clone()),
            model: self.model.clone().unwrap_or_else(|| base.model.clone()),
            api_key_env: self
                .api_key_env
                .clone()
                .unwrap_or_else(|| base.api_key_env.clone()),
            timeout_ms: self.timeout_ms.unwrap_or(base.timeout_ms),
            stream: self.stream.unwrap_or(base.stream),
            idle_timeout_ms: self.idle_timeout_ms.unwrap_or(base.idle_timeout_ms),
            max_retries: self.max_retries.unwrap_or(base.max_retries),
            backoff_ms: self.backoff_ms.unwrap_or(base.backoff_ms),
            max_tokens: self.max_tokens.unwrap_or(base.max_tokens),
            command: self.command.clone().unwrap_or_else(|| base.command.clone()),
            protocol: self
                .protocol
                .clone()
                .unwrap_or_else(|| base.protocol.clone()),
            workdir: self.workdir.clone().unwrap_or_else(|| base.workdir.clone()),
            grace_ms: self.grace_ms.unwrap_or(base.grace_ms),
            max_concurrent: self.max_concurrent.unwrap_or(0),
            context_tokens: self.context_tokens.unwrap_or(base.context_tokens),
            requests_per_minute: self.requests_per_minute.unwrap_or(0),
            tokens_per_minute: self.tokens_per_minute.unwrap_or(0),
        }
    }
}

/// Checkpoint settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSettings {
    /// Checkpoints kept per agent; older ones are pruned (0 keeps all).
    pub keep: usize,
}

/// Agent type settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentsSettings {
    /// Extra agent type directory; empty = built-in only.
    pub dir: String,
    /// Directories context files may come from.
    pub context_dirs: Vec<PathBuf>,
}

/// System prompt layers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSettings {
    /// Base prompt of every agent.
    pub base: String,
    /// Overlay of every sub-agent.
    pub subagent: String,
}

/// Actor runtime settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeSettings {
    /// Arbiters; 1 (the default) = the main thread, 0 = one per core.
    pub arbiters: usize,
}

/// Price table.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PricingSettings {
    /// Price of models without an entry.
    pub default: Price,
    /// Per-model prices.
    #[serde(default)]
    pub models: BTreeMap<String, Price>,
}

/// Logging settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSettings {
    /// `human` or `json`.
    pub format: String,
    /// Filter (RUST_LOG syntax).
    pub filter: String,
}

/// `[mcp]`: the MCP servers whose tools agents may be given.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpSettings {
    /// `[mcp.servers.<name>]`: each server by name.
    pub servers: BTreeMap<String, McpServerSettings>,
}

impl McpSettings {
    /// The servers resolved: names checked, `${VAR}` references expanded with `var`.
    pub fn resolve(
        &self,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<McpServerConfig>, SettingsError> {
        self.servers
            .iter()
            .map(|(name, server)| {
                server
                    .resolve(name, var)
                    .map_err(|e| SettingsError::Invalid(e.to_string()))
            })
            .collect()
    }

    /// The settings as `check-config` prints them (`env` and `headers` values masked).
    pub fn masked(&self) -> McpSettings {
        McpSettings {
            servers: self
                .servers
                .iter()
                .map(|(name, s)| (name.clone(), s.masked()))
                .collect(),
        }
    }
}

/// A tool of `[tools.<name>]`: answered by another service (`kind = "service"`) or a webhook
/// (`kind = "http"`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSettings {
    /// `service` or `http`.
    pub kind: agentd_proto::ToolKind,
    /// What it does, for the model.
    #[serde(default)]
    pub description: String,
    /// The JSON schema of its arguments (an object with no properties if not given).
    #[serde(default = "ToolSettings::no_parameters")]
    pub parameters: serde_json::Value,
    /// How long a call may take, ms: a webhook's request, retries included, or a service's
    /// answer; then the model gets a tool error. 0 waits for ever (service tools only).
    #[serde(default = "ToolSettings::default_timeout_ms")]
    pub timeout_ms: u64,
    /// `always` (every call waits for a person's approval) or `never`.
    #[serde(default)]
    pub approval: agentd_actors::Approval,
    /// Where a webhook tool POSTs.
    #[serde(default)]
    pub url: String,
    /// The environment variable holding a webhook tool's signing secret (unset: start-up
    /// error).
    #[serde(default)]
    pub secret_env: String,
}

impl ToolSettings {
    fn no_parameters() -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {}})
    }

    fn default_timeout_ms() -> u64 {
        60_000
    }

    /// Checks the tool's settings (not its environment, which `wiring` reads).
    fn validate(&self, name: &str) -> Result<(), SettingsError> {
        let bad = |why: String| Err(SettingsError::Invalid(format!("tools.{name}: {why}")));
        if let Err(e) = agentd_actors::ToolCatalogue::check_name(name) {
            return bad(e.message);
        }
        if !self.parameters.is_object() {
            return bad("parameters must be a JSON schema (a table)".into());
        }
        match self.kind {
            agentd_proto::ToolKind::Http => {
                if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
                    return bad(format!(
                        "a webhook tool needs url = \"http(s)://…\" (got `{}`)",
                        self.url
                    ));
                }
                if self.timeout_ms == 0 {
                    return bad("a webhook tool needs timeout_ms > 0".into());
                }
            }
            agentd_proto::ToolKind::Service => {
                if !self.url.is_empty() || !self.secret_env.is_empty() {
                    return bad("url and secret_env are for kind = \"http\"".into());
                }
            }
            agentd_proto::ToolKind::Mcp => {
                return bad("MCP tools come from [mcp.servers.<name>], not [tools]".into());
            }
            agentd_proto::ToolKind::Builtin => {
                return bad("built-in tools are agentd's own, not [tools]".into());
            }
        }
        Ok(())
    }
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
}

impl Settings {
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
                "scripted" | "openai" | "anthropic" | "process"
            ) {
                return Err(SettingsError::Invalid(format!(
                    "{section}.backend `{}` is not one of scripted, openai, anthropic, process",
                    m.backend
                )));
            }
            if !matches!(m.protocol.as_str(), "jsonl" | "claude-code") {
                return Err(SettingsError::Invalid(format!(
                    "{section}.protocol `{}` is not one of jsonl, claude-code",
                    m.protocol
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
