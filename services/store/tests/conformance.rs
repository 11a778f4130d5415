//! Every store passes the same conformance suite; the embedded one also survives a re-open.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_actors::ThreadStore;
use agentd_store::conformance::{self, entry, record};
use agentd_store::{MemoryStore, RedbStore};
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_conforms() {
    conformance::run_all(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run_all(Arc::new(RedbStore::open(dir.path()).unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_keeps_everything_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let e1 = entry("first");
    {
        let s = RedbStore::open(dir.path()).unwrap();
        s.put_agent(&record("p", None, 1)).await.unwrap();
        s.put_agent(&record("c", Some("p"), 2)).await.unwrap();
        s.add_child("p", "c").await.unwrap();
        s.append("c", &e1).await.unwrap();
        s.alias_get_or_create("p", "Ops", "a1", "c").await.unwrap();
    }
    let s = RedbStore::open(dir.path()).unwrap();
    assert_eq!(
        s.get_agent("c").await.unwrap(),
        Some(record("c", Some("p"), 2))
    );
    assert_eq!(s.children("p").await.unwrap(), vec!["c"]);
    assert_eq!(s.thread("c").await.unwrap(), vec![e1.clone()]);
    assert!(
        !s.append("c", &e1).await.unwrap(),
        "de-duplication survives the re-open"
    );
    assert_eq!(
        s.alias_get_or_create("p", "Ops", "a1", "other")
            .await
            .unwrap(),
        ("c".to_string(), false)
    );
    assert_eq!(s.list_roots().await.unwrap().len(), 1);
}
