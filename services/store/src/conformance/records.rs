//! Agent records: a round trip keeps every field, and deleting an agent removes everything
//! every concern keeps of it.

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

/// Runs every property of agent records against `store`, which must be empty of the ids they use.
pub async fn run(store: Arc<dyn ThreadStore>) {
    records_round_trip(store.as_ref()).await;
    records_at_their_defaults_round_trip(store.as_ref()).await;
    delete_removes_everything(store.as_ref()).await;
}
