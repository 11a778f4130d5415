//! Writes fenced by the partition's lease: pushes, flushes of a live agent's record and of new entries, and a forward after the writes before it.

use super::*;

/// [`store_on`], its pushes and flushes fenced by this process's token `me` in the lease of
/// `agent`'s partition (named in the answer; no lease is set).
async fn fenced_store_on(ns: &str, agent: &str) -> (TestRedis, RedisStore, String) {
    let (redis, store) = store_on(ns).await;
    let lease = store.keys().lease(store.keys().partition_of(agent));
    let fence = lease.clone();
    store.fence_pushes_with(Arc::new(move |_agent: &str| {
        Some((fence.clone(), "me".to_string()))
    }));
    (redis, store, lease)
}

/// A batch with a `Forward` appends the envelope to the named stream, after the batch's other
/// writes, in the same round trip (what carries a child's output to its parent's process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forward_in_a_batch_lands_on_its_stream_after_the_writes_before_it() {
    use agentd_actors::StoreWrite;
    let (redis, store) = store_on("fw").await;
    assert!(store.takes_forwards());
    let rec = conformance::record("fw-child", Some("fw-parent"), 1);
    let env = agentd_proto::Envelope::new(
        agentd_proto::Address::agent("fw-child"),
        agentd_proto::Address::agent("fw-parent"),
        agentd_proto::Item::Output(agentd_proto::Output::Reply {
            text: "done".into(),
        }),
        1,
    );
    let keys = store.keys().clone();
    let stream = keys.partition(keys.partition_of("fw-parent"));
    let batch = [
        StoreWrite::Append {
            agent_id: "fw-child".into(),
            entry: Arc::new(conformance::entry("done")),
        },
        StoreWrite::PutAgent(Arc::new(rec)),
        StoreWrite::Forward {
            stream: stream.clone(),
            env: Arc::new(env.clone()),
        },
    ];
    store.write_batch(&batch).await.unwrap();
    assert_eq!(store.thread("fw-child").await.unwrap().len(), 1);
    let mut con = redis.client();
    let entries: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(&stream)
        .arg("-")
        .arg("+")
        .query(&mut con)
        .unwrap();
    let bytes: Vec<Vec<u8>> = entries.ids.iter().filter_map(|e| e.get("m")).collect();
    assert_eq!(bytes.len(), 1);
    let got = agentd_proto::codec::decode_envelope(&bytes[0], 1 << 20).unwrap();
    assert_eq!(got, env);
}

/// A fenced store pushes into an agent's inbox only while the agent's partition lease holds
/// this process's token: a push that a stalled process still had in flight when another took
/// the partition is refused, and leaves nothing behind (the plain push and the one that starts
/// a turn alike).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_push_lands_only_while_the_lease_names_this_process() {
    use agentd_actors::{StoreErrorKind, StoreWrite};
    let (redis, store, lease) = fenced_store_on("fence", "fence-agent").await;
    let mut con = redis.client();
    let set_lease = |con: &mut TestConnection, holder: &str| set_key(con, &lease, holder);
    let env = |text: &str| {
        agentd_proto::Envelope::new(
            agentd_proto::Address::System,
            agentd_proto::Address::agent("fence-agent"),
            agentd_proto::Item::Inbox(agentd_proto::InboxItem::message(text)),
            1,
        )
    };
    store
        .put_agent(&conformance::record("fence-agent", None, 1))
        .await
        .unwrap();
    let start = |e: &str| {
        [
            StoreWrite::Append {
                agent_id: "fence-agent".into(),
                entry: Arc::new(conformance::entry(e)),
            },
            StoreWrite::PutAgent(Arc::new(conformance::record("fence-agent", None, 1))),
        ]
    };
    // Another process holds the lease: both kinds of push are refused, nothing is written.
    set_lease(&mut con, "someone else");
    let refused = store.inbox_push("fence-agent", &env("late")).await;
    assert!(
        matches!(&refused, Err(e) if e.kind() == StoreErrorKind::Fenced),
        "{refused:?}"
    );
    let refused = store
        .inbox_push_then("fence-agent", &env("late too"), &start("late too"))
        .await;
    assert!(
        matches!(&refused, Err(e) if e.kind() == StoreErrorKind::Fenced),
        "{refused:?}"
    );
    assert!(store.inbox_pending("fence-agent").await.unwrap().is_empty());
    assert!(store.thread("fence-agent").await.unwrap().is_empty());
    // Our lease: both land.
    set_lease(&mut con, "me");
    assert!(
        store
            .inbox_push("fence-agent", &env("on time"))
            .await
            .unwrap()
    );
    let pushed = store
        .inbox_push_then("fence-agent", &env("on time too"), &start("on time too"))
        .await
        .unwrap();
    assert!(pushed.fresh && pushed.then_applied);
    assert_eq!(store.inbox_pending("fence-agent").await.unwrap().len(), 2);
    assert_eq!(store.thread("fence-agent").await.unwrap().len(), 1);
}

/// A live agent's flush writes only while its partition's lease holds this process's token: a
/// flush a stalled process still had in flight when another took the partition must not
/// overwrite the record the new owner keeps, nor append entries it may be writing again. Writes
/// that are not an agent's own flush (a spawn writing a record for its owner to activate) are
/// not fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_agents_flush_writes_its_record_only_while_the_lease_names_this_process() {
    use agentd_actors::{StoreErrorKind, StoreWrite};
    use agentd_proto::AgentStatus;
    let (redis, store, lease) = fenced_store_on("ownfence", "own-agent").await;
    let mut con = redis.client();
    let set_lease = |con: &mut TestConnection, holder: &str| set_key(con, &lease, holder);
    let with_status = |status: AgentStatus| {
        let mut rec = conformance::record("own-agent", None, 1);
        rec.status = status;
        Arc::new(rec)
    };
    let answer = |text: &str| StoreWrite::Append {
        agent_id: "own-agent".into(),
        entry: Arc::new(conformance::entry(text)),
    };
    // Another process holds the lease; a spawn-like write still lands.
    set_lease(&mut con, "someone else");
    store
        .write_batch(&[StoreWrite::PutAgent(with_status(AgentStatus::Idle))])
        .await
        .unwrap();
    // The stale owner's flush is refused and the record stays as it was.
    let refused = store
        .write_own_batch(
            "own-agent",
            &[
                answer("late answer"),
                StoreWrite::PutAgent(with_status(AgentStatus::Failed)),
            ],
        )
        .await;
    assert!(
        matches!(&refused, Err(e) if e.kind() == StoreErrorKind::Fenced),
        "{refused:?}"
    );
    let stored = store.get_agent("own-agent").await.unwrap().unwrap();
    assert_eq!(stored.status, AgentStatus::Idle);
    // Nothing of a fenced flush lands: an entry known new would be appended without a look-up,
    // behind the back of the partition's next owner.
    assert!(store.thread("own-agent").await.unwrap().is_empty());
    // Our lease: the flush lands, record and all, alone ...
    set_lease(&mut con, "me");
    store
        .write_own_batch(
            "own-agent",
            &[StoreWrite::PutAgent(with_status(AgentStatus::Running))],
        )
        .await
        .unwrap();
    let stored = store.get_agent("own-agent").await.unwrap().unwrap();
    assert_eq!(stored.status, AgentStatus::Running);
    assert_eq!(store.list_roots().await.unwrap().len(), 1);
    // ... and with answers before it and the done mark after.
    store
        .write_own_batch(
            "own-agent",
            &[
                answer("first"),
                answer("second"),
                StoreWrite::InboxDone {
                    agent_id: "own-agent".into(),
                    env_id: uuid::Uuid::nil(),
                },
                StoreWrite::PutAgent(with_status(AgentStatus::Idle)),
            ],
        )
        .await
        .unwrap();
    let texts: Vec<String> = store
        .thread("own-agent")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(texts, ["first", "second"]);
    let stored = store.get_agent("own-agent").await.unwrap().unwrap();
    assert_eq!(stored.status, AgentStatus::Idle);
    assert_eq!(store.list_roots().await.unwrap().len(), 1);
    // Redis forgot its scripts (as after a restart): the flush loads them and lands.
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut con).unwrap();
    store
        .write_own_batch(
            "own-agent",
            &[
                answer("third"),
                StoreWrite::PutAgent(with_status(AgentStatus::Running)),
            ],
        )
        .await
        .unwrap();
    assert_eq!(store.thread("own-agent").await.unwrap().len(), 3);
    let stored = store.get_agent("own-agent").await.unwrap().unwrap();
    assert_eq!(stored.status, AgentStatus::Running);
    // A flush's done mark removes its item in the same call as the answer, and a flush the
    // fence refuses writes neither (the answer and its done mark land together, or neither).
    let item = agentd_proto::Envelope::new(
        agentd_proto::Address::System,
        agentd_proto::Address::agent("own-agent"),
        agentd_proto::Item::Inbox(agentd_proto::InboxItem::message("an item")),
        1,
    );
    assert!(store.inbox_push("own-agent", &item).await.unwrap());
    assert_eq!(store.inbox_pending("own-agent").await.unwrap().len(), 1);
    set_lease(&mut con, "someone else");
    let refused = store
        .write_own_batch(
            "own-agent",
            &[
                answer("its answer"),
                StoreWrite::InboxDone {
                    agent_id: "own-agent".into(),
                    env_id: item.id,
                },
                StoreWrite::PutAgent(with_status(AgentStatus::Failed)),
            ],
        )
        .await;
    assert!(
        matches!(&refused, Err(e) if e.kind() == StoreErrorKind::Fenced),
        "{refused:?}"
    );
    assert_eq!(store.inbox_pending("own-agent").await.unwrap(), [item]);
    assert_eq!(store.thread("own-agent").await.unwrap().len(), 3);
    let stored = store.get_agent("own-agent").await.unwrap().unwrap();
    assert_eq!(stored.status, AgentStatus::Running);
    set_lease(&mut con, "me");
    // Without a fence for the agent's own record, an empty-answer batch is fine too.
    store
        .write_own_batch(
            "own-agent",
            &[StoreWrite::InboxDone {
                agent_id: "own-agent".into(),
                env_id: uuid::Uuid::nil(),
            }],
        )
        .await
        .unwrap();
}

/// A flush of entries known new (a first run's) goes as a transaction fenced by a `WATCH` on
/// the partition's lease (on one Redis; the script on a cluster): it writes only while the lease
/// names this process, also when the lease changes between two flushes or between a flush's
/// watch and its write — renewed (the flush is sent again), taken or gone (refused, nothing
/// written). A child's output for a parent in another partition goes onto the parent's stream
/// with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_of_new_entries_writes_only_while_the_lease_names_this_process() {
    use agentd_actors::{StoreErrorKind, StoreWrite};
    let (redis, store, lease) = fenced_store_on("txfence", "tx-agent").await;
    let keys = store.keys().clone();
    let mut con = redis.client();
    let flush = |text: &str, created: u64| {
        vec![
            StoreWrite::AppendNew {
                agent_id: "tx-agent".into(),
                entry: Arc::new(conformance::entry(text)),
            },
            StoreWrite::PutAgent(Arc::new(conformance::record("tx-agent", None, created))),
        ]
    };
    let is_fenced = |res: &Result<(), agentd_actors::StoreError>| matches!(res, Err(e) if e.kind() == StoreErrorKind::Fenced);
    set_key(&mut con, &lease, "someone else");
    let refused = store.write_own_batch("tx-agent", &flush("late", 1)).await;
    assert!(is_fenced(&refused), "{refused:?}");
    assert!(store.thread("tx-agent").await.unwrap().is_empty());
    assert!(store.get_agent("tx-agent").await.unwrap().is_none());
    set_key(&mut con, &lease, "me");
    // With an output for a parent in another partition: on one Redis it goes onto the
    // parent's stream in the transaction itself, not through the outbox.
    let parent = (0..)
        .map(|i| format!("tx-parent-{i}"))
        .find(|p| keys.partition_of(p) != keys.partition_of("tx-agent"))
        .unwrap();
    let output = Arc::new(agentd_proto::Envelope::new(
        agentd_proto::Address::agent("tx-agent"),
        agentd_proto::Address::agent(&parent),
        agentd_proto::Item::Output(agentd_proto::Output::Reply {
            text: "for the parent".into(),
        }),
        1,
    ));
    let parent_stream = keys.partition(keys.partition_of(&parent));
    let mut first = flush("first", 1);
    first.push(StoreWrite::Forward {
        stream: parent_stream.clone(),
        env: output.clone(),
    });
    store.write_own_batch("tx-agent", &first).await.unwrap();
    assert_eq!(store.thread("tx-agent").await.unwrap().len(), 1);
    let sent: Vec<_> = read_stream(&mut con, &parent_stream)
        .iter()
        .map(|b| agentd_proto::codec::decode_envelope(b, 1 << 20).unwrap())
        .collect();
    assert_eq!(sent, vec![(*output).clone()]);
    if matches!(redis, agentd_tests::TestRedis::Single(_)) {
        let outbox: u64 = redis::cmd("HLEN")
            .arg(keys.outbox(keys.partition_of("tx-agent")))
            .query(&mut con)
            .unwrap();
        assert_eq!(outbox, 0, "never in the outbox");
    }
    // Renewed (touched) since the last flush watched it: sent again, written once.
    let _: i64 = redis::cmd("PEXPIRE")
        .arg(&lease)
        .arg(60_000)
        .query(&mut con)
        .unwrap();
    store
        .write_own_batch("tx-agent", &flush("second", 2))
        .await
        .unwrap();
    assert_eq!(store.thread("tx-agent").await.unwrap().len(), 2);
    // Taken by another process after the last flush watched it: refused.
    set_key(&mut con, &lease, "someone else");
    let refused = store.write_own_batch("tx-agent", &flush("stale", 3)).await;
    assert!(is_fenced(&refused), "{refused:?}");
    // Gone (expired): refused too.
    let _: i64 = redis::cmd("DEL").arg(&lease).query(&mut con).unwrap();
    let refused = store.write_own_batch("tx-agent", &flush("stale", 3)).await;
    assert!(is_fenced(&refused), "{refused:?}");
    let texts: Vec<String> = store
        .thread("tx-agent")
        .await
        .unwrap()
        .iter()
        .map(|e| e.text.clone())
        .collect();
    assert_eq!(texts, ["first", "second"]);
    let stored = store.get_agent("tx-agent").await.unwrap().unwrap();
    assert_eq!(
        stored.created_at_ms, 2,
        "the refused flushes' records did not land"
    );
    // The lease back: written again.
    set_key(&mut con, &lease, "me");
    store
        .write_own_batch("tx-agent", &flush("third", 4))
        .await
        .unwrap();
    assert_eq!(store.thread("tx-agent").await.unwrap().len(), 3);
    if let agentd_tests::TestRedis::Single(server) = &redis {
        // Transactions, not the script: three written, and two that found the lease changed
        // since their watch and wrote nothing (after the renewal, sent again; after the take,
        // refused).
        let mut con = server.client();
        assert_eq!(command_calls(&mut con, &["cmdstat_exec:"]), 5);
    }
}
