//! Records, their children, dependents and named child threads, and deletion.

use super::*;

pub(super) async fn records_round_trip(store: &dyn ThreadStore) {
    let root = record("c-root", None, 10);
    let child = record("c-child", Some("c-root"), 11);
    store.put_agent(&root).await.unwrap();
    store.put_agent(&child).await.unwrap();
    assert_eq!(store.get_agent("c-root").await.unwrap(), Some(root.clone()));
    assert_eq!(store.get_agent("c-child").await.unwrap(), Some(child));
    assert_eq!(store.get_agent("nope").await.unwrap(), None);
    assert!(store.agent_exists("c-child").await.unwrap());
    assert!(!store.agent_exists("nope").await.unwrap());
    let mut changed = root.clone();
    changed.status = AgentStatus::Closed;
    store.put_agent(&changed).await.unwrap();
    assert_eq!(
        store.get_agent("c-root").await.unwrap().map(|r| r.status),
        Some(AgentStatus::Closed)
    );
    let early = record("c-early", None, 5);
    store.put_agent(&early).await.unwrap();
    let roots: Vec<String> = store
        .list_roots()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(roots, vec!["c-early", "c-root"], "roots only, oldest first");
}

/// A record with every field that has a default at it (what a store may leave out) reads back
/// the same, and so does one whose defaults were set and then cleared again.
pub(super) async fn records_at_their_defaults_round_trip(store: &dyn ThreadStore) {
    let bare = bare_record("c-bare");
    store.put_agent(&bare).await.unwrap();
    assert_eq!(store.get_agent("c-bare").await.unwrap(), Some(bare.clone()));
    let full = record("c-bare", None, 3);
    store.put_agent(&full).await.unwrap();
    assert_eq!(store.get_agent("c-bare").await.unwrap(), Some(full));
    store.put_agent(&bare).await.unwrap();
    assert_eq!(store.get_agent("c-bare").await.unwrap(), Some(bare));
}

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

pub(super) async fn delete_removes_everything(store: &dyn ThreadStore) {
    store.put_agent(&record("d-parent", None, 1)).await.unwrap();
    store
        .put_agent(&record("d-child", Some("d-parent"), 2))
        .await
        .unwrap();
    store
        .put_agent(&record("d-sibling", Some("d-parent"), 3))
        .await
        .unwrap();
    store.add_child("d-parent", "d-child").await.unwrap();
    store.add_child("d-parent", "d-sibling").await.unwrap();
    store.add_child("d-child", "d-grandchild").await.unwrap();
    store.add_dependent("d-child", "d-sibling").await.unwrap();
    store.append("d-child", &entry("hello")).await.unwrap();
    store
        .alias_get_or_create("d-parent", "Ops", "x", "d-child")
        .await
        .unwrap();
    store
        .alias_get_or_create("d-parent", "Ops", "y", "d-sibling")
        .await
        .unwrap();
    store
        .alias_get_or_create("d-child", "Ops", "z", "d-grandchild")
        .await
        .unwrap();

    store.delete_agent("d-child").await.unwrap();
    assert_eq!(store.get_agent("d-child").await.unwrap(), None);
    assert!(store.thread("d-child").await.unwrap().is_empty());
    assert!(store.children("d-child").await.unwrap().is_empty());
    assert!(store.aliases("d-child").await.unwrap().is_empty());
    assert!(store.dependents("d-child").await.unwrap().is_empty());
    assert_eq!(store.children("d-parent").await.unwrap(), vec!["d-sibling"]);
    let left: Vec<String> = store
        .aliases("d-parent")
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.child_id)
        .collect();
    assert_eq!(left, vec!["d-sibling"]);
    // A deleted child's id is free again: the alias can be re-created.
    let (again, created) = store
        .alias_get_or_create("d-parent", "Ops", "x", "d-new")
        .await
        .unwrap();
    assert_eq!((again.as_str(), created), ("d-new", true));
    // Deleting what is not there is fine.
    store.delete_agent("d-child").await.unwrap();
    assert!(store.get_agent("d-sibling").await.unwrap().is_some());
}

/// A2A tasks are kept per context agent, replaced by id, and go with the agent.
pub(super) async fn a2a_tasks_live_and_die_with_their_agent(store: &dyn ThreadStore) {
    let ctx = record("c-a2a", None, 20);
    let other = record("c-a2a-other", None, 21);
    store.put_agent(&ctx).await.unwrap();
    store.put_agent(&other).await.unwrap();
    assert!(store.a2a_tasks("c-a2a").await.unwrap().is_empty());
    store.a2a_task_put("c-a2a", "t1", b"one").await.unwrap();
    store.a2a_task_put("c-a2a", "t2", b"two").await.unwrap();
    store
        .a2a_task_put("c-a2a", "t1", b"one again")
        .await
        .unwrap();
    store
        .a2a_task_put("c-a2a-other", "t1", b"theirs")
        .await
        .unwrap();
    assert_eq!(
        store.a2a_task_get("c-a2a", "t1").await.unwrap().as_deref(),
        Some(&b"one again"[..])
    );
    assert_eq!(store.a2a_task_get("c-a2a", "t3").await.unwrap(), None);
    // A value put only if new is not replaced, and replaces nothing.
    assert!(
        !store
            .a2a_task_put_new("c-a2a", "t1", b"not this")
            .await
            .unwrap()
    );
    assert!(
        store
            .a2a_task_put_new("c-a2a", "t3", b"three")
            .await
            .unwrap()
    );
    assert!(
        !store
            .a2a_task_put_new("c-a2a", "t3", b"not this")
            .await
            .unwrap()
    );
    assert_eq!(
        store.a2a_task_get("c-a2a", "t3").await.unwrap().as_deref(),
        Some(&b"three"[..])
    );
    store
        .a2a_task_put("c-a2a", "t3", b"three again")
        .await
        .unwrap();
    assert_eq!(
        store.a2a_task_get("c-a2a", "t3").await.unwrap().as_deref(),
        Some(&b"three again"[..])
    );
    let mut all = store.a2a_tasks("c-a2a").await.unwrap();
    all.sort();
    assert_eq!(
        all,
        vec![
            b"one again".to_vec(),
            b"three again".to_vec(),
            b"two".to_vec()
        ]
    );
    store.delete_agent("c-a2a").await.unwrap();
    assert!(store.a2a_tasks("c-a2a").await.unwrap().is_empty());
    assert_eq!(store.a2a_task_get("c-a2a", "t2").await.unwrap(), None);
    assert_eq!(
        store
            .a2a_task_get("c-a2a-other", "t1")
            .await
            .unwrap()
            .as_deref(),
        Some(&b"theirs"[..])
    );
}
