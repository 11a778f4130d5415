//! Layouts 2 and 3 moved to compact threads and records: read back once, layout 3's entry-id sets dropped, a cut-off migration finished, the same on a Redis Cluster.

use super::*;

/// A key of layout version 2 (partition-tagged names, as this version's), spelled out.
fn v2_key(id: &str, part: Option<&str>) -> String {
    let base = format!("{{{NS}:p{}}}:a:{id}", partition(id));
    match part {
        Some(part) => format!("{base}:{part}"),
        None => base,
    }
}

/// What a namespace of layout version 2 (or 3) holds, to be read back after the move.
struct Layout2 {
    records: Vec<agentd_proto::AgentRecord>,
    /// Root `r-1`'s thread (short) and worker `w-1`'s (long: past the short-thread check).
    short: Vec<ThreadEntry>,
    long: Vec<ThreadEntry>,
    pending: Envelope,
}

/// Writes layout version 2 as its code did: the layout key, records as hashes (the encoded
/// record in `rec`, with every field, and copies of four fields), threads as streams (fields
/// `id` and `e`) with their id sets, a pending inbox item with its de-duplication window, a
/// partition stream with its group and one pending entry, a dead process's heartbeat.
fn write_layout_2<C: redis::ConnectionLike>(con: &mut C) -> Layout2 {
    q(
        con,
        redis::cmd("HSET")
            .arg(format!("{{{NS}:layout}}"))
            .arg("version")
            .arg(2)
            .arg("partitions")
            .arg(PARTITIONS)
            .arg("state")
            .arg("ready"),
    );
    q(
        con,
        redis::cmd("SET")
            .arg(format!("{NS}:p:{{0}}"))
            .arg("agentd key layout 2"),
    );
    let records = vec![
        conformance::record("r-1", None, 10),
        conformance::record("c-1", Some("r-1"), 11),
        conformance::bare_record("w-1"),
    ];
    for rec in &records {
        put_old_record(con, &v2_key(&rec.id, None), rec);
        if rec.parent_id.is_none() {
            q(
                con,
                redis::cmd("ZADD")
                    .arg(format!("{{{NS}:p{}}}:roots", partition(&rec.id)))
                    .arg(rec.created_at_ms)
                    .arg(&rec.id),
            );
        }
    }
    let short: Vec<ThreadEntry> = ["first", "second", "third"]
        .iter()
        .map(|t| conformance::entry(t))
        .collect();
    let long: Vec<ThreadEntry> = (0..conformance::LONG_THREAD)
        .map(|i| conformance::entry(&format!("long {i}")))
        .collect();
    for (id, thread) in [("r-1", &short), ("w-1", &long)] {
        for e in thread {
            q(
                con,
                redis::cmd("XADD")
                    .arg(v2_key(id, Some("thread")))
                    .arg("*")
                    .arg("id")
                    .arg(e.id.to_string())
                    .arg("e")
                    .arg(encode(e).unwrap()),
            );
            q(
                con,
                redis::cmd("SADD")
                    .arg(v2_key(id, Some("eids")))
                    .arg(e.id.to_string()),
            );
        }
    }
    let pending = write_inbox_and_stream(con);
    Layout2 {
        records,
        short,
        long,
        pending,
    }
}

/// Writes, in the key names of layouts 2 and later, a pending inbox item of `c-1` with its
/// de-duplication window, a partition stream with its group and one entry pending with a dead
/// process; answers the inbox item.
fn write_inbox_and_stream<C: redis::ConnectionLike>(con: &mut C) -> Envelope {
    let pending = envelope("c-1", "waiting in the inbox");
    let id = pending.id.to_string();
    q(
        con,
        redis::cmd("ZADD")
            .arg(v2_key("c-1", Some("inbox")))
            .arg(1)
            .arg(&id),
    );
    q(
        con,
        redis::cmd("HSET")
            .arg(v2_key("c-1", Some("inboxdata")))
            .arg(&id)
            .arg(encode(&pending).unwrap()),
    );
    q(
        con,
        redis::cmd("ZADD")
            .arg(v2_key("c-1", Some("seen")))
            .arg(1)
            .arg(&id),
    );
    q(
        con,
        redis::cmd("SET").arg(v2_key("c-1", Some("seenseq"))).arg(1),
    );
    let stream = format!("{{{NS}:p{}}}:stream", partition("c-1"));
    q(
        con,
        redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&stream)
            .arg("agentd")
            .arg("0")
            .arg("MKSTREAM"),
    );
    q(
        con,
        redis::cmd("XADD")
            .arg(&stream)
            .arg("*")
            .arg("m")
            .arg(agentd_proto::codec::encode_envelope(&envelope("c-1", "read")).unwrap()),
    );
    read_by_a_dead_process(con, &stream, &format!("{{{NS}:members}}"));
    pending
}

/// Writes layout version 3 as its code did: the layout key, records as one string each,
/// threads as lists of `<id> <entry>` pairs, a set of entry ids beside the long one, and
/// [`write_inbox_and_stream`]'s inbox item and stream.
fn write_layout_3<C: redis::ConnectionLike>(con: &mut C) -> Layout2 {
    q(
        con,
        redis::cmd("HSET")
            .arg(format!("{{{NS}:layout}}"))
            .arg("version")
            .arg(3)
            .arg("partitions")
            .arg(PARTITIONS)
            .arg("state")
            .arg("ready"),
    );
    q(
        con,
        redis::cmd("SET")
            .arg(format!("{NS}:p:{{0}}"))
            .arg("agentd key layout 3"),
    );
    let records = vec![
        conformance::record("r-1", None, 10),
        conformance::record("c-1", Some("r-1"), 11),
        conformance::bare_record("w-1"),
    ];
    for rec in &records {
        q(
            con,
            redis::cmd("SET")
                .arg(v2_key(&rec.id, None))
                .arg(encode(rec).unwrap()),
        );
        if rec.parent_id.is_none() {
            q(
                con,
                redis::cmd("ZADD")
                    .arg(format!("{{{NS}:p{}}}:roots", partition(&rec.id)))
                    .arg(rec.created_at_ms)
                    .arg(&rec.id),
            );
        }
    }
    let short: Vec<ThreadEntry> = ["first", "second", "third"]
        .iter()
        .map(|t| conformance::entry(t))
        .collect();
    let long: Vec<ThreadEntry> = (0..conformance::LONG_THREAD)
        .map(|i| conformance::entry(&format!("long {i}")))
        .collect();
    for (id, thread) in [("r-1", &short), ("w-1", &long)] {
        for e in thread {
            q(
                con,
                redis::cmd("RPUSH")
                    .arg(v2_key(id, Some("thread")))
                    .arg(e.id.as_bytes().as_slice())
                    .arg(encode(e).unwrap()),
            );
        }
    }
    for e in &long {
        q(
            con,
            redis::cmd("SADD")
                .arg(v2_key("w-1", Some("eids")))
                .arg(e.id.as_bytes().as_slice()),
        );
    }
    let pending = write_inbox_and_stream(con);
    Layout2 {
        records,
        short,
        long,
        pending,
    }
}

/// Reads back through this version's store everything [`write_layout_2`] wrote, and checks
/// that threads still take each entry once.
async fn read_back_layout_2<C: redis::ConnectionLike>(
    target: &RedisTarget,
    con: &mut C,
    earlier: &Layout2,
) {
    let store = RedisStore::connect_to(target, NS, PARTITIONS)
        .await
        .unwrap();
    for rec in &earlier.records {
        assert_eq!(store.get_agent(&rec.id).await.unwrap().as_ref(), Some(rec));
        let kind: String = redis::cmd("TYPE")
            .arg(v2_key(&rec.id, None))
            .query(con)
            .unwrap();
        assert_eq!(kind, "string", "the record of {}", rec.id);
    }
    let roots: Vec<String> = store
        .list_roots()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(roots, vec!["w-1", "r-1"], "oldest first");
    assert_eq!(store.thread("r-1").await.unwrap(), earlier.short);
    assert_eq!(store.thread("w-1").await.unwrap(), earlier.long);
    for (id, thread) in [("r-1", &earlier.short), ("w-1", &earlier.long)] {
        let kind: String = redis::cmd("TYPE")
            .arg(v2_key(id, Some("thread")))
            .query(con)
            .unwrap();
        assert_eq!(kind, "list", "the thread of {id}");
        for e in [
            &thread[0],
            &thread[thread.len() / 2],
            &thread[thread.len() - 1],
        ] {
            assert!(!store.append(id, e).await.unwrap(), "{id}: appended once");
        }
    }
    let later = conformance::entry("after the move");
    assert!(store.append("w-1", &later).await.unwrap());
    assert!(!store.append("w-1", &later).await.unwrap());
    assert_eq!(
        store.thread("w-1").await.unwrap(),
        [earlier.long.clone(), vec![later]].concat()
    );
    assert_eq!(
        store.inbox_pending("c-1").await.unwrap(),
        vec![earlier.pending.clone()]
    );
    assert!(!store.inbox_push("c-1", &earlier.pending).await.unwrap());
    let stream = format!("{{{NS}:p{}}}:stream", partition("c-1"));
    let pending: redis::streams::StreamPendingReply = redis::cmd("XPENDING")
        .arg(&stream)
        .arg("agentd")
        .query(con)
        .unwrap();
    assert_eq!(pending.count(), 1, "the partition stream is untouched");
    let version: String = redis::cmd("HGET")
        .arg(format!("{{{NS}:layout}}"))
        .arg("version")
        .query(con)
        .unwrap();
    assert_eq!(version, agentd_store::LAYOUT_VERSION.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentd_migrate_moves_layout_2_to_compact_threads_and_records_once() {
    let server = RedisServer::start();
    let mut con = server.client();
    let earlier = write_layout_2(&mut con);
    let before: usize = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(v2_key("r-1", Some("thread")))
        .query(&mut con)
        .unwrap();

    // This version does not run on layout 2: it says to migrate; nor does the migration while
    // a process of layout 2 is live.
    let err = RedisStore::connect(&server.url(), NS, PARTITIONS)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("version 2") && err.contains("agentd migrate"),
        "{err}"
    );
    let (ok, out) = agentd(&server, &["check-config"]);
    assert!(!ok && out.contains("agentd migrate"), "{out}");
    refuses_live_processes_and_other_partition_counts(
        &server,
        &mut con,
        &format!("{{{NS}:members}}"),
    )
    .await;

    // Two threads and three records rewritten.
    let (ok, out) = agentd(&server, &["migrate"]);
    assert!(
        ok && out.contains("5 threads and records rewritten"),
        "{out}"
    );
    let after: usize = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(v2_key("r-1", Some("thread")))
        .query(&mut con)
        .unwrap();
    assert!(
        after < before / 4,
        "a short thread: {before} → {after} bytes"
    );
    for id in ["r-1", "w-1"] {
        let eids: usize = redis::cmd("EXISTS")
            .arg(v2_key(id, Some("eids")))
            .query(&mut con)
            .unwrap();
        assert_eq!(eids, 0, "the id set of {id}'s stream is dropped");
    }
    read_back_layout_2(&RedisTarget::single(server.url()), &mut con, &earlier).await;

    // Once: a second run changes nothing.
    let (ok, out) = agentd(&server, &["migrate"]);
    assert!(ok && out.contains("nothing to do"), "{out}");
    assert_eq!(
        RedisStore::connect(&server.url(), NS, PARTITIONS)
            .await
            .unwrap()
            .thread("r-1")
            .await
            .unwrap(),
        earlier.short
    );
}

/// Layout 3's sets of entry ids are dropped (an agentd of this version keeps none, so one of
/// version 3 would read them stale: it is refused on the migrated namespace by the version),
/// and nothing else changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentd_migrate_drops_layout_3s_entry_id_sets_and_loses_nothing() {
    let server = RedisServer::start();
    let mut con = server.client();
    let earlier = write_layout_3(&mut con);
    let err = RedisStore::connect(&server.url(), NS, PARTITIONS)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("version 3") && err.contains("agentd migrate"),
        "{err}"
    );
    let (ok, out) = agentd(&server, &["migrate"]);
    assert!(ok, "{out}");
    let eids: usize = redis::cmd("EXISTS")
        .arg(v2_key("w-1", Some("eids")))
        .query(&mut con)
        .unwrap();
    assert_eq!(eids, 0, "the long thread's id set is dropped");
    read_back_layout_2(&RedisTarget::single(server.url()), &mut con, &earlier).await;
    let (ok, out) = agentd(&server, &["migrate"]);
    assert!(ok && out.contains("nothing to do"), "{out}");
}

/// A move from layout 2 cut off midway (the layout key saying so, one thread and one record
/// rewritten, a list of another thread half built beside its stream) is refused at start and
/// finished by running it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_2_migration_cut_off_is_finished_by_running_it_again() {
    let server = RedisServer::start();
    let mut con = server.client();
    let earlier = write_layout_2(&mut con);
    q(
        &mut con,
        redis::cmd("HSET")
            .arg(format!("{{{NS}:layout}}"))
            .arg("version")
            .arg(agentd_store::LAYOUT_VERSION)
            .arg("state")
            .arg("migrating"),
    );
    // r-1's thread and record as the cut-off run left them.
    q(
        &mut con,
        redis::cmd("DEL").arg(v2_key("r-1", Some("thread"))),
    );
    q(&mut con, redis::cmd("DEL").arg(v2_key("r-1", Some("eids"))));
    for e in &earlier.short {
        q(
            &mut con,
            redis::cmd("RPUSH")
                .arg(v2_key("r-1", Some("thread")))
                .arg(e.id.as_bytes().as_slice())
                .arg(encode(e).unwrap()),
        );
    }
    q(&mut con, redis::cmd("DEL").arg(v2_key("r-1", None)));
    q(
        &mut con,
        redis::cmd("SET")
            .arg(v2_key("r-1", None))
            .arg(encode(&earlier.records[0]).unwrap()),
    );
    // w-1's list half built.
    for e in &earlier.long[..10] {
        q(
            &mut con,
            redis::cmd("RPUSH")
                .arg(format!("{}:rewriting", v2_key("w-1", Some("thread"))))
                .arg(e.id.as_bytes().as_slice())
                .arg(encode(e).unwrap()),
        );
    }
    let err = RedisStore::connect(&server.url(), NS, PARTITIONS)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("run `agentd migrate` again"), "{err}");
    let done = RedisStore::migrate(&server.url(), NS, PARTITIONS, 2_000)
        .await
        .unwrap();
    assert!(
        matches!(
            done,
            agentd_store::Migrated::Moved {
                agents: 0,
                rewritten: 3,
                ..
            }
        ),
        "{done:?}"
    );
    read_back_layout_2(&RedisTarget::single(server.url()), &mut con, &earlier).await;
    let left: usize = redis::cmd("EXISTS")
        .arg(format!("{}:rewriting", v2_key("w-1", Some("thread"))))
        .query(&mut con)
        .unwrap();
    assert_eq!(left, 0);
}

/// On a Redis Cluster (where layout 2 may have run, layout 1 never did) the migration finds
/// the agents' keys on every master and moves them the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentd_migrate_moves_layout_2_on_a_redis_cluster() {
    let cluster = agentd_tests::RedisCluster::start();
    let mut con = cluster.client();
    let earlier = write_layout_2(&mut con);
    let target = RedisTarget::cluster(cluster.urls());
    let err = RedisStore::connect_to(&target, NS, PARTITIONS)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("agentd migrate"), "{err}");
    let done = RedisStore::migrate_on(&target, NS, PARTITIONS, 2_000)
        .await
        .unwrap();
    assert!(
        matches!(
            done,
            agentd_store::Migrated::Moved {
                agents: 0,
                rewritten: 5,
                ..
            }
        ),
        "{done:?}"
    );
    read_back_layout_2(&target, &mut con, &earlier).await;
    assert_eq!(
        RedisStore::migrate_on(&target, NS, PARTITIONS, 2_000)
            .await
            .unwrap(),
        agentd_store::Migrated::AlreadyDone
    );
}
