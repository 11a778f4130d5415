//! The A2A task map: what the A2A layer keeps of a context — its tasks (runs of door `a2a`,
//! the store's `Runs` concern, see `as_run`) with their settled states (the runs' outcomes),
//! and push notification configs and notifications, each a [`Stored`] value under a key of its
//! own among the agent's values — and [`TaskMap`], the trait it is kept through.
//!
//! The map is the A2A layer's, not the store's: the store port knows runs and values kept
//! under an agent ([`AgentValues`], opaque bytes by key), and `TaskMap` is implemented for
//! every store that keeps them (the memory, embedded and Redis stores, and anything that wraps
//! one), here, over those concerns. (The store crate cannot implement a trait of this crate,
//! which depends on it; and the A2A layer holds the store as `dyn ThreadStore`, so it reaches
//! the map through concerns every store has.)
//!
//! Tasks and settled states stored before tasks were runs (the [`Stored::Task`] and
//! [`Stored::Settled`] values) are read as they were, never written: a task written again is
//! written as a run, which wins over the value it replaces.
//!
//! Deleting a context deletes its tasks: the runs and values live under the context agent's
//! own keys, and deleting the agent (`AgentRecords::delete_agent`, whichever process or door
//! deletes it) removes them with it; no process needs to hear of the deletion.

use super::{Settled, State, TaskRecord};
use crate::a2a::error::A2aError;
use agentd_actors::{AgentValues, RunOutcome, Runs};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::future::Future;
use uuid::Uuid;

/// What one stored value is (the kinds share the context's values).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(in crate::a2a) enum Stored {
    /// A task stored before tasks were runs: read, never written.
    Task(TaskRecord),
    /// A settled state stored before tasks were runs: read, never written.
    Settled(LegacySettled),
    /// A push notification config of a task (`notices.rs`).
    Push(super::PushConfig),
    /// A push notification in the outbox (`notices.rs`).
    Notice(super::Notice),
}

/// A task's settled state as it was stored before tasks were runs (A2A's state names, the
/// outcome's fields beside the task's id).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(in crate::a2a) struct LegacySettled {
    task_id: String,
    for_input: Uuid,
    state: State,
    #[serde(default)]
    status_text: Option<String>,
    #[serde(default)]
    answer: Option<String>,
    at_ms: u64,
    #[serde(default)]
    usage: agentd_proto::Usage,
}

impl From<LegacySettled> for Settled {
    fn from(s: LegacySettled) -> Settled {
        Settled {
            task_id: s.task_id,
            outcome: RunOutcome {
                for_input: s.for_input,
                state: s.state.into(),
                status_text: s.status_text,
                answer: s.answer,
                answer_entries: Vec::new(),
                at_ms: s.at_ms,
                usage: s.usage,
            },
        }
    }
}

/// What a context's task map holds, read.
#[derive(Default)]
pub(in crate::a2a) struct Contents {
    pub tasks: Vec<TaskRecord>,
    /// The settled states, the runs' outcomes before any stored before tasks were runs (a
    /// reader takes the first of a task's it finds).
    pub settled: Vec<Settled>,
    pub push: Vec<super::PushConfig>,
    pub notices: Vec<super::Notice>,
}

/// The task map of each context (a context is its agent, `ctx` its id).
pub(in crate::a2a) trait TaskMap {
    /// Saves `task` as its run, replacing what was saved of it (not its settled state).
    fn task_save(&self, task: &TaskRecord) -> impl Future<Output = Result<(), A2aError>> + Send;

    /// Keeps `settled` as the settled state of its task, a task of context `ctx`.
    fn task_settle(
        &self,
        ctx: &str,
        settled: &Settled,
    ) -> impl Future<Output = Result<(), A2aError>> + Send;

    /// Stores `value` (a push config or notice) under `key` in context `ctx`'s map, replacing
    /// what was stored there.
    fn task_put(
        &self,
        ctx: &str,
        key: &str,
        value: &Stored,
    ) -> impl Future<Output = Result<(), A2aError>> + Send;

    /// [`Self::task_put`] unless something is stored under `key` already (then nothing
    /// changes), in one atomic step: answers whether it stored `value`.
    fn task_put_new(
        &self,
        ctx: &str,
        key: &str,
        value: &Stored,
    ) -> impl Future<Output = Result<bool, A2aError>> + Send;

    /// Everything context `ctx`'s map holds, read (a value that cannot be read is logged and
    /// skipped).
    fn task_map(&self, ctx: &str) -> impl Future<Output = Result<Contents, A2aError>> + Send;

    /// Whether context `ctx`'s map holds anything (the agent is an A2A context).
    fn has_task_map(&self, ctx: &str) -> impl Future<Output = Result<bool, A2aError>> + Send;
}

impl<S: Runs + ?Sized> TaskMap for S {
    async fn task_save(&self, task: &TaskRecord) -> Result<(), A2aError> {
        self.run_put(&task.to_run()).await.map_err(A2aError::store)
    }

    async fn task_settle(&self, ctx: &str, settled: &Settled) -> Result<(), A2aError> {
        self.run_settle(ctx, &settled.task_id, &settled.outcome)
            .await
            .map_err(A2aError::store)
    }

    async fn task_put(&self, ctx: &str, key: &str, value: &Stored) -> Result<(), A2aError> {
        let bytes = serde_json::to_vec(value).map_err(A2aError::store)?;
        self.agent_value_put(ctx, key, &bytes)
            .await
            .map_err(A2aError::store)
    }

    async fn task_put_new(&self, ctx: &str, key: &str, value: &Stored) -> Result<bool, A2aError> {
        let bytes = serde_json::to_vec(value).map_err(A2aError::store)?;
        self.agent_value_put_new(ctx, key, &bytes)
            .await
            .map_err(A2aError::store)
    }

    async fn task_map(&self, ctx: &str) -> Result<Contents, A2aError> {
        let mut c = Contents::default();
        for stored in self.runs(ctx).await.map_err(A2aError::store)? {
            let Some(task) = TaskRecord::from_run(stored.run) else {
                continue;
            };
            if let Some(outcome) = stored.outcome {
                c.settled.push(Settled {
                    task_id: task.id.clone(),
                    outcome,
                });
            }
            c.tasks.push(task);
        }
        let runs: HashSet<String> = c.tasks.iter().map(|t| t.id.clone()).collect();
        for (key, v) in AgentValues::agent_values(self, ctx)
            .await
            .map_err(A2aError::store)?
        {
            if agentd_actors::ports::is_run_key(&key) {
                continue;
            }
            match serde_json::from_slice::<Stored>(&v) {
                Ok(Stored::Task(t)) if !runs.contains(&t.id) => c.tasks.push(t),
                Ok(Stored::Task(_)) => {}
                Ok(Stored::Settled(s)) => c.settled.push(s.into()),
                Ok(Stored::Push(p)) => c.push.push(p),
                Ok(Stored::Notice(n)) => c.notices.push(n),
                Err(e) => {
                    tracing::warn!(context = ctx, key, error = %e, "an A2A value could not be read")
                }
            }
        }
        Ok(c)
    }

    async fn has_task_map(&self, ctx: &str) -> Result<bool, A2aError> {
        let c = self.task_map(ctx).await?;
        Ok(!(c.tasks.is_empty() && c.push.is_empty() && c.notices.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::a2a::task::{Origin, State};
    use agentd_actors::RunState;
    use agentd_actors::ThreadStore;
    use std::sync::Arc;

    fn task(id: &str, created_ms: u64) -> TaskRecord {
        TaskRecord {
            id: id.into(),
            context_id: "ctx".into(),
            client_context_id: Some("chosen".into()),
            items: vec![Uuid::from_u128(1)],
            inputs: vec![Uuid::from_u128(2)],
            history: vec![serde_json::json!({"messageId": id})],
            origin: Origin::Client,
            rejected: None,
            cancel_requested: false,
            unposted: false,
            created_ms,
        }
    }

    fn settled(task: &str, state: State) -> Settled {
        Settled {
            task_id: task.into(),
            outcome: RunOutcome {
                for_input: Uuid::from_u128(2),
                state: state.into(),
                status_text: None,
                answer: Some("done".into()),
                answer_entries: vec![Uuid::from_u128(3)],
                at_ms: 1,
                usage: Default::default(),
            },
        }
    }

    /// A settled state as stored before tasks were runs.
    fn legacy(task: &str, state: State) -> LegacySettled {
        LegacySettled {
            task_id: task.into(),
            for_input: Uuid::from_u128(2),
            state,
            status_text: None,
            answer: Some("done".into()),
            at_ms: 1,
            usage: Default::default(),
        }
    }

    /// A store is a task map: tasks saved as runs and settled as their outcomes, read back
    /// typed beside the push values, and gone with the context agent.
    #[tokio::test]
    async fn a_task_map_lives_under_its_context_and_goes_with_it() {
        let store: Arc<dyn ThreadStore> = Arc::new(agentd_store::MemoryStore::new());
        let ctx = agentd_store::conformance::bare_record("ctx");
        store.put_agent(&ctx).await.unwrap();
        assert!(!store.has_task_map("ctx").await.unwrap());
        store.task_save(&task("ctx.t1", 1)).await.unwrap();
        store
            .task_settle("ctx", &settled("ctx.t1", State::Completed))
            .await
            .unwrap();
        let runs = store.runs("ctx").await.unwrap();
        assert_eq!(runs.len(), 1, "the task is a run");
        assert_eq!(runs[0].run.door, "a2a");
        let read = store.task_map("ctx").await.unwrap();
        assert_eq!(read.tasks, vec![task("ctx.t1", 1)]);
        assert_eq!(read.settled, vec![settled("ctx.t1", State::Completed)]);
        assert!(store.has_task_map("ctx").await.unwrap());
        store.delete_agent("ctx").await.unwrap();
        assert!(
            !store.has_task_map("ctx").await.unwrap(),
            "the tasks went with the context"
        );
    }

    /// Tasks and settled states stored before tasks were runs are read as they were; a task
    /// saved again is a run, which is read instead of the old value, and its outcome before the
    /// old settled state.
    #[tokio::test]
    async fn tasks_stored_before_runs_are_read_and_a_run_wins_over_them() {
        let store: Arc<dyn ThreadStore> = Arc::new(agentd_store::MemoryStore::new());
        store
            .put_agent(&agentd_store::conformance::bare_record("ctx"))
            .await
            .unwrap();
        let old = |v: Stored| serde_json::to_vec(&v).unwrap();
        let (t1, t2) = (task("ctx.t1", 1), task("ctx.t2", 2));
        for (key, value) in [
            ("ctx.t1", old(Stored::Task(t1.clone()))),
            ("ctx.t2", old(Stored::Task(t2.clone()))),
            (
                "ctx.t2#settled",
                old(Stored::Settled(legacy("ctx.t2", State::Working))),
            ),
        ] {
            store.agent_value_put("ctx", key, &value).await.unwrap();
        }
        let read = store.task_map("ctx").await.unwrap();
        let mut ids: Vec<&str> = read.tasks.iter().map(|t| t.id.as_str()).collect();
        ids.sort();
        assert_eq!(ids, ["ctx.t1", "ctx.t2"]);
        let states: Vec<_> = read
            .settled
            .iter()
            .map(|s| (s.task_id.as_str(), s.outcome.state))
            .collect();
        assert_eq!(states, [("ctx.t2", RunState::Running)]);
        assert!(store.has_task_map("ctx").await.unwrap());

        let cancelled = TaskRecord {
            cancel_requested: true,
            ..t2.clone()
        };
        store.task_save(&cancelled).await.unwrap();
        store
            .task_settle("ctx", &settled("ctx.t2", State::Canceled))
            .await
            .unwrap();
        let read = store.task_map("ctx").await.unwrap();
        assert_eq!(read.tasks.len(), 2, "one task each: {:?}", read.tasks);
        assert!(read.tasks.contains(&cancelled) && read.tasks.contains(&t1));
        let first = read.settled.iter().find(|s| s.task_id == "ctx.t2");
        assert_eq!(first.map(|s| s.outcome.state), Some(RunState::Cancelled));
    }
}
