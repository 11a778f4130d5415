//! Outside ids: the first claim of a key wins and is answered to every later one — its agent,
//! its fingerprint, whether it is settled —, a key maps to one agent per door, tenant and
//! owner, a mapping lasts as its retention says (with its agent, or for a time), a release
//! drops only the claim it names, and the mappings go with their agent.

use super::*;
use agentd_ports::{ExternalClaim, ExternalKey, Retention};
use std::time::Duration;

const WITH_AGENT: Retention = Retention::WithAgent;
const MINUTE: Retention = Retention::For { ms: 60_000 };
const BRIEF: Retention = Retention::For { ms: 50 };

/// An unsettled claim of `agent` by the request with fingerprint `fingerprint`.
fn under_way(agent: &str, fingerprint: &str) -> ExternalClaim {
    ExternalClaim {
        agent_id: agent.into(),
        fingerprint: fingerprint.into(),
        settled: false,
    }
}

/// `claim` settled.
fn settled(claim: &ExternalClaim) -> ExternalClaim {
    ExternalClaim {
        settled: true,
        ..claim.clone()
    }
}

/// How long the brief mappings take to expire, with a margin.
async fn past_brief() {
    tokio::time::sleep(Duration::from_millis(150)).await;
}

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
    // Racing claims of one key: one wins, and the other is answered the winner's claim.
    let mut racing = Vec::new();
    for candidate in ["x-ctx", "x-ctx-2"] {
        let (store, key) = (store.clone(), key.clone());
        racing.push(tokio::spawn(async move {
            let claim = ExternalClaim::settled(candidate);
            let first = store
                .external_id_claim(&key, &claim, WITH_AGENT)
                .await
                .unwrap();
            (candidate, first)
        }));
    }
    let mut winners = Vec::new();
    let mut answered = Vec::new();
    for r in racing {
        match r.await.unwrap() {
            (candidate, None) => winners.push(candidate.to_string()),
            (_, Some(first)) => answered.push(first.agent_id),
        }
    }
    assert_eq!(winners.len(), 1, "one claim wins: {winners:?}");
    assert_eq!(answered, winners, "the other learns the winner");
    let winner = winners[0].clone();
    let loser = if winner == "x-ctx" {
        "x-ctx-2"
    } else {
        "x-ctx"
    };
    assert_eq!(
        s.external_id_get(&key).await.unwrap(),
        Some(ExternalClaim::settled(&winner))
    );
    for k in [&other_door, &tenant, &joined] {
        assert_eq!(s.external_id_get(k).await.unwrap(), None, "{k:?}");
    }
    let other = ExternalClaim::settled("x-other");
    assert_eq!(
        s.external_id_claim(&other_door, &other, WITH_AGENT)
            .await
            .unwrap(),
        None
    );
    // Releasing a claim the key does not hold changes nothing.
    s.external_id_release(&key, &ExternalClaim::settled(loser))
        .await
        .unwrap();
    assert_eq!(
        s.external_id_get(&key).await.unwrap(),
        Some(ExternalClaim::settled(&winner))
    );
    // Deleting the loser leaves the winner's mapping; deleting the winner drops it.
    s.delete_agent(loser).await.unwrap();
    assert_eq!(
        s.external_id_get(&key).await.unwrap(),
        Some(ExternalClaim::settled(&winner))
    );
    s.delete_agent(&winner).await.unwrap();
    assert_eq!(s.external_id_get(&key).await.unwrap(), None);
    assert_eq!(s.external_id_get(&other_door).await.unwrap(), Some(other));
    // The key is free again; a release frees it too.
    s.put_agent(&record("x-again", None, 31)).await.unwrap();
    let again = ExternalClaim::settled("x-again");
    assert_eq!(
        s.external_id_claim(&key, &again, WITH_AGENT).await.unwrap(),
        None
    );
    s.external_id_release(&key, &again).await.unwrap();
    assert_eq!(s.external_id_get(&key).await.unwrap(), None);
    s.delete_agent("x-again").await.unwrap();
    s.delete_agent("x-other").await.unwrap();
    assert_eq!(s.external_id_get(&other_door).await.unwrap(), None);
}

/// A claim keeps its fingerprint; it is settled only by its own agent; a release names the
/// claim it drops (an unsettled one does not drop it once settled), and a timed mapping
/// settled with its agent no longer expires.
pub(super) async fn a_claim_keeps_its_fingerprint_and_is_settled_by_its_agent(
    store: Arc<dyn ThreadStore>,
) {
    let s = store.as_ref();
    let key = ExternalKey::new("spawn/", "order-1");
    let first = under_way("x-spawned", "fp-1");
    assert_eq!(
        s.external_id_claim(&key, &first, MINUTE).await.unwrap(),
        None
    );
    // A retry, or another request with the key: the first claim, not settled yet.
    for (agent, fingerprint) in [("x-spawned", "fp-1"), ("x-spawned", "fp-2"), ("x-else", "")] {
        assert_eq!(
            s.external_id_claim(&key, &under_way(agent, fingerprint), MINUTE)
                .await
                .unwrap(),
            Some(first.clone()),
            "{agent} {fingerprint}"
        );
    }
    assert_eq!(s.external_id_get(&key).await.unwrap(), Some(first.clone()));
    // Another agent does not settle it.
    s.external_id_settle(&key, "x-else", MINUTE).await.unwrap();
    assert_eq!(s.external_id_get(&key).await.unwrap(), Some(first.clone()));
    s.external_id_settle(&key, "x-spawned", MINUTE)
        .await
        .unwrap();
    assert_eq!(
        s.external_id_get(&key).await.unwrap(),
        Some(settled(&first)),
        "settled, with its fingerprint"
    );
    assert_eq!(
        s.external_id_claim(&key, &under_way("x-spawned", "fp-1"), MINUTE)
            .await
            .unwrap(),
        Some(settled(&first))
    );
    // The unsettled claim it was is no longer what it is.
    s.external_id_release(&key, &first).await.unwrap();
    assert_eq!(
        s.external_id_get(&key).await.unwrap(),
        Some(settled(&first))
    );
    s.external_id_release(&key, &settled(&first)).await.unwrap();
    assert_eq!(s.external_id_get(&key).await.unwrap(), None);
    // Settling a missing mapping makes none.
    s.external_id_settle(&key, "x-spawned", MINUTE)
        .await
        .unwrap();
    assert_eq!(s.external_id_get(&key).await.unwrap(), None);
    // A claim kept with its agent may carry a fingerprint and be unsettled too.
    let kept = ExternalKey::new("test/kept", "k");
    let unsettled = under_way("x-kept", "fp-k");
    assert_eq!(
        s.external_id_claim(&kept, &unsettled, WITH_AGENT)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        s.external_id_get(&kept).await.unwrap(),
        Some(unsettled.clone())
    );
    s.external_id_settle(&kept, "x-kept", WITH_AGENT)
        .await
        .unwrap();
    assert_eq!(
        s.external_id_get(&kept).await.unwrap(),
        Some(settled(&unsettled))
    );
    s.external_id_release(&kept, &settled(&unsettled))
        .await
        .unwrap();
    assert_eq!(s.external_id_get(&kept).await.unwrap(), None);
}

/// A timed mapping is no mapping once its time is past, claimed or settled for it; the key is
/// then free. One settled with its agent stays.
pub(super) async fn timed_mappings_expire(store: Arc<dyn ThreadStore>) {
    let s = store.as_ref();
    let brief = ExternalKey::new("spawn/", "brief");
    let settled_briefly = ExternalKey::new("spawn/", "settled briefly");
    let kept = ExternalKey::new("spawn/", "kept after all");
    for key in [&brief, &settled_briefly, &kept] {
        let claim = under_way("x-timed", "fp");
        let keep = if *key == brief { BRIEF } else { MINUTE };
        assert_eq!(s.external_id_claim(key, &claim, keep).await.unwrap(), None);
    }
    s.external_id_settle(&settled_briefly, "x-timed", BRIEF)
        .await
        .unwrap();
    // Claimed briefly, then kept with its agent: it no longer expires.
    let later = ExternalKey::new("spawn/", "later kept");
    assert_eq!(
        s.external_id_claim(&later, &under_way("x-timed", "fp"), BRIEF)
            .await
            .unwrap(),
        None
    );
    s.external_id_settle(&later, "x-timed", WITH_AGENT)
        .await
        .unwrap();
    s.external_id_settle(&kept, "x-timed", MINUTE)
        .await
        .unwrap();
    past_brief().await;
    for key in [&brief, &settled_briefly] {
        assert_eq!(s.external_id_get(key).await.unwrap(), None, "{key:?}");
        let fresh = under_way("x-fresh", "fp-fresh");
        assert_eq!(
            s.external_id_claim(key, &fresh, MINUTE).await.unwrap(),
            None,
            "an expired mapping is no mapping: {key:?}"
        );
        s.external_id_release(key, &fresh).await.unwrap();
    }
    for key in [&kept, &later] {
        assert_eq!(
            s.external_id_get(key).await.unwrap(),
            Some(settled(&under_way("x-timed", "fp"))),
            "{key:?}"
        );
        s.external_id_release(key, &settled(&under_way("x-timed", "fp")))
            .await
            .unwrap();
    }
}

/// Deleting an agent drops its settled mappings, timed or kept with it, and leaves those of
/// other agents.
pub(super) async fn deleting_an_agent_drops_its_settled_mappings(store: Arc<dyn ThreadStore>) {
    let s = store.as_ref();
    for id in ["x-gone", "x-stays"] {
        s.put_agent(&record(id, None, 32)).await.unwrap();
    }
    let timed = ExternalKey::new("spawn/", "deleted");
    let kept = ExternalKey::new("test/kept", "deleted");
    let other = ExternalKey::new("spawn/", "not deleted");
    s.external_id_claim(&timed, &under_way("x-gone", "fp"), MINUTE)
        .await
        .unwrap();
    s.external_id_settle(&timed, "x-gone", MINUTE)
        .await
        .unwrap();
    s.external_id_claim(&kept, &under_way("x-gone", "fp"), WITH_AGENT)
        .await
        .unwrap();
    s.external_id_settle(&kept, "x-gone", WITH_AGENT)
        .await
        .unwrap();
    s.external_id_claim(&other, &under_way("x-stays", "fp"), MINUTE)
        .await
        .unwrap();
    s.external_id_settle(&other, "x-stays", MINUTE)
        .await
        .unwrap();
    s.delete_agent("x-gone").await.unwrap();
    assert_eq!(s.external_id_get(&timed).await.unwrap(), None);
    assert_eq!(s.external_id_get(&kept).await.unwrap(), None);
    assert_eq!(
        s.external_id_get(&other).await.unwrap(),
        Some(settled(&under_way("x-stays", "fp")))
    );
    s.delete_agent("x-stays").await.unwrap();
    assert_eq!(s.external_id_get(&other).await.unwrap(), None);
}

/// Runs every property of outside ids against `store`, which must be empty of the ids they use.
pub async fn run(store: Arc<dyn ThreadStore>) {
    outside_ids_map_to_one_agent_until_it_is_deleted(store.clone()).await;
    a_claim_keeps_its_fingerprint_and_is_settled_by_its_agent(store.clone()).await;
    timed_mappings_expire(store.clone()).await;
    deleting_an_agent_drops_its_settled_mappings(store.clone()).await;
}
