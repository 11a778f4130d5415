//! The command stream as a plain Redis client drives it: commands, their answers and their limits, redelivered entries applied once, dead letters, generated garbage.

use super::*;

/// The error codes of the entries in `<ns>:dead`, oldest first.
fn dead_codes(con: &mut TestConnection) -> Vec<String> {
    stream_entries(con, &format!("{NS}:dead"))
        .iter()
        .filter_map(|e| e.get::<String>("code"))
        .collect()
}

#[test]
fn an_outside_service_drives_agents_through_the_command_stream() {
    let cluster = Cluster::new();
    let p = cluster.process();
    let mut con = cluster.redis.client();
    // A plain Redis client and a MessagePack map, as a service in any language would write it.
    let spawn = json!({
        "v": 1, "id": "0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162",
        "from": {"type": "external", "name": "billing"}, "to": {"type": "system"},
        "reply_to": "billing:replies", "sent_at": 1,
        "item": {"kind": "command", "type": "spawn", "agent_type": "subagent", "prompt": "hello from billing"}
    });
    xadd(
        &mut con,
        &format!("{NS}:commands"),
        &rmp_serde::to_vec_named(&spawn).unwrap(),
    );
    let reply = eventually_blocking(Duration::from_secs(15), "a reply", || {
        let r = read_stream(&mut con, "billing:replies");
        r.first()
            .map(|first| decode_envelope(first, 1 << 20).unwrap())
    });
    assert_eq!(
        reply.correlation_id.map(|u| u.to_string()).as_deref(),
        Some("0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162")
    );
    let Item::Reply(r) = reply.item else {
        panic!("not a reply")
    };
    let agent_id = r.result.unwrap()["agent_id"].as_str().unwrap().to_string();
    // A follow-up message through the same stream, with the typed envelope this time.
    let mut send = Envelope::new(
        Address::External {
            name: "billing".into(),
        },
        Address::System,
        Item::Command(Command::Send {
            agent_id: agent_id.clone(),
            text: "second".into(),
            interrupt: false,
            idempotency_key: None,
        }),
        2,
    );
    send.reply_to = Some("billing:replies".into());
    xadd(
        &mut con,
        &format!("{NS}:commands"),
        &encode_envelope(&send).unwrap(),
    );
    p.wait_for("both answers", |p| {
        p.texts(&agent_id).iter().any(|t| t == "echo: second")
    });
    assert_eq!(
        p.texts(&agent_id),
        vec![
            "hello from billing",
            "echo: hello from billing",
            "second",
            "echo: second"
        ]
    );
    // Events: status changes and token usage of that agent are on <ns>:events.
    eventually_blocking(Duration::from_secs(10), "the agent's events", || {
        let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(format!("{NS}:events"))
            .arg("-")
            .arg("+")
            .query(&mut con)
            .unwrap();
        let kinds: HashSet<String> = reply
            .ids
            .iter()
            .filter(|e| e.get::<String>("agent_id").as_deref() == Some(agent_id.as_str()))
            .filter_map(|e| e.get::<String>("type"))
            .collect();
        if kinds.contains("spawned")
            && kinds.contains("status_changed")
            && kinds.contains("token_usage")
        {
            Ok(())
        } else {
            Err(format!("events missing: {kinds:?}"))
        }
    });
    // A command for an unknown agent answers an error reply, not silence.
    let bad = Envelope {
        reply_to: Some("billing:replies".into()),
        ..Envelope::new(
            Address::External {
                name: "billing".into(),
            },
            Address::System,
            Item::Command(Command::Inspect {
                agent_id: "01930000-0000-7000-8000-00000000dead".into(),
            }),
            3,
        )
    };
    xadd(
        &mut con,
        &format!("{NS}:commands"),
        &encode_envelope(&bad).unwrap(),
    );
    let last = eventually_blocking(Duration::from_secs(10), "an error reply", || {
        read_stream(&mut con, "billing:replies").get(2).cloned()
    });
    let env = decode_envelope(&last, 1 << 20).unwrap();
    let Item::Reply(r) = env.item else { panic!() };
    assert_eq!(r.error.unwrap().code.as_str(), "agent_not_found");
    let _ = SpawnRequest::default();
}

/// Writes a Manage sync call from `root` to its `Researcher`, whose script takes 30 s to
/// answer: the command waits for it (or for `timeout_ms`).
fn slow_manage_call(con: &mut TestConnection, root: &str, timeout_ms: u64) -> uuid::Uuid {
    command(
        con,
        Command::InvokeTool {
            agent_id: Some(root.to_string()),
            tool: "Manage".into(),
            args: json!({"command": "send_message", "worker": "Researcher", "message": "take your time", "threadAlias": "slow", "syncTimeoutMs": timeout_ms}),
        },
    )
}

/// `redis.commands_running` of the processes of the command tests.
const COMMANDS_RUNNING: usize = 4;

#[test]
fn a_waiting_command_holds_up_neither_other_agents_commands_nor_order_per_agent() {
    let cluster = Cluster::new().with(
        "AGENTD__REDIS__COMMANDS_RUNNING",
        COMMANDS_RUNNING.to_string(),
    );
    let p = cluster.process();
    let mut con = cluster.redis.client();
    let (busy, other) = (
        p.spawn_with(json!({"agent_type": "lead"})),
        p.spawn_with(json!({"agent_type": "lead"})),
    );
    // A Manage sync call whose worker takes 30 s, then more reads of the same root than the
    // process runs commands at once (they wait for it without taking running places), then a
    // read of another root.
    let slow = slow_manage_call(&mut con, &busy, 60_000);
    let same_agent = command(
        &mut con,
        Command::Inspect {
            agent_id: busy.clone(),
        },
    );
    for _ in 0..COMMANDS_RUNNING {
        command(
            &mut con,
            Command::Inspect {
                agent_id: busy.clone(),
            },
        );
    }
    let other_agent = command(&mut con, Command::Inspect { agent_id: other });
    wait_answered(
        &mut con,
        other_agent,
        "the other agent's command waited for the slow one",
    );
    let done = answered(&mut con);
    assert!(!done.contains(&slow), "the worker cannot have answered yet");
    assert!(
        !done.contains(&same_agent),
        "a command for the busy root ran before the one written before it"
    );
}

/// `redis.commands_running` bounds the commands a process runs at once: with one place, a
/// Manage sync call waiting for its worker holds up another root's read until it times out.
#[test]
fn commands_beyond_the_running_limit_wait_for_a_place() {
    let cluster = Cluster::new().with("AGENTD__REDIS__COMMANDS_RUNNING", "1".to_string());
    let p = cluster.process();
    let mut con = cluster.redis.client();
    let (busy, other) = (
        p.spawn_with(json!({"agent_type": "lead"})),
        p.spawn_with(json!({"agent_type": "lead"})),
    );
    let slow = slow_manage_call(&mut con, &busy, 3_000);
    let other_agent = command(&mut con, Command::Inspect { agent_id: other });
    std::thread::sleep(Duration::from_millis(1_500));
    assert!(
        answered(&mut con).is_empty(),
        "the other root's read ran beside the waiting call"
    );
    wait_answered(&mut con, other_agent, "the read never got the place back");
    assert!(
        answered(&mut con).contains(&slow),
        "the read ran once the call had timed out and answered"
    );
}

#[test]
fn an_entry_that_keeps_failing_with_a_store_error_is_dead_lettered_after_max_deliveries() {
    let cluster = Cluster::new();
    let p = cluster.process();
    let poisoned = p.spawn_with(json!({"agent_type": "subagent"}));
    // Another agent of the same partition: its messages must get through meanwhile.
    let neighbour = (0..200)
        .map(|_| p.spawn_with(json!({"agent_type": "subagent"})))
        .find(|id| partition(id) == partition(&poisoned))
        .expect("an agent on the same partition");
    let mut con = cluster.redis.client();
    // The poisoned agent's de-duplication set is made a string: its inbox write fails with
    // WRONGTYPE every time (Redis answers; this is no outage).
    let _: () = redis::cmd("SET")
        .arg(keys().agent_part(&poisoned, "seen"))
        .arg("not a sorted set")
        .query(&mut con)
        .unwrap();
    let stream = keys().partition(partition(&poisoned));
    let message = |to: &str, text: &str| {
        encode_envelope(&Envelope::new(
            Address::External { name: "t".into() },
            Address::agent(to),
            Item::Inbox(InboxItem::message(text)),
            1,
        ))
        .unwrap()
    };
    // A possible resend (a second attempt) is pushed to the agent's durable inbox, never held
    // in its entry: the push is what fails.
    let mut resend = Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(&poisoned),
        Item::Inbox(InboxItem::message("poison")),
        1,
    );
    resend.attempt = 2;
    xadd(&mut con, &stream, &encode_envelope(&resend).unwrap());
    xadd(&mut con, &stream, &message(&neighbour, "first"));
    p.wait_for("the neighbour's first message answered", |p| {
        p.texts(&neighbour).iter().any(|t| t == "echo: first")
    });
    eventually_blocking(
        Duration::from_secs(60),
        "the failing entry to be moved aside",
        || !dead_codes(&mut con).is_empty(),
    );
    assert_eq!(dead_codes(&mut con), vec!["store_error"]);
    // The partition goes on, and nothing is left pending.
    xadd(&mut con, &stream, &message(&neighbour, "second"));
    p.wait_for("the neighbour's second message answered", |p| {
        p.texts(&neighbour).iter().any(|t| t == "echo: second")
    });
    assert_eq!(pending(&mut con, &stream), 0, "nothing left pending");
    assert!(p.texts(&poisoned).is_empty());
}

#[test]
fn redelivered_entries_apply_once_and_bad_entries_go_to_dead_letters() {
    let cluster = Cluster::new();
    let p = cluster.process();
    let agent = p.spawn_with(json!({"agent_type": "subagent"}));
    let mut con = cluster.redis.client();
    let stream = keys().partition(partition(&agent));
    let env = Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(&agent),
        Item::Inbox(InboxItem::message("only once")),
        1,
    );
    let bytes = encode_envelope(&env).unwrap();
    xadd(&mut con, &stream, &bytes);
    xadd(&mut con, &stream, &bytes);
    // Bad entries on the same partition: garbage, oversize, unknown agent; then a good one.
    xadd(&mut con, &stream, b"\xc1 not msgpack");
    let big = Envelope::new(
        Address::System,
        Address::agent(&agent),
        Item::Inbox(InboxItem::message("x".repeat(10_000))),
        1,
    );
    xadd(&mut con, &stream, &encode_envelope(&big).unwrap());
    let ghost = Envelope::new(
        Address::System,
        Address::agent("no-such-agent"),
        Item::Inbox(InboxItem::message("boo")),
        1,
    );
    xadd(
        &mut con,
        &keys().partition(partition("no-such-agent")),
        &encode_envelope(&ghost).unwrap(),
    );
    let _: () = redis::cmd("XADD")
        .arg(&stream)
        .arg("*")
        .arg("other")
        .arg("field")
        .query::<String>(&mut con)
        .map(|_| ())
        .unwrap();
    let last = Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(&agent),
        Item::Inbox(InboxItem::message("marker")),
        1,
    );
    xadd(&mut con, &stream, &encode_envelope(&last).unwrap());
    p.wait_for("marker answered", |p| {
        p.texts(&agent).iter().any(|t| t == "echo: marker")
    });
    let texts = p.texts(&agent);
    assert_eq!(
        texts.iter().filter(|t| *t == "only once").count(),
        1,
        "{texts:?}"
    );
    assert_eq!(
        texts,
        vec!["only once", "echo: only once", "marker", "echo: marker"]
    );
    let mut codes = dead_codes(&mut con);
    codes.sort();
    assert_eq!(
        codes,
        vec![
            "agent_not_found",
            "bad_envelope",
            "bad_envelope",
            "payload_too_large"
        ]
    );
    // Everything was acknowledged: nothing pending in the group.
    assert_eq!(pending(&mut con, &stream), 0, "nothing left pending");
}

#[test]
fn generated_garbage_on_the_command_and_partition_streams_is_dead_lettered_or_handled() {
    use proptest::strategy::{Strategy, ValueTree};
    let cluster = Cluster::new();
    let p = cluster.process();
    let agent = p.spawn_with(json!({"agent_type": "subagent"}));
    let mut con = cluster.redis.client();
    let partition_stream = keys().partition(partition(&agent));
    let commands = format!("{NS}:commands");
    let valid = encode_envelope(&Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(&agent),
        Item::Inbox(InboxItem::message("valid")),
        1,
    ))
    .unwrap();
    // Random bytes, and valid envelopes with random bytes overwritten (mostly undecodable,
    // sometimes decodable with odd values).
    let garbage = proptest::prop_oneof![
        proptest::collection::vec(proptest::num::u8::ANY, 0..300),
        proptest::collection::vec((0..valid.len(), proptest::num::u8::ANY), 1..6).prop_map(
            move |flips| {
                let mut b = valid.clone();
                for (i, v) in flips {
                    b[i] = v;
                }
                b
            }
        ),
    ];
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let rss_before = rss_kib(p.pid());
    for round in 0..400 {
        let bytes = garbage.new_tree(&mut runner).unwrap().current();
        let stream = if round % 2 == 0 {
            &commands
        } else {
            &partition_stream
        };
        xadd(&mut con, stream, &bytes);
    }
    let marker = Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(&agent),
        Item::Inbox(InboxItem::message("marker")),
        1,
    );
    xadd(
        &mut con,
        &partition_stream,
        &encode_envelope(&marker).unwrap(),
    );
    p.wait_for("the marker after the garbage", |p| {
        p.texts(&agent).iter().any(|t| t == "echo: marker")
    });
    // Every entry was handled or dead-lettered, and acknowledged; the process is fine.
    eventually_blocking(Duration::from_secs(20), "no entries left pending", || {
        pending(&mut con, &commands) + pending(&mut con, &partition_stream) == 0
    });
    let dead: u64 = redis::cmd("XLEN")
        .arg(format!("{NS}:dead"))
        .query(&mut con)
        .unwrap();
    assert!(dead > 0, "undecodable entries are dead-lettered");
    assert!(dead <= 400);
    assert_eq!(p.get_status("/healthz", None).0, 200);
    let grown = rss_kib(p.pid()).saturating_sub(rss_before);
    assert!(grown < 64 * 1024, "memory grew by {grown} KiB");
}
