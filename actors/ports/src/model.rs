//! The model port: what a turn asks a model (or an agent process) and what it gets back.

use agentd_proto::{ThreadEntry, ToolCall, Usage};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name the model calls.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON schema of the arguments.
    pub parameters: serde_json::Value,
}

/// Why the model is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A step of an ordinary turn.
    Turn,
    /// Writing the summary that replaces old history (seed 003's compaction).
    Compact,
}

/// A thread as an agent keeps it in memory and hands it to its model: each entry shared
/// (`Arc`), so a thread that grows one entry at a time moves pointers (not whole entries) when
/// its vector grows, and the agent's copy and the store's batch (and the memory store) hold one
/// entry between them instead of a copy each.
pub type ThreadEntries = Vec<Arc<ThreadEntry>>;

/// One model call's input.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The calling agent (shared by all its requests, like its type and title).
    pub agent_id: Arc<str>,
    /// Its type.
    pub agent_type: Arc<str>,
    /// Its title.
    pub title: Arc<str>,
    /// The model name to use, if the spawn or the agent type names one.
    pub model: Option<String>,
    /// The provider to call (`None` = the default one); a [`ModelClient`] routing between
    /// providers reads it.
    pub provider: Option<String>,
    /// The agent's environment variables (a process backend passes them to its process).
    pub env: std::collections::BTreeMap<String, String>,
    /// Layered system prompt (base + sub-agent role + type overlay).
    pub system_prompt: Arc<str>,
    /// The thread so far (shared with the agent's copy: a request costs no copy of it).
    pub thread: std::sync::Arc<ThreadEntries>,
    /// Tools the agent may call (built once per agent and shared by its requests).
    pub tools: std::sync::Arc<Vec<ToolSpec>>,
    /// Why the model is called.
    pub purpose: Purpose,
    /// The agent CLI session its record names (an agent CLI backend resumes it when it has no
    /// process of its own for the agent, e.g. after a restart).
    pub cli_session_id: Option<String>,
    /// What an agent CLI may run by itself for this agent (built once per agent).
    pub cli_tools: std::sync::Arc<CliTools>,
    /// Told of the answer as it arrives, if the caller watches (a streaming backend reports
    /// text, other output and usage through it; a backend that answers whole may say nothing).
    pub observer: Option<Arc<dyn AnswerObserver>>,
    /// Cancelled when the caller no longer wants the answer (a pause): a backend aborts the
    /// request in flight and answers [`ModelError::Cancelled`]. Dropping the call's future
    /// aborts it too (an interrupt, a cancel, a shutdown); the token lets a caller that keeps
    /// running learn that the call ended.
    pub cancel: CancellationToken,
}

/// The tools an agent CLI (the process backend's `claude-code` protocol) may run on its own:
/// its agent type's `cli_tools`, narrowed by the agent's own allowed tools when it has a list,
/// and the type's permission mode. agentd's own tools are not among them: the CLI never sees
/// those.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CliTools {
    /// Tool names (or rules such as `Bash(git:*)`) the CLI runs without asking.
    pub allowed: Vec<String>,
    /// The CLI's permission mode (`default`, `acceptEdits`, `plan`, `bypassPermissions`), if set.
    pub permission_mode: Option<String>,
}

/// What an agent CLI did by itself during one call (the process backend's `claude-code`
/// protocol): it runs its own tools, so the calls and results it reports are recorded as
/// already executed, never run by agentd.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CliRun {
    /// The steps that called tools, in order, each with one result per call.
    pub steps: Vec<CliStep>,
    /// The CLI's session (from its `system/init` line): the record keeps it so that a new
    /// process resumes it.
    pub session_id: Option<String>,
    /// The cost the CLI reported for this call, USD (kept beside agentd's own pricing).
    pub reported_cost_usd: Option<f64>,
}

/// One step an agent CLI ran: what it said, the tools it called and their results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CliStep {
    /// Text said with the calls.
    pub text: String,
    /// The calls.
    pub tool_calls: Vec<ToolCall>,
    /// One result text per call, in the calls' order (invariant: as many as `tool_calls`).
    pub results: Vec<String>,
}

/// What a model call reports while its answer arrives. Implementations must be cheap and never
/// block: they run inside the call, once per streamed chunk.
pub trait AnswerObserver: Send + Sync + std::fmt::Debug {
    /// A piece of the answer's text arrived.
    fn text(&self, delta: &str);
    /// Output that is not text arrived (a tool call's name or arguments), `chars` long: it
    /// counts in the estimate of an aborted call's output.
    fn other_output(&self, chars: usize);
    /// The provider reported the call's usage so far. Each report holds everything the
    /// provider has counted up to then (it replaces the previous one, it does not add to it).
    fn usage(&self, usage: Usage);
}

/// One model call's output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelResponse {
    /// Text of the answer (may be empty when only tools are called).
    pub text: String,
    /// Tool calls requested.
    pub tool_calls: Vec<ToolCall>,
    /// Tokens used.
    pub usage: Usage,
    /// The provider stopped the answer at the request's token limit (OpenAI's `finish_reason`
    /// `length`, Anthropic's `stop_reason` `max_tokens`): it is not a finished answer.
    pub cut_off: bool,
    /// What an agent CLI ran by itself during the call, if the backend is one: its steps are
    /// recorded as executed and `tool_calls` is empty (nothing is left for agentd to run).
    pub cli_run: Option<Box<CliRun>>,
    /// The model that answered, as the provider's answer names it (OpenAI's and Anthropic's
    /// `model`: a dated version where the request named an alias); `None` when it names none.
    pub model: Option<String>,
}

/// Why a model call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    /// The provider asks to wait.
    #[error("rate limited; retry after {retry_after_ms} ms")]
    RateLimited {
        /// How long to wait.
        retry_after_ms: u64,
    },
    /// The caller cancelled the call ([`ModelRequest::cancel`]); its request was aborted.
    #[error("the model call was cancelled")]
    Cancelled,
    /// The provider could not answer for now: a 5xx after the backend's own retries, a call
    /// that timed out, a connection that failed or broke off. The same request can succeed
    /// later, so the turn is retried ([`ModelError::is_transient`]).
    #[error("{0}")]
    Unavailable(String),
    /// Anything else: a request the provider refused (a 4xx), an answer that cannot be read, a
    /// backend that is misconfigured. The same request fails the same way again.
    #[error("{0}")]
    Failed(String),
}

impl ModelError {
    /// Whether the same request can succeed later ([`ModelError::Unavailable`]): a turn that
    /// failed with it is retried (`limits.max_attempts`), one that failed otherwise is not.
    pub fn is_transient(&self) -> bool {
        matches!(self, ModelError::Unavailable(_))
    }
}

/// What one backend does that another does not, as the backend itself reports it
/// ([`ModelClient::capabilities`]). The actors decide by these, never by a backend's name: a
/// new backend states its own and needs no change outside its crate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelCapabilities {
    /// Its rate limits are its provider's, shared by every caller (an HTTP API's `429`), not
    /// the calling agent's own (a process or a script of its own): one agent's limit holds
    /// every agent of the provider until the reset, in every process of the deployment (the
    /// [`crate::Transport`]'s provider gate).
    pub shared_rate_limit: bool,
    /// Its provider bills a call's input even when the call is aborted, and may say what the
    /// input was only at the answer's end (usage at the end of a stream): the turn estimates
    /// the input before it sends a call, and counts that estimate for a call aborted before
    /// the provider reported it.
    pub bills_aborted_input: bool,
    /// Its provider refuses a conversation in which a tool call is not answered right after
    /// it. The actors pair every conversation whatever the backend
    /// (`agentd_proto::conversation`); a backend with this capability must pair it again
    /// before it sends it.
    pub strict_tool_pairing: bool,
    /// It asks its provider to cache the prompt's stable part (cache breakpoints) and reports
    /// cache writes and reads in [`Usage`], which are priced apart.
    pub prompt_caching: bool,
    /// It reports an answer's text to [`ModelRequest::observer`] while the answer arrives:
    /// the turn publishes `text_delta` events only for a backend that does.
    pub streams: bool,
}

/// A language model (or an agent process) that produces the next assistant message.
#[async_trait]
pub trait ModelClient: Send + Sync + 'static {
    /// Backend name for logs and the API (`scripted`, `openai`, ...).
    fn backend(&self) -> &'static str;

    /// The backend that serves `provider` (a router of several providers overrides it).
    fn backend_of(&self, _provider: Option<&str>) -> &'static str {
        self.backend()
    }

    /// What this backend does differently ([`ModelCapabilities`]). Required, so that a new
    /// backend says it.
    fn capabilities(&self) -> ModelCapabilities;

    /// The capabilities of the backend that serves `provider` (a router overrides it).
    fn capabilities_of(&self, _provider: Option<&str>) -> ModelCapabilities {
        self.capabilities()
    }

    /// The model `provider` asks for when a request names none (an HTTP backend's configured
    /// model), for telemetry's `gen_ai.request.model`; `None`: the backend has no such name.
    fn default_model_of(&self, _provider: Option<&str>) -> Option<&str> {
        None
    }
    /// Produces the next message for `request`.
    async fn complete(&self, request: ModelRequest) -> Result<ModelResponse, ModelError>;

    /// A lifecycle control of an agent, for backends that run something per agent (the process
    /// backend signals its process). Stateless backends ignore it.
    fn control(&self, _agent_id: &str, _control: agentd_proto::Control) {}

    /// The agent's conversation was replaced (a reset, a restore): a backend that keeps a
    /// conversation of its own per agent (an agent CLI's session) drops it and follows the
    /// request's `cli_session_id` from then on. Stateless backends ignore it.
    fn conversation_replaced(&self, _agent_id: &str) {}
}
