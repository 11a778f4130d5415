//! Acting on one agent: creating it, sending it messages and controls, replacing its budget or
//! environment, answering what it waits for, its checkpoints, and running a tool as it would.

use super::{AgentSystem, external};
use crate::errors::mailbox;
use crate::messages::SpawnSpec;
use crate::ops;
use crate::tools::{self, ToolContext, ToolOutcome};
use agentd_proto::{
    Address, AgentRecord, AgentdError, Channel, Control, ErrorCode, InboxItem, SpawnRequest,
    ThreadEntry,
};
use serde_json::Value;

impl AgentSystem {
    /// Creates an agent; without a parent it is a root, foreground unless `req.background`.
    /// With `req.idempotency_key`, a retry answers the agent the first attempt made
    /// ([`super::idempotent`]). Answers once the agent's record (and its place among its
    /// parent's children) is held by the replicas the store waits for (`redis.min_replicas`).
    pub async fn spawn(&self, mut req: SpawnRequest) -> Result<AgentRecord, AgentdError> {
        match req.idempotency_key.take() {
            Some(key) => self.spawn_once(req, &key).await,
            None => self.spawn_as(req, None).await,
        }
    }

    /// [`Self::spawn`] as agent `id` (`None`: a new id).
    pub(super) async fn spawn_as(
        &self,
        req: SpawnRequest,
        id: Option<String>,
    ) -> Result<AgentRecord, AgentdError> {
        let parent = match &req.parent_id {
            Some(p) => Some(ops::record(&self.system, p).await?),
            None => None,
        };
        let prompt = crate::context_files::first_message(
            &self.system.deps,
            req.prompt.as_deref(),
            &req.context_files,
        )?;
        let channel = match &parent {
            Some(p) => Channel::Spawn {
                parent_id: p.id.clone(),
                background: req.background,
            },
            None => Channel::None,
        };
        let rec = ops::spawn(
            &self.system,
            SpawnSpec {
                id,
                parent,
                agent_type: req.agent_type.clone().unwrap_or_else(|| "subagent".into()),
                title: req.title.clone(),
                prompt,
                allowed_tools: req.allowed_tools.clone(),
                channel,
                budget: req.budget,
                priority: req.priority,
                depends_on: req.depends_on.clone(),
                on_dependency_failure: req.on_dependency_failure,
                provider: req.provider.clone(),
                model: req.model.clone(),
                env: req.env.clone(),
                background: req.background,
                trace: agentd_observe::telemetry::current(),
            },
        )
        .await?;
        let store = &self.system.deps.store;
        store.replicated(&rec.id).await?;
        if let Some(parent) = &rec.parent_id {
            store.replicated(parent).await?;
        }
        Ok(rec)
    }

    /// Sends text to an agent (re-opening it if closed); `agent_not_found` if there is none,
    /// as its activation here or the forward to its owner finds (no look-up first: that was
    /// one more store round trip per message).
    pub async fn send(
        &self,
        agent_id: &str,
        text: &str,
        interrupt: bool,
    ) -> Result<(), AgentdError> {
        if text.trim().is_empty() {
            return Err(AgentdError::missing_field("text"));
        }
        let item = InboxItem::followup(text, interrupt);
        ops::post(&self.system, external(), agent_id, item, None)
            .await
            .map(|_| ())
    }

    /// Posts `item` from service `sender` to `agent_id` as envelope `id` (checked like every
    /// message), answering once it is in the agent's durable inbox (and held by the replicas
    /// the store waits for): `Ok(false)` if that id was queued before (a
    /// resend), so a caller that derives the id from its own request id posts it once.
    pub async fn post_as_from(
        &self,
        sender: &str,
        agent_id: &str,
        id: uuid::Uuid,
        item: InboxItem,
    ) -> Result<bool, AgentdError> {
        let from = Address::External {
            name: sender.to_string(),
        };
        let fresh = ops::post_as(&self.system, from, agent_id, id, item, None).await?;
        self.system.deps.store.replicated(agent_id).await?;
        Ok(fresh)
    }

    /// Cancels inbox item `item_id` of `agent_id` alone (see
    /// [`agentd_proto::Command::CancelItem`]); `agent_not_found` if there is no such agent.
    pub async fn cancel_item(
        &self,
        agent_id: &str,
        item_id: uuid::Uuid,
    ) -> Result<agentd_proto::ItemCancel, AgentdError> {
        let addr = self.activated(agent_id).await?;
        addr.send(crate::agent::messages::CancelItem(item_id))
            .await
            .map_err(mailbox)?
    }

    /// Posts any inbox item (reset, compact, ...).
    pub async fn post(&self, agent_id: &str, item: InboxItem) -> Result<(), AgentdError> {
        ops::post(&self.system, external(), agent_id, item, None)
            .await
            .map(|_| ())
    }

    /// [`Self::post`] as envelope `id` if there is one (a request that may arrive twice:
    /// its second copy is not queued again), else as a new envelope.
    pub(super) async fn post_once(
        &self,
        agent_id: &str,
        item: InboxItem,
        id: Option<uuid::Uuid>,
    ) -> Result<(), AgentdError> {
        match id {
            Some(id) => ops::post_as(&self.system, external(), agent_id, id, item, None)
                .await
                .map(|_| ()),
            None => self.post(agent_id, item).await,
        }
    }

    /// The actor of `agent_id`, activated if it is not live (`agent_not_found` if no such agent
    /// exists).
    async fn activated(
        &self,
        agent_id: &str,
    ) -> Result<std::sync::Arc<actix::Addr<crate::agent::AgentActor>>, AgentdError> {
        self.require_exists(agent_id).await?;
        self.live(agent_id).await
    }

    /// The actor of `agent_id`, activated if it is not live.
    async fn live(
        &self,
        agent_id: &str,
    ) -> Result<std::sync::Arc<actix::Addr<crate::agent::AgentActor>>, AgentdError> {
        self.system
            .supervisor
            .send(crate::supervisor::messages::Activate(agent_id.to_string()))
            .await
            .map_err(mailbox)?
    }

    pub(super) async fn require_exists(&self, agent_id: &str) -> Result<AgentRecord, AgentdError> {
        self.system
            .deps
            .store
            .get_agent(agent_id)
            .await?
            .ok_or_else(|| AgentdError::agent_not_found(agent_id))
    }

    /// Hands a dependency (`waiting_dependency`) or an answer (`waiting_question`) to a waiting
    /// agent, which runs again on it; `invalid_transition` if it is not waiting for that.
    pub async fn provide(
        &self,
        agent_id: &str,
        waiting_for: agentd_proto::AgentStatus,
        text: &str,
    ) -> Result<AgentRecord, AgentdError> {
        self.provide_as(agent_id, waiting_for, text, None).await
    }

    /// [`Self::provide`], the item it becomes having id `item_id` when given (the same id
    /// twice is one item: the durable inbox keeps it once).
    pub async fn provide_as(
        &self,
        agent_id: &str,
        waiting_for: agentd_proto::AgentStatus,
        text: &str,
        item_id: Option<uuid::Uuid>,
    ) -> Result<AgentRecord, AgentdError> {
        let field = if waiting_for == agentd_proto::AgentStatus::WaitingQuestion {
            "answer"
        } else {
            "value"
        };
        if text.trim().is_empty() {
            return Err(AgentdError::missing_field(field));
        }
        self.system
            .deps
            .config
            .limits
            .input()
            .message(field, text)?;
        self.require_exists(agent_id).await?;
        let label = if waiting_for == agentd_proto::AgentStatus::WaitingQuestion {
            "Answer"
        } else {
            "Dependency provided"
        };
        let mut env = agentd_proto::Envelope::new(
            external(),
            Address::agent(agent_id),
            agentd_proto::Item::Inbox(InboxItem::message(format!("{label}: {text}"))),
            self.system.deps.clock.now_ms(),
        );
        if let Some(id) = item_id {
            env.id = id;
        }
        // The turn the answer starts joins the caller's trace.
        env.trace = agentd_observe::telemetry::current();
        let addr = self.live(agent_id).await?;
        addr.send(crate::agent::messages::Provide { env, waiting_for })
            .await
            .map_err(mailbox)?
    }

    /// Answers call `call_id` of a service tool of `agent_id` (the first answer is applied:
    /// `tool_call_closed` after it, `tool_call_not_found` for a call that is not the agent's).
    pub async fn answer_tool_call(
        &self,
        agent_id: &str,
        call_id: uuid::Uuid,
        answer: agentd_proto::ToolAnswer,
    ) -> Result<agentd_proto::ToolCallRecord, AgentdError> {
        match self.system.deps.store.tool_call_get(call_id).await? {
            Some(call) if call.agent_id == agent_id => {
                // Only a service tool's call waits for an answer from outside: agentd runs
                // the others itself once approved (an approved one is `pending` until then).
                if call.kind != agentd_proto::ToolKind::Service {
                    return Err(crate::tools::service::not_a_service_call(&call));
                }
                // Open and past its gate, if it had one.
                if call.status != agentd_proto::ToolCallStatus::Pending {
                    return Err(crate::tools::service::closed_error(&call));
                }
            }
            _ => return Err(crate::tools::service::not_found(call_id)),
        }
        let addr = self.live(agent_id).await?;
        addr.send(crate::agent::messages::AnswerToolCall { call_id, answer })
            .await
            .map_err(mailbox)?
    }

    /// Decides call `call_id` of `agent_id` that waits for approval: `approve` runs it,
    /// otherwise the model gets `reason` as a tool error. The first decision is applied
    /// (`tool_call_closed` after it, `tool_call_not_found` for a call that is not the agent's).
    /// Only people decide, through the API, the command or agentctl: no tool calls this.
    pub async fn decide_tool_call(
        &self,
        agent_id: &str,
        call_id: uuid::Uuid,
        approve: bool,
        reason: Option<String>,
    ) -> Result<agentd_proto::ToolCallRecord, AgentdError> {
        match self.system.deps.store.tool_call_get(call_id).await? {
            Some(call) if call.agent_id == agent_id => {
                if call.status != agentd_proto::ToolCallStatus::AwaitingApproval {
                    return Err(crate::tools::service::closed_error(&call));
                }
            }
            _ => return Err(crate::tools::service::not_found(call_id)),
        }
        let addr = self.live(agent_id).await?;
        addr.send(crate::agent::messages::DecideToolCall {
            call_id,
            approve,
            reason,
        })
        .await
        .map_err(mailbox)?
    }

    /// The open calls of service tools (`pending`, `awaiting_approval`, or both when
    /// `status` is `None`), oldest first, of the tree of `scope` if the caller is scoped.
    pub async fn tool_calls(
        &self,
        status: Option<agentd_proto::ToolCallStatus>,
        scope: Option<&str>,
    ) -> Result<Vec<agentd_proto::ToolCallView>, AgentdError> {
        let mut out = Vec::new();
        for call in self.system.deps.store.tool_calls_open().await? {
            if status.is_some_and(|s| s != call.status) {
                continue;
            }
            if scope.is_some() && self.check_scope(scope, &call.agent_id).await.is_err() {
                continue;
            }
            out.push(call.view());
        }
        Ok(out)
    }

    /// Replaces an agent's budget (raise it, then `resume` a paused agent).
    pub async fn set_budget(
        &self,
        agent_id: &str,
        budget: agentd_proto::Budget,
    ) -> Result<AgentRecord, AgentdError> {
        budget.check()?;
        let addr = self.activated(agent_id).await?;
        addr.send(crate::agent::messages::SetBudget(budget))
            .await
            .map_err(mailbox)
    }

    /// Takes a checkpoint of an agent now (reason `manual`). A live agent takes it between two
    /// of its messages; an agent that is not live is read from the store (and stays as it is).
    pub async fn checkpoint(
        &self,
        agent_id: &str,
    ) -> Result<agentd_proto::Checkpoint, AgentdError> {
        let rec = self.require_exists(agent_id).await?;
        let live = self.system.directory.agent(agent_id);
        let reason = agentd_proto::CheckpointReason::Manual;
        match live {
            Some(addr) => addr
                .send(crate::agent::messages::TakeCheckpoint {
                    reason,
                    trigger: "manual".into(),
                })
                .await
                .map_err(mailbox)?,
            None => crate::checkpoints::capture(&self.system.deps, &rec, reason, "manual").await,
        }
    }

    /// An agent's checkpoints, newest first.
    pub async fn checkpoints(
        &self,
        agent_id: &str,
    ) -> Result<Vec<agentd_proto::Checkpoint>, AgentdError> {
        self.require_exists(agent_id).await?;
        Ok(self.system.deps.store.checkpoints(agent_id).await?)
    }

    /// An agent's checkpoint `id` (`None` = its newest); `checkpoint_not_found` if it has none
    /// such.
    pub async fn find_checkpoint(
        &self,
        agent_id: &str,
        id: Option<uuid::Uuid>,
    ) -> Result<agentd_proto::Checkpoint, AgentdError> {
        crate::checkpoints::find(&self.system.deps, agent_id, id).await
    }

    /// Brings an agent back to checkpoint `id` (`None` = its newest): conversation, phase,
    /// step, progress and environment as they were, its pending items queued again.
    pub async fn restore(
        &self,
        agent_id: &str,
        id: Option<uuid::Uuid>,
    ) -> Result<AgentRecord, AgentdError> {
        self.require_exists(agent_id).await?;
        let cp = crate::checkpoints::find(&self.system.deps, agent_id, id).await?;
        let addr = self.live(agent_id).await?;
        addr.send(crate::agent::messages::RestoreCheckpoint(cp))
            .await
            .map_err(mailbox)?
    }

    /// Replaces an agent's environment variables.
    pub async fn set_env(
        &self,
        agent_id: &str,
        env: std::collections::BTreeMap<String, String>,
    ) -> Result<AgentRecord, AgentdError> {
        let addr = self.activated(agent_id).await?;
        addr.send(crate::agent::messages::SetEnv(env))
            .await
            .map_err(mailbox)
    }

    /// Applies a lifecycle control (cascading where the design says so).
    pub async fn control(
        &self,
        agent_id: &str,
        control: Control,
    ) -> Result<Option<AgentRecord>, AgentdError> {
        ops::lifecycle(&self.system, agent_id, control).await
    }

    /// The freshest record of an agent.
    pub async fn record(&self, agent_id: &str) -> Result<AgentRecord, AgentdError> {
        ops::record(&self.system, agent_id).await
    }

    /// An agent's thread.
    pub async fn thread(&self, agent_id: &str) -> Result<Vec<ThreadEntry>, AgentdError> {
        self.require_exists(agent_id).await?;
        Ok(self.system.deps.store.thread(agent_id).await?)
    }

    /// Runs a tool as `agent_id` would (its thread is the runtime thread). Without an agent id
    /// there is no runtime thread: `missing_thread_id` (seed 000). The arguments are only
    /// read: a caller that sends the same ones again lends them instead of copying them.
    pub async fn invoke_tool(
        &self,
        agent_id: Option<&str>,
        tool: &str,
        args: impl std::borrow::Borrow<Value>,
    ) -> Result<Value, AgentdError> {
        let Some(agent_id) = agent_id.filter(|a| !a.trim().is_empty()) else {
            return Err(AgentdError::new(
                ErrorCode::MissingThreadId,
                "a tool call needs the caller's thread id (agent_id)",
            ));
        };
        let caller = ops::shared_record(&self.system, agent_id).await?;
        let ctx = ToolContext {
            caller,
            deps: self.system.deps.clone(),
            agents: self.system.agents(),
            cause: agentd_proto::ids::new_id(),
        };
        match tools::execute(&ctx, tool, args.borrow()).await? {
            ToolOutcome::Value(v) => Ok(v),
            ToolOutcome::Yielded(v) => Err(AgentdError::new(
                ErrorCode::ToolNotAllowed,
                format!("yield_to_parent only ends a running turn (result: {v})"),
            )),
        }
    }

    /// The tools `agent_id` sees, as its model is shown them.
    pub async fn tools_of(
        &self,
        agent_id: &str,
    ) -> Result<Vec<crate::ports::ToolSpec>, AgentdError> {
        let rec = self.record(agent_id).await?;
        Ok(tools::visible_specs(&rec, &self.system.deps)
            .specs()
            .to_vec())
    }
}
