//! Idempotency claims: the first claim of a key wins and is answered to every later one — with
//! its fingerprint, and whether what it guards is done — until it is released or expires; keys
//! of different homes are different claims.

use agentd_ports::{Claim, ClaimEnd, ThreadStore};
use std::sync::Arc;

fn claim(fingerprint: &str, settled: bool) -> Option<Claim> {
    Some(Claim {
        fingerprint: fingerprint.to_string(),
        settled,
    })
}

/// The first claim of a key wins, racing claims included; settling keeps it, releasing frees
/// the key; a claim expires by its time.
pub async fn the_first_claim_wins_until_released_or_expired(store: Arc<dyn ThreadStore>) {
    let s = store.as_ref();
    let (home, key) = ("c-agent", "message 1");
    assert_eq!(
        s.idempotency_claim(home, key, "first", 60_000)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        s.idempotency_claim(home, key, "second", 60_000)
            .await
            .unwrap(),
        claim("first", false),
        "a later claim is answered the first one, not settled yet"
    );
    assert_eq!(
        s.idempotency_claim("c-other", key, "x", 60_000)
            .await
            .unwrap(),
        None,
        "another home's key is another claim"
    );
    assert_eq!(
        s.idempotency_claim(home, "message 2", "x", 60_000)
            .await
            .unwrap(),
        None,
        "another key of the home is another claim"
    );
    s.idempotency_claim_end(home, key, ClaimEnd::Settled { keep_ms: 120_000 })
        .await
        .unwrap();
    assert_eq!(
        s.idempotency_claim(home, key, "third", 60_000)
            .await
            .unwrap(),
        claim("first", true),
        "a settled claim stays, settled"
    );
    s.idempotency_claim_end(home, key, ClaimEnd::Released)
        .await
        .unwrap();
    assert_eq!(
        s.idempotency_claim(home, key, "fourth", 60_000)
            .await
            .unwrap(),
        None
    );
    s.idempotency_claim_end("c-never", key, ClaimEnd::Settled { keep_ms: 60_000 })
        .await
        .unwrap();
    assert_eq!(
        s.idempotency_claim("c-never", key, "x", 60_000)
            .await
            .unwrap(),
        None,
        "settling a missing claim makes none"
    );
    // A claim expires by its time: one made for 50 ms, and one settled for 50 ms.
    assert_eq!(
        s.idempotency_claim(home, "brief", "b1", 50).await.unwrap(),
        None
    );
    assert_eq!(
        s.idempotency_claim(home, "kept", "k1", 60_000)
            .await
            .unwrap(),
        None
    );
    s.idempotency_claim_end(home, "kept", ClaimEnd::Settled { keep_ms: 50 })
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(120)).await;
    assert_eq!(
        s.idempotency_claim(home, "brief", "b2", 60_000)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        s.idempotency_claim(home, "kept", "k2", 60_000)
            .await
            .unwrap(),
        None
    );
    // Racing claims: exactly one wins, and every other sees its fingerprint.
    let racers: Vec<_> = (0..8)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                let fingerprint = format!("racer-{n}");
                let first = store
                    .idempotency_claim("c-raced", "k", &fingerprint, 60_000)
                    .await;
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
            Some(first) => seen.push(first.fingerprint),
        }
    }
    assert_eq!(winners.len(), 1, "one claim wins: {winners:?}");
    assert!(
        seen.iter().all(|s| *s == winners[0]),
        "{seen:?} vs {winners:?}"
    );
}

/// Runs every property of idempotency claims against `store`, which must be empty of the ids they use.
pub async fn run(store: Arc<dyn ThreadStore>) {
    the_first_claim_wins_until_released_or_expired(store.clone()).await;
}
