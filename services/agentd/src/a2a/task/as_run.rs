//! A2A's tasks as runs: a task is a run of door [`DOOR`] (the store's `Runs` concern), and its
//! settled state ([`Settled`](super::Settled)) the run's outcome. [`TaskRecord`] is the A2A
//! layer's view of the run — the `contextId` the client chose and the client's messages are the
//! door's own fields —, converted both ways without loss; A2A's [`State`] is a [`RunState`] in
//! A2A's words.

use super::{Origin, State, TaskRecord};
use agentd_actors::{Run, RunOrigin, RunState};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The door A2A's runs carry.
pub(super) const DOOR: &str = "a2a";

/// The fields of an A2A task a run keeps as its door's own.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Fields {
    /// [`TaskRecord::client_context_id`].
    #[serde(
        rename = "clientContextId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    client_context_id: Option<String>,
    /// [`TaskRecord::history`].
    #[serde(default)]
    history: Vec<Value>,
}

impl From<State> for RunState {
    fn from(s: State) -> Self {
        match s {
            State::Submitted => RunState::Pending,
            State::Working => RunState::Running,
            State::InputRequired => RunState::InputRequired,
            State::Completed => RunState::Completed,
            State::Failed => RunState::Failed,
            State::Canceled => RunState::Cancelled,
            State::Rejected => RunState::Rejected,
        }
    }
}

impl From<RunState> for State {
    fn from(s: RunState) -> Self {
        match s {
            RunState::Pending => State::Submitted,
            RunState::Running => State::Working,
            RunState::InputRequired => State::InputRequired,
            RunState::Completed => State::Completed,
            RunState::Failed => State::Failed,
            RunState::Cancelled => State::Canceled,
            RunState::Rejected => State::Rejected,
        }
    }
}

impl TaskRecord {
    /// The run this task is.
    pub(crate) fn to_run(&self) -> Run {
        let fields = Fields {
            client_context_id: self.client_context_id.clone(),
            history: self.history.clone(),
        };
        let fields = match serde_json::to_value(fields) {
            Ok(Value::Object(map)) => map,
            // A struct of a string and a list of JSON values is always an object.
            _ => Map::new(),
        };
        Run {
            id: self.id.clone(),
            agent_id: self.context_id.clone(),
            door: DOOR.to_string(),
            origin: match self.origin {
                Origin::Client => RunOrigin::Door,
                Origin::Agent => RunOrigin::Agent,
            },
            items: self.items.clone(),
            inputs: self.inputs.clone(),
            rejected: self.rejected.clone(),
            cancel_requested: self.cancel_requested,
            unposted: self.unposted,
            created_ms: self.created_ms,
            fields,
        }
    }

    /// The task run `run` is (`None`: a run of another door). Door fields it cannot read are
    /// taken as absent, and logged.
    pub(super) fn from_run(run: Run) -> Option<TaskRecord> {
        if run.door != DOOR {
            return None;
        }
        let fields: Fields =
            serde_json::from_value(Value::Object(run.fields)).unwrap_or_else(|e| {
                tracing::warn!(task = %run.id, error = %e, "an A2A task's own fields could not be read");
                Fields::default()
            });
        Some(TaskRecord {
            id: run.id,
            context_id: run.agent_id,
            client_context_id: fields.client_context_id,
            items: run.items,
            inputs: run.inputs,
            history: fields.history,
            origin: match run.origin {
                RunOrigin::Door => Origin::Client,
                RunOrigin::Agent => Origin::Agent,
            },
            rejected: run.rejected,
            cancel_requested: run.cancel_requested,
            unposted: run.unposted,
            created_ms: run.created_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use uuid::Uuid;

    #[test]
    fn a_task_is_a_run_and_its_state_a_run_state_both_ways() {
        for (origin, client_context_id) in [
            (Origin::Client, Some("chosen".to_string())),
            (Origin::Agent, None),
        ] {
            let task = TaskRecord {
                id: "ctx.first".into(),
                context_id: "ctx".into(),
                client_context_id,
                items: vec![Uuid::from_u128(1)],
                inputs: vec![Uuid::from_u128(2)],
                history: vec![json!({"messageId": "m", "parts": [{"text": "hi"}]})],
                origin,
                rejected: Some("over budget".into()),
                cancel_requested: true,
                unposted: true,
                created_ms: 42,
            };
            let run = task.to_run();
            assert_eq!(run.door, DOOR);
            assert_eq!(run.agent_id, "ctx");
            assert_eq!(TaskRecord::from_run(run), Some(task));
        }
        for state in [
            State::Submitted,
            State::Working,
            State::InputRequired,
            State::Completed,
            State::Failed,
            State::Canceled,
            State::Rejected,
        ] {
            assert_eq!(State::from(RunState::from(state)), state);
        }
    }

    #[test]
    fn a_run_of_another_door_is_no_task() {
        let mut run = TaskRecord {
            id: "t".into(),
            context_id: "ctx".into(),
            client_context_id: None,
            items: vec![],
            inputs: vec![],
            history: vec![],
            origin: Origin::Agent,
            rejected: None,
            cancel_requested: false,
            unposted: false,
            created_ms: 0,
        }
        .to_run();
        run.door = "langgraph".into();
        assert_eq!(TaskRecord::from_run(run), None);
    }
}
