//! Idempotent spawns in one process, on the memory and the embedded store (the Redis store, and
//! across processes, are in `redis_replicas.rs`): a spawn retried under one key answers the
//! first agent and makes no second, another request under the key is refused, keys are scoped
//! by parent, a retry whose key's mapping is gone (an expiry, a failover) still finds the agent,
//! and one whose mapping outlived its agent makes the agent again.

use agentd_actors::Retention;
use agentd_actors::system::{idempotent_agent_id, spawn_key};
use agentd_proto::{Control, ErrorCode, Role, SpawnRequest};
use agentd_tests::{TestSystem, failing_store::FailingWrites};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn keyed(key: &str, prompt: &str) -> SpawnRequest {
    SpawnRequest {
        agent_type: Some("subagent".into()),
        prompt: Some(prompt.into()),
        idempotency_key: Some(key.into()),
        ..SpawnRequest::default()
    }
}

async fn retries_answer_the_first_agent(sys: &TestSystem) -> String {
    let first = sys.system.spawn(keyed("job-1", "work")).await.unwrap();
    assert_eq!(first.id, idempotent_agent_id(None, "job-1"));
    // Racing retries, and a later one.
    let (a, b) = tokio::join!(
        sys.system.spawn(keyed("job-1", "work")),
        sys.system.spawn(keyed("job-1", "work"))
    );
    assert_eq!(
        (a.unwrap().id, b.unwrap().id),
        (first.id.clone(), first.id.clone())
    );
    let reused = sys.system.spawn(keyed("job-1", "other work")).await;
    assert!(
        matches!(&reused, Err(e) if e.code == ErrorCode::IdempotencyKeyReused),
        "{reused:?}"
    );
    let mut child = keyed("job-1", "child work");
    child.parent_id = Some(first.id.clone());
    let child = sys.system.spawn(child).await.unwrap();
    assert_ne!(child.id, first.id, "a key is scoped by its parent");
    let bad = sys
        .system
        .spawn(SpawnRequest {
            agent_type: Some("no-such-type".into()),
            ..keyed("job-2", "x")
        })
        .await;
    assert!(matches!(&bad, Err(e) if e.code == ErrorCode::UnknownAgentType));
    sys.system.spawn(keyed("job-2", "fixed")).await.unwrap();
    let roots = sys.system.list(None).await.unwrap();
    assert_eq!(roots.len(), 2, "job-1 and job-2 once each: {roots:?}");
    sys.wait_for_entry(&first.id, Role::Assistant, "echo: work")
        .await;
    let inputs = sys.texts_of(&first.id, Role::User).await;
    assert_eq!(
        inputs.iter().filter(|t| *t == "work").count(),
        1,
        "one first message: {inputs:?}"
    );
    first.id
}

#[actix_rt::test]
async fn a_retried_spawn_answers_its_first_agent_on_the_memory_store() {
    let sys = TestSystem::builder().start().await;
    retries_answer_the_first_agent(&sys).await;
}

#[actix_rt::test]
async fn a_retried_spawn_answers_its_first_agent_on_the_embedded_store_after_its_claim_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let sys = TestSystem::builder().embedded(dir.path()).start().await;
    let id = retries_answer_the_first_agent(&sys).await;
    // The key's mapping expires (or a failover loses it): the agent's id, derived from the
    // key, still finds it.
    let key = spawn_key(None, "job-1");
    let mapped = sys.store.external_id_get(&key).await.unwrap().unwrap();
    assert!(mapped.settled && mapped.agent_id == id, "{mapped:?}");
    sys.store.external_id_release(&key, &mapped).await.unwrap();
    let again = sys.system.spawn(keyed("job-1", "work")).await.unwrap();
    assert_eq!(again.id, id);
    assert_eq!(sys.system.list(None).await.unwrap().len(), 2);
    let inputs = sys.texts_of(&id, Role::User).await;
    assert_eq!(
        inputs.iter().filter(|t| *t == "work").count(),
        1,
        "still one first message: {inputs:?}"
    );
}

/// A spawn answers once its prompt is in the agent's durable inbox: whoever it answers (a `201`)
/// can count on the first message as on the agent. With pushes that take 300 ms, the prompt is
/// in the thread when the spawn answers, not 300 ms later.
#[actix_rt::test]
async fn a_spawn_answers_once_its_first_message_is_durable() {
    let store = Arc::new(FailingWrites::default());
    let sys = TestSystem::builder().store(store.clone()).start().await;
    store.delay_pushes(300);
    let started = Instant::now();
    let rec = sys
        .system
        .spawn(SpawnRequest {
            agent_type: Some("subagent".into()),
            prompt: Some("work".into()),
            ..SpawnRequest::default()
        })
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(sys.texts_of(&rec.id, Role::User).await, vec!["work"]);
}

/// The first attempt of a keyed spawn writes its agent and fails to queue its first message (a
/// store lost in between): it answers an error, and the retry answers the same agent with its
/// prompt queued, once.
#[actix_rt::test]
async fn a_retried_spawn_queues_the_first_message_its_first_attempt_lost() {
    let store = Arc::new(FailingWrites::default());
    let sys = TestSystem::builder().store(store.clone()).start().await;
    store.fail_pushes(true);
    let failed = sys.system.spawn(keyed("job-lost", "work")).await;
    assert!(failed.is_err(), "{failed:?}");
    let id = idempotent_agent_id(None, "job-lost");
    assert!(sys.store.get_agent(&id).await.unwrap().is_some());
    store.fail_pushes(false);
    let again = sys.system.spawn(keyed("job-lost", "work")).await.unwrap();
    assert_eq!(again.id, id);
    sys.wait_for_entry(&id, Role::Assistant, "echo: work").await;
    // A further retry queues nothing more.
    sys.system.spawn(keyed("job-lost", "work")).await.unwrap();
    let inputs = sys.texts_of(&id, Role::User).await;
    assert_eq!(inputs, vec!["work"]);
}

/// Deleting the agent drops its key's mapping: the key is free for any request. A mapping that
/// outlived its agent (a failover that kept it and lost the agent, a deletion cut off before
/// it) is settled with no agent: a retry makes the agent again, under the same id.
#[actix_rt::test]
async fn a_retried_spawn_whose_agent_is_gone_makes_it_again() {
    let sys = TestSystem::builder().start().await;
    let first = sys.system.spawn(keyed("job-gone", "work")).await.unwrap();
    let id = first.id.clone();
    let key = spawn_key(None, "job-gone");
    let mapped = sys.store.external_id_get(&key).await.unwrap().unwrap();
    let delete = |sys: &TestSystem| {
        let (system, id) = (sys.system.clone(), id.clone());
        async move {
            system.control(&id, Control::Delete).await.unwrap();
        }
    };
    delete(&sys).await;
    assert!(sys.store.get_agent(&id).await.unwrap().is_none());
    assert_eq!(
        sys.store.external_id_get(&key).await.unwrap(),
        None,
        "the deletion dropped the key's mapping"
    );
    // The mapping back, as a failover that lost the agent would leave it.
    let kept = Retention::For {
        ms: 24 * 60 * 60 * 1000,
    };
    assert_eq!(
        sys.store
            .external_id_claim(&key, &mapped, kept)
            .await
            .unwrap(),
        None
    );
    let started = Instant::now();
    let again = sys.system.spawn(keyed("job-gone", "work")).await.unwrap();
    assert_eq!(again.id, id, "made again under the key's id");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a settled mapping's missing agent is not waited for"
    );
    assert!(sys.store.get_agent(&id).await.unwrap().is_some());
    sys.wait_for_entry(&id, Role::Assistant, "echo: work").await;
    let remapped = sys.store.external_id_get(&key).await.unwrap().unwrap();
    assert!(remapped.settled, "{remapped:?}");
    // Deleted for good, the key is free: another request takes it.
    delete(&sys).await;
    let other = sys
        .system
        .spawn(keyed("job-gone", "other work"))
        .await
        .unwrap();
    assert_eq!(other.id, id);
    sys.wait_for_entry(&id, Role::Assistant, "echo: other work")
        .await;
    assert_eq!(sys.system.list(None).await.unwrap().len(), 1);
}
