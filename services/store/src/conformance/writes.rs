//! Threads and the batched writes of a turn: order, de-duplication, the turn-start marker,
//! concurrent writers, forwards and the outbox.

use super::*;

/// A store that keeps an outbox keeps each output written in a batch once, in the order
/// written, until it is done (a repeat keeps its first place; an unknown id is no error); one
/// that keeps none refuses such a batch before applying any of it.
pub(super) async fn the_outbox_keeps_outputs_in_order_until_done(store: &dyn ThreadStore) {
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
pub(super) async fn a_store_that_is_not_the_bus_refuses_forwards_whole(store: &dyn ThreadStore) {
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
pub(super) async fn a_push_carries_the_turn_start_only_when_new(store: &dyn ThreadStore) {
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
pub(super) async fn batches_apply_in_order(store: &dyn ThreadStore) {
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
pub(super) async fn concurrent_writes_all_land(store: Arc<dyn ThreadStore>) {
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

/// A thread of [`LONG_THREAD`] entries, written one by one, in batches and with turn starts,
/// each replayed at once and again later (before and after the thread grew long), holds each
/// entry once, in order; replaced by a long thread or a short one, it still refuses the new
/// entries again and takes back one it no longer holds.
pub(super) async fn long_threads_keep_order_and_deduplicate(store: &dyn ThreadStore) {
    use agentd_actors::StoreWrite;
    let id = "t-long";
    let entries: Vec<ThreadEntry> = (0..LONG_THREAD).map(|i| entry(&format!("e{i}"))).collect();
    store.put_agent(&record(id, None, 1)).await.unwrap();
    // Each entry written one of the ways agents write them: looked up first, or (a first run's)
    // known new; alone, in an own flush, or with a push that starts a turn.
    for (i, e) in entries.iter().enumerate() {
        let checked = StoreWrite::Append {
            agent_id: id.into(),
            entry: Arc::new(e.clone()),
        };
        let new = StoreWrite::AppendNew {
            agent_id: id.into(),
            entry: Arc::new(e.clone()),
        };
        match i % 6 {
            0 => assert!(store.append(id, e).await.unwrap(), "entry {i} is new"),
            1 => store.append_new(id, e).await.unwrap(),
            2 => store.write_own_batch(id, &[checked]).await.unwrap(),
            3 => store.write_own_batch(id, &[new]).await.unwrap(),
            _ => {
                let env = envelope(&format!("input {i}"));
                let append = if i % 6 == 4 { checked } else { new };
                let start = [append, StoreWrite::PutAgent(Arc::new(record(id, None, 1)))];
                let pushed = store.inbox_push_then(id, &env, &start).await.unwrap();
                assert!(pushed.fresh, "push {i} is new");
                if !pushed.then_applied {
                    store.write_batch(&start).await.unwrap();
                }
                store.inbox_done(id, env.id).await.unwrap();
            }
        }
        // The entry again at once, and the first, the middle one so far and the previous.
        for again in [i, 0, i / 2, i.saturating_sub(1)] {
            assert!(
                !store.append(id, &entries[again]).await.unwrap(),
                "entry {again} replayed after entry {i}"
            );
        }
        store
            .write_own_batch(
                id,
                &[StoreWrite::Append {
                    agent_id: id.into(),
                    entry: Arc::new(entries[i / 3].clone()),
                }],
            )
            .await
            .unwrap();
    }
    assert_eq!(
        store.thread(id).await.unwrap(),
        entries,
        "each once, in order"
    );
    let (first, rest) = entries.split_at(1);
    store.replace_thread(id, rest).await.unwrap();
    for e in rest.iter().step_by(7) {
        assert!(!store.append(id, e).await.unwrap(), "kept by the replace");
    }
    assert!(store.append(id, &first[0]).await.unwrap(), "dropped by it");
    let mut expected = rest.to_vec();
    expected.push(first[0].clone());
    assert_eq!(store.thread(id).await.unwrap(), expected);
    store.replace_thread(id, &entries[..2]).await.unwrap();
    assert!(!store.append(id, &entries[1]).await.unwrap());
    assert!(store.append(id, &entries[LONG_THREAD - 1]).await.unwrap());
    assert_eq!(
        texts(&store.thread(id).await.unwrap()),
        vec!["e0", "e1", &format!("e{}", LONG_THREAD - 1)]
    );
}

pub(super) async fn threads_keep_order_and_deduplicate(store: &dyn ThreadStore) {
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
