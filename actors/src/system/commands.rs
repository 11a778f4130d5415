//! Commands from other services (the HTTP API and the Redis command stream): scoped to a tree
//! when the caller is, and run in the process that owns the agent when they act on a live one.

use super::{AgentSystem, external};
use agentd_proto::ids::derived_id;
use agentd_proto::{Address, AgentList, AgentView, AgentdError, Command, ErrorCode, InboxItem};
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;

/// How a request bounded by a deadline ([`AgentSystem::execute_within`]) leaves the work it
/// started when the deadline passes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfinished {
    /// The request's future is dropped: a read, or a message handed to its agent in one step
    /// (a delivery whose durable push has not begun is then dropped, not applied:
    /// [`crate::deadline`]; one already being pushed lands).
    Dropped,
    /// The work goes on in the background to its end, unobserved: a command of several writes
    /// (a spawn's record, its place under its parent and its first message; a cascade), which a
    /// cut would leave half done.
    Finished,
}

/// What the deadline does to `cmd`: `None` for a tool run, which may wait for models and workers
/// as long as the tool's own timeouts allow.
pub fn unfinished(cmd: &Command) -> Option<Unfinished> {
    match cmd {
        Command::InvokeTool { .. } => None,
        Command::Inspect { .. }
        | Command::List { .. }
        | Command::Thread { .. }
        | Command::Checkpoints { .. }
        | Command::Send { .. }
        | Command::Reset { .. }
        | Command::Compact { .. } => Some(Unfinished::Dropped),
        _ => Some(Unfinished::Finished),
    }
}

/// The answer of a request whose deadline passed: `unavailable`, to retry.
pub fn deadline_passed(within: Duration) -> AgentdError {
    AgentdError::new(
        ErrorCode::Unavailable,
        format!(
            "the store did not answer within {} ms (redis.request_wait_ms: Redis unreachable or \
             failing over?); what the request started may still take effect: retry, with the \
             same Idempotency-Key where the request takes one",
            within.as_millis()
        ),
    )
}

impl AgentSystem {
    /// [`Self::execute_scoped`], answering `unavailable` once `within` has passed (see
    /// [`unfinished`] for what becomes of the work then): a request waits a bounded time for
    /// the store — Redis failing over, a replica that does not confirm, a partition's owner
    /// that does not answer — while the work itself keeps the store's own, longer, timeouts and
    /// retries. `None` waits as long as the work takes.
    pub async fn execute_within(
        &self,
        cmd: Command,
        scope: Option<String>,
        within: Option<Duration>,
    ) -> Result<Value, AgentdError> {
        let (Some(within), Some(way)) = (within, unfinished(&cmd)) else {
            return self.execute_scoped(cmd, scope.as_deref()).await;
        };
        match way {
            Unfinished::Dropped => {
                let deadline = std::time::Instant::now() + within;
                let work = self.execute_scoped(cmd, scope.as_deref());
                tokio::time::timeout(within, crate::deadline::within(deadline, work))
                    .await
                    .unwrap_or_else(|_| Err(deadline_passed(within)))
            }
            Unfinished::Finished => {
                let system = self.clone();
                let trace = agentd_observe::telemetry::current();
                let work = actix_rt::spawn(agentd_observe::telemetry::scope(trace, async move {
                    system.execute_scoped(cmd, scope.as_deref()).await
                }));
                match tokio::time::timeout(within, work).await {
                    Ok(Ok(answer)) => answer,
                    Ok(Err(join)) => Err(AgentdError::new(
                        ErrorCode::Internal,
                        format!("the request's work ended abnormally: {join}"),
                    )),
                    Err(_) => Err(deadline_passed(within)),
                }
            }
        }
    }

    /// Checks that an external caller scoped to `scope` (a root it names) may act on `target`:
    /// the root itself or one of its descendants (`not_ancestor` otherwise). No scope = operator.
    pub async fn check_scope(&self, scope: Option<&str>, target: &str) -> Result<(), AgentdError> {
        match scope {
            Some(root) => crate::lineage::require_descendant(&self.system.deps, root, target).await,
            None => Ok(()),
        }
    }

    /// [`Self::execute`] for a caller scoped to the tree of `scope` (if any): targets must be
    /// in that tree, spawns without a parent become children of the scope root, lists without
    /// a parent list its children.
    pub async fn execute_scoped(
        &self,
        cmd: Command,
        scope: Option<&str>,
    ) -> Result<Value, AgentdError> {
        cmd.check_agent_ids()?;
        let Some(root) = scope else {
            return self.execute(cmd).await;
        };
        let cmd = match cmd {
            Command::Spawn(mut req) => {
                let parent = req
                    .parent_id
                    .get_or_insert_with(|| root.to_string())
                    .clone();
                self.check_scope(scope, &parent).await?;
                Command::Spawn(req)
            }
            Command::List { parent_id } => {
                let parent = parent_id.unwrap_or_else(|| root.to_string());
                self.check_scope(scope, &parent).await?;
                Command::List {
                    parent_id: Some(parent),
                }
            }
            Command::InvokeTool {
                agent_id: Some(id),
                tool,
                args,
            } => {
                self.check_scope(scope, &id).await?;
                Command::InvokeTool {
                    agent_id: Some(id),
                    tool,
                    args,
                }
            }
            other => {
                if let Some(target) = other.target() {
                    self.check_scope(scope, target).await?;
                }
                other
            }
        };
        self.execute(cmd).await
    }

    /// Executes a command from another service and answers its result as JSON (agent ids
    /// without an agent id's form are `invalid_argument`). A command that
    /// acts on a live agent (see [`runs_where_the_agent_lives`]) whose partition another
    /// process owns runs there, and its answer comes back from there.
    pub async fn execute(&self, cmd: Command) -> Result<Value, AgentdError> {
        self.execute_as(cmd, None).await
    }

    /// [`Self::execute`] of a command that may arrive more than once as request `request` (an
    /// entry of the command stream read again after a crash before it was acknowledged): what
    /// it adds takes an id derived from the request's — a message, a reset or a compaction is
    /// queued once, and a spawn without an idempotency key takes the request's id as its key —
    /// so a second delivery repeats none of it.
    pub async fn execute_request(&self, cmd: Command, request: Uuid) -> Result<Value, AgentdError> {
        self.execute_as(cmd, Some(request)).await
    }

    /// [`Self::execute`], with the effects of request `request` (if any) made once.
    async fn execute_as(&self, cmd: Command, request: Option<Uuid>) -> Result<Value, AgentdError> {
        cmd.check_agent_ids()?;
        if let Some(target) = runs_where_the_agent_lives(&cmd)
            && self.system.deps.is_owned_elsewhere(target)
            && let Some(transport) = &self.system.deps.transport
        {
            let timeout = call_timeout(&cmd, &self.system.deps.config);
            let mut env = agentd_proto::Envelope::new(
                external(),
                Address::agent(target),
                agentd_proto::Item::Command(cmd),
                self.system.deps.clock.now_ms(),
            );
            // The owner runs it in the caller's trace.
            env.trace = agentd_observe::telemetry::current();
            return transport.call(env, timeout).await?.into_result();
        }
        // The reply waits until the command's effects are held by the replicas the store waits
        // for (`redis.min_replicas`; a spawn waits in `spawn`, reads write nothing).
        let effects_on = effects_on(&cmd).map(str::to_string);
        let value = self.execute_here(cmd, request).await?;
        if let Some(agent_id) = effects_on {
            self.system.deps.store.replicated(&agent_id).await?;
        }
        Ok(value)
    }

    /// [`Self::execute`] in this process, as request `request` if it has an id.
    async fn execute_here(
        &self,
        cmd: Command,
        request: Option<Uuid>,
    ) -> Result<Value, AgentdError> {
        // The id of what the request queues: the same on every delivery.
        let queued_as = |what: &str| request.map(|r| derived_id(r, what));
        match cmd {
            Command::SetBudget { agent_id, budget } => self
                .set_budget(&agent_id, budget)
                .await
                .and_then(|r| crate::errors::to_json(&AgentView::of(&r, 0))),
            Command::ProvideDependency { agent_id, value } => self
                .provide(
                    &agent_id,
                    agentd_proto::AgentStatus::WaitingDependency,
                    &value,
                )
                .await
                .and_then(|r| crate::errors::to_json(&AgentView::of(&r, 0))),
            Command::AnswerQuestion {
                agent_id,
                answer,
                item_id,
            } => self
                .provide_as(
                    &agent_id,
                    agentd_proto::AgentStatus::WaitingQuestion,
                    &answer,
                    item_id,
                )
                .await
                .and_then(|r| crate::errors::to_json(&AgentView::of(&r, 0))),
            Command::CancelItem { agent_id, item_id } => {
                let done = self.cancel_item(&agent_id, item_id).await?;
                Ok(json!({"agent_id": agent_id, "item_id": item_id, "cancel": done.as_str()}))
            }
            Command::Spawn(mut req) => {
                if let (Some(request), None) = (request, &req.idempotency_key) {
                    req.idempotency_key = Some(format!("request {request}"));
                }
                self.spawn(*req).await.and_then(|r| crate::errors::to_json(&AgentView::of(&r, 0)))
            }
            Command::Send {
                agent_id,
                text,
                interrupt,
                idempotency_key,
            } => {
                if text.trim().is_empty() {
                    return Err(AgentdError::missing_field("text"));
                }
                let item = InboxItem::followup(&text, interrupt);
                match idempotency_key {
                    Some(key) => self.post_once_by_key(&agent_id, item, &key).await?,
                    None => self.post_once(&agent_id, item, queued_as("send")).await?,
                }
                Ok(json!({"agent_id": agent_id, "status": "sent"}))
            }
            Command::Control { agent_id, control } => {
                let rec = self.control(&agent_id, control).await?;
                Ok(
                    json!({"agent_id": agent_id, "control": control.as_str(), "status": rec.map(|r| r.status)}),
                )
            }
            Command::Reset { agent_id, message } => {
                let item = InboxItem::Reset { message };
                self.post_once(&agent_id, item, queued_as("reset")).await?;
                Ok(
                    json!({"summary": "Agent session reset requested.", "target_agent_id": agent_id}),
                )
            }
            Command::Compact { agent_id } => {
                self.post_once(&agent_id, InboxItem::Compact, queued_as("compact"))
                    .await?;
                Ok(json!({"summary": "Agent compaction requested.", "target_agent_id": agent_id}))
            }
            Command::Inspect { agent_id } => crate::errors::to_json(&self.inspect(&agent_id).await?),
            Command::List { parent_id } => crate::errors::to_json(&AgentList {
                agents: self.list(parent_id.as_deref()).await?,
            }),
            Command::Thread { agent_id } => {
                self.thread(&agent_id).await.map(|t| json!({"entries": t}))
            }
            Command::InvokeTool {
                agent_id,
                tool,
                args,
            } => self.invoke_tool(agent_id.as_deref(), &tool, args).await,
            Command::ToolResult {
                agent_id,
                call_id,
                result,
                error,
            } => {
                let answer = match (result, error) {
                    (Some(v), None) => agentd_proto::ToolAnswer::Result(v),
                    (None, Some(e)) => agentd_proto::ToolAnswer::Error(e),
                    _ => {
                        return Err(AgentdError::new(
                            agentd_proto::ErrorCode::InvalidArgument,
                            "a tool result has either `result` or `error`",
                        ));
                    }
                };
                let call = self.answer_tool_call(&agent_id, call_id, answer).await?;
                Ok(json!({"call_id": call.call_id, "status": call.status}))
            }
            Command::ApproveTool {
                agent_id,
                call_id,
                approve,
                reason,
            } => {
                let call = self
                    .decide_tool_call(&agent_id, call_id, approve, reason)
                    .await?;
                let decision = if call.status == agentd_proto::ToolCallStatus::Rejected {
                    agentd_proto::ApprovalDecision::Rejected
                } else {
                    agentd_proto::ApprovalDecision::Approved
                };
                Ok(json!({"call_id": call.call_id, "decision": decision}))
            }
            Command::SetEnv { agent_id, env } => self
                .set_env(&agent_id, env)
                .await
                .and_then(|r| crate::errors::to_json(&AgentView::of(&r, 0))),
            Command::Checkpoint { agent_id } => {
                self.checkpoint(&agent_id).await.map(|c| c.summary())
            }
            Command::Checkpoints { agent_id } => self.checkpoints(&agent_id).await.map(|l| {
                json!({"checkpoints": l.iter().map(agentd_proto::Checkpoint::summary).collect::<Vec<_>>()})
            }),
            Command::Restore {
                agent_id,
                checkpoint_id,
            } => self
                .restore(&agent_id, checkpoint_id)
                .await
                .and_then(|r| crate::errors::to_json(&AgentView::of(&r, 0))),
            Command::Fork {
                agent_id,
                at,
                mut idempotency_key,
            } => {
                if let (Some(request), None) = (request, &idempotency_key) {
                    idempotency_key = Some(format!("request {request}"));
                }
                Box::pin(self.fork(&agent_id, at, idempotency_key))
                    .await
                    .and_then(|r| crate::errors::to_json(&AgentView::of(&r, 0)))
            }
        }
    }
}

/// The agent in whose partition a command writes what it does, whose reply therefore waits
/// for its replicas: none for reads, and none for a spawn (it waits by itself).
fn effects_on(cmd: &Command) -> Option<&str> {
    match cmd {
        Command::Spawn(_)
        | Command::Fork { .. }
        | Command::Inspect { .. }
        | Command::List { .. }
        | Command::Thread { .. }
        | Command::Checkpoints { .. } => None,
        other => other.target().filter(|a| !a.trim().is_empty()),
    }
}

/// The agent a command must run beside, if it acts on a live agent: a tool run as the agent
/// (its Manage waits get the replies its process receives), its budget, environment,
/// checkpoints, and what it waits for. Messages and controls travel as envelopes to the owner
/// anyway; reads answer from the store.
pub fn runs_where_the_agent_lives(cmd: &Command) -> Option<&str> {
    match cmd {
        Command::ProvideDependency { agent_id, .. }
        | Command::AnswerQuestion { agent_id, .. }
        | Command::SetBudget { agent_id, .. }
        | Command::SetEnv { agent_id, .. }
        | Command::Checkpoint { agent_id }
        | Command::Restore { agent_id, .. }
        | Command::ToolResult { agent_id, .. }
        | Command::ApproveTool { agent_id, .. }
        | Command::CancelItem { agent_id, .. } => Some(agent_id),
        Command::InvokeTool { agent_id, .. } => {
            agent_id.as_deref().filter(|a| !a.trim().is_empty())
        }
        _ => None,
    }
}

/// How long a caller waits for a command run in another process: its own work (30 s) plus,
/// for a tool, the longest sync wait it may do (the call's override, else any type's setting).
fn call_timeout(cmd: &Command, config: &crate::config::RuntimeConfig) -> std::time::Duration {
    const WORK_MS: u64 = 30_000;
    let wait_ms = match cmd {
        Command::InvokeTool { args, .. } => ["sync_timeout_ms", "syncTimeoutMs"]
            .iter()
            .find_map(|k| args.get(*k).and_then(Value::as_u64))
            .unwrap_or_else(|| config.types.longest_sync_wait_ms()),
        _ => 0,
    };
    std::time::Duration::from_millis(WORK_MS.saturating_add(wait_ms))
}
