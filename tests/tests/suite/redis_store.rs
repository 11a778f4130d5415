//! The Redis store passes the same conformance suite as the memory and embedded stores, and
//! keeps its own layout, fences and window, on a private redis-server or, with
//! `AGENTD_TEST_REDIS=cluster`, a private Redis Cluster (the tests of one server's behaviour —
//! an unreachable server, a namespace's partitions, a cluster-mode node, Redis's script counts —
//! always run on one server).

use agentd_actors::{AgentRecords, Batches, Inboxes, Threads};
use agentd_store::RedisStore;
use agentd_store::conformance;
use agentd_tests::{RedisServer, TestConnection, TestRedis};
use std::sync::Arc;

/// A private Redis (one server, or a cluster with `AGENTD_TEST_REDIS=cluster`) and a Redis store on
/// it with namespace `ns` and 8 partitions; the Redis stops when the first is dropped.
async fn store_on(ns: &str) -> (TestRedis, RedisStore) {
    let redis = TestRedis::from_env();
    let store = RedisStore::connect_to(&redis.target(), ns, 8)
        .await
        .unwrap();
    (redis, store)
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_conforms() {
    let (_redis, store) = store_on("conf").await;
    conformance::run_all(Arc::new(store.clone())).await;
    // Deleted agents leave no key behind.
    assert_eq!(store.keys_mentioning("d-child").await.unwrap(), 0);
    assert_eq!(store.keys_mentioning("i-agent").await.unwrap(), 0);
}

/// An outside id mapped before mappings had fingerprints (a bare agent id in the partition's
/// `extids` hash: an A2A `contextId`) reads as a settled claim, and a new claim loses to it; a
/// timed mapping is a string that Redis expires, which an unsettled claim does not list beside
/// the agent (the agent may never be written) and a settled one does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_ids_of_before_read_as_settled_and_timed_ones_expire_in_redis() {
    use agentd_actors::{ExternalClaim, ExternalIds, ExternalKey, Retention};
    let (redis, store) = store_on("extids").await;
    let keys = store.keys().clone();
    let mut con = redis.client();
    let old = ExternalKey::new("a2a/lead", "ctx-old");
    let _: () = redis::cmd("HSET")
        .arg(keys.external_ids(&old.encoded()))
        .arg(old.encoded())
        .arg("agent-old")
        .query(&mut con)
        .unwrap();
    assert_eq!(
        store.external_id_get(&old).await.unwrap(),
        Some(ExternalClaim::settled("agent-old"))
    );
    assert_eq!(
        store
            .external_id_claim(
                &old,
                &ExternalClaim::settled("agent-new"),
                Retention::WithAgent
            )
            .await
            .unwrap(),
        Some(ExternalClaim::settled("agent-old"))
    );
    let exists = |con: &mut TestConnection, key: &str| -> bool {
        redis::cmd("EXISTS").arg(key).query(con).unwrap()
    };
    let timed = ExternalKey::new("spawn/", "brief");
    let claim = ExternalClaim {
        agent_id: "t-agent".into(),
        fingerprint: "fp".into(),
        settled: false,
    };
    let listed = keys.agent_part("t-agent", "extids");
    assert_eq!(
        store
            .external_id_claim(&timed, &claim, Retention::For { ms: 100 })
            .await
            .unwrap(),
        None
    );
    let string = keys.external_id_timed(&timed.encoded());
    assert!(exists(&mut con, &string));
    assert!(
        !exists(&mut con, &listed),
        "an unsettled claim is not listed"
    );
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        !exists(&mut con, &string),
        "Redis forgot the expired mapping"
    );
    assert_eq!(store.external_id_get(&timed).await.unwrap(), None);
    store
        .external_id_claim(&timed, &claim, Retention::For { ms: 60_000 })
        .await
        .unwrap();
    store
        .external_id_settle(&timed, "t-agent", Retention::For { ms: 60_000 })
        .await
        .unwrap();
    assert!(exists(&mut con, &listed), "a settled one is listed");
    let ttl: i64 = redis::cmd("PTTL").arg(&string).query(&mut con).unwrap();
    assert!(ttl > 0 && ttl <= 60_000, "{ttl}");
    store.delete_agent("t-agent").await.unwrap();
    assert!(!exists(&mut con, &string), "gone with its agent");
    assert!(!exists(&mut con, &listed));
}

/// A record is one MessagePack string holding only the fields not at their defaults; a thread
/// is a list of `<id> <entry>` pairs, with an id set beside it only once it is long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_and_threads_are_stored_compactly() {
    let (redis, store) = store_on("compact").await;
    let keys = store.keys().clone();
    let mut con = redis.client();
    let bare = conformance::bare_record("bare");
    store.put_agent(&bare).await.unwrap();
    let kind: String = redis::cmd("TYPE")
        .arg(keys.agent("bare"))
        .query(&mut con)
        .unwrap();
    assert_eq!(kind, "string");
    let bytes: Vec<u8> = redis::cmd("GET")
        .arg(keys.agent("bare"))
        .query(&mut con)
        .unwrap();
    let stored: serde_json::Value = rmp_serde::from_slice(&bytes).unwrap();
    let mut fields: Vec<&str> = stored
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "agent_type",
            "created_at_ms",
            "id",
            "root_id",
            "status",
            "title",
            "updated_at_ms"
        ],
        "only the fields without a default"
    );
    assert_eq!(store.get_agent("bare").await.unwrap(), Some(bare));

    let thread = keys.agent_part("bare", "thread");
    let entries: Vec<_> = (0..conformance::LONG_THREAD)
        .map(|i| conformance::entry(&format!("e{i}")))
        .collect();
    // Entries known new go in as they are; any other is looked up in the list first, however
    // long the thread.
    for (i, e) in entries.iter().enumerate() {
        if i % 2 == 0 {
            store.append_new("bare", e).await.unwrap();
        } else {
            assert!(store.append("bare", e).await.unwrap());
        }
        assert!(!store.append("bare", e).await.unwrap(), "entry {i} again");
    }
    assert!(
        !store.append("bare", &entries[0]).await.unwrap(),
        "the first entry of a long thread"
    );
    let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
        .arg(&thread)
        .arg(0)
        .arg(-1)
        .query(&mut con)
        .unwrap();
    assert_eq!(items.len(), 2 * entries.len());
    for (pair, e) in items.chunks(2).zip(&entries) {
        assert_eq!(pair[0], e.id.as_bytes().to_vec());
        assert_eq!(pair[1], agentd_proto::codec::encode(e).unwrap());
    }
    // Nothing but the list: no set of its ids beside it (layout 3 kept one).
    let beside: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{thread}*"))
        .query(&mut con)
        .unwrap();
    assert_eq!(beside, std::slice::from_ref(&thread));
    store.replace_thread("bare", &entries[..3]).await.unwrap();
    assert!(!store.append("bare", &entries[2]).await.unwrap());
    assert!(store.append("bare", &entries[5]).await.unwrap());
    assert_eq!(
        store.thread("bare").await.unwrap(),
        [&entries[..3], &entries[5..6]].concat()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_is_a_clear_error() {
    let server = RedisServer::start();
    let url = server.url();
    drop(server);
    let err = RedisStore::connect(&url, "x", 8)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("redis"), "{err}");
}

#[actix_rt::test]
async fn actors_on_the_redis_store_delete_leaves_no_key_behind() {
    use agentd_proto::{Control, Role};
    use agentd_tests::*;
    let (_redis, store) = store_on("del").await;
    let script = "[[rule]]\ntext = \"echo: {{input}}\"\n";
    let sys = TestSystem::builder()
        .script(script)
        .store(Arc::new(store.clone()))
        .start()
        .await;
    let lead = sys.root("lead", Some("hi")).await;
    let keep = sys.root("lead", Some("keep")).await;
    let child = sys.spawn_child(&lead.id, "coding", "work").await;
    let m = sys
        .system
        .invoke_tool(Some(&lead.id), "Manage", serde_json::json!({"command": "send_message", "worker": "Ops", "message": "x", "threadAlias": "a"}))
        .await
        .unwrap();
    let worker = m["childThreadId"].as_str().unwrap().to_string();
    sys.wait_for_entry(&child, Role::Assistant, "echo: work")
        .await;
    sys.wait_for_entry(&keep.id, Role::Assistant, "echo: keep")
        .await;
    for id in [&lead.id, &child, &worker] {
        assert!(store.keys_mentioning(id).await.unwrap() > 0);
    }
    sys.system.control(&lead.id, Control::Delete).await.unwrap();
    for id in [&lead.id, &child, &worker] {
        assert_eq!(
            store.keys_mentioning(id).await.unwrap(),
            0,
            "keys left for {id}"
        );
    }
    assert!(store.keys_mentioning(&keep.id).await.unwrap() > 0);
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

fn set_key(con: &mut impl redis::ConnectionLike, key: &str, value: &str) {
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query::<()>(con)
        .unwrap();
}

/// The de-duplication window on Redis: a repeat of an envelope still in the window is refused,
/// the window is cut back to its size from time to time (every 64th push), so it never holds
/// more than 63 ids beyond it, and an envelope that has left it is taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dedup_window_refuses_repeats_and_stays_near_its_size() {
    let (redis, store) = store_on("win").await;
    let store = store.with_dedup_window(5);
    store
        .put_agent(&conformance::record("w-agent", None, 1))
        .await
        .unwrap();
    let envs: Vec<_> = (0..300)
        .map(|i| {
            agentd_proto::Envelope::new(
                agentd_proto::Address::System,
                agentd_proto::Address::agent("w-agent"),
                agentd_proto::Item::Inbox(agentd_proto::InboxItem::message(format!("m{i}"))),
                1,
            )
        })
        .collect();
    let mut con = redis.client();
    let seen = store.keys().agent_part("w-agent", "seen");
    let window_len =
        |con: &mut TestConnection| -> usize { redis::cmd("ZCARD").arg(&seen).query(con).unwrap() };
    let mut largest = 0;
    for env in &envs {
        assert!(store.inbox_push("w-agent", env).await.unwrap());
        largest = largest.max(window_len(&mut con));
    }
    assert!((5..=5 + 63).contains(&largest), "window grew to {largest}");
    // The latest five are in the window whatever its cut left: their repeats are refused and
    // queue nothing twice.
    for env in envs.iter().rev().take(5) {
        assert!(!store.inbox_push("w-agent", env).await.unwrap());
    }
    assert_eq!(store.inbox_pending("w-agent").await.unwrap().len(), 300);
    // The first left the window long ago: it is taken again.
    assert!(store.inbox_push("w-agent", &envs[0]).await.unwrap());
}

/// Every command, transaction and script of the store touches one Redis Cluster slot (its
/// agent's partition's, or a process-wide key's own): the conformance suite and flushes that
/// carry child outputs to parents in the same and in other partitions pass on a redis-server in
/// cluster mode, which refuses a command, a transaction or a script whose declared keys span
/// slots (every script touches only the keys it declares). (The pipelines the store sends are
/// checked by `assert_one_slot` in every debug build, so in every test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_touches_one_slot_per_command_script_and_pipeline() {
    use agentd_actors::StoreWrite;
    let server = RedisServer::start_cluster_node();
    let store = RedisStore::connect(&server.url(), "slots", 16)
        .await
        .unwrap();
    let keys = store.keys().clone();
    // Fenced as the bus fences it (every lease this process's), so the fences run too.
    let mut con = server.client();
    for k in 0..16 {
        set_key(&mut con, &keys.lease(k), "me");
    }
    let fence_keys = keys.clone();
    store.fence_pushes_with(Arc::new(move |agent: &str| {
        Some((
            fence_keys.lease(fence_keys.partition_of(agent)),
            "me".to_string(),
        ))
    }));
    conformance::run_all(Arc::new(store.clone())).await;

    // A child's flush with outputs for a parent in its own partition and one in another.
    let child = "slot-child";
    let pick = |same: bool| {
        (0..1000)
            .map(|i| format!("slot-parent-{i}"))
            .find(|p| (keys.partition_of(p) == keys.partition_of(child)) == same)
            .unwrap()
    };
    let (near, far) = (pick(true), pick(false));
    for parent in [&near, &far] {
        store
            .put_agent(&conformance::record(parent, None, 1))
            .await
            .unwrap();
    }
    store
        .put_agent(&conformance::record(child, Some(&near), 1))
        .await
        .unwrap();
    let output = |parent: &str| {
        Arc::new(agentd_proto::Envelope::new(
            agentd_proto::Address::agent(child),
            agentd_proto::Address::agent(parent),
            agentd_proto::Item::Output(agentd_proto::Output::Reply {
                text: format!("for {parent}"),
            }),
            1,
        ))
    };
    let (to_near, to_far) = (output(&near), output(&far));
    let batch = [
        StoreWrite::Append {
            agent_id: child.into(),
            entry: Arc::new(conformance::entry("answer")),
        },
        StoreWrite::PutAgent(Arc::new(conformance::record(child, Some(&near), 2))),
        StoreWrite::Forward {
            stream: keys.partition(keys.partition_of(&near)),
            env: to_near.clone(),
        },
        StoreWrite::Forward {
            stream: keys.partition(keys.partition_of(&far)),
            env: to_far.clone(),
        },
    ];
    store.write_own_batch(child, &batch).await.unwrap();
    for (parent, env) in [(&near, &to_near), (&far, &to_far)] {
        let bytes = read_stream(&mut con, &keys.partition(keys.partition_of(parent)));
        let got: Vec<_> = bytes
            .iter()
            .map(|b| agentd_proto::codec::decode_envelope(b, 1 << 20).unwrap())
            .collect();
        assert_eq!(got, vec![(**env).clone()], "the stream of {parent}");
    }
    // What went to another slot is taken out of the outbox once appended.
    agentd_tests::eventually_blocking(
        std::time::Duration::from_secs(5),
        "the outbox to be empty",
        || {
            redis::cmd("HLEN")
                .arg(keys.outbox(keys.partition_of(child)))
                .query::<usize>(&mut con)
                .is_ok_and(|n| n == 0)
        },
    );
    assert_eq!(store.thread(child).await.unwrap().len(), 1);
}

/// The `m` fields of a stream's entries.
fn read_stream(con: &mut impl redis::ConnectionLike, key: &str) -> Vec<Vec<u8>> {
    let entries: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(con)
        .unwrap();
    entries.ids.iter().filter_map(|e| e.get("m")).collect()
}

/// The number of partitions is fixed for a namespace's life: a store with another number is
/// refused at connection, saying which number the namespace has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_keeps_its_number_of_partitions() {
    let server = RedisServer::start();
    RedisStore::connect(&server.url(), "fixed", 8)
        .await
        .unwrap();
    RedisStore::connect(&server.url(), "fixed", 8)
        .await
        .unwrap();
    let err = RedisStore::connect(&server.url(), "fixed", 16)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("8 partitions"), "{err}");
    assert!(err.contains("redis.partitions is 16"), "{err}");
    // Another namespace on the same Redis chooses its own.
    RedisStore::connect(&server.url(), "other", 16)
        .await
        .unwrap();
}

/// Pushes for agents of one partition made at once are grouped into one script call, and each
/// still gets its own answer: fresh, duplicate, or the error of its own agent's broken key
/// (which fails no other agent's push in the same call).
// One thread, as an actix arbiter runs its agents: the pushes of one poll all join before the
// task that sends them runs.
#[tokio::test(flavor = "current_thread")]
async fn pushes_made_at_once_are_grouped_and_each_gets_its_own_answer() {
    grouped_pushes(1).await;
}

/// Two pushes of one envelope reach Redis in the order they were made, whichever runtime thread
/// sends their calls: the first is the fresh one. (On two threads the pushes made at once go
/// in as many calls as the other thread's sends happen to split them into.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_of_one_envelope_reach_redis_in_order_from_any_thread() {
    grouped_pushes(100).await;
}

/// 50 agents' pushes, each made twice at once, in at most `most_calls` script calls.
async fn grouped_pushes(most_calls: u64) {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), "group", 4)
        .await
        .unwrap();
    let keys = store.keys().clone();
    let agents: Vec<String> = (0..400)
        .map(|i| format!("g-{i}"))
        .filter(|a| keys.partition_of(a) == 0)
        .take(50)
        .collect();
    for a in &agents {
        store
            .put_agent(&conformance::record(a, None, 1))
            .await
            .unwrap();
    }
    let mut con = server.client();
    // One agent's window is not a sorted set: its push fails, with WRONGTYPE.
    set_key(&mut con, &keys.agent_part(&agents[7], "seen"), "broken");
    let calls_before = script_calls(&mut con);
    let envs: Vec<_> = agents
        .iter()
        .map(|a| {
            agentd_proto::Envelope::new(
                agentd_proto::Address::System,
                agentd_proto::Address::agent(a.as_str()),
                agentd_proto::Item::Inbox(agentd_proto::InboxItem::message("hi")),
                1,
            )
        })
        .collect();
    // Every envelope twice, all at once.
    let pushes = agents
        .iter()
        .zip(&envs)
        .chain(agents.iter().zip(&envs))
        .map(|(a, e)| store.inbox_push(a, e));
    let results = futures::future::join_all(pushes).await;
    let calls = script_calls(&mut con) - calls_before;
    assert!(calls <= most_calls, "{calls} script calls for 100 pushes");
    let (first, again) = results.split_at(agents.len());
    for (i, (first, again)) in first.iter().zip(again).enumerate() {
        if i == 7 {
            let err = first.as_ref().unwrap_err().to_string();
            assert!(err.contains("WRONGTYPE"), "{err}");
            continue;
        }
        assert!(first.as_ref().unwrap(), "{} fresh", agents[i]);
        assert!(!again.as_ref().unwrap(), "{} a duplicate", agents[i]);
        assert_eq!(
            store.inbox_pending(&agents[i]).await.unwrap(),
            vec![envs[i].clone()]
        );
    }
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

/// Live agents' flushes made at once, for agents of one partition, go in one call — a
/// transaction (a store that connects itself to one Redis) or a script call (a store over a
/// given connection, or on a cluster) — and each still gets its own answer: one agent's broken
/// thread key fails its own flush only, the others' entries and records land, and the stream
/// entries they held are acknowledged. The script stops the broken agent's part at the failed
/// write (its record is not written, its entry stays pending); a transaction has no rollback,
/// so there its other writes stand.
// One thread, as an actix arbiter runs its agents: the flushes of one poll all join before the
// task that sends them runs (on more threads, another one may send the first few alone).
#[tokio::test(flavor = "current_thread")]
async fn flushes_made_at_once_are_grouped_and_each_gets_its_own_answer() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), "group", 4)
        .await
        .unwrap();
    grouped_flushes(&server, store, "cmdstat_exec:").await;
    let con = agentd_store::RedisTarget::single(server.url())
        .connect()
        .await
        .unwrap();
    let store = RedisStore::with_connection(con, agentd_store::Keys::new("scripted", 4));
    grouped_flushes(&server, store, "cmdstat_evalsha:").await;
}

/// [`flushes_made_at_once_are_grouped_and_each_gets_its_own_answer`] with `store`, whose flush
/// calls Redis counts in `INFO commandstats` under `call`.
async fn grouped_flushes(server: &RedisServer, store: RedisStore, call: &str) {
    use agentd_actors::StoreWrite;
    use agentd_actors::ports::StreamEntry;
    let transaction = call == "cmdstat_exec:";
    let keys = store.keys().clone();
    let agents: Vec<String> = (0..400)
        .map(|i| format!("f-{i}"))
        .filter(|a| keys.partition_of(a) == 0)
        .take(50)
        .collect();
    let mut con = server.client();
    let stream = keys.partition(0);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&stream)
        .arg(agentd_store::GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query(&mut con)
        .unwrap();
    let mut entries = Vec::new();
    for _ in &agents {
        let _: String = redis::cmd("XADD")
            .arg(&stream)
            .arg("*")
            .arg("m")
            .arg("x")
            .query(&mut con)
            .unwrap();
    }
    let read: redis::streams::StreamReadReply = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(agentd_store::GROUP)
        .arg("t")
        .arg("STREAMS")
        .arg(&stream)
        .arg(">")
        .query(&mut con)
        .unwrap();
    for sid in &read.keys[0].ids {
        entries.push(StreamEntry::new(
            stream.as_str().into(),
            0,
            0,
            sid.id.clone(),
            std::time::Duration::ZERO,
            None,
        ));
    }
    // One agent's thread is not a list: its flush fails, with WRONGTYPE.
    set_key(&mut con, &keys.agent_part(&agents[7], "thread"), "broken");
    // A first flush (of an agent of another partition) loads the flush scripts: a flush made
    // before they are loaded waits for the load first, and joins a call whenever that returns.
    let warm = (0..400)
        .map(|i| format!("w-{i}"))
        .find(|a| keys.partition_of(a) != 0)
        .unwrap();
    let warm_record =
        StoreWrite::PutAgent(std::sync::Arc::new(conformance::record(&warm, None, 1)));
    store.write_own_batch(&warm, &[warm_record]).await.unwrap();
    let calls_before = command_calls(&mut con, &[call]);
    let batches: Vec<Vec<StoreWrite>> = agents
        .iter()
        .zip(&entries)
        .map(|(a, entry)| {
            let agent_id: std::sync::Arc<str> = a.as_str().into();
            vec![
                StoreWrite::AppendNew {
                    agent_id: agent_id.clone(),
                    entry: std::sync::Arc::new(conformance::entry(&format!("to {a}"))),
                },
                StoreWrite::Acknowledge {
                    agent_id,
                    entry: entry.clone(),
                },
                StoreWrite::PutAgent(std::sync::Arc::new(conformance::record(a, None, 1))),
            ]
        })
        .collect();
    let flushes = agents
        .iter()
        .zip(&batches)
        .map(|(a, b)| store.write_own_batch(a, b));
    let results = futures::future::join_all(flushes).await;
    let calls = command_calls(&mut con, &[call]) - calls_before;
    assert_eq!(calls, 1, "{calls} calls ({call}) for 50 flushes");
    for (i, res) in results.iter().enumerate() {
        if i == 7 {
            let err = res.as_ref().unwrap_err().to_string();
            assert!(err.contains("WRONGTYPE"), "{err}");
            let record = store.get_agent(&agents[i]).await.unwrap();
            assert_eq!(record.is_some(), transaction, "{record:?}");
            assert!(!entries[i].is_acknowledged());
            continue;
        }
        res.as_ref().unwrap();
        assert_eq!(store.thread(&agents[i]).await.unwrap().len(), 1);
        assert!(store.get_agent(&agents[i]).await.unwrap().is_some());
        assert!(entries[i].is_acknowledged());
    }
    let pending: redis::streams::StreamPendingReply = redis::cmd("XPENDING")
        .arg(&stream)
        .arg(agentd_store::GROUP)
        .query(&mut con)
        .unwrap();
    let still_pending = if transaction { 0 } else { 1 };
    assert_eq!(
        pending.count(),
        still_pending,
        "only the broken agent's entry is pending, and only with the script"
    );
}

/// How many scripts Redis has run (`INFO commandstats`: `EVALSHA` and `EVAL` calls).
fn script_calls(con: &mut impl redis::ConnectionLike) -> u64 {
    command_calls(con, &["cmdstat_evalsha:", "cmdstat_eval:"])
}

/// How many calls of the commands `stats` (`INFO commandstats` line prefixes) Redis has run.
fn command_calls(con: &mut impl redis::ConnectionLike, stats: &[&str]) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    info.lines()
        .filter(|l| stats.iter().any(|s| l.starts_with(s)))
        .filter_map(|l| {
            l.split([':', ','])
                .find_map(|f| f.strip_prefix("calls="))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .sum()
}
