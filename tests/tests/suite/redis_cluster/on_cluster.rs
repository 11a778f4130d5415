//! On a Redis Cluster (three masters, three replicas): one slot per command and script, Manage, commands, events and a `kill -9` takeover, a reshard under load, ASK redirections.

use super::*;

/// Every command, transaction and script the service sends touches one slot: two processes on a
/// redis-server in cluster mode (which refuses anything else with `CROSSSLOT`), with one
/// partition (the partition reader's one `XREADGROUP` spans every owned partition, which only
/// one partition keeps in one slot), do what crosses processes — messages and Manage calls
/// through the process that does not own the agents, async forwards, a command from the command
/// stream, a `kill -9` of the owner and the takeover with its claims.
#[test]
fn the_service_touches_one_slot_per_command_and_script_on_a_cluster_mode_redis() {
    let cluster = Cluster::on(TestRedis::Single(RedisServer::start_cluster_node()))
        .with("AGENTD__REDIS__PARTITIONS", "1".to_string());
    let a = cluster.process();
    a.wait_for("a to own the partition", |a| {
        a.partitions_owned().len() == 1
    });
    let b = cluster.process();
    // Through B, which owns nothing: a spawn, messages, Manage sync and async.
    let root = b.spawn_with(json!({"agent_type": "lead"}));
    b.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "hello"}),
    )
    .unwrap();
    let r = b.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "q", "threadAlias": "w"})).unwrap();
    assert_eq!(r["messages"], json!(["Findings for: q"]), "{r}");
    let r = b.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "later", "threadAlias": "w", "mode": "async"})).unwrap();
    assert_eq!(r["status"], "sent", "{r}");
    a.wait_for("the forward", |a| {
        a.texts(&root)
            .iter()
            .any(|t| t == "From Researcher: Findings for: later")
    });
    // A command from the command stream.
    send_by_command(&cluster, &a, &root);
    // The owner dies: B takes the partition, claims and drains it, and answers.
    a.kill9();
    b.wait_for("b to own the partition", |b| {
        b.partitions_owned().len() == 1
    });
    let answers = |b: &AgentdProcess| b.texts(&root).iter().filter(|t| *t == "ok").count();
    let before = answers(&b);
    b.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "after the takeover"}),
    )
    .unwrap();
    b.wait_for("the answer after the takeover", |b| answers(b) > before);
    assert!(dead_letters(&cluster).is_empty(), "nothing dead-lettered");
}

/// A cluster of agentd processes on a Redis Cluster of three masters and three replicas,
/// whatever `AGENTD_TEST_REDIS` says (so every run covers the cluster).
fn on_a_redis_cluster() -> Cluster {
    Cluster::on(TestRedis::Cluster(RedisCluster::start()))
}

/// The masters serving the test namespace's partitions, by port.
fn partition_masters(cluster: &Cluster) -> HashSet<u16> {
    let nodes = cluster.redis.cluster().expect("a Redis Cluster");
    (0..PARTITIONS)
        .map(|k| nodes.master_of(&keys().partition(k)).port)
        .collect()
}

/// On a real Redis Cluster (the partitions spread over its masters): a spawn, messages, Manage
/// sync and async across two processes, a command from the command stream, another process's
/// events on the event stream, and after a `kill -9` of one process the other takes its
/// partitions, claims and drains them, and answers; nothing is dead-lettered.
#[test]
fn manage_commands_events_and_a_kill_9_takeover_work_on_a_redis_cluster() {
    let cluster = on_a_redis_cluster();
    assert!(
        partition_masters(&cluster).len() > 1,
        "the partitions live on more than one master"
    );
    let (a, b) = cluster.balanced_pair();
    // A root on A, and Manage calls through B: a worker lands wherever its id hashes.
    let root = loop {
        let id = b.spawn_with(json!({"agent_type": "lead"}));
        if a.partitions_owned().contains(&partition(&id)) {
            break id;
        }
    };
    let events = follow_events(&b);
    b.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "hello"}),
    )
    .unwrap();
    let mut on_b = false;
    for i in 0..16 {
        let r = b.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": format!("q{i}"), "threadAlias": format!("w{i}")})).unwrap();
        assert_eq!(r["messages"], json!([format!("Findings for: q{i}")]), "{r}");
        let child = r["childThreadId"].as_str().unwrap().to_string();
        if b.partitions_owned().contains(&partition(&child)) {
            on_b = true;
            let r = a.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "later", "threadAlias": format!("w{i}"), "mode": "async"})).unwrap();
            assert_eq!(r["status"], "sent", "{r}");
            break;
        }
    }
    assert!(on_b, "a worker on B");
    a.wait_for("the forward from B's worker", |a| {
        a.texts(&root)
            .iter()
            .any(|t| t == "From Researcher: Findings for: later")
    });
    // A's events on B's event stream.
    loop {
        let e = events
            .recv_timeout(Duration::from_secs(10))
            .expect("A's events on B's stream");
        if e["type"] == "status_changed" && e["agent_id"] == root.as_str() && e["to"] == "idle" {
            break;
        }
    }
    // A command from the command stream, written by a cluster client.
    send_by_command(&cluster, &a, &root);
    // A dies: B takes every partition, claims and drains them, and answers.
    a.kill9();
    b.wait_for("all partitions on B", |b| {
        b.partitions_owned().len() == PARTITIONS as usize
    });
    let answers = |b: &AgentdProcess| b.texts(&root).iter().filter(|t| *t == "ok").count();
    let before = answers(&b);
    b.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "after the takeover"}),
    )
    .unwrap();
    b.wait_for("the answer after the takeover", |b| answers(b) > before);
    assert!(dead_letters(&cluster).is_empty(), "nothing dead-lettered");
}

/// Slots of live partitions move between masters (`redis-cli --cluster reshard`, keys and
/// consumer groups with them) while two processes take a stream of messages: the blocking
/// reads follow their slots (`MOVED`, `ASK`), scripts and pipelines are redirected, and every
/// message is taken once, in order, and answered once — before, during and after the move.
#[test]
fn a_reshard_under_load_moves_live_partitions_without_losing_or_doubling_a_message() {
    let cluster = on_a_redis_cluster();
    let nodes = cluster.redis.cluster().expect("a Redis Cluster");
    let (a, b) = cluster.balanced_pair();
    let agents: Vec<String> = (0..20)
        .map(|_| a.spawn_with(json!({"agent_type": "subagent"})))
        .collect();
    // A live partition and its master: `reshard` takes a master's slots from its lowest, so
    // moving every slot of that master up to the partition's moves it; of the agents'
    // partitions, the one that needs the fewest slots moved (a shorter reshard, well within
    // the load).
    let slots_up_to = |node: &agentd_tests::redis_cluster::ClusterNode, slot: u16| -> usize {
        node.slots
            .iter()
            .filter(|(lo, _)| *lo <= slot)
            .map(|(lo, hi)| usize::from((*hi).min(slot) - lo + 1))
            .sum()
    };
    let (moving, from, count) = agents
        .iter()
        .map(|id| {
            let moving = keys().partition(partition(id));
            let from = nodes.master_of(&moving);
            let count = slots_up_to(&from, agentd_store::slot(moving.as_bytes()));
            (moving, from, count)
        })
        .min_by_key(|(_, _, count)| *count)
        .expect("agents");
    let to = nodes
        .masters()
        .into_iter()
        .find(|n| n.id != from.id)
        .expect("another master");
    // The moving partition's agents get messages from a sender of their own for as long as the
    // reshard runs, each agent through one process (its order is one path's), half through
    // each; the other agents take the load meanwhile.
    let (movers, others): (Vec<String>, Vec<String>) = agents
        .iter()
        .cloned()
        .partition(|id| keys().partition(partition(id)) == moving);
    let resharding = std::sync::atomic::AtomicBool::new(true);
    let started = Instant::now();
    let (load, during) = std::thread::scope(|scope| {
        let poster = scope.spawn(|| {
            let mut sent = Vec::new();
            let mut n = 0;
            while resharding.load(std::sync::atomic::Ordering::SeqCst) {
                let i = n % movers.len();
                let id = &movers[i];
                let via = if i % 2 == 0 { &a } else { &b };
                let text = format!("msg during-{n}");
                let r = via.post(&format!("/v1/agents/{id}/messages"), json!({"text": text}));
                assert!(r.is_ok(), "{text} to {id} during the reshard: {r:?}");
                sent.push((id.clone(), text));
                n += 1;
            }
            sent
        });
        let load = drive_load(&a, &others, 2_000, || {
            nodes.reshard(&from, &to, count);
            resharding.store(false, std::sync::atomic::Ordering::SeqCst);
            eprintln!("resharded {count} slots in {:?}", started.elapsed());
        });
        (load, poster.join().unwrap())
    });
    eprintln!(
        "{} messages to the moving partition during the reshard; the load done in {:?}",
        during.len(),
        started.elapsed()
    );
    assert!(during.len() > 10, "messages while the partition moved");
    let mut sent = load;
    sent.extend(during);
    assert_eq!(
        nodes.master_of(&moving).id,
        to.id,
        "the partition's slot moved"
    );
    // And after the move: messages through both processes.
    for (n, id) in agents.iter().enumerate() {
        // Through the process each agent's earlier messages went through (one path, one order).
        let via = match movers.iter().position(|m| m == id) {
            Some(i) if i % 2 == 1 => &b,
            _ => &a,
        };
        let text = format!("msg after-{n}");
        via.post(&format!("/v1/agents/{id}/messages"), json!({"text": text}))
            .unwrap();
        sent.push((id.clone(), text));
    }
    every_message_once_in_order(&a, &agents, &sent);
    assert!(dead_letters(&cluster).is_empty(), "nothing dead-lettered");
}

/// A slot held halfway through its move, the state `redis-cli --cluster reshard` passes each
/// slot through: `MIGRATING` on its master, `IMPORTING` on the next, and one key — the
/// partition's stream — already moved. Its master answers `ASK` for the stream: the partition
/// reader reads it from the importing master (`ASKING`). The deliveries, scripts on the agent's
/// keys that are split between the two masters meanwhile, are answered `TRYAGAIN` and retried
/// until the move is finished; then they land, the acknowledgements follow the slot (`MOVED`),
/// and the partition goes on. Every message is taken once, in order.
#[test]
fn a_partition_whose_stream_is_caught_mid_move_is_read_through_ask_redirections() {
    let cluster = on_a_redis_cluster();
    let nodes = cluster.redis.cluster().expect("a Redis Cluster");
    let p = cluster.process();
    p.wait_for("p to own every partition", |p| {
        p.partitions_owned().len() == PARTITIONS as usize
    });
    let agent = p.spawn_with(json!({"agent_type": "subagent"}));
    let stream = keys().partition(partition(&agent));
    let slot = agentd_store::slot(stream.as_bytes());
    let from = nodes.master_of(&stream);
    let to = nodes
        .masters()
        .into_iter()
        .find(|n| n.id != from.id)
        .expect("another master");
    let mut sent = Vec::new();
    let send = |text: String, sent: &mut Vec<String>| {
        p.post(
            &format!("/v1/agents/{agent}/messages"),
            json!({"text": text}),
        )
        .unwrap();
        sent.push(text);
    };
    send("msg before".into(), &mut sent);
    let answered = |p: &AgentdProcess, sent: &[String]| {
        let texts = p.texts(&agent);
        sent.iter()
            .all(|t| texts.iter().any(|x| *x == format!("echo: {t}")))
    };
    p.wait_for("the answer before the move", |p| answered(p, &sent));
    // Halfway: the slot migrating, its stream on the importing master.
    let (mut source, mut target) = (nodes.node_client(from.port), nodes.node_client(to.port));
    let setslot = |con: &mut redis::Connection, state: &str, id: &str| {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(state)
            .arg(id)
            .query(con)
            .unwrap();
    };
    setslot(&mut target, "IMPORTING", &from.id);
    setslot(&mut source, "MIGRATING", &to.id);
    let migrate = |con: &mut redis::Connection, keys: &[String]| {
        let _: String = redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(to.port)
            .arg("")
            .arg(0)
            .arg(5_000)
            .arg("KEYS")
            .arg(keys)
            .query(con)
            .unwrap();
    };
    migrate(&mut source, std::slice::from_ref(&stream));
    // Messages on the stream (a cluster client follows the `ASK` itself), read from where it
    // is now.
    let mut con = cluster.redis.client();
    for n in 0..5 {
        let text = format!("msg asked {n}");
        let env = Envelope::new(
            Address::External { name: "t".into() },
            Address::agent(&agent),
            Item::Inbox(InboxItem::message(text.clone())),
            1,
        );
        xadd(&mut con, &stream, &encode_envelope(&env).unwrap());
        sent.push(text);
    }
    // The reader took them from the importing master: they are pending with it there. (Their
    // deliveries wait: a script on the agent's keys, some of which do not exist, is answered
    // `TRYAGAIN` until the slot has moved, and is retried meanwhile.)
    eventually_blocking(
        Duration::from_secs(10),
        "the entries read through ASK",
        || {
            let (_, pending): ((), redis::streams::StreamPendingReply) = redis::pipe()
                .cmd("ASKING")
                .cmd("XPENDING")
                .arg(&stream)
                .arg("agentd")
                .query(&mut target)
                .unwrap();
            pending.count() == 5
        },
    );
    // The move finished: the rest of the slot's keys, then the slot, to the new master.
    loop {
        let left: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100)
            .query(&mut source)
            .unwrap();
        if left.is_empty() {
            break;
        }
        migrate(&mut source, &left);
    }
    for node in nodes.masters() {
        setslot(&mut nodes.node_client(node.port), "NODE", &to.id);
    }
    nodes.wait_ok();
    assert_eq!(nodes.master_of(&stream).id, to.id);
    send("msg after".into(), &mut sent);
    let env = Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(&agent),
        Item::Inbox(InboxItem::message("msg moved")),
        1,
    );
    xadd(&mut con, &stream, &encode_envelope(&env).unwrap());
    sent.push("msg moved".into());
    p.wait_for("the answers after the move", |p| answered(p, &sent));
    let texts = p.texts(&agent);
    let inputs: Vec<&String> = texts.iter().filter(|t| t.starts_with("msg ")).collect();
    assert_eq!(
        inputs,
        sent.iter().collect::<Vec<_>>(),
        "each once, in order"
    );
    assert!(dead_letters(&cluster).is_empty(), "nothing dead-lettered");
    assert_eq!(pending(&mut con, &stream), 0, "nothing left pending");
}
