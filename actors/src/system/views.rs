//! What the API shows of agents: one agent's inspection (asked of the process that owns it),
//! lists, the tree with costs rolled up, and the work queue.

use super::{AgentSystem, external};
use crate::ops;
use agentd_proto::{
    Address, AgentdError, Command, ErrorCode, Inspection, LiveState, QueueState, QueueTask,
    TreeNode,
};

/// How long an inspection waits for the agent's owner before answering the stored view.
const INSPECT_RELAY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl AgentSystem {
    /// The inspect view of an agent.
    pub async fn inspect(&self, agent_id: &str) -> Result<Inspection, AgentdError> {
        // Whether the agent is live, its inbox and its turn are known only in the process that
        // owns it: asked there. If that process does not answer (or answers what is not an
        // inspection), the stored view answers with `live: null` (unknown), not a `false` that
        // would be wrong.
        if self.system.deps.is_owned_elsewhere(agent_id)
            && let Some(transport) = &self.system.deps.transport
        {
            let env = agentd_proto::Envelope::new(
                external(),
                Address::agent(agent_id),
                agentd_proto::Item::Command(Command::Inspect {
                    agent_id: agent_id.to_string(),
                }),
                self.system.deps.clock.now_ms(),
            );
            // Within a request's deadline, half of what is left: the stored view answers in
            // the other half.
            let wait = crate::deadline::remaining().map_or(INSPECT_RELAY_TIMEOUT, |left| {
                (left / 2).min(INSPECT_RELAY_TIMEOUT)
            });
            let unanswered = match transport
                .call(env, wait)
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
            let stored = ops::inspect(&self.system, agent_id).await?;
            return Ok(Inspection {
                live: LiveState::UNKNOWN,
                ..stored
            });
        }
        ops::inspect(&self.system, agent_id).await
    }

    /// Children of `parent` or all roots.
    pub async fn list(&self, parent: Option<&str>) -> Result<Vec<Inspection>, AgentdError> {
        ops::list(&self.system, parent).await
    }

    /// Every root (or only `scope`'s tree) with its descendants, nested, with statuses and
    /// costs rolled up.
    pub async fn tree(&self, scope: Option<&str>) -> Result<Vec<TreeNode>, AgentdError> {
        let roots: Vec<String> = match scope {
            Some(root) => vec![self.record(root).await?.id],
            None => ops::root_ids(&self.system.deps).await?,
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
                for c in self.system.deps.store.children(id).await? {
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
            None => ops::root_ids(&self.system.deps).await?,
        };
        let mut tasks = Vec::new();
        while let Some(id) = stack.pop() {
            stack.extend(self.system.deps.store.children(&id).await?);
            let rec = self.record(&id).await?;
            let pending = self.system.deps.store.inbox_pending(&id).await?.len();
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
}
