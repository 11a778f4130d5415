//! Failover: `kill -9` of a partition owner, a frozen process, load across a kill, events and readiness while leases move, an entry read late by a process that lost its partition.

use super::*;

#[test]
fn kill_9_of_a_partition_owner_moves_its_agents_without_losing_or_doubling_messages() {
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    // Agents on both processes.
    let mut agents = Vec::new();
    while agents.len() < 6
        || !agents
            .iter()
            .any(|id: &String| b.partitions_owned().contains(&partition(id)))
    {
        agents.push(a.spawn_with(json!({"agent_type": "subagent"})));
    }
    let on_b: Vec<&String> = agents
        .iter()
        .filter(|id| b.partitions_owned().contains(&partition(id)))
        .collect();
    assert!(!on_b.is_empty());
    let mut sent: Vec<(String, String)> = Vec::new();
    let send = |n: usize, sent: &mut Vec<(String, String)>| {
        let id = agents[n % agents.len()].clone();
        let text = format!("msg {n}");
        let r = a.post(&format!("/v1/agents/{id}/messages"), json!({"text": text}));
        assert!(r.is_ok(), "{r:?}");
        sent.push((id, text));
    };
    for n in 0..30 {
        send(n, &mut sent);
    }
    b.kill9();
    for n in 30..60 {
        send(n, &mut sent);
    }
    // A takes over every partition and finishes everything, each message exactly once.
    a.wait_for("all partitions on A", |a| {
        a.partitions_owned().len() == PARTITIONS as usize
    });
    for (id, text) in &sent {
        a.wait_for(&format!("{text} answered"), |a| {
            a.texts(id).iter().any(|t| *t == format!("echo: {text}"))
        });
    }
    for id in &agents {
        let texts = a.texts(id);
        let mine: Vec<&String> = sent
            .iter()
            .filter(|(i, _)| i == id)
            .map(|(_, t)| t)
            .collect();
        for t in &mine {
            assert_eq!(
                texts.iter().filter(|x| x == t).count(),
                1,
                "{t} on {id}: {texts:?}"
            );
            assert_eq!(
                texts.iter().filter(|x| **x == format!("echo: {t}")).count(),
                1,
                "{t} answer on {id}"
            );
        }
        // Per-agent order is kept.
        let order: Vec<&String> = texts.iter().filter(|t| t.starts_with("msg ")).collect();
        assert_eq!(order, mine, "order on {id}");
    }
}

#[test]
fn events_of_every_process_reach_each_event_stream() {
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    let pb = b.partitions_owned();
    // An agent whose partition b owns: its events come from b, and show on a's stream.
    let on_b = (0..500)
        .map(|_| b.spawn_with(json!({"agent_type": "subagent"})))
        .find(|id| pb.contains(&partition(id)))
        .expect("an agent on one of b's partitions");
    // No pause after subscribing: a's tail rests while nobody listens, and must still pass on
    // everything published once the subscription is in place.
    let events = follow_events(&a);
    b.post(
        &format!("/v1/agents/{on_b}/messages"),
        json!({"text": "hello from b"}),
    )
    .unwrap();
    loop {
        let e = events
            .recv_timeout(Duration::from_secs(10))
            .expect("b's events on a's stream");
        if e["type"] == "status_changed" && e["agent_id"] == on_b.as_str() && e["to"] == "idle" {
            break;
        }
    }
}

/// Commands a redis-server has run so far (`INFO commandstats`, a script's own included).
fn commands_run(con: &mut redis::Connection) -> u64 {
    let stats: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    stats
        .lines()
        .filter_map(|l| {
            l.split_once("calls=")?
                .1
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[test]
fn readyz_asks_redis_nothing_and_stops_naming_a_partition_whose_lease_was_taken() {
    // A long lease: a lease round runs every few seconds only.
    let cluster = Cluster::with_lease_ms(60_000);
    let a = cluster.process();
    let (code, v) = a.get_status("/readyz", None);
    assert_eq!(code, 200, "{v}");
    let owned_by_a = v["partitions_owned"].as_array().unwrap().clone();
    assert_eq!(owned_by_a.len(), PARTITIONS as usize, "alone, it owns all");
    assert_eq!(v["partitions_degraded"], json!([]), "{v}");
    // A probe is answered from what the lease rounds learnt: 200 probes cost Redis next to
    // nothing (a lease round may run meanwhile), where a listing or a lease check per probe
    // would cost thousands of commands.
    if let TestRedis::Single(server) = &cluster.redis {
        let mut con = server.client();
        let before = commands_run(&mut con);
        for _ in 0..200 {
            assert_eq!(a.get_status("/readyz", None).0, 200);
        }
        let run = commands_run(&mut con) - before;
        assert!(run < 100, "200 probes made Redis run {run} commands");
    }
    // A lease taken away is noticed by the next renewal: no longer owned, still ready.
    let stolen = owned_by_a[0].as_u64().unwrap() as u32;
    let mut con = cluster.redis.client();
    let _: () = redis::cmd("SET")
        .arg(keys().lease(stolen))
        .arg("someone-else")
        .query(&mut con)
        .unwrap();
    eventually_blocking(
        Duration::from_secs(20),
        "the stolen partition no longer owned",
        || {
            let (code, v) = a.get_status("/readyz", None);
            code == 200
                && !v["partitions_owned"]
                    .as_array()
                    .unwrap()
                    .contains(&json!(stolen))
        },
    );
}

/// Two balanced processes and the load tests' agents (spawned through the first, spread over
/// both), with the number of messages to send: 2,000 across 20 agents per unit of
/// [`scale`].
fn load_cluster() -> (Cluster, AgentdProcess, AgentdProcess, Vec<String>, usize) {
    let s = scale();
    let (messages, n_agents) = (2_000 * s, (20 * s).min(1_000));
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    let agents: Vec<String> = (0..n_agents)
        .map(|_| a.spawn_with(json!({"agent_type": "subagent"})))
        .collect();
    assert!(
        agents
            .iter()
            .any(|id| b.partitions_owned().contains(&partition(id)))
    );
    (cluster, a, b, agents, messages)
}

#[test]
fn load_across_two_processes_with_a_kill_9_midway_keeps_every_message_once_in_order() {
    let (_cluster, a, b, agents, messages) = load_cluster();
    // All through `a`; `b` is killed 300 ms in.
    let sent = drive_load(&a, &agents, messages, move || b.kill9());
    a.wait_for("all partitions on a", |a| {
        a.partitions_owned().len() == PARTITIONS as usize
    });
    every_message_once_in_order(&a, &agents, &sent);
}

/// A process frozen (SIGSTOP) for longer than its leases wakes up to find its partitions
/// taken: it fences itself by its own clock (reads nothing and delivers nothing directly on a
/// stale lease), so the two never deliver to one agent at once; it then takes its share back.
#[test]
fn a_process_frozen_past_its_leases_neither_loses_nor_reorders_messages_when_it_wakes() {
    let (_cluster, a, b, agents, messages) = load_cluster();
    // Half through each process, so `b` also takes posts just before it freezes and right
    // after it wakes.
    let for_a: Vec<String> = agents.iter().step_by(2).cloned().collect();
    let for_b: Vec<String> = agents.iter().skip(1).step_by(2).cloned().collect();
    let frozen = std::sync::atomic::AtomicBool::new(false);
    let sent: Vec<(String, String)> = std::thread::scope(|scope| {
        let via_b = scope.spawn(|| {
            // `b`'s own sender pauses while `b` is frozen (its posts would just hang).
            let mut sent = Vec::new();
            for n in 0..messages / 4 {
                while frozen.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let id = for_b[n % for_b.len()].clone();
                let text = format!("msg b-{n}");
                let mut text_sent = text.clone();
                while let Err(e) =
                    b.post(&format!("/v1/agents/{id}/messages"), json!({"text": text}))
                {
                    eprintln!("post of {text} to {id} refused ({e:?}); sending it again");
                    text_sent = format!("{text} (retried)");
                    std::thread::sleep(Duration::from_millis(20));
                }
                sent.push((id, text_sent));
            }
            sent
        });
        let via_a = drive_load(&a, &for_a, messages * 3 / 4, || {
            frozen.store(true, std::sync::atomic::Ordering::SeqCst);
            b.signal("STOP");
            // Past b's leases and its membership: a takes every partition meanwhile.
            std::thread::sleep(Duration::from_millis(3_500));
            b.signal("CONT");
            frozen.store(false, std::sync::atomic::Ordering::SeqCst);
        });
        let mut all = via_a;
        all.extend(via_b.join().unwrap());
        all
    });
    wait_balanced(&a, &b, PARTITIONS);
    every_message_once_in_order(&a, &agents, &sent);
    assert_eq!(b.get_status("/readyz", None).0, 200, "b serves again");
}

/// An entry that a process which lost its partition read late (a read it had sent before it
/// stalled, answered after the new owner had claimed what it left) is pending with that
/// process, and the owner's own reads never return it: the owner claims it before it delivers
/// anything newer from that partition, so it is neither lost nor overtaken. Here a consumer of
/// a process that is gone reads an entry while the owner is paused for a moment (well within
/// its lease, so it keeps the partition and does not claim again by itself).
#[test]
fn an_entry_read_late_by_a_process_that_lost_the_partition_is_claimed_before_newer_ones() {
    let cluster = Cluster::with_lease_ms(6_000);
    let p = cluster.process();
    let agent = p.spawn_with(json!({"agent_type": "subagent"}));
    let mut con = cluster.redis.client();
    let stream = keys().partition(partition(&agent));
    let message = |text: &str| {
        encode_envelope(&Envelope::new(
            Address::External { name: "t".into() },
            Address::agent(&agent),
            Item::Inbox(InboxItem::message(text)),
            1,
        ))
        .unwrap()
    };
    xadd(&mut con, &stream, &message("warm up"));
    p.wait_for("the warm-up answered", |p| {
        p.texts(&agent).iter().any(|t| t == "echo: warm up")
    });
    p.signal("STOP");
    // The owner's blocked read (at most 200 ms) has run out; another consumer reads the next
    // entry, then a newer one arrives.
    std::thread::sleep(Duration::from_millis(300));
    xadd(&mut con, &stream, &message("first"));
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("agentd")
        .arg("a-process-that-is-gone")
        .arg("COUNT")
        .arg(1)
        .arg("STREAMS")
        .arg(&stream)
        .arg(">")
        .query(&mut con)
        .unwrap();
    xadd(&mut con, &stream, &message("second"));
    p.signal("CONT");
    p.wait_for("both answered", |p| {
        p.texts(&agent)
            .iter()
            .filter(|t| t.starts_with("echo: "))
            .count()
            == 3
    });
    assert_eq!(
        p.texts(&agent),
        vec![
            "warm up",
            "echo: warm up",
            "first",
            "echo: first",
            "second",
            "echo: second"
        ]
    );
    acknowledged_soon(&mut con, &stream);
}
