//! The first layout (a key per agent part, unpartitioned streams) moved to partitions: everything read back once, a cut-off migration finished by running it again, live processes and other partition counts refused.

use super::*;

/// What the earlier namespace holds, to be read back after the move.
struct Earlier {
    records: Vec<agentd_proto::AgentRecord>,
    thread: Vec<ThreadEntry>,
    pending: Envelope,
    checkpoint: Checkpoint,
    call: ToolCallRecord,
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
