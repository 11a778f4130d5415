//! Outside ids: the first claim of a key wins and is answered to every later one, a key maps
//! to one agent per door, tenant and owner, and the mappings go with their agent.

use super::*;
use agentd_ports::ExternalKey;

pub(super) async fn outside_ids_map_to_one_agent_until_it_is_deleted(store: Arc<dyn ThreadStore>) {
    let s = store.as_ref();
    for id in ["x-ctx", "x-ctx-2", "x-other"] {
        s.put_agent(&record(id, None, 30)).await.unwrap();
    }
    // Any string is an id, and the parts of a key never run together.
    let key = ExternalKey::new("a2a/research", "ctx 1/ünïcode\u{1f}\"]");
    let other_door = ExternalKey::new("a2a/lead", "ctx 1/ünïcode\u{1f}\"]");
    let tenant = ExternalKey {
        tenant: "t1".into(),
        ..key.clone()
    };
    let joined = ExternalKey::new("a2a/research\",\"", "ctx");
    assert_eq!(s.external_id_get(&key).await.unwrap(), None);
    // Racing claims of one key agree on one agent.
    let mut racing = Vec::new();
    for candidate in ["x-ctx", "x-ctx-2"] {
        let (store, key) = (store.clone(), key.clone());
        racing.push(tokio::spawn(async move {
            store.external_id_claim(&key, candidate).await.unwrap()
        }));
    }
    let mut winners = Vec::new();
    for r in racing {
        winners.push(r.await.unwrap());
    }
    winners.dedup();
    assert_eq!(
        winners.len(),
        1,
        "both claims answer the winner: {winners:?}"
    );
    let winner = winners[0].clone();
    let loser = if winner == "x-ctx" {
        "x-ctx-2"
    } else {
        "x-ctx"
    };
    assert_eq!(
        s.external_id_get(&key).await.unwrap().as_deref(),
        Some(winner.as_str())
    );
    for k in [&other_door, &tenant, &joined] {
        assert_eq!(s.external_id_get(k).await.unwrap(), None, "{k:?}");
    }
    assert_eq!(
        s.external_id_claim(&other_door, "x-other").await.unwrap(),
        "x-other"
    );
    // Releasing for an agent it does not map to changes nothing.
    s.external_id_release(&key, loser).await.unwrap();
    assert_eq!(
        s.external_id_get(&key).await.unwrap().as_deref(),
        Some(winner.as_str())
    );
    // Deleting the loser leaves the winner's mapping; deleting the winner drops it.
    s.delete_agent(loser).await.unwrap();
    assert_eq!(
        s.external_id_get(&key).await.unwrap().as_deref(),
        Some(winner.as_str())
    );
    s.delete_agent(&winner).await.unwrap();
    assert_eq!(s.external_id_get(&key).await.unwrap(), None);
    assert_eq!(
        s.external_id_get(&other_door).await.unwrap().as_deref(),
        Some("x-other")
    );
    // The key is free again; a release frees it too.
    s.put_agent(&record("x-again", None, 31)).await.unwrap();
    assert_eq!(
        s.external_id_claim(&key, "x-again").await.unwrap(),
        "x-again"
    );
    s.external_id_release(&key, "x-again").await.unwrap();
    assert_eq!(s.external_id_get(&key).await.unwrap(), None);
    s.delete_agent("x-again").await.unwrap();
    s.delete_agent("x-other").await.unwrap();
    assert_eq!(s.external_id_get(&other_door).await.unwrap(), None);
}

/// Runs every property of outside ids against `store`, which must be empty of the ids they use.
pub async fn run(store: Arc<dyn ThreadStore>) {
    outside_ids_map_to_one_agent_until_it_is_deleted(store.clone()).await;
}
