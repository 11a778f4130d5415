//! Values kept under an agent (runs, A2A's push notifications): replaced by key, written once
//! by a put of a new key, listed with their keys, gone with the agent.

use super::*;

/// Values are kept per agent, replaced by key, written once by `agent_value_put_new`, and go
/// with the agent.
pub(super) async fn values_live_and_die_with_their_agent(store: &dyn ThreadStore) {
    let ctx = record("c-a2a", None, 20);
    let other = record("c-a2a-other", None, 21);
    store.put_agent(&ctx).await.unwrap();
    store.put_agent(&other).await.unwrap();
    assert!(store.agent_values("c-a2a").await.unwrap().is_empty());
    store.agent_value_put("c-a2a", "t1", b"one").await.unwrap();
    store.agent_value_put("c-a2a", "t2", b"two").await.unwrap();
    store
        .agent_value_put("c-a2a", "t1", b"one again")
        .await
        .unwrap();
    store
        .agent_value_put("c-a2a-other", "t1", b"theirs")
        .await
        .unwrap();
    assert_eq!(
        value(store, "c-a2a", "t1").await.as_deref(),
        Some(&b"one again"[..])
    );
    assert_eq!(store.agent_value_get("c-a2a", "t3").await.unwrap(), None);
    // A value put only if new is not replaced, and replaces nothing.
    assert!(!put_new(store, "c-a2a", "t1", b"not this").await);
    assert!(put_new(store, "c-a2a", "t3", b"three").await);
    assert!(!put_new(store, "c-a2a", "t3", b"not this").await);
    assert_eq!(
        value(store, "c-a2a", "t3").await.as_deref(),
        Some(&b"three"[..])
    );
    store
        .agent_value_put("c-a2a", "t3", b"three again")
        .await
        .unwrap();
    assert_eq!(
        value(store, "c-a2a", "t3").await.as_deref(),
        Some(&b"three again"[..])
    );
    let mut all = store.agent_values("c-a2a").await.unwrap();
    all.sort();
    assert_eq!(
        all,
        vec![
            ("t1".to_string(), b"one again".to_vec()),
            ("t2".to_string(), b"two".to_vec()),
            ("t3".to_string(), b"three again".to_vec()),
        ]
    );
    store.delete_agent("c-a2a").await.unwrap();
    assert!(store.agent_values("c-a2a").await.unwrap().is_empty());
    assert_eq!(store.agent_value_get("c-a2a", "t2").await.unwrap(), None);
    assert_eq!(
        value(store, "c-a2a-other", "t1").await.as_deref(),
        Some(&b"theirs"[..])
    );
}

/// The value under `key` of `agent`.
async fn value(store: &dyn ThreadStore, agent: &str, key: &str) -> Option<Vec<u8>> {
    store.agent_value_get(agent, key).await.unwrap()
}

/// Whether a put of `key` only if new wrote it.
async fn put_new(store: &dyn ThreadStore, agent: &str, key: &str, value: &[u8]) -> bool {
    store.agent_value_put_new(agent, key, value).await.unwrap()
}

/// Runs every property of the values kept under an agent against `store`, which must be empty of the ids they use.
pub async fn run(store: Arc<dyn ThreadStore>) {
    values_live_and_die_with_their_agent(store.as_ref()).await;
}
