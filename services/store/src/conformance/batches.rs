//! Batches: the writes of a flush in order, concurrent writers, and forwards refused whole by
//! a store that is not the bus.

use super::*;

/// A batch does what its writes do one by one, in order; duplicates stay out.
pub(super) async fn batches_apply_in_order(store: &dyn ThreadStore) {
    use agentd_ports::StoreWrite;
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

/// A store that cannot append to the bus's streams refuses a batch with a
/// [`agentd_ports::StoreWrite::Forward`] before applying any of it (agents never send it one:
/// they ask `takes_forwards` first); the store that can is checked against its streams by its
/// own test.
pub(super) async fn a_store_that_is_not_the_bus_refuses_forwards_whole(store: &dyn ThreadStore) {
    use agentd_ports::StoreWrite;
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

/// Runs every property of batches against `store`, which must be empty of the ids they use.
pub async fn run(store: Arc<dyn ThreadStore>) {
    batches_apply_in_order(store.as_ref()).await;
    concurrent_writes_all_land(store.clone()).await;
    a_store_that_is_not_the_bus_refuses_forwards_whole(store.as_ref()).await;
}
