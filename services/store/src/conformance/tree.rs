//! The links between agents: children in order and idempotent, dependents a set, worker
//! aliases created once (also by racing callers).

use super::*;

pub(super) async fn children_keep_order_and_are_idempotent(store: &dyn ThreadStore) {
    for c in ["k3", "k1", "k2", "k1"] {
        store.add_child("kp", c).await.unwrap();
    }
    assert_eq!(store.children("kp").await.unwrap(), vec!["k3", "k1", "k2"]);
    assert!(store.children("none").await.unwrap().is_empty());
}

pub(super) async fn dependents_are_a_set(store: &dyn ThreadStore) {
    for d in ["w2", "w1", "w2", "w3"] {
        store.add_dependent("dep", d).await.unwrap();
    }
    // Removing is idempotent and touches only that dependent (and that dependency).
    store.add_dependent("dep-2", "w3").await.unwrap();
    for _ in 0..2 {
        store.remove_dependent("dep", "w3").await.unwrap();
    }
    store.remove_dependent("dep", "never-added").await.unwrap();
    store.remove_dependent("none", "w1").await.unwrap();
    let mut got = store.dependents("dep").await.unwrap();
    got.sort();
    assert_eq!(got, vec!["w1", "w2"]);
    assert_eq!(store.dependents("dep-2").await.unwrap(), vec!["w3"]);
    assert!(store.dependents("none").await.unwrap().is_empty());
}

pub(super) async fn aliases_get_or_create(store: &dyn ThreadStore) {
    let (c1, created) = store
        .alias_get_or_create("ap", "Ops", "a1", "child-1")
        .await
        .unwrap();
    assert_eq!((c1.as_str(), created), ("child-1", true));
    let (c2, created) = store
        .alias_get_or_create("ap", "Ops", "a1", "child-2")
        .await
        .unwrap();
    assert_eq!(
        (c2.as_str(), created),
        ("child-1", false),
        "same alias, same child"
    );
    let (c3, _) = store
        .alias_get_or_create("ap", "QA", "a1", "child-3")
        .await
        .unwrap();
    assert_eq!(
        c3, "child-3",
        "same alias under another worker is another thread"
    );
    let (c4, _) = store
        .alias_get_or_create("other", "Ops", "a1", "child-4")
        .await
        .unwrap();
    assert_eq!(c4, "child-4", "aliases are per parent");
    let mut list = store.aliases("ap").await.unwrap();
    list.sort_by(|a, b| a.child_id.cmp(&b.child_id));
    let got: Vec<(String, String, String)> = list
        .into_iter()
        .map(|a| (a.worker_title, a.alias, a.child_id))
        .collect();
    assert_eq!(
        got,
        vec![
            ("Ops".into(), "a1".into(), "child-1".into()),
            ("QA".into(), "a1".into(), "child-3".into())
        ]
    );
}

pub(super) async fn racing_aliases_agree(store: Arc<dyn ThreadStore>) {
    let mut tasks = Vec::new();
    for i in 0..16 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            s.alias_get_or_create("race", "Ops", "same", &format!("cand-{i}"))
                .await
                .unwrap()
        }));
    }
    let mut winners = Vec::new();
    let mut created = 0;
    for t in tasks {
        let (child, c) = t.await.unwrap();
        winners.push(child);
        created += usize::from(c);
    }
    winners.dedup();
    assert_eq!(winners.len(), 1, "every racer got the same child");
    assert_eq!(created, 1, "exactly one racer created it");
}

/// Runs every property of the tree against `store`, which must be empty of the ids they use.
pub async fn run(store: Arc<dyn ThreadStore>) {
    children_keep_order_and_are_idempotent(store.as_ref()).await;
    dependents_are_a_set(store.as_ref()).await;
    aliases_get_or_create(store.as_ref()).await;
    racing_aliases_agree(store.clone()).await;
}
