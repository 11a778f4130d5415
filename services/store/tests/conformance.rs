//! Every store passes the same conformance suite; the embedded one also survives a re-open.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_ports::{AgentRecords, Batches, IdempotencyClaims, Inboxes, Threads, Tree};
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
    let output = |text: &str| {
        Arc::new(agentd_proto::Envelope::new(
            agentd_proto::Address::agent("c"),
            agentd_proto::Address::agent("p"),
            agentd_proto::Item::Output(agentd_proto::Output::Reply { text: text.into() }),
            1,
        ))
    };
    let (kept, later) = (output("kept"), output("later"));
    {
        let s = RedbStore::open(dir.path()).unwrap();
        s.put_agent(&record("p", None, 1)).await.unwrap();
        s.put_agent(&record("c", Some("p"), 2)).await.unwrap();
        s.add_child("p", "c").await.unwrap();
        s.append("c", &e1).await.unwrap();
        s.alias_get_or_create("p", "Ops", "a1", "c").await.unwrap();
        s.write_batch(&[agentd_ports::StoreWrite::Outbox { env: kept.clone() }])
            .await
            .unwrap();
        s.idempotency_claim("c", "message 1", "fp", 60_000)
            .await
            .unwrap();
        s.idempotency_claim_end(
            "c",
            "message 1",
            agentd_ports::ClaimEnd::Settled { keep_ms: 60_000 },
        )
        .await
        .unwrap();
    }
    let s = RedbStore::open(dir.path()).unwrap();
    assert_eq!(
        s.idempotency_claim("c", "message 1", "other", 60_000)
            .await
            .unwrap(),
        Some(agentd_ports::Claim {
            fingerprint: "fp".into(),
            settled: true
        }),
        "an idempotency claim survives the re-open"
    );
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
    // The outbox too, and what is kept after the re-open queues after it.
    s.write_batch(&[agentd_ports::StoreWrite::Outbox { env: later.clone() }])
        .await
        .unwrap();
    assert_eq!(
        s.outbox_pending().await.unwrap(),
        vec![(*kept).clone(), (*later).clone()]
    );
}

/// A file whose inbox was written by an earlier version (slots of its own and an id index) is
/// moved to the current layout when opened: the pending envelopes keep their order, each can
/// be marked done (also one evicted from the de-duplication window since), and new ones queue
/// after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_moves_an_inbox_of_the_earlier_layout() {
    use agentd_proto::codec::encode;
    use agentd_proto::{Address, Envelope, InboxItem, Item};
    use redb::{Database, TableDefinition};
    let legacy_inbox: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("inbox");
    let legacy_ids: TableDefinition<(&str, &str), u64> = TableDefinition::new("inbox_ids");
    let seen: TableDefinition<(&str, &str), u64> = TableDefinition::new("seen");
    let seen_seq: TableDefinition<(&str, u64), &str> = TableDefinition::new("seen_seq");
    let env = |text: &str| {
        Envelope::new(
            Address::System,
            Address::agent("m-agent"),
            Item::Inbox(InboxItem::message(text)),
            1,
        )
    };
    let (old, mid, new) = (env("old"), env("mid"), env("new"));
    let dir = tempfile::tempdir().unwrap();
    {
        // As the earlier version left it: `old` waited while its window moved on (no longer in
        // `seen`), `mid` and `new` are in the window with seqs 7 and 8; slots 0, 1, 2.
        let db = Database::create(dir.path().join("agentd.redb")).unwrap();
        let tx = db.begin_write().unwrap();
        {
            let mut inbox = tx.open_table(legacy_inbox).unwrap();
            let mut ids = tx.open_table(legacy_ids).unwrap();
            let mut seen = tx.open_table(seen).unwrap();
            let mut seen_seq = tx.open_table(seen_seq).unwrap();
            for (slot, e) in [&old, &mid, &new].into_iter().enumerate() {
                let id = e.id.to_string();
                inbox
                    .insert(("m-agent", slot as u64), encode(e).unwrap().as_slice())
                    .unwrap();
                ids.insert(("m-agent", id.as_str()), slot as u64).unwrap();
            }
            for (seq, e) in [(7u64, &mid), (8, &new)] {
                let id = e.id.to_string();
                seen.insert(("m-agent", id.as_str()), seq).unwrap();
                seen_seq.insert(("m-agent", seq), id.as_str()).unwrap();
            }
        }
        tx.commit().unwrap();
    }
    let s = RedbStore::open(dir.path()).unwrap();
    assert_eq!(
        s.inbox_pending("m-agent").await.unwrap(),
        vec![old.clone(), mid.clone(), new.clone()]
    );
    // A duplicate of one still in the window is refused; a newcomer queues last.
    assert!(!s.inbox_push("m-agent", &mid).await.unwrap());
    let later = env("later");
    assert!(s.inbox_push("m-agent", &later).await.unwrap());
    s.inbox_done("m-agent", mid.id).await.unwrap();
    s.inbox_done("m-agent", old.id).await.unwrap();
    assert_eq!(
        s.inbox_pending("m-agent").await.unwrap(),
        vec![new.clone(), later.clone()]
    );
    drop(s);
    // Opened again: nothing is moved twice.
    let s = RedbStore::open(dir.path()).unwrap();
    assert_eq!(s.inbox_pending("m-agent").await.unwrap(), vec![new, later]);
}

/// A file of the layout before `agent_rows` (records, thread ids, the window, children and
/// aliases in tables of their own, the window keyed by agent) opens with everything in place:
/// records, roots, children, aliases, de-duplication of appends and pushes, the inbox; deleting
/// an agent then leaves nothing of it; a second open moves nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_moves_agents_rows_of_the_earlier_layout() {
    use agentd_proto::codec::encode;
    use agentd_proto::{Address, Envelope, InboxItem, Item};
    use redb::{Database, TableDefinition};
    let agents: TableDefinition<&str, &[u8]> = TableDefinition::new("agents");
    let threads: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("threads");
    let thread_ids: TableDefinition<(&str, &str), u64> = TableDefinition::new("thread_ids");
    let children: TableDefinition<(&str, u64), &str> = TableDefinition::new("children");
    let aliases: TableDefinition<(&str, &str), &str> = TableDefinition::new("aliases");
    let seen: TableDefinition<(&str, &str), u64> = TableDefinition::new("seen");
    let seen_seq: TableDefinition<(&str, u64), &str> = TableDefinition::new("seen_seq");
    let inbox: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("inbox_by_seen");
    let (parent, child) = (record("p", None, 1), record("c", Some("p"), 2));
    let first = entry("first");
    let pending = Envelope::new(
        Address::System,
        Address::agent("c"),
        Item::Inbox(InboxItem::message("pending")),
        1,
    );
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::create(dir.path().join("agentd.redb")).unwrap();
        let tx = db.begin_write().unwrap();
        {
            let mut t = tx.open_table(agents).unwrap();
            t.insert("p", encode(&parent).unwrap().as_slice()).unwrap();
            t.insert("c", encode(&child).unwrap().as_slice()).unwrap();
            let first_id = first.id.to_string();
            tx.open_table(threads)
                .unwrap()
                .insert(("c", 0), encode(&first).unwrap().as_slice())
                .unwrap();
            tx.open_table(thread_ids)
                .unwrap()
                .insert(("c", first_id.as_str()), 0)
                .unwrap();
            tx.open_table(children)
                .unwrap()
                .insert(("p", 0), "c")
                .unwrap();
            tx.open_table(aliases)
                .unwrap()
                .insert(("p", "Ops\x1fa1"), "c")
                .unwrap();
            let env_id = pending.id.to_string();
            tx.open_table(seen)
                .unwrap()
                .insert(("c", env_id.as_str()), 0)
                .unwrap();
            tx.open_table(seen_seq)
                .unwrap()
                .insert(("c", 0), env_id.as_str())
                .unwrap();
            tx.open_table(inbox)
                .unwrap()
                .insert(("c", 0), encode(&pending).unwrap().as_slice())
                .unwrap();
        }
        tx.commit().unwrap();
    }
    let s = RedbStore::open(dir.path()).unwrap();
    assert_eq!(s.get_agent("c").await.unwrap(), Some(child.clone()));
    assert_eq!(s.list_roots().await.unwrap(), vec![parent.clone()]);
    assert_eq!(s.children("p").await.unwrap(), vec!["c"]);
    assert_eq!(
        s.alias_get_or_create("p", "Ops", "a1", "other")
            .await
            .unwrap(),
        ("c".to_string(), false)
    );
    assert!(!s.append("c", &first).await.unwrap(), "thread ids moved");
    assert!(!s.inbox_push("c", &pending).await.unwrap(), "window moved");
    assert_eq!(s.inbox_pending("c").await.unwrap(), vec![pending.clone()]);
    let later = Envelope::new(
        Address::System,
        Address::agent("c"),
        Item::Inbox(InboxItem::message("later")),
        1,
    );
    assert!(s.inbox_push("c", &later).await.unwrap());
    s.inbox_done("c", pending.id).await.unwrap();
    assert_eq!(s.inbox_pending("c").await.unwrap(), vec![later.clone()]);
    drop(s);
    let s = RedbStore::open(dir.path()).unwrap();
    assert_eq!(s.thread("c").await.unwrap(), vec![first]);
    assert_eq!(s.inbox_pending("c").await.unwrap(), vec![later]);
    s.delete_agent("c").await.unwrap();
    assert_eq!(s.rows_mentioning("c").await.unwrap(), 0);
    assert_eq!(s.children("p").await.unwrap(), Vec::<String>::new());
    assert_eq!(s.get_agent("p").await.unwrap(), Some(parent));
}
