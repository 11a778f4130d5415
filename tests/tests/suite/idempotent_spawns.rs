//! Idempotent spawns in one process, on the memory and the embedded store (the Redis store, and
//! across processes, are in `redis_replicas.rs`): a spawn retried under one key answers the
//! first agent and makes no second, another request under the key is refused, keys are scoped
//! by parent, and a retry whose claim is gone (a restart, an expiry) still finds the agent.

use agentd_actors::system::idempotent_agent_id;
use agentd_proto::{ErrorCode, Role, SpawnRequest};
use agentd_tests::TestSystem;

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
    let sys = TestSystem::builder().start();
    retries_answer_the_first_agent(&sys).await;
}

#[actix_rt::test]
async fn a_retried_spawn_answers_its_first_agent_on_the_embedded_store_after_its_claim_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let sys = TestSystem::builder().embedded(dir.path()).start();
    let id = retries_answer_the_first_agent(&sys).await;
    // A restart forgets the process's claims (as does their expiry): the agent's id, derived
    // from the key, still finds it.
    sys.store.spawn_claim_expire(&id, 0).await.unwrap();
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
