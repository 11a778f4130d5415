//! The A2A task map: what the A2A layer keeps of a context — its tasks, their settled states,
//! push notification configs and notifications, each a [`Stored`] value under a key of its
//! own — and [`TaskMap`], the trait it is kept through.
//!
//! The map is the A2A layer's, not the store's: the store port knows only values kept under an
//! agent ([`AgentValues`]), opaque bytes by key, and `TaskMap` is implemented for every store
//! that keeps them (the memory, embedded and Redis stores, and anything that wraps one), here,
//! over that concern. (The store crate cannot implement a trait of this crate, which depends
//! on it; and the A2A layer holds the store as `dyn ThreadStore`, so it reaches the map through
//! a concern every store has.)
//!
//! Deleting a context deletes its tasks: the values live under the context agent's own keys,
//! and deleting the agent (`AgentRecords::delete_agent`, whichever process or door deletes
//! it) removes them with it; no process needs to hear of the deletion.

use crate::a2a::error::A2aError;
use agentd_actors::AgentValues;
use serde::{Deserialize, Serialize};
use std::future::Future;

/// What one stored value is (the kinds share the context's task map).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(in crate::a2a) enum Stored {
    Task(super::TaskRecord),
    Settled(super::Settled),
    /// A push notification config of a task (`notices.rs`).
    Push(super::PushConfig),
    /// A push notification in the outbox (`notices.rs`).
    Notice(super::Notice),
}

/// What a context's task map holds, read.
#[derive(Default)]
pub(in crate::a2a) struct Contents {
    pub tasks: Vec<super::TaskRecord>,
    pub settled: Vec<super::Settled>,
    pub push: Vec<super::PushConfig>,
    pub notices: Vec<super::Notice>,
}

pub(super) fn store_err(e: impl std::fmt::Display) -> A2aError {
    A2aError::Internal(format!("the store failed: {e}"))
}

/// The task map of each context (a context is its agent, `ctx` its id). Values are JSON.
pub(in crate::a2a) trait TaskMap {
    /// Stores `value` under `key` in context `ctx`'s map, replacing what was stored there.
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

    /// Every value of context `ctx`'s map, read (a value that cannot be read is logged and
    /// skipped).
    fn task_map(&self, ctx: &str) -> impl Future<Output = Result<Contents, A2aError>> + Send;

    /// Whether context `ctx`'s map holds anything (the agent is an A2A context).
    fn has_task_map(&self, ctx: &str) -> impl Future<Output = Result<bool, A2aError>> + Send;
}

impl<S: AgentValues + ?Sized> TaskMap for S {
    async fn task_put(&self, ctx: &str, key: &str, value: &Stored) -> Result<(), A2aError> {
        let bytes = serde_json::to_vec(value).map_err(store_err)?;
        self.agent_value_put(ctx, key, &bytes)
            .await
            .map_err(store_err)
    }

    async fn task_put_new(&self, ctx: &str, key: &str, value: &Stored) -> Result<bool, A2aError> {
        let bytes = serde_json::to_vec(value).map_err(store_err)?;
        self.agent_value_put_new(ctx, key, &bytes)
            .await
            .map_err(store_err)
    }

    async fn task_map(&self, ctx: &str) -> Result<Contents, A2aError> {
        let values = self.agent_values(ctx).await.map_err(store_err)?;
        let mut c = Contents::default();
        for v in values {
            match serde_json::from_slice::<Stored>(&v) {
                Ok(Stored::Task(t)) => c.tasks.push(t),
                Ok(Stored::Settled(s)) => c.settled.push(s),
                Ok(Stored::Push(p)) => c.push.push(p),
                Ok(Stored::Notice(n)) => c.notices.push(n),
                Err(e) => {
                    tracing::warn!(context = ctx, error = %e, "an A2A task could not be read")
                }
            }
        }
        Ok(c)
    }

    async fn has_task_map(&self, ctx: &str) -> Result<bool, A2aError> {
        Ok(!self.agent_values(ctx).await.map_err(store_err)?.is_empty())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::a2a::task::{Settled, State};
    use agentd_actors::ThreadStore;
    use std::sync::Arc;

    fn settled(task: &str) -> Stored {
        Stored::Settled(Settled {
            task_id: task.into(),
            for_input: uuid::Uuid::nil(),
            state: State::Completed,
            status_text: None,
            answer: Some("done".into()),
            at_ms: 1,
            usage: Default::default(),
        })
    }

    /// A store is a task map: values written once by `task_put_new`, read back typed, and
    /// gone with the context agent.
    #[tokio::test]
    async fn a_task_map_lives_under_its_context_and_goes_with_it() {
        let store: Arc<dyn ThreadStore> = Arc::new(agentd_store::MemoryStore::new());
        let ctx = agentd_store::conformance::bare_record("ctx");
        store.put_agent(&ctx).await.unwrap();
        assert!(!store.has_task_map("ctx").await.unwrap());
        store
            .task_put("ctx", "t1#settled", &settled("t1"))
            .await
            .unwrap();
        assert!(
            !store
                .task_put_new("ctx", "t1#settled", &settled("other"))
                .await
                .unwrap()
        );
        assert!(
            store
                .task_put_new("ctx", "t2", &settled("t2"))
                .await
                .unwrap()
        );
        let mut read: Vec<String> = store
            .task_map("ctx")
            .await
            .unwrap()
            .settled
            .into_iter()
            .map(|s| s.task_id)
            .collect();
        read.sort();
        assert_eq!(read, ["t1", "t2"]);
        store.delete_agent("ctx").await.unwrap();
        assert!(
            !store.has_task_map("ctx").await.unwrap(),
            "the tasks went with the context"
        );
    }
}
