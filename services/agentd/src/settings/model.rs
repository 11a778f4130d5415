//! Model providers: the default one (`[model]`), further ones by name (`[providers.<name>]`),
//! and the price table their usage is priced by.

use agentd_proto::Price;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Model settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSettings {
    /// Backend: `scripted`, `openai` (any OpenAI-compatible endpoint), `anthropic`, `process`
    /// or `a2a` (a remote A2A agent; `kind` is another name of the key).
    #[serde(alias = "kind")]
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
    /// The remote agent's Agent Card URL (`backend = "a2a"`).
    #[serde(default)]
    pub card_url: String,
    /// Headers sent with every request to the remote agent (`backend = "a2a"`); values may
    /// name environment variables as `${VAR}` (an unset one fails the start).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// A named model provider (`[providers.<name>]`): every key is optional and defaults to the
/// `[model]` section's, so a provider names only what differs (backend, model, key, limit).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderSettings {
    /// See [`ModelSettings::backend`].
    #[serde(alias = "kind")]
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
    /// See [`ModelSettings::card_url`].
    pub card_url: Option<String>,
    /// See [`ModelSettings::headers`].
    pub headers: Option<BTreeMap<String, String>>,
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
            card_url: self
                .card_url
                .clone()
                .unwrap_or_else(|| base.card_url.clone()),
            headers: self.headers.clone().unwrap_or_else(|| base.headers.clone()),
        }
    }
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
