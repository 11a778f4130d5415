//! `agentd migrate`: a namespace written in an earlier Redis key layout — version 1, every
//! agent's keys under its own hash tag; version 2, partition-tagged keys with threads in
//! streams and records in hashes; or version 3, this one with a set of entry ids beside each
//! long thread — is moved to this one (threads as lists, records as one string, no id sets),
//! once, with nothing lost; this version refuses to run on an unmigrated namespace, and the
//! earlier code's first command at its start fails on a migrated one.
//!
//! The earlier layouts are written here with their key names spelled out, as the earlier code
//! wrote them, not with any of this version's code.

use agentd_actors::{AgentRecords, Checkpoints, Inboxes, Threads, ToolCalls, Tree};
use agentd_proto::codec::encode;
use agentd_proto::{
    AgentStatus, Checkpoint, Envelope, ThreadEntry, ToolCallRecord, ToolCallStatus, ToolKind,
};
use agentd_store::{RedisStore, RedisTarget, conformance};
use agentd_tests::RedisServer;
use agentd_tests::process::binary;
use redis::Connection;
use std::process::Command;

const NS: &str = "old";
const PARTITIONS: u32 = 4;

/// The earlier layout's partition of an agent (as this version's: the formula did not change).
fn partition(id: &str) -> u32 {
    agentd_store::partition_index(id, PARTITIONS)
}

/// What the earlier namespace holds, to be read back after the move.
struct Earlier {
    records: Vec<agentd_proto::AgentRecord>,
    thread: Vec<ThreadEntry>,
    pending: Envelope,
    checkpoint: Checkpoint,
    call: ToolCallRecord,
}

fn q<C: redis::ConnectionLike>(con: &mut C, cmd: &mut redis::Cmd) {
    let _: redis::Value = cmd.query(con).unwrap();
}

/// Writes `rec` as layouts 1 and 2 kept a record: a hash of its MessagePack and the fields
/// listings read.
fn put_old_record<C: redis::ConnectionLike>(
    con: &mut C,
    key: &str,
    rec: &agentd_proto::AgentRecord,
) {
    q(
        con,
        redis::cmd("HSET")
            .arg(key)
            .arg("rec")
            .arg(encode(rec).unwrap())
            .arg("status")
            .arg(rec.status.as_str())
            .arg("title")
            .arg(&*rec.title)
            .arg("type")
            .arg(&*rec.agent_type)
            .arg("parent")
            .arg(rec.parent_id.as_deref().unwrap_or("")),
    );
}

fn envelope(to: &str, text: &str) -> Envelope {
    Envelope::new(
        agentd_proto::Address::System,
        agentd_proto::Address::agent(to),
        agentd_proto::Item::Inbox(agentd_proto::InboxItem::message(text)),
        1,
    )
}

/// Writes a root `r-1` with a thread, checkpoint, children (`c-1`, and worker `w-1` under an
/// alias) and a dependent; `c-1` with a pending inbox item and its de-duplication window; a
/// service tool call; the roots index; partition streams with consumer group `agentd`, one
/// entry pending with a dead process and one unread; a dead process's heartbeat and lease.
fn write_earlier_layout(con: &mut Connection) -> Earlier {
    let records = vec![
        conformance::record("r-1", None, 10),
        conformance::record("c-1", Some("r-1"), 11),
        conformance::record("w-1", Some("r-1"), 12),
    ];
    for rec in &records {
        put_old_record(con, &format!("{NS}:agent:{{{}}}", rec.id), rec);
    }
    let thread: Vec<ThreadEntry> = ["first", "second", "third"]
        .iter()
        .map(|t| conformance::entry(t))
        .collect();
    for e in &thread {
        q(
            con,
            redis::cmd("XADD")
                .arg(format!("{NS}:agent:{{r-1}}:thread"))
                .arg("*")
                .arg("id")
                .arg(e.id.to_string())
                .arg("e")
                .arg(encode(e).unwrap()),
        );
        q(
            con,
            redis::cmd("SADD")
                .arg(format!("{NS}:agent:{{r-1}}:eids"))
                .arg(e.id.to_string()),
        );
    }
    for (n, child) in ["c-1", "w-1"].iter().enumerate() {
        q(
            con,
            redis::cmd("ZADD")
                .arg(format!("{NS}:agent:{{r-1}}:children"))
                .arg(n + 1)
                .arg(*child),
        );
    }
    q(
        con,
        redis::cmd("SET")
            .arg(format!("{NS}:agent:{{r-1}}:childseq"))
            .arg(2),
    );
    q(
        con,
        redis::cmd("HSET")
            .arg(format!("{NS}:agent:{{r-1}}:workers"))
            .arg("Ops\x1fa1")
            .arg("w-1"),
    );
    q(
        con,
        redis::cmd("SADD")
            .arg(format!("{NS}:agent:{{r-1}}:dependents"))
            .arg("c-1"),
    );
    let checkpoint = Checkpoint {
        id: agentd_proto::ids::new_id(),
        agent_id: "r-1".into(),
        reason: agentd_proto::CheckpointReason::Auto,
        trigger: "phase 1 complete".into(),
        created_at_ms: 5,
        status: AgentStatus::Running,
        phase: Some(1),
        current_step: None,
        progress: Some(0.5),
        conversation: thread.clone(),
        pending: vec![envelope("r-1", "pending at the checkpoint")],
        environment: [("K".to_string(), "v".to_string())].into(),
        usage: agentd_proto::Usage::default(),
        cost_usd: 0.0,
        turns: 1,
        cli_session_id: None,
    };
    q(
        con,
        redis::cmd("LPUSH")
            .arg(format!("{NS}:agent:{{r-1}}:checkpoints"))
            .arg(encode(&checkpoint).unwrap()),
    );
    let pending = envelope("c-1", "waiting in the inbox");
    let id = pending.id.to_string();
    q(
        con,
        redis::cmd("ZADD")
            .arg(format!("{NS}:agent:{{c-1}}:inbox"))
            .arg(1)
            .arg(&id),
    );
    q(
        con,
        redis::cmd("HSET")
            .arg(format!("{NS}:agent:{{c-1}}:inboxdata"))
            .arg(&id)
            .arg(encode(&pending).unwrap()),
    );
    q(
        con,
        redis::cmd("ZADD")
            .arg(format!("{NS}:agent:{{c-1}}:seen"))
            .arg(1)
            .arg(&id),
    );
    q(
        con,
        redis::cmd("SET")
            .arg(format!("{NS}:agent:{{c-1}}:seenseq"))
            .arg(1),
    );
    q(
        con,
        redis::cmd("ZADD")
            .arg(format!("{NS}:roots"))
            .arg(10)
            .arg("r-1"),
    );
    let call = ToolCallRecord {
        call_id: uuid::Uuid::from_u128(0x7c01),
        agent_id: "c-1".into(),
        root_id: "r-1".into(),
        tool: "lookup_order".into(),
        kind: ToolKind::Service,
        arguments: serde_json::json!({"order_id": "A-1"}),
        status: ToolCallStatus::Pending,
        requested_at_ms: 1_001,
        deadline_ms: Some(60_000),
        model_call_id: "call_1".into(),
        published: true,
        answer: None,
        reason: None,
        closed_at_ms: None,
    };
    q(
        con,
        redis::cmd("HSET")
            .arg(format!("{NS}:{{tool_calls}}"))
            .arg(call.call_id.to_string())
            .arg(serde_json::to_vec(&call).unwrap()),
    );
    q(
        con,
        redis::cmd("HSET")
            .arg(format!("{NS}:{{tool_calls}}:status"))
            .arg(call.call_id.to_string())
            .arg("pending"),
    );
    for k in 0..PARTITIONS {
        q(
            con,
            redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(format!("{NS}:p:{{{k}}}"))
                .arg("agentd")
                .arg("0")
                .arg("MKSTREAM"),
        );
    }
    // In c-1's partition: one entry a dead process read and never acknowledged, one unread.
    let stream = format!("{NS}:p:{{{}}}", partition("c-1"));
    for text in ["read, not acknowledged", "not read yet"] {
        q(
            con,
            redis::cmd("XADD")
                .arg(&stream)
                .arg("*")
                .arg("m")
                .arg(agentd_proto::codec::encode_envelope(&envelope("c-1", text)).unwrap()),
        );
    }
    read_by_a_dead_process(con, &stream, &format!("{NS}:members"));
    q(
        con,
        redis::cmd("SET")
            .arg(format!("{NS}:lease:{{0}}"))
            .arg("dead-proc"),
    );
    Earlier {
        records,
        thread,
        pending,
        checkpoint,
        call,
    }
}

/// `agentd <args>` on namespace `NS` of `server`: whether it succeeded, and what it wrote.
fn agentd(server: &RedisServer, args: &[&str]) -> (bool, String) {
    let out = Command::new(binary("agentd"))
        .args(args)
        .env("AGENTD__REDIS__URL", server.url())
        .env("AGENTD__REDIS__NAMESPACE", NS)
        .env("AGENTD__REDIS__PARTITIONS", PARTITIONS.to_string())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Leaves one entry of `stream` read and unacknowledged by `dead-proc`, a process that last
/// beat long ago in `members`: what a process killed mid-delivery leaves for a migration.
fn read_by_a_dead_process<C: redis::ConnectionLike>(con: &mut C, stream: &str, members: &str) {
    q(
        con,
        redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("agentd")
            .arg("dead-proc")
            .arg("COUNT")
            .arg(1)
            .arg("STREAMS")
            .arg(stream)
            .arg(">"),
    );
    q(
        con,
        redis::cmd("ZADD").arg(members).arg(1_000).arg("dead-proc"),
    );
}

/// `agentd migrate` refuses while a process is live in `members` (the members key of the
/// layout being moved), and a migration with another partition count than the namespace's.
async fn refuses_live_processes_and_other_partition_counts<C: redis::ConnectionLike>(
    server: &RedisServer,
    con: &mut C,
    members: &str,
) {
    q(
        con,
        redis::cmd("ZADD")
            .arg(members)
            .arg(now_ms())
            .arg("live-proc"),
    );
    let (ok, out) = agentd(server, &["migrate"]);
    assert!(!ok && out.contains("live-proc"), "{out}");
    q(con, redis::cmd("ZREM").arg(members).arg("live-proc"));
    let err = RedisStore::migrate(&server.url(), NS, 8, 2_000)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("redis.partitions = 4"), "{err}");
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentd_migrate_moves_the_earlier_layout_once_and_loses_nothing() {
    let server = RedisServer::start();
    let mut con = server.client();
    let earlier = write_earlier_layout(&mut con);

    // This version does not run on the earlier layout: it says to migrate.
    let err = RedisStore::connect(&server.url(), NS, PARTITIONS)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("agentd migrate"), "{err}");
    let (ok, out) = agentd(&server, &["check-config"]);
    assert!(!ok && out.contains("agentd migrate"), "{out}");

    // Not while a process is live on the namespace, nor with another partition count.
    refuses_live_processes_and_other_partition_counts(&server, &mut con, &format!("{NS}:members"))
        .await;

    let (ok, out) = agentd(&server, &["migrate"]);
    assert!(
        ok && out.contains("3 agents") && out.contains("4 threads and records rewritten"),
        "{out}"
    );

    // Everything reads back through this version's store.
    let store = RedisStore::connect(&server.url(), NS, PARTITIONS)
        .await
        .unwrap();
    for rec in &earlier.records {
        assert_eq!(store.get_agent(&rec.id).await.unwrap().as_ref(), Some(rec));
    }
    let roots: Vec<String> = store
        .list_roots()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(roots, vec!["r-1"]);
    assert_eq!(store.thread("r-1").await.unwrap(), earlier.thread);
    // The thread is a list now, and an entry is still appended once.
    let kind: String = redis::cmd("TYPE")
        .arg(store.keys().agent_part("r-1", "thread"))
        .query(&mut con)
        .unwrap();
    assert_eq!(kind, "list");
    for e in &earlier.thread {
        assert!(!store.append("r-1", e).await.unwrap());
    }
    assert_eq!(store.children("r-1").await.unwrap(), vec!["c-1", "w-1"]);
    let aliases = store.aliases("r-1").await.unwrap();
    assert_eq!(aliases.len(), 1);
    assert_eq!(
        (
            aliases[0].worker_title.as_str(),
            aliases[0].alias.as_str(),
            aliases[0].child_id.as_str()
        ),
        ("Ops", "a1", "w-1")
    );
    assert_eq!(store.dependents("r-1").await.unwrap(), vec!["c-1"]);
    assert_eq!(
        store.checkpoints("r-1").await.unwrap(),
        vec![earlier.checkpoint.clone()]
    );
    assert_eq!(
        store.inbox_pending("c-1").await.unwrap(),
        vec![earlier.pending.clone()]
    );
    // The de-duplication window moved too: the pending envelope is not taken twice.
    assert!(!store.inbox_push("c-1", &earlier.pending).await.unwrap());
    assert_eq!(
        store.tool_call_get(earlier.call.call_id).await.unwrap(),
        Some(earlier.call.clone())
    );
    assert_eq!(
        store.tool_calls_open().await.unwrap(),
        vec![earlier.call.clone()]
    );
    // The partition stream moved with its group: one entry still pending, one unread.
    let keys = store.keys().clone();
    let stream = keys.partition(partition("c-1"));
    let len: usize = redis::cmd("XLEN").arg(&stream).query(&mut con).unwrap();
    assert_eq!(len, 2);
    let pending: redis::streams::StreamPendingReply = redis::cmd("XPENDING")
        .arg(&stream)
        .arg("agentd")
        .query(&mut con)
        .unwrap();
    assert_eq!(pending.count(), 1);
    // Nothing of the earlier layout is left but the string that stops its code.
    let mut left: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{NS}:*"))
        .query(&mut con)
        .unwrap();
    left.sort();
    assert_eq!(left, vec![format!("{NS}:p:{{0}}")]);

    // The earlier code's first command at its start fails on the migrated namespace.
    let old_start: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(format!("{NS}:p:{{0}}"))
        .arg("agentd")
        .arg("0")
        .arg("MKSTREAM")
        .query(&mut con);
    let old_start = old_start.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(old_start.contains("WRONGTYPE"), "{old_start}");

    // Once: a second run changes nothing.
    let (ok, out) = agentd(&server, &["migrate"]);
    assert!(ok && out.contains("nothing to do"), "{out}");
    assert_eq!(store.thread("r-1").await.unwrap(), earlier.thread);
}

/// A migration cut off midway (some keys moved, the layout still `migrating`) is refused by
/// this version at start and finished by running it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_cut_off_is_finished_by_running_it_again() {
    let server = RedisServer::start();
    let mut con = server.client();
    let earlier = write_earlier_layout(&mut con);
    let keys = agentd_store::Keys::new(NS, PARTITIONS);
    // What a cut-off run leaves: the layout key saying so, one agent's record moved.
    q(
        &mut con,
        redis::cmd("HSET")
            .arg(keys.layout())
            .arg("version")
            .arg(2)
            .arg("partitions")
            .arg(PARTITIONS)
            .arg("state")
            .arg("migrating"),
    );
    q(
        &mut con,
        redis::cmd("RENAME")
            .arg(format!("{NS}:agent:{{c-1}}"))
            .arg(keys.agent("c-1")),
    );
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
        matches!(done, agentd_store::Migrated::Moved { agents: 2, .. }),
        "{done:?}"
    );
    let store = RedisStore::connect(&server.url(), NS, PARTITIONS)
        .await
        .unwrap();
    for rec in &earlier.records {
        assert_eq!(store.get_agent(&rec.id).await.unwrap().as_ref(), Some(rec));
    }
    assert_eq!(
        store.inbox_pending("c-1").await.unwrap(),
        vec![earlier.pending]
    );
}

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
