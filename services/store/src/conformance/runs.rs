//! Runs (`Runs`): a run and its outcome kept apart under their agent, listed oldest first,
//! written once by a put of a new run, gone with the agent, beside the agent's other values.

use super::*;
use agentd_ports::{Run, RunOrigin, RunOutcome, RunState, StoreErrorKind, StoredRun};
use serde_json::json;
use uuid::Uuid;

/// Run `id` of agent `agent`, created at `created_ms`.
fn run_of(agent: &str, id: &str, created_ms: u64) -> Run {
    let mut fields = serde_json::Map::new();
    fields.insert("history".into(), json!([{"text": id}]));
    Run {
        id: id.into(),
        agent_id: agent.into(),
        door: "a2a".into(),
        origin: RunOrigin::Door,
        items: vec![Uuid::from_u128(created_ms.into())],
        inputs: vec![Uuid::from_u128(u128::from(created_ms) + 1)],
        rejected: None,
        cancel_requested: false,
        unposted: true,
        created_ms,
        fields,
    }
}

fn outcome(state: RunState, answer: Option<&str>) -> RunOutcome {
    RunOutcome {
        for_input: Uuid::from_u128(7),
        state,
        status_text: None,
        answer: answer.map(str::to_string),
        answer_entries: vec![Uuid::from_u128(8)],
        at_ms: 1_000,
        usage: Usage {
            input: 3,
            output: 2,
            ..Usage::default()
        },
    }
}

/// A run and its outcome are written by different hands: each replaces only its own part;
/// `run_get` and `runs` read both, the oldest run first.
pub(super) async fn a_run_and_its_outcome_are_kept_apart(store: &dyn ThreadStore) {
    let agent = record("r-ctx", None, 30);
    store.put_agent(&agent).await.unwrap();
    assert_eq!(store.run_get("r-ctx", "later").await.unwrap(), None);
    assert!(store.runs("r-ctx").await.unwrap().is_empty());
    // Stored out of order: listed by creation.
    let later = run_of("r-ctx", "later", 20);
    let first = run_of("r-ctx", "first", 10);
    store.run_put(&later).await.unwrap();
    store.run_put(&first).await.unwrap();
    let working = outcome(RunState::Running, None);
    store.run_settle("r-ctx", "first", &working).await.unwrap();
    assert_eq!(
        store.run_get("r-ctx", "first").await.unwrap(),
        Some(StoredRun {
            run: first.clone(),
            outcome: Some(working.clone()),
        })
    );
    // The door's write of the run keeps the outcome a reader wrote, and the other way round.
    let posted = Run {
        unposted: false,
        ..first.clone()
    };
    store.run_put(&posted).await.unwrap();
    let done = outcome(RunState::Completed, Some("the answer"));
    store.run_settle("r-ctx", "first", &done).await.unwrap();
    let all = store.runs("r-ctx").await.unwrap();
    assert_eq!(
        all,
        vec![
            StoredRun {
                run: posted,
                outcome: Some(done),
            },
            StoredRun {
                run: later.clone(),
                outcome: None,
            },
        ]
    );
}

/// `run_put_new` stores a run only if none of its id is stored: two processes that take up
/// the same work as a run make one, and the first one's stays.
pub(super) async fn a_run_put_only_if_new_is_written_once(store: &dyn ThreadStore) {
    let agent = record("r-once", None, 31);
    store.put_agent(&agent).await.unwrap();
    let first = run_of("r-once", "t", 1);
    assert!(store.run_put_new(&first).await.unwrap());
    let second = Run {
        origin: RunOrigin::Agent,
        ..run_of("r-once", "t", 2)
    };
    assert!(!store.run_put_new(&second).await.unwrap());
    let stored = store.run_get("r-once", "t").await.unwrap().unwrap();
    assert_eq!(stored.run, first);
}

/// Runs live beside the agent's other values (which are not runs), and go with the agent;
/// another agent's runs stay.
pub(super) async fn runs_live_beside_other_values_and_die_with_their_agent(
    store: &dyn ThreadStore,
) {
    for id in ["r-gone", "r-stays"] {
        store.put_agent(&record(id, None, 32)).await.unwrap();
        store.run_put(&run_of(id, "t", 1)).await.unwrap();
        store
            .run_settle(id, "t", &outcome(RunState::Failed, None))
            .await
            .unwrap();
    }
    store
        .agent_value_put("r-gone", "t#push:1", b"not a run")
        .await
        .unwrap();
    assert_eq!(store.runs("r-gone").await.unwrap().len(), 1);
    assert_eq!(store.agent_values("r-gone").await.unwrap().len(), 3);
    store.delete_agent("r-gone").await.unwrap();
    assert!(store.runs("r-gone").await.unwrap().is_empty());
    assert_eq!(store.run_get("r-gone", "t").await.unwrap(), None);
    assert_eq!(store.runs("r-stays").await.unwrap().len(), 1);
}

/// A stored run that cannot be read is a corrupt value, never a run that vanished.
pub(super) async fn a_run_that_cannot_be_read_is_corrupt(store: &dyn ThreadStore) {
    store.put_agent(&record("r-bad", None, 33)).await.unwrap();
    store
        .agent_value_put("r-bad", "run/t", b"{not json")
        .await
        .unwrap();
    let got = store.run_get("r-bad", "t").await.unwrap_err();
    assert_eq!(got.kind(), StoreErrorKind::Corrupt);
    let listed = store.runs("r-bad").await.unwrap_err();
    assert_eq!(listed.kind(), StoreErrorKind::Corrupt);
}

/// Runs every property of runs against `store`, which must be empty of the ids they use.
pub async fn run(store: Arc<dyn ThreadStore>) {
    a_run_and_its_outcome_are_kept_apart(store.as_ref()).await;
    a_run_put_only_if_new_is_written_once(store.as_ref()).await;
    runs_live_beside_other_values_and_die_with_their_agent(store.as_ref()).await;
    a_run_that_cannot_be_read_is_corrupt(store.as_ref()).await;
}
