//! [`AgentSystem`]: the facade services and tests use. It starts the actors of one process and
//! turns every [`Command`] into the same operations the tools use.

use crate::channel_router::ChannelRouter;
use crate::deps::Deps;
use crate::handle::{Shared, SystemHandle};
use crate::messages::{Shutdown, SpawnSpec};
use crate::ops::{self, mailbox};
use crate::scheduler::{Scheduler, SchedulerLimits};
use crate::supervisor::Supervisor;
use crate::tools::{self, ToolContext, ToolOutcome};
use actix::prelude::*;
use agentd_proto::{
    Address, AgentList, AgentRecord, AgentView, AgentdError, Channel, Command, Control, Envelope,
    ErrorCode, InboxItem, Inspection, LiveState, QueueState, QueueTask, SpawnRequest, ThreadEntry,
    TreeNode,
};
use serde_json::{Value, json};
use std::sync::Arc;

/// The running actors of one process. Its operations act in this process; [`Self::execute`]
/// (what the HTTP API and the command stream call) runs a command that acts on a live agent in
/// the process that owns the agent, when that is another one.
#[derive(Clone)]
pub struct AgentSystem {
    deps: Arc<Deps>,
    // Shared, not cloned: cloning an `Addr` allocates its sender state, and a system handle
    // (like a turn's tool context) is cloned per call.
    supervisor: Arc<Addr<Supervisor>>,
    router: Arc<Addr<ChannelRouter>>,
}

impl AgentSystem {
    /// Starts the ChannelRouter and the Supervisor. Must run inside an actix `System`.
    pub fn start(deps: Deps) -> Self {
        let deps = Arc::new(deps);
        let limits = SchedulerLimits {
            total: deps.config.limits.max_running_turns,
            per_parent: deps.config.limits.max_running_turns_per_parent,
            per_provider: deps.config.provider_limits.clone(),
        };
        let scheduler = limits.any().then(|| Scheduler::new(limits).start());
        // Both actors' addresses exist before either starts, so each is made with the handle
        // that names both.
        let router_ctx = Context::<ChannelRouter>::new();
        let supervisor_ctx = Context::<Supervisor>::new();
        let system = SystemHandle::new(Shared {
            deps: deps.clone(),
            supervisor: Arc::new(supervisor_ctx.address()),
            router: Arc::new(router_ctx.address()),
            scheduler,
            directory: Default::default(),
            tree_spend: Default::default(),
        });
        router_ctx.run(ChannelRouter::new(system.clone()));
        supervisor_ctx.run(Supervisor::new(system.clone()));
        tracing::info!(
            model = deps.model.backend(),
            store = deps.store.kind(),
            "agent system started"
        );
        AgentSystem {
            deps,
            supervisor: system.supervisor.clone(),
            router: system.router.clone(),
        }
    }

    /// Hands `env`, read from a partition stream this process owns, to its receiver (it is
    /// delivered here even while that partition still drains after a takeover). The future
    /// answers once the item is in the receiver's durable inbox (`Ok(false)`: a duplicate),
    /// so a transport acknowledges its entry after it. The envelope is queued at the router
    /// when this is called, not when the future is polled: envelopes handed over one after
    /// another keep their order.
    pub fn route_from_stream(
        &self,
        env: Envelope,
    ) -> impl std::future::Future<Output = Result<bool, AgentdError>> + use<> {
        let sent = self
            .router
            .send(crate::channel_router::messages::RouteFromStream(env));
        async move { sent.await.map_err(mailbox)? }
    }

    /// Routes `env` like any envelope of this process and answers once it is in the
    /// receiver's durable inbox (`Ok(false)`: a duplicate). Queued at the router when called.
    pub fn route_acked(
        &self,
        env: Envelope,
    ) -> impl std::future::Future<Output = Result<bool, AgentdError>> + use<> {
        let sent = self
            .router
            .send(crate::channel_router::messages::RouteAcked(env));
        async move { sent.await.map_err(mailbox)? }
    }

    /// Takes a child's output that arrived through a partition stream (an `Item::Output`
    /// envelope) to its parent's router here, or on to the process that owns the parent;
    /// answers once that router has handled it.
    pub async fn take_output(&self, env: Envelope) -> Result<(), AgentdError> {
        self.router
            .send(crate::channel_router::messages::RemoteOutput(env))
            .await
            .map_err(mailbox)?
    }

    /// Asks the transport, between two routed envelopes, to end the drain of the partitions it
    /// has emptied ([`crate::ports::Transport::settle`]).
    pub async fn settle_transport(&self) -> Result<(), AgentdError> {
        self.router
            .send(crate::channel_router::messages::SettleTransport)
            .await
            .map_err(mailbox)?
    }

    /// Stops the live agents for which `filter` holds (their partition moved to another
    /// process); answers how many were stopped. Their durable inboxes stay.
    pub async fn passivate(&self, filter: Box<dyn Fn(&str) -> bool + Send>) -> usize {
        self.supervisor
            .send(crate::supervisor::messages::Passivate(filter))
            .await
            .unwrap_or(0)
    }

    /// Ports and config.
    pub fn deps(&self) -> &Deps {
        &self.deps
    }

    /// Creates an agent; without a parent it is a foreground root.
    pub async fn spawn(&self, req: SpawnRequest) -> Result<AgentRecord, AgentdError> {
        let parent = match &req.parent_id {
            Some(p) => Some(ops::record(&self.deps, &self.supervisor, p).await?),
            None => None,
        };
        let prompt = match &req.prompt {
            Some(p) => Some(ops::attach_context_files(
                &self.deps,
                p,
                &req.context_files,
            )?),
            None if !req.context_files.is_empty() => Some(ops::attach_context_files(
                &self.deps,
                "",
                &req.context_files,
            )?),
            None => None,
        };
        let channel = match &parent {
            Some(p) => Channel::Spawn {
                parent_id: p.id.clone(),
            },
            None => Channel::None,
        };
        ops::spawn(
            &self.supervisor,
            SpawnSpec {
                id: None,
                parent,
                agent_type: req.agent_type.clone().unwrap_or_else(|| "subagent".into()),
                title: req.title.clone(),
                prompt,
                allowed_tools: req.allowed_tools.clone(),
                channel,
                budget: req.budget,
                priority: req.priority,
                depends_on: req.depends_on.clone(),
                provider: req.provider.clone(),
                model: req.model.clone(),
                env: req.env.clone(),
            },
        )
        .await
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
        ops::post(&self.router, external(), agent_id, item, None)
            .await
            .map(|_| ())
    }

    /// Posts any inbox item (reset, compact, ...).
    pub async fn post(&self, agent_id: &str, item: InboxItem) -> Result<(), AgentdError> {
        ops::post(&self.router, external(), agent_id, item, None)
            .await
            .map(|_| ())
    }

    async fn require_exists(&self, agent_id: &str) -> Result<AgentRecord, AgentdError> {
        self.deps
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
        if text.trim().is_empty() {
            return Err(AgentdError::missing_field("value"));
        }
        self.require_exists(agent_id).await?;
        let label = if waiting_for == agentd_proto::AgentStatus::WaitingQuestion {
            "Answer"
        } else {
            "Dependency provided"
        };
        let env = agentd_proto::Envelope::new(
            external(),
            Address::agent(agent_id),
            agentd_proto::Item::Inbox(InboxItem::message(format!("{label}: {text}"))),
            self.deps.clock.now_ms(),
        );
        let addr = self
            .supervisor
            .send(crate::messages::Activate(agent_id.to_string()))
            .await
            .map_err(mailbox)??;
        addr.send(crate::messages::Provide { env, waiting_for })
            .await
            .map_err(mailbox)?
    }

    /// Replaces an agent's budget (raise it, then `resume` a paused agent).
    pub async fn set_budget(
        &self,
        agent_id: &str,
        budget: agentd_proto::Budget,
    ) -> Result<AgentRecord, AgentdError> {
        self.require_exists(agent_id).await?;
        let addr = self
            .supervisor
            .send(crate::messages::Activate(agent_id.to_string()))
            .await
            .map_err(mailbox)??;
        addr.send(crate::messages::SetBudget(budget))
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
        let live = self
            .supervisor
            .send(crate::messages::Lookup(agent_id.to_string()))
            .await
            .map_err(mailbox)?;
        let reason = agentd_proto::CheckpointReason::Manual;
        match live {
            Some(addr) => addr
                .send(crate::messages::TakeCheckpoint {
                    reason,
                    trigger: "manual".into(),
                })
                .await
                .map_err(mailbox)?,
            None => crate::checkpoints::capture(&self.deps, &rec, reason, "manual").await,
        }
    }

    /// An agent's checkpoints, newest first.
    pub async fn checkpoints(
        &self,
        agent_id: &str,
    ) -> Result<Vec<agentd_proto::Checkpoint>, AgentdError> {
        self.require_exists(agent_id).await?;
        Ok(self.deps.store.checkpoints(agent_id).await?)
    }

    /// Brings an agent back to checkpoint `id` (`None` = its newest): conversation, phase,
    /// step, progress and environment as they were, its pending items queued again.
    pub async fn restore(
        &self,
        agent_id: &str,
        id: Option<uuid::Uuid>,
    ) -> Result<AgentRecord, AgentdError> {
        self.require_exists(agent_id).await?;
        let cp = crate::checkpoints::find(&self.deps, agent_id, id).await?;
        let addr = self
            .supervisor
            .send(crate::messages::Activate(agent_id.to_string()))
            .await
            .map_err(mailbox)??;
        addr.send(crate::messages::RestoreCheckpoint(cp))
            .await
            .map_err(mailbox)?
    }

    /// Replaces an agent's environment variables.
    pub async fn set_env(
        &self,
        agent_id: &str,
        env: std::collections::BTreeMap<String, String>,
    ) -> Result<AgentRecord, AgentdError> {
        self.require_exists(agent_id).await?;
        let addr = self
            .supervisor
            .send(crate::messages::Activate(agent_id.to_string()))
            .await
            .map_err(mailbox)??;
        addr.send(crate::messages::SetEnv(env))
            .await
            .map_err(mailbox)
    }

    /// Applies a lifecycle control (cascading where the design says so).
    pub async fn control(
        &self,
        agent_id: &str,
        control: Control,
    ) -> Result<Option<AgentRecord>, AgentdError> {
        ops::lifecycle(&self.deps, &self.supervisor, agent_id, control).await
    }

    /// The freshest record of an agent.
    pub async fn record(&self, agent_id: &str) -> Result<AgentRecord, AgentdError> {
        ops::record(&self.deps, &self.supervisor, agent_id).await
    }

    /// The inspect view of an agent.
    pub async fn inspect(&self, agent_id: &str) -> Result<Inspection, AgentdError> {
        // Whether the agent is live, its inbox and its turn are known only in the process that
        // owns it: asked there. If that process does not answer (or answers what is not an
        // inspection), the stored view answers with `live: null` (unknown), not a `false` that
        // would be wrong.
        if self.deps.is_owned_elsewhere(agent_id)
            && let Some(transport) = &self.deps.transport
        {
            let env = agentd_proto::Envelope::new(
                external(),
                Address::agent(agent_id),
                agentd_proto::Item::Command(Command::Inspect {
                    agent_id: agent_id.to_string(),
                }),
                self.deps.clock.now_ms(),
            );
            let unanswered = match transport
                .call(env, INSPECT_RELAY_TIMEOUT)
                .await
                .and_then(|reply| reply.into_result())
            {
                Ok(answer) => match serde_json::from_value::<Inspection>(answer) {
                    Ok(inspection) => return Ok(inspection),
                    Err(e) => e.to_string(),
                },
                Err(e) if e.code != ErrorCode::Unavailable => return Err(e),
                Err(e) => e.to_string(),
            };
            tracing::warn!(agent_id, error = %unanswered, "the agent's owner did not answer an inspection; answering the stored view");
            let stored = ops::inspect(&self.deps, &self.supervisor, agent_id).await?;
            return Ok(Inspection {
                live: LiveState::UNKNOWN,
                ..stored
            });
        }
        ops::inspect(&self.deps, &self.supervisor, agent_id).await
    }

    /// How many agents are live (have an actor) in this process.
    pub async fn live_count(&self) -> Result<usize, AgentdError> {
        self.supervisor
            .send(crate::messages::LiveCount)
            .await
            .map_err(|e| AgentdError::new(ErrorCode::Unavailable, format!("supervisor: {e}")))
    }

    /// Children of `parent` or all roots.
    pub async fn list(&self, parent: Option<&str>) -> Result<Vec<Inspection>, AgentdError> {
        ops::list(&self.deps, &self.supervisor, parent).await
    }

    /// Every root (or only `scope`'s tree) with its descendants, nested, with statuses and
    /// costs rolled up.
    pub async fn tree(&self, scope: Option<&str>) -> Result<Vec<TreeNode>, AgentdError> {
        let roots: Vec<String> = match scope {
            Some(root) => vec![self.record(root).await?.id],
            None => ops::root_ids(&self.deps).await?,
        };
        let mut out = Vec::new();
        for root in roots {
            out.push(self.subtree(&root, 0).await?);
        }
        Ok(out)
    }

    fn subtree<'a>(
        &'a self,
        id: &'a str,
        depth: u32,
    ) -> futures::future::BoxFuture<'a, Result<TreeNode, AgentdError>> {
        Box::pin(async move {
            let agent = self.inspect(id).await?;
            let mut children = Vec::new();
            if depth < 64 {
                for c in self.deps.store.children(id).await? {
                    children.push(self.subtree(&c, depth + 1).await?);
                }
            }
            Ok(TreeNode::new(agent, children))
        })
    }

    /// The work queue (seed 001): every agent with work pending or in progress, in the order
    /// turns start when slots are scarce (priority, then age). Each task shows its
    /// [`QueueState`]: `executing`, `queued`, `waiting_rate_limit` (with `resume_at_ms`),
    /// `waiting_dependency` (with `depends_on`), `held` or `ready`.
    pub async fn queue(&self, scope: Option<&str>) -> Result<Vec<QueueTask>, AgentdError> {
        let mut stack: Vec<String> = match scope {
            Some(root) => vec![self.record(root).await?.id],
            None => ops::root_ids(&self.deps).await?,
        };
        let mut tasks = Vec::new();
        while let Some(id) = stack.pop() {
            stack.extend(self.deps.store.children(&id).await?);
            let rec = self.record(&id).await?;
            let pending = self.deps.store.inbox_pending(&id).await?.len();
            let Some(state) = QueueState::of(rec.status, pending) else {
                continue;
            };
            tasks.push((
                (rec.priority, rec.created_at_ms, rec.id.clone()),
                QueueTask::of(&rec, state, pending),
            ));
        }
        tasks.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(tasks.into_iter().map(|(_, task)| task).collect())
    }

    /// An agent's thread.
    pub async fn thread(&self, agent_id: &str) -> Result<Vec<ThreadEntry>, AgentdError> {
        self.require_exists(agent_id).await?;
        Ok(self.deps.store.thread(agent_id).await?)
    }

    /// Runs a tool as `agent_id` would (its thread is the runtime thread). Without an agent id
    /// there is no runtime thread: `missing_thread_id` (seed 000).
    pub async fn invoke_tool(
        &self,
        agent_id: Option<&str>,
        tool: &str,
        args: Value,
    ) -> Result<Value, AgentdError> {
        let Some(agent_id) = agent_id.filter(|a| !a.trim().is_empty()) else {
            return Err(AgentdError::new(
                ErrorCode::MissingThreadId,
                "a tool call needs the caller's thread id (agent_id)",
            ));
        };
        let caller = ops::record(&self.deps, &self.supervisor, agent_id).await?;
        let ctx = ToolContext {
            caller: std::sync::Arc::new(caller),
            deps: self.deps.clone(),
            supervisor: self.supervisor.clone(),
            router: self.router.clone(),
            cause: agentd_proto::ids::new_id(),
        };
        match tools::execute(&ctx, tool, &args).await? {
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
        Ok(tools::visible_specs(&rec, &self.deps).specs().to_vec())
    }

    /// Checks that an external caller scoped to `scope` (a root it names) may act on `target`:
    /// the root itself or one of its descendants (`not_ancestor` otherwise). No scope = operator.
    pub async fn check_scope(&self, scope: Option<&str>, target: &str) -> Result<(), AgentdError> {
        match scope {
            Some(root) => ops::require_descendant(&self.deps, root, target).await,
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
                if let Some(target) = command_target(&other) {
                    self.check_scope(scope, target).await?;
                }
                other
            }
        };
        self.execute(cmd).await
    }

    /// Executes a command from another service and answers its result as JSON. A command that
    /// acts on a live agent (see [`runs_where_the_agent_lives`]) whose partition another
    /// process owns runs there, and its answer comes back from there.
    pub async fn execute(&self, cmd: Command) -> Result<Value, AgentdError> {
        if let Some(target) = runs_where_the_agent_lives(&cmd)
            && self.deps.is_owned_elsewhere(target)
            && let Some(transport) = &self.deps.transport
        {
            let timeout = call_timeout(&cmd, &self.deps.config);
            let env = agentd_proto::Envelope::new(
                external(),
                Address::agent(target),
                agentd_proto::Item::Command(cmd),
                self.deps.clock.now_ms(),
            );
            return transport.call(env, timeout).await?.into_result();
        }
        match cmd {
            Command::SetBudget { agent_id, budget } => self
                .set_budget(&agent_id, budget)
                .await
                .and_then(|r| ops::to_json(&AgentView::of(&r, 0))),
            Command::ProvideDependency { agent_id, value } => self
                .provide(
                    &agent_id,
                    agentd_proto::AgentStatus::WaitingDependency,
                    &value,
                )
                .await
                .and_then(|r| ops::to_json(&AgentView::of(&r, 0))),
            Command::AnswerQuestion { agent_id, answer } => self
                .provide(
                    &agent_id,
                    agentd_proto::AgentStatus::WaitingQuestion,
                    &answer,
                )
                .await
                .and_then(|r| ops::to_json(&AgentView::of(&r, 0))),
            Command::Spawn(req) => self.spawn(*req).await.and_then(|r| ops::to_json(&AgentView::of(&r, 0))),
            Command::Send {
                agent_id,
                text,
                interrupt,
            } => {
                self.send(&agent_id, &text, interrupt).await?;
                Ok(json!({"agent_id": agent_id, "status": "sent"}))
            }
            Command::Control { agent_id, control } => {
                let rec = self.control(&agent_id, control).await?;
                Ok(
                    json!({"agent_id": agent_id, "control": control.as_str(), "status": rec.map(|r| r.status)}),
                )
            }
            Command::Reset { agent_id, message } => {
                self.post(&agent_id, InboxItem::Reset { message }).await?;
                Ok(
                    json!({"summary": "Agent session reset requested.", "target_agent_id": agent_id}),
                )
            }
            Command::Compact { agent_id } => {
                self.post(&agent_id, InboxItem::Compact).await?;
                Ok(json!({"summary": "Agent compaction requested.", "target_agent_id": agent_id}))
            }
            Command::Inspect { agent_id } => ops::to_json(&self.inspect(&agent_id).await?),
            Command::List { parent_id } => ops::to_json(&AgentList {
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
            Command::SetEnv { agent_id, env } => self
                .set_env(&agent_id, env)
                .await
                .and_then(|r| ops::to_json(&AgentView::of(&r, 0))),
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
                .and_then(|r| ops::to_json(&AgentView::of(&r, 0))),
        }
    }

    /// Re-activates, after a restart, every agent of this process that was running or queued
    /// when the previous process stopped: their durable inboxes (the interrupted item first)
    /// are resumed. Then hands the child outputs the store's outbox still keeps to their
    /// parents. Answers how many agents were activated.
    pub async fn recover(&self) -> Result<usize, AgentdError> {
        let n = self.recover_where(|_| true).await?;
        self.hand_over_outbox().await?;
        Ok(n)
    }

    /// Hands each child output kept in the store's outbox ([`crate::ports::StoreWrite::Outbox`])
    /// to its parent's router, oldest first: the previous process stopped between the batch
    /// that kept it and the parent's push (a repeat of a push that did land is a duplicate the
    /// parent's inbox drops). The parent's router lets it go once handled.
    async fn hand_over_outbox(&self) -> Result<(), AgentdError> {
        let store = &self.deps.store;
        if !store.keeps_outbox() {
            return Ok(());
        }
        let pending = store.outbox_pending().await?;
        let mut handed = 0usize;
        for env in pending {
            let child = match (&env.item, env.from.agent_id()) {
                (agentd_proto::Item::Output(_), Some(child_id)) => {
                    store.get_agent(child_id).await?
                }
                _ => None,
            };
            let (Some(child), agentd_proto::Item::Output(output), Some(cause)) =
                (child, env.item, env.causation_id)
            else {
                // Not an output as agents keep them, or its child is gone: nothing to hand over.
                store.outbox_done(env.id).await?;
                continue;
            };
            // The parent's router lets it go by the id derived from its cause, as it was kept.
            let out = crate::messages::ChildOutput {
                child: Arc::new(child),
                output,
                cause,
                kept: true,
            };
            self.router.send(out).await.map_err(mailbox)?;
            handed += 1;
        }
        if handed > 0 {
            tracing::info!(
                outputs = handed,
                "handed over child outputs the last process had not delivered"
            );
        }
        Ok(())
    }

    /// [`AgentSystem::recover`] for the agents `filter` selects: a transport calls it for the
    /// partitions it has just taken, because an agent stopped when its partition moved (or
    /// whose previous owner died) keeps its acknowledged work only in its durable inbox, and
    /// nothing else would activate it again until another message arrives.
    pub async fn recover_where(
        &self,
        filter: impl Fn(&str) -> bool + Send,
    ) -> Result<usize, AgentdError> {
        let mut stack: Vec<String> = self
            .deps
            .store
            .list_roots()
            .await?
            .into_iter()
            .map(|r| r.id)
            .collect();
        let mut n = 0;
        let mut seen = std::collections::HashSet::new();
        while let Some(id) = stack.pop() {
            if !seen.insert(id.clone()) {
                continue;
            }
            stack.extend(self.deps.store.children(&id).await?);
            if !filter(&id) || self.deps.is_owned_elsewhere(&id) {
                continue;
            }
            let Some(rec) = self.deps.store.get_agent(&id).await? else {
                continue;
            };
            let pending = !self.deps.store.inbox_pending(&id).await?.is_empty();
            // Rate-limited agents come back too: they resume by themselves at their reset time.
            if matches!(
                rec.status,
                agentd_proto::AgentStatus::Running
                    | agentd_proto::AgentStatus::Queued
                    | agentd_proto::AgentStatus::WaitingRateLimit
            ) || (pending && rec.status.accepts_turns())
            {
                self.supervisor
                    .send(crate::messages::Activate(id.clone()))
                    .await
                    .map_err(mailbox)??;
                n += 1;
            }
        }
        if n > 0 {
            tracing::info!(
                agents = n,
                "resumed agents that had work when the last process stopped"
            );
        }
        Ok(n)
    }

    /// Stops every agent (records stay as persisted) and the supervisor.
    pub async fn shutdown(&self) {
        if let Err(e) = self.supervisor.send(Shutdown).await.map_err(mailbox) {
            tracing::warn!(error = %e, "shutdown");
        }
    }
}

/// The agent a command acts on, if it names one.
pub fn command_target(cmd: &Command) -> Option<&str> {
    match cmd {
        Command::Send { agent_id, .. }
        | Command::Control { agent_id, .. }
        | Command::Reset { agent_id, .. }
        | Command::Compact { agent_id }
        | Command::Inspect { agent_id }
        | Command::Thread { agent_id }
        | Command::ProvideDependency { agent_id, .. }
        | Command::AnswerQuestion { agent_id, .. }
        | Command::SetBudget { agent_id, .. }
        | Command::SetEnv { agent_id, .. }
        | Command::Checkpoint { agent_id }
        | Command::Checkpoints { agent_id }
        | Command::Restore { agent_id, .. } => Some(agent_id),
        Command::InvokeTool { agent_id, .. } => agent_id.as_deref(),
        Command::Spawn(req) => req.parent_id.as_deref(),
        Command::List { parent_id } => parent_id.as_deref(),
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
        | Command::Restore { agent_id, .. } => Some(agent_id),
        Command::InvokeTool { agent_id, .. } => {
            agent_id.as_deref().filter(|a| !a.trim().is_empty())
        }
        _ => None,
    }
}

/// How long an inspection waits for the agent's owner before answering the stored view.
const INSPECT_RELAY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

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

fn external() -> Address {
    Address::External { name: "api".into() }
}
