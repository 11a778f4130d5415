//! The JSON bodies the routes answer with that they assemble themselves (the wire types of
//! `agentd_proto` aside): what the OpenAPI document (`openapi.rs`) describes them by.

use agentd_proto::{AgentStatus, CheckpointReason, ThreadEntry};
use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// `GET /healthz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: String,
}

/// `GET /readyz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Ready {
    /// Always `ready` (a process that reaches neither Redis nor its store answers `503`).
    pub status: String,
    /// The partitions this process owns (with Redis), `null` otherwise.
    pub partitions_owned: Option<Vec<u32>>,
    /// Those it cannot serve now (with Redis; `null` otherwise): their lease was not renewed
    /// within the fence time — their Redis node failing over or unreachable —, so messages for
    /// their agents are refused with `503 unavailable` or wait in their stream until it is.
    pub partitions_degraded: Option<Vec<u32>>,
}

/// One configured agent type, as `/v1/info` lists it.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentTypeInfo {
    /// The type's name (`agent_type` of a spawn).
    pub name: String,
    /// Its default title.
    pub title: String,
    /// What it is for.
    pub description: String,
    /// The types it may manage as workers.
    pub workers: Vec<String>,
}

/// One configured MCP server, as `/v1/info` lists it (never its environment or headers).
#[derive(Debug, Serialize, ToSchema)]
pub struct McpServerInfo {
    /// The configured name (`[mcp.servers.<name>]`).
    pub name: String,
    /// `stdio` or `streamable_http`.
    pub transport: String,
    /// Connected now.
    pub up: bool,
    /// The exposed names (`mcp__<server>__<tool>`) of the tools it lists.
    pub tools: Vec<String>,
    /// Tools it lists whose exposed name does not fit `^[A-Za-z0-9_-]{1,64}$`: never shown.
    pub skipped: Vec<String>,
    /// Tools an agent type names that it does not list (calls get `unknown_tool`).
    pub missing: Vec<String>,
    /// Why the last connection failed or ended, if it did.
    pub last_error: Option<String>,
}

/// A model provider in `GET /v1/info`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProviderInfo {
    /// `default` for `[model]`, else the name of its `[providers.<name>]`.
    pub name: String,
    /// Its backend (`scripted`, `openai`, `anthropic`, `process`, `a2a`).
    pub backend: String,
    /// What the backend does differently, as it reports it itself.
    pub capabilities: CapabilitiesInfo,
}

/// A backend's capabilities (docs/configuration.md, "Model backends").
#[derive(Debug, Serialize, ToSchema)]
pub struct CapabilitiesInfo {
    /// One agent's rate limit holds every agent of the provider until its reset (in every
    /// process on the same Redis); otherwise it holds its own agent only.
    pub shared_rate_limit: bool,
    /// A call aborted before the provider reported its usage counts its estimated input.
    pub bills_aborted_input: bool,
    /// The provider refuses a conversation in which a tool call is not answered right after
    /// it.
    pub strict_tool_pairing: bool,
    /// The backend asks its provider to cache the prompt's stable part.
    pub prompt_caching: bool,
    /// The answer's text streams in (`text_delta` events).
    pub streams: bool,
}

impl From<agentd_actors::ModelCapabilities> for CapabilitiesInfo {
    fn from(can: agentd_actors::ModelCapabilities) -> Self {
        CapabilitiesInfo {
            shared_rate_limit: can.shared_rate_limit,
            bills_aborted_input: can.bills_aborted_input,
            strict_tool_pairing: can.strict_tool_pairing,
            prompt_caching: can.prompt_caching,
            streams: can.streams,
        }
    }
}

/// `GET /v1/info`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Info {
    /// Always `agentd`.
    pub service: String,
    /// The service's version.
    pub version: String,
    /// The default provider's model backend (`scripted`, `openai`, ...).
    pub model_backend: String,
    /// Every model provider, the default one first, with its backend and what it can do.
    pub providers: Vec<ProviderInfo>,
    /// The store kind (`memory`, `embedded`, `redis`).
    pub store: String,
    /// The configured agent types.
    pub agent_types: Vec<AgentTypeInfo>,
    /// This process's id on the Redis bus, `null` without Redis.
    pub process_id: Option<String>,
    /// The partitions this process owns, `null` without Redis.
    pub partitions_owned: Option<Vec<u32>>,
    /// Live agent actors in this process, `null` if the supervisor did not answer.
    pub live_agents: Option<usize>,
    /// The configured MCP servers and their tools.
    pub mcp_servers: Vec<McpServerInfo>,
    /// `telemetry.trace_url`: where a trace is shown, `{trace_id}` to be replaced by an agent's
    /// `trace_id`; `null` when not configured.
    pub trace_url: Option<String>,
}

/// What `DELETE /v1/agents/{id}` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Deleted {
    /// The deleted agent.
    pub agent_id: String,
    /// Always `deleted`.
    pub status: String,
}

/// What `POST /v1/agents/{id}/messages` answers once the message is stored in the inbox.
#[derive(Debug, Serialize, ToSchema)]
pub struct Sent {
    /// The target agent.
    pub agent_id: String,
    /// Always `sent`.
    pub status: String,
    /// The trace the message's turn runs in (32 hex digits): the request's `traceparent`'s, or
    /// a new one.
    pub trace_id: String,
}

/// What `POST /v1/agents/{id}/control` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct ControlApplied {
    /// The target agent.
    pub agent_id: String,
    /// The control applied (`pause`, `resume`, `cancel`, `terminate`, `close`, `delete`).
    pub control: String,
    /// The agent's status after it, `null` once deleted.
    pub status: Option<AgentStatus>,
}

/// The control names `POST /v1/agents/{id}/control` takes.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ControlName {
    /// Hold new turns.
    Pause,
    /// Continue after a pause.
    Resume,
    /// Stop gracefully (with the descendants).
    Cancel,
    /// Stop at once.
    Terminate,
    /// Free the actor, keep the history (with the descendants).
    Close,
    /// Remove the agent and its history (with the descendants).
    Delete,
}

/// What `reset` and `compact` answer: the request is queued in the agent's inbox (seed 003).
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionRequested {
    /// What was requested, in words.
    pub summary: String,
    /// The agent it was requested of.
    pub target_agent_id: String,
}

/// `GET /v1/agents/{id}/thread`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ThreadView {
    /// The agent.
    pub agent_id: String,
    /// Its thread, oldest first.
    pub entries: Vec<ThreadEntry>,
}

/// One tool as an agent's model is shown it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolInfo {
    /// The name the model calls.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON schema of its arguments.
    pub parameters: serde_json::Value,
}

/// `GET /v1/agents/{id}/tools`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolList {
    /// The tools, in the order the model sees them.
    pub tools: Vec<ToolInfo>,
}

/// `GET /v1/tool_calls`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolCallList {
    /// The open calls, oldest first.
    pub tool_calls: Vec<agentd_proto::ToolCallView>,
}

/// `POST /v1/agents/{id}/tool_results/{call_id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolCallAnswered {
    /// agentd's id of the call.
    #[schema(format = Uuid)]
    pub call_id: String,
    /// `answered`.
    pub status: agentd_proto::ToolCallStatus,
}

/// `POST /v1/agents/{id}/approvals/{call_id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolCallDecided {
    /// agentd's id of the call.
    #[schema(format = Uuid)]
    pub call_id: String,
    /// `approved` or `rejected`.
    pub decision: agentd_proto::ApprovalDecision,
}

/// What every description of a checkpoint says about it.
#[derive(Debug, Serialize, ToSchema)]
pub struct CheckpointFacts {
    /// The checkpoint's id (v7, sorts by time).
    #[schema(format = Uuid)]
    pub checkpoint_id: String,
    /// The agent it belongs to.
    pub agent_id: String,
    /// Why it was taken.
    pub reason: CheckpointReason,
    /// What triggered it, in a few words.
    pub trigger: String,
    /// When it was taken, ms since the epoch.
    pub created_at_ms: u64,
    /// The agent's status then.
    pub status: AgentStatus,
    /// Its phase then.
    pub phase: Option<u32>,
    /// Its current step then.
    pub current_step: Option<String>,
    /// Its progress then, when known.
    pub progress: Option<f64>,
    /// Entries of the conversation saved.
    pub entries: u64,
    /// The inbox items not yet handled then, described.
    pub pending_actions: Vec<String>,
    /// Tokens used up to then.
    pub tokens_used: u64,
    /// Cost up to then, USD.
    pub cost_usd: f64,
    /// Turns completed up to then.
    pub turns: u64,
}

/// A checkpoint without its bulky parts.
#[derive(Debug, Serialize, ToSchema)]
pub struct CheckpointSummary {
    #[serde(flatten)]
    pub facts: CheckpointFacts,
    /// The names of its environment variables.
    pub environment: Vec<String>,
}

/// `GET /v1/agents/{id}/checkpoints`.
#[derive(Debug, Serialize, ToSchema)]
pub struct CheckpointList {
    /// Newest first.
    pub checkpoints: Vec<CheckpointSummary>,
}

/// `GET /v1/agents/{id}/checkpoints/{checkpoint}`: the summary's facts, with the saved state
/// in full in place of the environment's names.
#[derive(Debug, Serialize, ToSchema)]
pub struct CheckpointDetail {
    #[serde(flatten)]
    pub facts: CheckpointFacts,
    /// The whole conversation then.
    pub conversation: Vec<ThreadEntry>,
    /// The inbox items not yet handled then (envelopes, as the store keeps them).
    pub pending: Vec<serde_json::Value>,
    /// Its environment variables then.
    pub environment: BTreeMap<String, String>,
}
