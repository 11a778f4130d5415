//! The service's own settings: the HTTP server and its authentication, the store and Redis,
//! checkpoints, agent types, prompts, the actor runtime and logs.

use super::SettingsError;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};
use std::path::{Path, PathBuf};

/// HTTP API settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    /// Address to bind.
    pub bind: String,
    /// Largest request body, bytes.
    pub max_body_bytes: usize,
    /// How long a request's body may take to arrive once its headers are read, ms; past it the
    /// request is answered `408 request_timeout` (actix's own timeout covers the headers only).
    pub request_timeout_ms: u64,
    /// How long a stop waits for requests in flight before it goes on stopping agents, ms
    /// (event streams end at once and do not count).
    pub shutdown_timeout_ms: u64,
}

/// Which store backs threads and records (`store.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    /// Durable redb file under `data_dir` (one process).
    Embedded,
    /// In memory (tests, throwaway runs).
    Memory,
    /// Redis at `redis.url` (any number of processes); Redis is then the bus too.
    Redis,
}

impl StoreKind {
    /// The `store.kind` value that names it.
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Embedded => "embedded",
            StoreKind::Memory => "memory",
            StoreKind::Redis => "redis",
        }
    }
}

/// Store settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSettings {
    /// The store; unset: `redis` when `redis.url` is set, else `embedded`
    /// ([`super::Settings::store`]). A kind `redis.url` contradicts stops start-up.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "some_by_name"
    )]
    pub kind: Option<StoreKind>,
    /// The data directory: the embedded store's `agentd.redb`, and the Claude Code CLIs'
    /// homes whatever the store.
    pub data_dir: PathBuf,
}

/// The store the settings choose, with what it needs: what wiring builds, matched without a
/// catch-all so a new kind is a compile error until every use handles it.
#[derive(Debug, Clone, Copy)]
pub enum StoreBackend<'a> {
    /// The redb file in this data directory.
    Embedded {
        /// `store.data_dir`.
        data_dir: &'a Path,
    },
    /// In memory.
    Memory,
    /// Redis (store and bus).
    Redis(&'a RedisSettings),
}

impl StoreBackend<'_> {
    /// The `store.kind` value that chooses it.
    pub fn kind(&self) -> StoreKind {
        match self {
            StoreBackend::Embedded { .. } => StoreKind::Embedded,
            StoreBackend::Memory => StoreKind::Memory,
            StoreBackend::Redis(_) => StoreKind::Redis,
        }
    }
}

/// A value named by a string, read as `T` names its variants: another name is refused with
/// the names there are (`config` would say only that the enum has no such variant).
pub(super) fn by_name<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    use serde::de::IntoDeserializer as _;
    let name = String::deserialize(d)?;
    T::deserialize(name.trim().into_deserializer())
        .map_err(|e: serde::de::value::Error| D::Error::custom(e))
}

/// [`by_name`] of a setting that may be left unset.
fn some_by_name<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    by_name(d).map(Some)
}

/// Redis settings (empty `url` = no Redis).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSettings {
    /// `redis://` or `rediss://` URL; empty disables Redis. With `cluster`, a node of the
    /// cluster (a seed).
    pub url: String,
    /// `url` is a node of a Redis Cluster.
    pub cluster: bool,
    /// More seed nodes of the cluster (with `cluster`): a list of URLs, or (from the
    /// environment) one string of them separated by commas.
    #[serde(default, deserialize_with = "super::names")]
    pub cluster_nodes: Vec<String>,
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
    /// How long an agent may hold a message in its partition stream entry (instead of its
    /// durable inbox) before it adopts it into the inbox, ms; 0 holds none.
    pub hold_ms: u64,
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
    /// Replicas that must hold a write before an acknowledgement that depends on it (a `202`,
    /// a turn's flush before its outputs go out, a command's effects) is given: `WAIT` on the
    /// node that took the write. 0 (the default) waits for none and sends no `WAIT`.
    pub min_replicas: u32,
    /// How long such a `WAIT` may take, ms; fewer replicas by then answers `unavailable`.
    pub replica_wait_ms: u64,
    /// How long an API request waits for Redis, ms: a request that cannot be made durable (or
    /// answered) within it — Redis failing over or unreachable, a replica that does not
    /// confirm — is answered `503 unavailable` with `Retry-After`, while what it started keeps
    /// the store's own timeouts and retries in the background. 0: no bound.
    pub request_wait_ms: u64,
}

impl RedisSettings {
    /// Whether a URL is set (with `store.kind` unset, Redis is then the store).
    pub fn has_url(&self) -> bool {
        !self.url.trim().is_empty()
    }

    /// Where Redis is: the one server at `url`, or the cluster `url` and `cluster_nodes` are
    /// nodes of.
    pub fn target(&self) -> agentd_store::RedisTarget {
        if self.cluster {
            agentd_store::RedisTarget::cluster(
                std::iter::once(self.url.clone()).chain(self.cluster_nodes.iter().cloned()),
            )
        } else {
            agentd_store::RedisTarget::single(self.url.clone())
        }
    }

    /// The URL with any password replaced by `***`, for logs and `check-config`.
    pub fn masked_url(&self) -> String {
        masked(&self.url)
    }

    /// [`Self::cluster_nodes`] with any password replaced by `***`.
    pub fn masked_cluster_nodes(&self) -> Vec<String> {
        self.cluster_nodes.iter().map(|u| masked(u)).collect()
    }
}

/// `url` with any password replaced by `***`.
fn masked(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_string(),
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

/// Logging settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSettings {
    /// `human` or `json`.
    pub format: String,
    /// Filter (RUST_LOG syntax).
    pub filter: String,
}
