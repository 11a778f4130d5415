//! Spawn idempotency claims: the first claim wins and is answered to every later one until it
//! is dropped; a claim is kept or dropped by its expiry.

use agentd_actors::ThreadStore;
use std::sync::Arc;

/// The first claim of a key wins, racing claims included; a dropped claim frees the key.
pub async fn the_first_claim_wins_until_dropped(store: Arc<dyn ThreadStore>) {
    let id = "s-agent";
    assert_eq!(store.spawn_claim(id, "first", 60_000).await.unwrap(), None);
    assert_eq!(
        store.spawn_claim(id, "second", 60_000).await.unwrap(),
        Some("first".to_string()),
        "a later claim is answered the first one's fingerprint"
    );
    store.spawn_claim_expire(id, 120_000).await.unwrap();
    assert_eq!(
        store.spawn_claim(id, "third", 60_000).await.unwrap(),
        Some("first".to_string()),
        "a claim kept longer stays"
    );
    store.spawn_claim_expire(id, 0).await.unwrap();
    assert_eq!(store.spawn_claim(id, "fourth", 60_000).await.unwrap(), None);
    store.spawn_claim_expire(id, 0).await.unwrap();
    store
        .spawn_claim_expire("s-never-claimed", 60_000)
        .await
        .unwrap();
    assert_eq!(
        store
            .spawn_claim("s-never-claimed", "x", 60_000)
            .await
            .unwrap(),
        None,
        "expiring a missing claim makes none"
    );
    // Racing claims: exactly one wins, and every other sees its fingerprint.
    let racers: Vec<_> = (0..8)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                let fingerprint = format!("racer-{n}");
                let first = store.spawn_claim("s-raced", &fingerprint, 60_000).await;
                (fingerprint, first.unwrap())
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut seen = Vec::new();
    for racer in racers {
        let (fingerprint, first) = racer.await.unwrap();
        match first {
            None => winners.push(fingerprint),
            Some(first) => seen.push(first),
        }
    }
    assert_eq!(winners.len(), 1, "one claim wins: {winners:?}");
    assert!(
        seen.iter().all(|s| *s == winners[0]),
        "{seen:?} vs {winners:?}"
    );
}
