//! Agents of two processes working together: Manage sync and async, dependencies across processes, calls that act on a live agent run where it lives, inspections, a worker's output through its parent's stream, rate limits and the outbox.

use super::*;

#[test]
fn manage_sync_and_async_across_two_processes() {
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    // A root owned by A.
    let root = loop {
        let id = a.spawn_with(json!({"agent_type": "lead"}));
        if a.partitions_owned().contains(&partition(&id)) {
            break id;
        }
    };
    // A worker thread whose partition B owns: aliases map to new child ids until one lands there.
    let mut worker = None;
    for i in 0..64 {
        let r = a
            .post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": format!("q{i}"), "threadAlias": format!("w{i}")}))
            .unwrap();
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(
            r["messages"],
            json!([format!("Findings for: q{i}")]),
            "sync answer, whichever process the worker is on"
        );
        let child = r["childThreadId"].as_str().unwrap().to_string();
        if b.partitions_owned().contains(&partition(&child)) {
            worker = Some((format!("w{i}"), child));
            break;
        }
    }
    let (alias, child) = worker.expect("a worker on B");
    assert!(
        b.get(&format!("/v1/agents/{child}"))["live"]
            .as_bool()
            .unwrap(),
        "the worker runs in B"
    );
    // Sync again on the same alias: same child thread, answered across processes.
    let r = a.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "sync again", "threadAlias": alias})).unwrap();
    assert_eq!(
        (r["childThreadId"].as_str(), r["created"].as_bool()),
        (Some(child.as_str()), Some(false))
    );
    assert_eq!(r["messages"], json!(["Findings for: sync again"]));
    // Async: three messages; the forwards come back to A's root in order.
    for n in 1..=3 {
        let r = a.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": format!("async {n}"), "threadAlias": alias, "mode": "async"})).unwrap();
        assert_eq!(r["status"], "sent");
    }
    a.wait_for("three forwards", |p| {
        p.texts(&root)
            .iter()
            .filter(|t| t.starts_with("From Researcher: "))
            .count()
            == 3
    });
    let forwards: Vec<String> = a
        .texts(&root)
        .into_iter()
        .filter(|t| t.starts_with("From Researcher: "))
        .collect();
    assert_eq!(
        forwards,
        vec![
            "From Researcher: Findings for: async 1",
            "From Researcher: Findings for: async 2",
            "From Researcher: Findings for: async 3"
        ]
    );
    // The worker deleted (its owner is B): A's root still remembers the alias's child, and its
    // next send finds the child gone on the way to B's partition, so the alias is resolved
    // again and a new worker answers.
    a.post(
        &format!("/v1/agents/{child}/control"),
        json!({"control": "delete"}),
    )
    .unwrap();
    let r = a.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "after the delete", "threadAlias": alias})).unwrap();
    assert_eq!(r["created"], true, "{r}");
    assert_ne!(r["childThreadId"].as_str(), Some(child.as_str()));
    assert_eq!(r["messages"], json!(["Findings for: after the delete"]));
}

/// A message for an agent that does not exist (never did, or was deleted) is refused with
/// `agent_not_found` by the process it is sent to, whichever process owns the agent's
/// partition, and nothing is appended to that partition's stream (the forward checks the
/// receiver's record in the same script as its append).
#[test]
fn a_message_for_an_agent_that_does_not_exist_is_refused_and_never_queued() {
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    let mut con = cluster.redis.client();
    // Entries ever appended (the stream itself is trimmed as entries are acknowledged).
    let stream_len = |con: &mut TestConnection, id: &str| -> u64 {
        entries_added(con, &keys().partition(partition(id)))
    };
    let refused = |id: &str| {
        let (status, body) = a
            .post(
                &format!("/v1/agents/{id}/messages"),
                json!({"text": "hello"}),
            )
            .expect_err("a message for a missing agent");
        assert_eq!(
            (status, body["code"].as_str()),
            (404, Some("agent_not_found")),
            "{body}"
        );
    };
    // Never existed: one id on B's partitions, one on A's (well-formed: a malformed id is
    // refused before any process is asked).
    let on = |p: &AgentdProcess| {
        (0u64..)
            .map(|i| format!("0190a5f2-7b6e-7cc0-8a4b-{i:012x}"))
            .find(|id| p.partitions_owned().contains(&partition(id)))
            .unwrap()
    };
    for id in [on(&b), on(&a)] {
        let before = stream_len(&mut con, &id);
        refused(&id);
        assert_eq!(stream_len(&mut con, &id), before, "nothing queued for {id}");
    }
    // Deleted: an agent B owns, deleted through A.
    let gone = loop {
        let id = a.spawn_with(json!({"agent_type": "lead"}));
        if b.partitions_owned().contains(&partition(&id)) {
            break id;
        }
    };
    a.post(
        &format!("/v1/agents/{gone}/control"),
        json!({"control": "delete"}),
    )
    .unwrap();
    let before = stream_len(&mut con, &gone);
    refused(&gone);
    assert_eq!(
        stream_len(&mut con, &gone),
        before,
        "nothing queued for the deleted agent"
    );
}

/// A root that process `p` owns.
fn root_on(p: &AgentdProcess, agent_type: &str) -> String {
    loop {
        let id = p.spawn_with(json!({"agent_type": agent_type}));
        if p.partitions_owned().contains(&partition(&id)) {
            return id;
        }
    }
}

/// An agent waiting for another (`depends_on`) hears that it completed even when the two are
/// owned by different processes: the news goes through the dependent's partition.
#[test]
fn a_dependency_completing_in_one_process_wakes_its_dependent_in_the_other() {
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    let lead = root_on(&a, "lead");
    let dependency = a
        .post(
            &format!("/v1/agents/{lead}/tools/spawn_agent"),
            json!({"agent_type": "coding", "prompt": "start"}),
        )
        .unwrap()["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (owner, other) = if a.partitions_owned().contains(&partition(&dependency)) {
        (&a, &b)
    } else {
        (&b, &a)
    };
    // A dependent the other process owns.
    let dependent = loop {
        let v = other
            .post(
                "/v1/agents",
                json!({"agent_type": "research", "depends_on": [dependency], "prompt": "after it"}),
            )
            .unwrap();
        let id = v["agent_id"].as_str().unwrap().to_string();
        if other.partitions_owned().contains(&partition(&id)) {
            break id;
        }
    };
    other.wait_for("the dependent waiting", |p| {
        p.status(&dependent) == "waiting_dependency"
    });
    owner
        .post(
            &format!("/v1/agents/{dependency}/messages"),
            json!({"text": "please yield"}),
        )
        .unwrap();
    other.wait_for(
        "the dependent's answer once its dependency completed",
        |p| {
            p.get(&format!("/v1/agents/{dependent}/thread"))
                .to_string()
                .contains("Findings for: after it")
        },
    );
    assert_eq!(owner.status(&dependency), "completed");
}

/// Dependents in one process of roots busy in the other: one is met once its root has
/// handled what was queued for it (the watch reached in the root's process, the news through
/// the dependent's partition), the other fails when its root is cancelled (announced by the
/// root's process, under `on_dependency_failure = "fail"`). The roots stay busy until the test
/// lets them go (a slow turn, cancelled or interrupted), however long the dependents take to
/// start on a loaded machine.
#[test]
fn busy_roots_in_one_process_meet_or_fail_their_dependents_in_the_other() {
    let cluster = Cluster::new().with("AGENTD__LIMITS__ON_DEPENDENCY_FAILURE", "fail".into());
    let (a, b) = cluster.balanced_pair();
    let met = root_on(&a, "research");
    let cancelled = root_on(&a, "research");
    for root in [&met, &cancelled] {
        a.post(
            &format!("/v1/agents/{root}/messages"),
            json!({"text": "take your time"}),
        )
        .unwrap();
    }
    let dependent_of = |dependency: &str| loop {
        let v = b
            .post(
                "/v1/agents",
                json!({"agent_type": "research", "depends_on": [dependency], "prompt": "after it"}),
            )
            .unwrap();
        let id = v["agent_id"].as_str().unwrap().to_string();
        if b.partitions_owned().contains(&partition(&id)) {
            break id;
        }
    };
    let (d1, d2) = (dependent_of(&met), dependent_of(&cancelled));
    b.wait_for("both dependents waiting", |p| {
        p.status(&d1) == "waiting_dependency" && p.status(&d2) == "waiting_dependency"
    });
    a.post(
        &format!("/v1/agents/{cancelled}/control"),
        json!({"control": "cancel"}),
    )
    .unwrap();
    b.wait_for("the dependent of the cancelled root failed", |p| {
        p.status(&d2) == "failed"
    });
    let view = b.get(&format!("/v1/agents/{d2}"));
    assert_eq!(
        view["status_reason"],
        format!("dependency_failed: {cancelled} cancelled"),
        "{view}"
    );
    assert_eq!(b.status(&d1), "waiting_dependency");
    a.post(
        &format!("/v1/agents/{met}/messages"),
        json!({"text": "now, please", "interrupt": true}),
    )
    .unwrap();
    b.wait_for("the other dependent's answer", |p| {
        p.texts(&d1).iter().any(|t| t == "Findings for: after it")
    });
    assert!(
        a.texts(&met)
            .iter()
            .any(|t| t == "Findings for: now, please")
    );
    assert!(!b.texts(&d2).iter().any(|t| t.starts_with("Findings")));
}

/// A root busy with a message it holds (read from its partition stream: not in its durable
/// inbox, its turn's start not yet written) is not taken for idle by a dependent spawned
/// meanwhile: the dependent waits until the root has handled what was queued for it.
#[test]
fn a_dependent_waits_for_a_root_busy_with_a_held_message() {
    let cluster = Cluster::new().with("AGENTD__REDIS__HOLD_MS", "20000".into());
    let (a, b) = cluster.balanced_pair();
    let root = root_on(&a, "research");
    // Sent through the process that does not own the root: the message travels the root's
    // partition stream, and the root holds it.
    b.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "take your time"}),
    )
    .unwrap();
    a.wait_for("the root busy", |p| p.status(&root) == "running");
    let stored = agentd_store::Keys::new(NS, PARTITIONS).agent(&root);
    let mut con = cluster.redis.client();
    let record: Option<Vec<u8>> = redis::cmd("GET").arg(&stored).query(&mut con).unwrap();
    let record: agentd_proto::AgentRecord = agentd_proto::codec::decode(&record.unwrap()).unwrap();
    assert_eq!(
        record.status,
        agentd_proto::AgentStatus::Idle,
        "the held turn's start is not written yet"
    );
    let dependent =
        b.spawn_with(json!({"agent_type": "research", "depends_on": [root], "prompt": "after it"}));
    b.wait_for("the dependent waiting", |p| {
        p.status(&dependent) == "waiting_dependency"
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(b.status(&dependent), "waiting_dependency");
    assert!(
        b.texts(&dependent)
            .iter()
            .all(|t| !t.starts_with("Findings"))
    );
}

#[test]
fn calls_that_act_on_a_live_agent_run_in_the_process_that_owns_it() {
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    let root = root_on(&a, "lead");
    // Manage through B for A's root: B hands the call to A, where the root's router lives and
    // the worker's reply arrives; the answer comes back to B's caller.
    let r = b
        .post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "via b", "threadAlias": "x"}))
        .unwrap();
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["messages"], json!(["Findings for: via b"]));
    // (The worker that answered may live on B; from here on, nothing new should.)
    let live_on_b = b.get("/v1/info")["live_agents"].as_u64().unwrap();
    // B's reply stream expires unless B lives on to renew it (a dead caller leaves nothing).
    let replies = keys().replies(b.get("/v1/info")["process_id"].as_str().unwrap());
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&replies)
        .query(&mut cluster.redis.client())
        .unwrap();
    assert!(ttl > 0, "{replies} has no expiry: {ttl}");
    // An error answered by the owner keeps its code on the way back.
    let (status, err) = b
        .post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Nobody", "message": "x", "threadAlias": "y"}))
        .unwrap_err();
    assert_eq!(
        (status, err["code"].as_str()),
        (400, Some("unknown_worker")),
        "{err}"
    );
    // Budget and environment set through B, then a turn of the root on A: A's live root holds
    // them (a second copy of the root on B would have written them, and A's next write lost them).
    b.post(
        &format!("/v1/agents/{root}/budget"),
        json!({"max_tokens": 123_456}),
    )
    .unwrap();
    b.post(
        &format!("/v1/agents/{root}/env"),
        json!({"env": {"REGION": "eu"}}),
    )
    .unwrap();
    a.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "hello"}),
    )
    .unwrap();
    a.wait_for("the root's answer", |p| {
        p.texts(&root).iter().any(|t| t == "ok")
    });
    let view = a.get(&format!("/v1/agents/{root}"));
    assert_eq!(view["budget"]["max_tokens"], 123_456, "{view}");
    assert_eq!(view["env"], json!(["REGION"]), "{view}");
    // A call larger than a partition takes is refused at once (the owner would dead-letter it).
    let big = "x".repeat(10_000);
    let (status, err) = b
        .post(
            &format!("/v1/agents/{root}/env"),
            json!({"env": {"BIG": big}}),
        )
        .unwrap_err();
    assert_eq!(
        (status, err["code"].as_str()),
        (413, Some("payload_too_large")),
        "{err}"
    );
    // A checkpoint through B is the live agent's (taken on A between two of its messages).
    let cp = b
        .post(&format!("/v1/agents/{root}/checkpoints"), json!({}))
        .unwrap();
    assert_eq!(cp["reason"], "manual", "{cp}");
    // Nothing of the root ever ran on B ...
    assert_eq!(b.get("/v1/info")["live_agents"].as_u64(), Some(live_on_b));
    // ... and B, asked about it, answers what A knows: it is live there.
    assert_eq!(a.get(&format!("/v1/agents/{root}"))["live"], true);
    assert_eq!(b.get(&format!("/v1/agents/{root}"))["live"], true);
}

/// Asked about an agent that lives in a process that does not answer (frozen here), a process
/// answers the stored view with what only the owner knows left unknown (`live: null`), not a
/// wrong `false`. Leases of 12 s (renewed every 4 s) keep the frozen process the owner for
/// longer than the 5 s the inspection waits for it.
#[test]
fn an_inspection_whose_owner_does_not_answer_shows_the_stored_view_with_liveness_unknown() {
    let cluster = Cluster::with_lease_ms(12_000);
    let (a, b) = cluster.balanced_pair();
    let root = root_on(&a, "lead");
    assert_eq!(b.get(&format!("/v1/agents/{root}"))["live"], true);
    a.signal("STOP");
    let started = Instant::now();
    let view = b.get(&format!("/v1/agents/{root}"));
    a.signal("CONT");
    assert!(view["live"].is_null(), "{view}");
    assert_eq!(view["agent_id"], root.as_str(), "{view}");
    assert!(started.elapsed() < Duration::from_secs(15));
}

/// A worker's output reaches its parent through the parent's partition stream also when one
/// process runs both (it leaves in the worker's store batch): an output that a process left
/// there when it died — the worker's item done, the parent not told yet — reaches the parent
/// from whichever process reads the partition next, instead of being lost with the process.
#[test]
fn a_workers_output_goes_through_the_parents_stream_and_survives_its_process() {
    let cluster = Cluster::new();
    let p = cluster.process();
    let mut con = cluster.redis.client();
    let root = root_on(&p, "lead");
    let stream = keys().partition(partition(&root));
    let outputs_to_root = |con: &mut TestConnection| -> Vec<Envelope> {
        read_stream(con, &stream)
            .iter()
            .filter_map(|b| decode_envelope(b, 1 << 20).ok())
            .filter(|e| matches!(e.item, Item::Output(_)) && e.to.agent_id() == Some(root.as_str()))
            .collect()
    };
    let r = p.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "local", "threadAlias": "w", "mode": "async"})).unwrap();
    assert_eq!(r["status"], "sent", "{r}");
    let worker = r["childThreadId"].as_str().unwrap().to_string();
    p.wait_for("the forward", |p| {
        p.texts(&root)
            .iter()
            .any(|t| t == "From Researcher: Findings for: local")
    });
    let outputs = outputs_to_root(&mut con);
    assert_eq!(outputs.len(), 1, "the output went through the stream");
    assert_eq!(outputs[0].from.agent_id(), Some(worker.as_str()));
    acknowledged_soon(&mut con, &stream);
    // The process dies with an output of the worker still in the stream, unread.
    p.kill9();
    let mut left = outputs[0].clone();
    left.id = uuid::Uuid::new_v4();
    left.causation_id = Some(uuid::Uuid::new_v4());
    left.item = Item::Output(agentd_proto::Output::Reply {
        text: "Findings for: left behind".into(),
    });
    xadd(&mut con, &stream, &encode_envelope(&left).unwrap());
    let q = cluster.process();
    q.wait_for("the output left behind", |q| {
        q.texts(&root)
            .iter()
            .any(|t| t == "From Researcher: Findings for: left behind")
    });
    acknowledged_soon(&mut con, &stream);
}

/// A 429 in one process closes its provider's gate for every process of the deployment: an
/// agent owned by the other process waits for the same reset without calling the provider.
#[test]
fn a_rate_limit_met_in_one_process_holds_the_provider_in_the_other() {
    let mut limited = agentd_tests::Canned::raw(429, "{\"error\": \"slow down\"}");
    limited.headers.push(("retry-after".into(), "30".into()));
    let provider = agentd_tests::MockHttp::start(vec![limited]);
    let cluster = Cluster::new()
        .without("AGENTD__MODEL__SCRIPT")
        .with("AGENTD__MODEL__BACKEND", "openai".into())
        .with("AGENTD__MODEL__BASE_URL", provider.url.clone())
        .with("AGENTD__MODEL__API_KEY_ENV", "AGENTD_TEST_KEY".into())
        .with("AGENTD_TEST_KEY", "test".into());
    let (a, b) = cluster.balanced_pair();
    let first = root_on(&a, "research");
    a.post(
        &format!("/v1/agents/{first}/messages"),
        json!({"text": "hello"}),
    )
    .unwrap();
    a.wait_for("the first agent rate-limited", |p| {
        p.status(&first) == "waiting_rate_limit"
    });
    let resume_at = a.get(&format!("/v1/agents/{first}"))["resume_at_ms"].clone();
    let second = root_on(&b, "research");
    b.post(
        &format!("/v1/agents/{second}/messages"),
        json!({"text": "hello"}),
    )
    .unwrap();
    b.wait_for("the second agent held by the shared gate", |p| {
        p.status(&second) == "waiting_rate_limit"
    });
    assert_eq!(
        provider.requests().len(),
        1,
        "the second agent never called"
    );
    let held_until = b.get(&format!("/v1/agents/{second}"))["resume_at_ms"].clone();
    let (x, y) = (resume_at.as_u64().unwrap(), held_until.as_u64().unwrap());
    assert!(x.abs_diff(y) < 1_000, "the same reset: {x} and {y}");
}

/// A child's output for a parent in another partition is written by the child's flush into the
/// child's partition's outbox (with the done mark of the item it answers, in one script), then
/// appended to the parent's partition as a command of its own. One left in the outbox — its
/// process died between the two — is appended by the next owner of the child's partition when
/// it takes the partition, and taken out of the outbox.
#[test]
fn a_child_output_left_in_the_outbox_is_sent_on_by_the_next_owner() {
    let cluster = Cluster::new();
    let a = cluster.process();
    let parent = root_on(&a, "lead");
    a.stop();
    let child = (0..)
        .map(|i| format!("gone-child-{i}"))
        .find(|c| partition(c) != partition(&parent))
        .unwrap();
    let env = Envelope::new(
        Address::agent(&child),
        Address::agent(&parent),
        Item::Output(agentd_proto::Output::Reply {
            text: "left behind".into(),
        }),
        1,
    );
    let mut con = cluster.redis.client();
    let outbox = keys().outbox(partition(&child));
    let _: () = redis::cmd("HSET")
        .arg(&outbox)
        .arg(env.id.to_string())
        .arg(encode_envelope(&env).unwrap())
        .query(&mut con)
        .unwrap();
    let stream = keys().partition(partition(&parent));
    let before = entries_added(&mut con, &stream);
    let b = cluster.process();
    let line = b.wait_for_log("a child output left in the outbox sent on");
    assert!(line.contains(&env.id.to_string()), "{line}");
    eventually_blocking(Duration::from_secs(10), "the outbox to be empty", || {
        redis::cmd("HLEN")
            .arg(&outbox)
            .query::<u64>(&mut con)
            .is_ok_and(|n| n == 0)
    });
    assert_eq!(entries_added(&mut con, &stream), before + 1);
}

/// A fork made through one process whose partition the other owns is restored there: it holds
/// the copy, answers through either process, and the source is untouched.
#[test]
fn a_fork_made_in_one_process_lives_in_the_other() {
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    let source = root_on(&a, "research");
    a.post(
        &format!("/v1/agents/{source}/messages"),
        json!({"text": "tides"}),
    )
    .unwrap();
    a.wait_for("the source's answer", |p| {
        p.texts(&source).iter().any(|t| t == "Findings for: tides")
    });
    let copied = a.texts(&source);
    let fork = (0..40)
        .map(|_| {
            a.post(&format!("/v1/agents/{source}/fork"), json!({}))
                .unwrap()["agent_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .find(|id| b.partitions_owned().contains(&partition(id)))
        .expect("a fork in the other process's partitions");
    b.wait_for("the copy in the fork", |p| p.texts(&fork) == copied);
    assert_eq!(a.texts(&fork), copied);
    a.post(
        &format!("/v1/agents/{fork}/messages"),
        json!({"text": "currents"}),
    )
    .unwrap();
    b.wait_for("the fork's own answer", |p| {
        p.texts(&fork).iter().any(|t| t == "Findings for: currents")
    });
    assert_eq!(a.texts(&source), copied, "the source is untouched");
}
