//! The durable inbox: each message once, in order, a push carrying a turn's first writes only
//! when new; and the outbox: outputs kept in order until done.

use super::*;

pub(super) async fn inbox_is_durable_once_and_ordered(store: &dyn ThreadStore) {
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

/// `inbox_push_then` queues the envelope and, only if it was new, applies the writes that
/// start its turn (the shape an agent sends, and any other); a duplicate changes nothing.
pub(super) async fn a_push_carries_the_turn_start_only_when_new(store: &dyn ThreadStore) {
    use agentd_ports::StoreWrite;
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

/// A store that keeps an outbox keeps each output written in a batch once, in the order
/// written, until it is done (a repeat keeps its first place; an unknown id is no error); one
/// that keeps none refuses such a batch before applying any of it.
pub(super) async fn the_outbox_keeps_outputs_in_order_until_done(store: &dyn ThreadStore) {
    use agentd_ports::StoreWrite;
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

/// Runs every property of inboxes and the outbox against `store`, which must be empty of the ids they use.
pub async fn run(store: Arc<dyn ThreadStore>) {
    inbox_is_durable_once_and_ordered(store.as_ref()).await;
    a_push_carries_the_turn_start_only_when_new(store.as_ref()).await;
    the_outbox_keeps_outputs_in_order_until_done(store.as_ref()).await;
}
