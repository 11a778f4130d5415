//! The concern of runs: the record of one piece of work a door started on an agent — an A2A
//! task, a LangGraph run, an MCP task — from the inbox items it is made of to what became of
//! them.
//!
//! A run is kept in two parts with different writers. [`Run`], what the run *is* (its items,
//! the inputs their turns begin with, a cancel asked, the door's own fields), is written by the
//! door's request handlers. [`RunOutcome`], what *became* of it, is read from the agent's own
//! durable state (its inbox, its thread, its record) by whichever process looks, and kept once
//! read so that the answer outlives a later compaction or reset of the thread; two processes
//! reading the same state write the same outcome, so the last write wins without harm, and a
//! door's write of the run never races a reader's write of its outcome.
//!
//! Retention: a run lives as long as its agent. It is kept under the agent's own keys (the
//! [`AgentValues`] concern, keys `run/<id>` and `run-outcome/<id>`), so deleting the agent
//! ([`AgentRecords::delete_agent`](super::AgentRecords::delete_agent)) removes its runs in
//! every process, with no event to hear; closing it keeps them.

use super::{AgentValues, StoreError, StoreResult};
use agentd_proto::Usage;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

/// The state of a run, in words every door maps to its own (A2A's `TASK_STATE_*`, LangGraph's
/// run statuses, MCP's task statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Queued in the agent's inbox; its turn has not begun.
    Pending,
    /// Its turn runs (waiting on a tool call or an approval included).
    Running,
    /// The turn asked its caller a question (`waiting_question`).
    InputRequired,
    /// The turn answered.
    Completed,
    /// The turn failed.
    Failed,
    /// Cancelled before or while it ran (a cancel of the run, of the agent, an interrupt).
    Cancelled,
    /// Refused before it ran (a budget, a limit).
    Rejected,
}

impl RunState {
    /// Whether nothing changes it any more.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Completed | RunState::Failed | RunState::Cancelled | RunState::Rejected
        )
    }
}

/// Who started a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOrigin {
    /// A caller of the door (an A2A client's message, a LangGraph run created).
    Door,
    /// Something else that made the agent run, which the door took up as a run of its own: a
    /// sub-agent's output, a message through agentd's own API.
    Agent,
}

/// What a run is: written by its door's request handlers only.
///
/// Invariant kept by every door: a run is stored (with `unposted` set) before its last item is
/// posted, so a reader never takes the item's turn for work no run started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Its id, unique within its agent; the door chooses it.
    pub id: String,
    /// The agent whose inbox items it is made of.
    pub agent_id: String,
    /// The door that started it or took it up (`a2a`, …).
    pub door: String,
    /// Who started it.
    pub origin: RunOrigin,
    /// The inbox items that belong to it, in order: the message that started it, then each
    /// answer to a question it asked. Empty for work found only in the thread.
    #[serde(default)]
    pub items: Vec<Uuid>,
    /// The ids the items' turns' input entries have in the thread, in order (for a message
    /// item, `derived_id(item, "input")`).
    pub inputs: Vec<Uuid>,
    /// Why it was refused before it ran (`None`: it was not).
    #[serde(default)]
    pub rejected: Option<String>,
    /// A cancel was asked.
    #[serde(default)]
    pub cancel_requested: bool,
    /// Stored, its last item not posted yet: nothing is concluded from the item's absence.
    #[serde(default)]
    pub unposted: bool,
    /// Created, ms since the epoch.
    pub created_ms: u64,
    /// The door's own fields (A2A: the client's `contextId` and messages), opaque to the store
    /// and to other doors.
    #[serde(default)]
    pub fields: Map<String, Value>,
}

/// What became of a run, as last read from its agent's state (any process writes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// The input it was read for: a later input of the run (an answer to its question) makes
    /// it stale.
    pub for_input: Uuid,
    /// The state.
    pub state: RunState,
    /// The question, the error, or why it was cancelled or refused.
    #[serde(default)]
    pub status_text: Option<String>,
    /// The answer (the text of the answer's entries, kept: the thread may be compacted).
    #[serde(default)]
    pub answer: Option<String>,
    /// The ids of the thread entries the answer is made of, in order.
    #[serde(default)]
    pub answer_entries: Vec<Uuid>,
    /// When this state was first seen, ms since the epoch.
    pub at_ms: u64,
    /// The tokens the run's turns used.
    #[serde(default)]
    pub usage: Usage,
}

/// A run with what became of it, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRun {
    /// The run.
    pub run: Run,
    /// Its outcome, once one was read and kept.
    pub outcome: Option<RunOutcome>,
}

/// Where run `id` is kept among its agent's values.
fn run_key(id: &str) -> String {
    format!("{RUN_PREFIX}{id}")
}

/// Where run `id`'s outcome is kept among its agent's values.
fn outcome_key(id: &str) -> String {
    format!("{OUTCOME_PREFIX}{id}")
}

/// What the keys of runs start with among an agent's values. Another user of [`AgentValues`]
/// keeps its own values under keys that start with neither this nor [`OUTCOME_PREFIX`].
pub const RUN_PREFIX: &str = "run/";
/// What the keys of runs' outcomes start with among an agent's values.
pub const OUTCOME_PREFIX: &str = "run-outcome/";

/// Whether `key`, a key of an agent's values, is a run's or a run's outcome's.
pub fn is_run_key(key: &str) -> bool {
    key.starts_with(RUN_PREFIX) || key.starts_with(OUTCOME_PREFIX)
}

fn encode(what: &str, value: &impl Serialize) -> StoreResult<Vec<u8>> {
    serde_json::to_vec(value)
        .map_err(|e| StoreError::caused_by(super::StoreErrorKind::Corrupt, what.to_string(), e))
}

fn decode<T: serde::de::DeserializeOwned>(what: &str, bytes: &[u8]) -> StoreResult<T> {
    serde_json::from_slice(bytes).map_err(|e| {
        StoreError::caused_by(super::StoreErrorKind::Corrupt, format!("{what}: {e}"), e)
    })
}

/// Runs: each agent's runs and their outcomes (see the module doc). Every method has a
/// default composed of [`AgentValues`]; a backend implements the concern with an empty `impl`,
/// or with its own methods where it can do better.
#[async_trait]
pub trait Runs: AgentValues {
    /// Stores `run` under its agent, replacing what was stored of it (not its outcome).
    async fn run_put(&self, run: &Run) -> StoreResult<()> {
        let bytes = encode("encoding a run", run)?;
        self.agent_value_put(&run.agent_id, &run_key(&run.id), &bytes)
            .await
    }

    /// [`Self::run_put`] unless a run of that id is stored already (then nothing changes), in
    /// one atomic step: answers whether it stored `run`. Two processes that take up the same
    /// work as a run make one.
    async fn run_put_new(&self, run: &Run) -> StoreResult<bool> {
        let bytes = encode("encoding a run", run)?;
        self.agent_value_put_new(&run.agent_id, &run_key(&run.id), &bytes)
            .await
    }

    /// Keeps `outcome` as what became of run `run_id` of agent `agent_id`, replacing the outcome
    /// kept before.
    async fn run_settle(
        &self,
        agent_id: &str,
        run_id: &str,
        outcome: &RunOutcome,
    ) -> StoreResult<()> {
        let bytes = encode("encoding a run's outcome", outcome)?;
        self.agent_value_put(agent_id, &outcome_key(run_id), &bytes)
            .await
    }

    /// Run `run_id` of agent `agent_id` with its outcome, if stored. A value that cannot be
    /// decoded is a [`Corrupt`](super::StoreErrorKind::Corrupt) failure.
    async fn run_get(&self, agent_id: &str, run_id: &str) -> StoreResult<Option<StoredRun>> {
        let Some(run) = self.agent_value_get(agent_id, &run_key(run_id)).await? else {
            return Ok(None);
        };
        let outcome = self.agent_value_get(agent_id, &outcome_key(run_id)).await?;
        Ok(Some(StoredRun {
            run: decode("a stored run", &run)?,
            outcome: outcome
                .map(|o| decode("a stored run's outcome", &o))
                .transpose()?,
        }))
    }

    /// Every run of agent `agent_id` with its outcome, oldest first (by creation, then id).
    /// A value that cannot be decoded is a [`Corrupt`](super::StoreErrorKind::Corrupt)
    /// failure; the agent's values of other users are not looked at.
    async fn runs(&self, agent_id: &str) -> StoreResult<Vec<StoredRun>> {
        let mut runs = Vec::new();
        let mut outcomes = std::collections::HashMap::new();
        for (key, bytes) in self.agent_values(agent_id).await? {
            if let Some(id) = key.strip_prefix(OUTCOME_PREFIX) {
                let outcome: RunOutcome = decode("a stored run's outcome", &bytes)?;
                outcomes.insert(id.to_string(), outcome);
            } else if key.starts_with(RUN_PREFIX) {
                runs.push(decode::<Run>("a stored run", &bytes)?);
            }
        }
        runs.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        Ok(runs
            .into_iter()
            .map(|run| StoredRun {
                outcome: outcomes.remove(&run.id),
                run,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_run_id_makes_a_key_of_another_run_or_outcome() {
        for id in ["a", "run/a", "run-outcome/a", "a#outcome", ""] {
            assert!(is_run_key(&run_key(id)) && is_run_key(&outcome_key(id)));
            assert_ne!(run_key(id), outcome_key(id));
            // A run's key read back names the run, never an outcome (and the other way).
            assert_eq!(outcome_key(id).strip_prefix(OUTCOME_PREFIX), Some(id));
            assert!(!run_key(id).starts_with(OUTCOME_PREFIX));
        }
    }
}
