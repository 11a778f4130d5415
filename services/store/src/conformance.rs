//! The conformance suite of the `ThreadStore` port. Every implementation runs it (memory and
//! embedded here, Redis with its own server), so the actors can rely on one set of semantics.
//! It panics on the first broken property: that is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentd_actors::ThreadStore;
use agentd_proto::{AgentRecord, AgentStatus, Channel, ManageOptions, Role, ThreadEntry, Usage};
use std::sync::Arc;

/// A record for tests.
pub fn record(id: &str, parent: Option<&str>, created: u64) -> AgentRecord {
    AgentRecord {
        id: id.into(),
        parent_id: parent.map(str::to_string),
        root_id: parent.unwrap_or(id).into(),
        depth: u32::from(parent.is_some()),
        title: format!("title of {id}"),
        agent_type: "subagent".into(),
        status: AgentStatus::Idle,
        status_reason: None,
        foreground: parent.is_none(),
        allowed_tools: Some(vec!["current_time".into()]),
        channel: match parent {
            Some(p) => Channel::Manage(Box::new(agentd_proto::ManageChannel {
                parent_id: p.into(),
                worker_title: "Ops".into(),
                alias: "a1".into(),
                options: ManageOptions::default(),
            })),
            None => Channel::None,
        },
        last_error: None,
        usage: Usage {
            input: 1,
            output: 2,
            cache_write: 3,
            cache_read: 4,
            ..Usage::default()
        },
        cost_usd: 0.25,
        phase: Some(2),
        current_step: Some("step".into()),
        progress: Some(0.5),
        resume_at_ms: Some(42),
        provider: Some("fast".into()),
        model: Some("m-1".into()),
        env: [("MODE".to_string(), "test".to_string())].into(),
        turns: 3,
        priority: agentd_proto::Priority::High,
        depends_on: vec!["dep-a".into()],
        attempts: 2,
        current_task: Some(uuid::Uuid::nil()),
        task_steps_counted: 1,
        budget: Some(Box::new(agentd_proto::Budget {
            max_tokens: Some(9),
            max_cost_usd: Some(0.5),
            deadline_ms: None,
        })),
        result: Some(Box::new(serde_json::json!({"ok": true}))),
        agent_cli: None,
        created_at_ms: created,
        updated_at_ms: created,
    }
}

/// A thread entry for tests.
pub fn entry(text: &str) -> ThreadEntry {
    ThreadEntry::text(agentd_proto::ids::new_id(), Role::User, text, 7)
}

fn texts(entries: &[ThreadEntry]) -> Vec<String> {
    entries.iter().map(|e| e.text.clone()).collect()
}

/// Runs every property against `store`, which must be empty.
pub async fn run_all(store: Arc<dyn ThreadStore>) {
    records_round_trip(store.as_ref()).await;
    threads_keep_order_and_deduplicate(store.as_ref()).await;
    children_keep_order_and_are_idempotent(store.as_ref()).await;
    dependents_are_a_set(store.as_ref()).await;
    aliases_get_or_create(store.as_ref()).await;
    racing_aliases_agree(store.clone()).await;
    delete_removes_everything(store.as_ref()).await;
    inbox_is_durable_once_and_ordered(store.as_ref()).await;
    checkpoints_are_kept_newest_first_and_pruned(store.as_ref()).await;
    batches_apply_in_order(store.as_ref()).await;
    a_push_carries_the_turn_start_only_when_new(store.as_ref()).await;
    concurrent_writes_all_land(store.clone()).await;
    a_store_that_is_not_the_bus_refuses_forwards_whole(store.as_ref()).await;
    the_outbox_keeps_outputs_in_order_until_done(store.as_ref()).await;
}

/// A store that keeps an outbox keeps each output written in a batch once, in the order
/// written, until it is done (a repeat keeps its first place; an unknown id is no error); one
/// that keeps none refuses such a batch before applying any of it.
async fn the_outbox_keeps_outputs_in_order_until_done(store: &dyn ThreadStore) {
    use agentd_actors::StoreWrite;
    let output = |text: &str| {
        Arc::new(agentd_proto::Envelope::new(
            agentd_proto::Address::agent("o-child"),
            agentd_proto::Address::agent("o-parent"),
            agentd_proto::Item::Output(agentd_proto::Output::Reply { text: text.into() }),
            1,
        ))
    };
    let (first, second, third) = (output("first"), output("second"), output("third"));
    let keep = |env: &Arc<agentd_proto::Envelope>| StoreWrite::Outbox { env: env.clone() };
    let batch = [
        StoreWrite::PutAgent(Arc::new(record("o-child", None, 1))),
        keep(&first),
        keep(&second),
    ];
    if !store.keeps_outbox() {
        assert!(store.write_batch(&batch).await.is_err());
        assert_eq!(
            store.get_agent("o-child").await.unwrap(),
            None,
            "nothing applied"
        );
        return;
    }
    store.write_batch(&batch).await.unwrap();
    store
        .write_batch(&[keep(&third), keep(&first)])
        .await
        .unwrap();
    let ids = |kept: Vec<agentd_proto::Envelope>| kept.iter().map(|e| e.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.outbox_pending().await.unwrap()),
        vec![first.id, second.id, third.id]
    );
    assert_eq!(store.outbox_pending().await.unwrap()[1], *second);
    store.outbox_done(second.id).await.unwrap();
    store.outbox_done(uuid::Uuid::new_v4()).await.unwrap();
    assert_eq!(
        ids(store.outbox_pending().await.unwrap()),
        vec![first.id, third.id]
    );
    store.outbox_done(first.id).await.unwrap();
    store.outbox_done(third.id).await.unwrap();
    assert!(store.outbox_pending().await.unwrap().is_empty());
}

/// A store that cannot append to the bus's streams refuses a batch with a
/// [`agentd_actors::StoreWrite::Forward`] before applying any of it (agents never send it one:
/// they ask `takes_forwards` first); the store that can is checked against its streams by its
/// own test.
async fn a_store_that_is_not_the_bus_refuses_forwards_whole(store: &dyn ThreadStore) {
    use agentd_actors::StoreWrite;
    if store.takes_forwards() {
        return;
    }
    let rec = record("f-agent", None, 1);
    let env = agentd_proto::Envelope::new(
        agentd_proto::Address::System,
        agentd_proto::Address::agent("f-parent"),
        agentd_proto::Item::Inbox(agentd_proto::InboxItem::message("x")),
        1,
    );
    let batch = [
        StoreWrite::PutAgent(Arc::new(rec)),
        StoreWrite::Forward {
            stream: "somewhere".into(),
            env: Arc::new(env),
        },
    ];
    assert!(store.write_batch(&batch).await.is_err());
    assert_eq!(
        store.get_agent("f-agent").await.unwrap(),
        None,
        "nothing applied"
    );
}

/// `inbox_push_then` queues the envelope and, only if it was new, applies the writes that
/// start its turn (the shape an agent sends, and any other); a duplicate changes nothing.
async fn a_push_carries_the_turn_start_only_when_new(store: &dyn ThreadStore) {
    use agentd_actors::StoreWrite;
    let id = "p-agent";
    let idle = record(id, None, 70);
    store.put_agent(&idle).await.unwrap();
    let env = envelope("start me");
    let mut running = idle.clone();
    running.status = AgentStatus::Running;
    running.current_task = Some(env.id);
    let start = [
        StoreWrite::Append {
            agent_id: id.into(),
            entry: std::sync::Arc::new(entry("start me")),
        },
        StoreWrite::PutAgent(std::sync::Arc::new(running.clone())),
    ];
    let pushed = store.inbox_push_then(id, &env, &start).await.unwrap();
    assert!(pushed.fresh);
    assert_eq!(store.inbox_pending(id).await.unwrap(), vec![env.clone()]);
    let (thread, rec) = if pushed.then_applied {
        (vec!["start me".to_string()], running)
    } else {
        (Vec::new(), idle.clone())
    };
    assert_eq!(texts(&store.thread(id).await.unwrap()), thread);
    assert_eq!(store.get_agent(id).await.unwrap(), Some(rec));
    // The same envelope again: nothing happens, whatever comes with it.
    store.put_agent(&idle).await.unwrap();
    let other = [StoreWrite::Append {
        agent_id: id.into(),
        entry: std::sync::Arc::new(entry("must not appear")),
    }];
    for then in [&start[..], &other[..]] {
        let again = store.inbox_push_then(id, &env, then).await.unwrap();
        assert!(!again.fresh && !again.then_applied);
    }
    assert_eq!(store.inbox_pending(id).await.unwrap(), vec![env]);
    assert_eq!(texts(&store.thread(id).await.unwrap()), thread);
    assert_eq!(store.get_agent(id).await.unwrap(), Some(idle));
}

/// A batch does what its writes do one by one, in order; duplicates stay out.
async fn batches_apply_in_order(store: &dyn ThreadStore) {
    use agentd_actors::StoreWrite;
    let (e1, e2) = (entry("batch one"), entry("batch two"));
    let env = envelope("batched");
    assert!(store.inbox_push("b-agent", &env).await.unwrap());
    let mut rec = record("b-agent", None, 60);
    rec.status = AgentStatus::Running;
    store
        .write_batch(&[
            StoreWrite::PutAgent(std::sync::Arc::new(rec.clone())),
            StoreWrite::Append {
                agent_id: "b-agent".into(),
                entry: std::sync::Arc::new(e1.clone()),
            },
        ])
        .await
        .unwrap();
    assert_eq!(store.get_agent("b-agent").await.unwrap(), Some(rec.clone()));
    rec.status = AgentStatus::Idle;
    store
        .write_batch(&[
            StoreWrite::Append {
                agent_id: "b-agent".into(),
                entry: std::sync::Arc::new(e1.clone()),
            },
            StoreWrite::Append {
                agent_id: "b-agent".into(),
                entry: std::sync::Arc::new(e2.clone()),
            },
            StoreWrite::InboxDone {
                agent_id: "b-agent".into(),
                env_id: env.id,
            },
            StoreWrite::PutAgent(std::sync::Arc::new(rec.clone())),
        ])
        .await
        .unwrap();
    assert_eq!(store.thread("b-agent").await.unwrap(), vec![e1, e2]);
    assert!(store.inbox_pending("b-agent").await.unwrap().is_empty());
    assert_eq!(store.get_agent("b-agent").await.unwrap(), Some(rec.clone()));
    assert!(
        store
            .list_roots()
            .await
            .unwrap()
            .iter()
            .any(|r| r.id == "b-agent"),
        "a root written by a batch is listed"
    );
    // Writes of several agents interleaved: each agent's in its order.
    let other = record("b-other", Some("b-agent"), 61);
    let (o1, o2, e3) = (entry("other one"), entry("other two"), entry("batch three"));
    let append = |agent: &str, entry: &ThreadEntry| StoreWrite::Append {
        agent_id: agent.into(),
        entry: std::sync::Arc::new(entry.clone()),
    };
    store
        .write_batch(&[
            StoreWrite::PutAgent(std::sync::Arc::new(other.clone())),
            append("b-other", &o1),
            append("b-agent", &e3),
            append("b-other", &o2),
            append("b-other", &o1),
        ])
        .await
        .unwrap();
    assert_eq!(store.thread("b-other").await.unwrap(), vec![o1, o2]);
    assert_eq!(store.thread("b-agent").await.unwrap().last(), Some(&e3));
    assert_eq!(store.get_agent("b-other").await.unwrap(), Some(other));
    store.delete_agent("b-other").await.unwrap();
    store.write_batch(&[]).await.unwrap();
    store.delete_agent("b-agent").await.unwrap();
    assert!(
        !store.agent_exists("b-agent").await.unwrap(),
        "gone once deleted"
    );
}

/// Many writers at once (a durable store group-commits them): every write lands, each
/// thread in its writer's order.
async fn concurrent_writes_all_land(store: Arc<dyn ThreadStore>) {
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("c-agent-{w}");
            let mut mine = Vec::new();
            for i in 0..25 {
                let e = entry(&format!("w{w} e{i}"));
                assert!(store.append(&id, &e).await.unwrap());
                mine.push(e);
            }
            (id, mine)
        }));
    }
    for t in tasks {
        let (id, mine) = t.await.unwrap();
        assert_eq!(store.thread(&id).await.unwrap(), mine);
        store.delete_agent(&id).await.unwrap();
    }
}

fn checkpoint(agent: &str, n: u64) -> agentd_proto::Checkpoint {
    agentd_proto::Checkpoint {
        id: agentd_proto::ids::new_id(),
        agent_id: agent.into(),
        reason: agentd_proto::CheckpointReason::Auto,
        trigger: format!("phase {n} complete"),
        created_at_ms: n,
        status: AgentStatus::Running,
        phase: Some(n as u32),
        current_step: None,
        progress: Some(0.5),
        conversation: vec![entry(&format!("entry {n}"))],
        pending: vec![envelope(&format!("pending {n}"))],
        environment: [("K".to_string(), format!("v{n}"))].into(),
        usage: Usage::default(),
        cost_usd: 0.0,
        turns: n,
        cli_session_id: None,
    }
}

async fn checkpoints_are_kept_newest_first_and_pruned(store: &dyn ThreadStore) {
    let all: Vec<_> = (1..=5).map(|n| checkpoint("c-agent", n)).collect();
    for cp in &all[..3] {
        store.checkpoint_put(cp, 0).await.unwrap();
    }
    let listed = store.checkpoints("c-agent").await.unwrap();
    assert_eq!(listed, vec![all[2].clone(), all[1].clone(), all[0].clone()]);
    // Keeping 2 prunes the oldest ones.
    store.checkpoint_put(&all[3], 2).await.unwrap();
    store.checkpoint_put(&all[4], 2).await.unwrap();
    let listed = store.checkpoints("c-agent").await.unwrap();
    assert_eq!(listed, vec![all[4].clone(), all[3].clone()]);
    assert!(store.checkpoints("c-other").await.unwrap().is_empty());
    store.put_agent(&record("c-agent", None, 1)).await.unwrap();
    store.delete_agent("c-agent").await.unwrap();
    assert!(store.checkpoints("c-agent").await.unwrap().is_empty());
}

fn envelope(text: &str) -> agentd_proto::Envelope {
    agentd_proto::Envelope::new(
        agentd_proto::Address::System,
        agentd_proto::Address::agent("i-agent"),
        agentd_proto::Item::Inbox(agentd_proto::InboxItem::message(text)),
        1,
    )
}

async fn inbox_is_durable_once_and_ordered(store: &dyn ThreadStore) {
    let (a, b, c) = (envelope("a"), envelope("b"), envelope("c"));
    assert!(store.inbox_push("i-agent", &a).await.unwrap());
    assert!(store.inbox_push("i-agent", &b).await.unwrap());
    assert!(
        !store.inbox_push("i-agent", &a).await.unwrap(),
        "a redelivered envelope is queued once"
    );
    assert!(store.inbox_push("i-agent", &c).await.unwrap());
    assert_eq!(
        store.inbox_pending("i-agent").await.unwrap(),
        vec![a.clone(), b.clone(), c.clone()]
    );
    store.inbox_done("i-agent", b.id).await.unwrap();
    assert_eq!(
        store.inbox_pending("i-agent").await.unwrap(),
        vec![a.clone(), c.clone()]
    );
    assert!(
        !store.inbox_push("i-agent", &b).await.unwrap(),
        "done envelopes are still remembered"
    );
    store.inbox_done("i-agent", a.id).await.unwrap();
    store.inbox_done("i-agent", c.id).await.unwrap();
    assert!(store.inbox_pending("i-agent").await.unwrap().is_empty());
    store.inbox_push("i-agent", &envelope("d")).await.unwrap();
    store.put_agent(&record("i-agent", None, 50)).await.unwrap();
    store.delete_agent("i-agent").await.unwrap();
    assert!(store.inbox_pending("i-agent").await.unwrap().is_empty());
    assert!(
        store.inbox_push("i-agent", &a).await.unwrap(),
        "delete forgets the window too"
    );
    store.delete_agent("i-agent").await.unwrap();
}

async fn records_round_trip(store: &dyn ThreadStore) {
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

async fn threads_keep_order_and_deduplicate(store: &dyn ThreadStore) {
    let a = entry("one");
    let b = entry("two");
    assert!(store.append("t1", &a).await.unwrap());
    assert!(store.append("t1", &b).await.unwrap());
    assert!(
        !store.append("t1", &a).await.unwrap(),
        "a replayed entry is not appended twice"
    );
    assert!(
        store.append("t2", &a).await.unwrap(),
        "ids de-duplicate per thread"
    );
    let t = store.thread("t1").await.unwrap();
    assert_eq!(t, vec![a.clone(), b.clone()]);
    assert!(store.thread("empty").await.unwrap().is_empty());
    let c = entry("three");
    store
        .replace_thread("t1", &[b.clone(), c.clone()])
        .await
        .unwrap();
    assert_eq!(
        texts(&store.thread("t1").await.unwrap()),
        vec!["two", "three"]
    );
    assert!(
        store.append("t1", &a).await.unwrap(),
        "an entry removed by replace can come back"
    );
    assert!(!store.append("t1", &c).await.unwrap());
    assert_eq!(
        texts(&store.thread("t1").await.unwrap()),
        vec!["two", "three", "one"]
    );
    store.replace_thread("t1", &[]).await.unwrap();
    assert!(store.thread("t1").await.unwrap().is_empty());
}

async fn children_keep_order_and_are_idempotent(store: &dyn ThreadStore) {
    for c in ["k3", "k1", "k2", "k1"] {
        store.add_child("kp", c).await.unwrap();
    }
    assert_eq!(store.children("kp").await.unwrap(), vec!["k3", "k1", "k2"]);
    assert!(store.children("none").await.unwrap().is_empty());
}

async fn dependents_are_a_set(store: &dyn ThreadStore) {
    for d in ["w2", "w1", "w2"] {
        store.add_dependent("dep", d).await.unwrap();
    }
    let mut got = store.dependents("dep").await.unwrap();
    got.sort();
    assert_eq!(got, vec!["w1", "w2"]);
    assert!(store.dependents("none").await.unwrap().is_empty());
}

async fn aliases_get_or_create(store: &dyn ThreadStore) {
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

async fn racing_aliases_agree(store: Arc<dyn ThreadStore>) {
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

async fn delete_removes_everything(store: &dyn ThreadStore) {
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
