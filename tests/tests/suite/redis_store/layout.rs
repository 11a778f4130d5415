//! The store's semantics and layout: the conformance suite, outside ids of before, compact records and threads, a clear error for an unreachable server, nothing left after a delete, a namespace's partition count, the dedup window, one slot per command, script and pipeline.

use super::*;

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
