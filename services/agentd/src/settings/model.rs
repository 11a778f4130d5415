//! Model providers: the default one (`[model]`), further ones by name (`[providers.<name>]`),
//! and the price table their usage is priced by.
//!
//! A provider's table is tagged by `backend` (`kind` is another name of the key): the tag picks
//! a variant of [`Backend`], which takes only its own keys, besides the keys every backend
//! takes ([`ProviderLimits`]). Unset, the backend is `scripted`. Before the settings are read,
//! [`prepare`] gives each `[providers.<name>]` the keys it inherits from `[model]` (all but the
//! limits of [`NOT_INHERITED`], and only when its backend is `[model]`'s) and reads every
//! provider once, so that a mistake is named by its section.
//!
//! A table is read with the `config` crate's own deserializer, key by key, rather than through
//! serde's internally tagged enums, which buffer values first: a value the environment gave
//! (`AGENTD__MODEL__MODEL=4`, parsed as a number) then still reads as the string its key
//! needs, and a wrong one is named by its key and origin.

use agentd_proto::Price;
use config::{ConfigError, Map, Value, ValueKind};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// One model provider: its backend, with that backend's own settings, and what agentd keeps
/// to around every call to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelSettings {
    /// The backend (`backend = "…"`) and its settings.
    #[serde(flatten)]
    pub backend: Backend,
    /// What every backend takes.
    #[serde(flatten)]
    pub limits: ProviderLimits,
}

impl Default for ModelSettings {
    /// The `scripted` backend on the built-in script, without limits.
    fn default() -> Self {
        ModelSettings {
            backend: Backend::Scripted(ScriptedBackend::default()),
            limits: ProviderLimits::default(),
        }
    }
}

/// The model backends, by the name `backend` gives them. Each variant holds the keys of its
/// backend and no other's: a key of another backend is refused at start-up.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "backend", rename_all = "lowercase")]
pub enum Backend {
    /// Deterministic answers from a TOML script; offline, no keys; the default.
    Scripted(ScriptedBackend),
    /// Any OpenAI-compatible chat-completions endpoint.
    OpenAi(ApiBackend),
    /// The Anthropic Messages API.
    Anthropic(ApiBackend),
    /// One OS process per agent (agentd's JSON lines, or the Claude Code CLI).
    Process(ProcessBackend),
    /// A remote A2A 1.0 agent.
    A2a(A2aBackend),
}

impl Backend {
    /// The name `backend` gives it (also its serde tag).
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Scripted(_) => "scripted",
            Backend::OpenAi(_) => "openai",
            Backend::Anthropic(_) => "anthropic",
            Backend::Process(_) => "process",
            Backend::A2a(_) => "a2a",
        }
    }

    /// Every backend, with its defaults, in the order the documentation lists them. Each
    /// variant names the next, so the compiler asks a new variant for its place.
    pub fn every() -> Vec<Backend> {
        let mut all = Vec::new();
        let mut next = Some(Backend::Scripted(ScriptedBackend::default()));
        while let Some(backend) = next {
            next = match &backend {
                Backend::Scripted(_) => Some(Backend::OpenAi(ApiBackend::default())),
                Backend::OpenAi(_) => Some(Backend::Anthropic(ApiBackend::default())),
                Backend::Anthropic(_) => Some(Backend::Process(ProcessBackend::default())),
                Backend::Process(_) => Some(Backend::A2a(A2aBackend::default())),
                Backend::A2a(_) => None,
            };
            all.push(backend);
        }
        all
    }

    /// The backend of `self`'s variant with the keys of `table` (its defaults for the rest).
    fn read(&self, table: Value) -> Result<Backend, ConfigError> {
        Ok(match self {
            Backend::Scripted(_) => Backend::Scripted(ScriptedBackend::deserialize(table)?),
            Backend::OpenAi(_) => Backend::OpenAi(ApiBackend::deserialize(table)?),
            Backend::Anthropic(_) => Backend::Anthropic(ApiBackend::deserialize(table)?),
            Backend::Process(_) => Backend::Process(ProcessBackend::deserialize(table)?),
            Backend::A2a(_) => Backend::A2a(A2aBackend::deserialize(table)?),
        })
    }

    /// The settings this backend needs and the types do not say (`section` names it).
    fn check(&self, section: &str) -> Result<(), String> {
        match self {
            Backend::A2a(a) if a.card_url.trim().is_empty() => Err(format!(
                "{section}.backend is a2a: set {section}.card_url (the remote's Agent Card)"
            )),
            Backend::Process(p) if p.protocol == ProcessProtocol::Jsonl && p.command.is_empty() => {
                Err(format!(
                    "{section}.backend is process: set {section}.command"
                ))
            }
            _ => Ok(()),
        }
    }
}

/// `scripted`: deterministic answers from a TOML script.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScriptedBackend {
    /// The script file; empty = the built-in demo (`deploy/scripts/demo.toml`).
    pub script: String,
}

/// `openai` and `anthropic`: a provider's HTTP API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiBackend {
    /// Base URL; empty = the provider's public API.
    pub base_url: String,
    /// Model name used unless the agent type or the spawn names one.
    pub model: String,
    /// Name of the environment variable holding the API key (the key itself is never in a
    /// file).
    pub api_key_env: String,
    /// Whole-request timeout of an answer asked for whole, ms.
    pub timeout_ms: u64,
    /// Ask for streamed answers (text reaches `/v1/events` as it arrives); `false` asks for
    /// whole answers.
    pub stream: bool,
    /// Longest silence of a streamed answer, ms: before its first chunk and between two
    /// chunks (it replaces `timeout_ms` for streams, so a long answer that keeps coming is
    /// never cut).
    pub idle_timeout_ms: u64,
    /// Retries after a 5xx or a connection error.
    pub max_retries: u32,
    /// First retry backoff, ms (doubled per retry, jittered).
    pub backoff_ms: u64,
}

impl Default for ApiBackend {
    fn default() -> Self {
        ApiBackend {
            base_url: String::new(),
            model: String::new(),
            api_key_env: String::new(),
            timeout_ms: 120_000,
            stream: true,
            idle_timeout_ms: 60_000,
            max_retries: 3,
            backoff_ms: 500,
        }
    }
}

/// `process`: one OS process per agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProcessBackend {
    /// Program and arguments; empty with the `claude-code` protocol = `["claude"]`.
    pub command: Vec<String>,
    /// What the processes speak.
    #[serde(deserialize_with = "super::service::by_name")]
    pub protocol: ProcessProtocol,
    /// Working directory of the Claude Code CLIs (`claude-code`); empty = a directory of each
    /// agent's own under the data directory.
    pub workdir: String,
    /// Model the Claude Code CLIs are asked for unless the agent type or the spawn names one
    /// (`claude-code`; empty = the CLI's own choice).
    pub model: String,
    /// Grace period of the signals (SIGTSTP→SIGSTOP, SIGTERM→SIGKILL), ms.
    pub grace_ms: u64,
    /// The wait for an answer line (`claude-code`: one whole CLI turn, paused time not
    /// counted), ms.
    pub timeout_ms: u64,
}

impl Default for ProcessBackend {
    fn default() -> Self {
        ProcessBackend {
            command: Vec::new(),
            protocol: ProcessProtocol::Jsonl,
            workdir: String::new(),
            model: String::new(),
            grace_ms: 2_000,
            timeout_ms: 120_000,
        }
    }
}

/// What the `process` backend's processes speak.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProcessProtocol {
    /// agentd's own JSON lines (`services/models/src/process.rs`).
    #[default]
    Jsonl,
    /// The Claude Code CLI's stream-json (docs/claude-code.md).
    ClaudeCode,
}

/// `a2a`: a remote A2A 1.0 agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct A2aBackend {
    /// The remote agent's Agent Card URL (required).
    pub card_url: String,
    /// Headers sent with every request to the remote; values may name environment variables
    /// as `${VAR}` (an unset one fails the start).
    pub headers: BTreeMap<String, String>,
    /// Whole-request timeout of an answer asked for whole, ms.
    pub timeout_ms: u64,
    /// Longest silence of a stream from the remote, ms.
    pub idle_timeout_ms: u64,
    /// Retries after a 5xx or a connection error.
    pub max_retries: u32,
    /// First retry backoff, ms (doubled per retry, jittered).
    pub backoff_ms: u64,
}

impl Default for A2aBackend {
    fn default() -> Self {
        A2aBackend {
            card_url: String::new(),
            headers: BTreeMap::new(),
            timeout_ms: 120_000,
            idle_timeout_ms: 60_000,
            max_retries: 3,
            backoff_ms: 500,
        }
    }
}

/// What every backend takes: what agentd itself keeps to around the provider's calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderLimits {
    /// Turns of this provider's agents running at once (0 = no provider limit).
    pub max_concurrent: usize,
    /// The longest answer, in tokens: what a call leaves room for under `context_tokens`, and
    /// the `max_tokens` of Anthropic requests.
    pub max_tokens: u32,
    /// The model's context window in tokens (0 = not said: no check before a call).
    pub context_tokens: u64,
    /// Calls per minute agentd makes to this provider (0 = no limit).
    pub requests_per_minute: u32,
    /// Estimated input tokens per minute agentd sends this provider (0 = no limit).
    pub tokens_per_minute: u32,
}

impl Default for ProviderLimits {
    fn default() -> Self {
        ProviderLimits {
            max_concurrent: 0,
            max_tokens: 4096,
            context_tokens: 0,
            requests_per_minute: 0,
            tokens_per_minute: 0,
        }
    }
}

/// The keys of `[model]` a provider of the same backend does not inherit: each provider's
/// concurrency and pace are its own (0, no limit, unless it says).
pub const NOT_INHERITED: [&str; 3] = ["max_concurrent", "requests_per_minute", "tokens_per_minute"];

impl ModelSettings {
    /// What the types do not check (`section` names the provider in the message).
    pub(super) fn check(&self, section: &str) -> Result<(), String> {
        self.backend.check(section)
    }
}

impl ModelSettings {
    /// Reads a provider's table (`section` names it in messages; empty: no name): its
    /// backend, that backend's keys and those of [`ProviderLimits`]. A key that is no
    /// setting of the backend is refused, naming the backends it is a setting of.
    fn from_table(section: &str, mut table: Map<String, Value>) -> Result<Self, String> {
        let at = |key: &str| match section {
            "" => key.to_string(),
            _ => format!("{section}.{key}"),
        };
        let name = take_backend(&mut table, &at("backend"), &at("kind"))?
            .unwrap_or_else(|| "scripted".to_string());
        let every = Backend::every();
        let Some(own) = every.iter().find(|b| b.name() == name) else {
            let names: Vec<&str> = every.iter().map(Backend::name).collect();
            return Err(format!(
                "{} `{name}` is not one of {}",
                at("backend"),
                names.join(", ")
            ));
        };
        let own_keys = keys(own);
        let limit_keys = keys(&ProviderLimits::default());
        let mut stray: Vec<&String> = table
            .keys()
            .filter(|k| !own_keys.contains(k) && !limit_keys.contains(k))
            .collect();
        stray.sort();
        if let Some(key) = stray.first() {
            let owners: Vec<&str> = every
                .iter()
                .filter(|b| keys(*b).contains(key))
                .map(Backend::name)
                .collect();
            return Err(if owners.is_empty() {
                format!(
                    "{} is not a setting of the {name} backend (its own: {}; every backend's: {})",
                    at(key),
                    own_keys.join(", "),
                    limit_keys.join(", ")
                )
            } else {
                let owners = match owners.split_last() {
                    Some((last, [])) => format!("the {last} backend"),
                    Some((last, rest)) => format!("the {} and {last} backends", rest.join(", ")),
                    None => String::new(),
                };
                format!(
                    "{} is a setting of {owners}, not of {name} ({}): each backend takes only \
                     its own settings; remove it or set the backend it belongs to",
                    at(key),
                    at("backend")
                )
            });
        }
        let limits: Map<String, Value> = table.extract_if(|k, _| limit_keys.contains(k)).collect();
        let read = |e: ConfigError| match section {
            "" => e.to_string(),
            _ => format!("{section}: {e}"),
        };
        Ok(ModelSettings {
            limits: ProviderLimits::deserialize(Value::new(None, ValueKind::Table(limits)))
                .map_err(read)?,
            backend: own
                .read(Value::new(None, ValueKind::Table(table)))
                .map_err(read)?,
        })
    }
}

impl<'de> Deserialize<'de> for ModelSettings {
    /// A provider's table (see [`ModelSettings::from_table`]).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let table = Map::<String, Value>::deserialize(d)?;
        ModelSettings::from_table("", table).map_err(D::Error::custom)
    }
}

/// The top-level keys `value` serializes to (the tag left out), sorted.
fn keys<T: Serialize>(value: &T) -> Vec<String> {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(map)) => map
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| k != "backend")
            .collect(),
        _ => Vec::new(),
    }
}

/// Removes `backend` (or `kind`, its other name) from `table`: the backend it names, if any.
fn take_backend(
    table: &mut Map<String, Value>,
    backend: &str,
    kind: &str,
) -> Result<Option<String>, String> {
    match (table.remove("backend"), table.remove("kind")) {
        (Some(_), Some(_)) => Err(format!(
            "{backend} and {kind} are one setting (kind is another name of backend): set one"
        )),
        (Some(v), None) | (None, Some(v)) => v
            .into_string()
            .map(|s| Some(s.trim().to_string()))
            .map_err(|e| format!("{backend}: {e}")),
        (None, None) => Ok(None),
    }
}

/// Gives each `[providers.<name>]` of the raw settings what it inherits from `[model]`: when it
/// names no backend or `[model]`'s, every key of `[model]` it leaves out but
/// [`NOT_INHERITED`]; of another backend, nothing. Then reads `[model]` and every provider
/// once, so that a mistake is named by its section.
pub(super) fn prepare(raw: &mut Map<String, Value>) -> Result<(), String> {
    let given = match raw.get("model") {
        Some(v) => table_of(v.clone(), "model")?,
        None => Map::new(),
    };
    ModelSettings::from_table("model", given.clone())?;
    let mut model = given;
    let base = take_backend(&mut model, "model.backend", "model.kind")?
        .unwrap_or_else(|| "scripted".to_string());
    if let Some(providers) = raw.get_mut("providers")
        && let ValueKind::Table(providers) = &mut providers.kind
    {
        for (name, provider) in providers.iter_mut() {
            let section = format!("providers.{name}");
            let ValueKind::Table(table) = &mut provider.kind else {
                return Err(format!("{section} must be a table"));
            };
            let mut own = table.clone();
            let backend = take_backend(
                &mut own,
                &format!("{section}.backend"),
                &format!("{section}.kind"),
            )?;
            if backend.as_ref().is_none_or(|b| *b == base) {
                for (key, value) in &model {
                    if !NOT_INHERITED.contains(&key.as_str()) && !table.contains_key(key) {
                        table.insert(key.clone(), value.clone());
                    }
                }
                if backend.is_none() {
                    table.insert("backend".into(), Value::new(None, base.clone()));
                }
            }
            ModelSettings::from_table(&section, table.clone())?;
        }
    }
    Ok(())
}

fn table_of(value: Value, section: &str) -> Result<Map<String, Value>, String> {
    value
        .into_table()
        .map_err(|_| format!("{section} must be a table"))
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
