//! Partition streams that stay bounded: however many messages pass, while agents hold what they take, and under a flood.

use super::*;

/// Partition streams stay bounded: each acknowledgement trims its stream below the oldest
/// entry still pending (or, with none, the last one read), so 100,000 messages per unit of
/// [`scale`] (a million at `AGENTD_TEST_SCALE=10`) through one partition leave it holding about
/// one node of its listpacks, not every message ever sent. The messages are for an agent that
/// does not exist (each is dead-lettered and acknowledged: the cheapest full delivery).
#[test]
fn a_partition_stream_stays_bounded_however_many_messages_go_through_it() {
    let cluster = Cluster::new();
    let p = cluster.process();
    let stream = keys().partition(partition("nobody"));
    let bytes = encode_envelope(&Envelope::new(
        Address::External { name: "t".into() },
        Address::agent("nobody"),
        Item::Inbox(InboxItem::message("to no one")),
        1,
    ))
    .unwrap();
    let total = 100_000 * scale();
    let chunk = 5_000;
    let mut con = cluster.redis.client_for(&stream);
    let group = |con: &mut TestConnection| pending_and_lag(con, &stream);
    let mut longest = 0;
    for _ in 0..total / chunk {
        let mut pipe = redis::pipe();
        for _ in 0..chunk {
            pipe.cmd("XADD")
                .arg(&stream)
                .arg("*")
                .arg("m")
                .arg(&bytes)
                .ignore();
        }
        pipe.query::<()>(&mut con).unwrap();
        // The process keeps up before the next chunk: what it has not read stays.
        eventually_blocking(Duration::from_secs(120), "the process to keep up", || {
            let (pending, lag) = group(&mut con);
            pending + lag < chunk as u64
        });
        let len: u64 = redis::cmd("XLEN").arg(&stream).query(&mut con).unwrap();
        longest = longest.max(len);
    }
    eventually_blocking(Duration::from_secs(120), "every message delivered", || {
        group(&mut con) == (0, 0)
    });
    assert_eq!(entries_added(&mut con, &stream), total as u64);
    // Once a last acknowledgement has trimmed it: about one node (100 entries) is left.
    eventually_blocking(Duration::from_secs(10), "the stream trimmed", || {
        redis::cmd("XLEN")
            .arg(&stream)
            .query::<u64>(&mut con)
            .is_ok_and(|n| n <= 200)
    });
    assert!(longest < 3 * chunk as u64, "the stream grew to {longest}");
    assert_eq!(p.get_status("/healthz", None).0, 200);
}

/// Partition streams stay bounded when agents hold what they take (their flushes acknowledge the
/// entries without trimming; the reader trims a stream every `batch` entries it read there):
/// 10,000 messages per unit of [`scale`] to four agents of one partition leave about one node
/// of the stream, and it never holds much more than what is pending or unread, however many
/// are read between two lease rounds (a long lease here: its rounds, which trim too, are rare).
#[test]
fn a_partition_stream_stays_bounded_when_its_agents_hold_what_they_take() {
    let cluster = Cluster::new().with("AGENTD__REDIS__LEASE_MS", "20000".into());
    let p = cluster.process();
    let agents = subagents_in_one_partition(&p, 4);
    let first = agents[0].clone();
    let stream = keys().partition(partition(&first));
    let mut con = cluster.redis.client_for(&stream);
    let group = |con: &mut TestConnection| pending_and_lag(con, &stream);
    // Chunks of 50 messages per agent: below what an agent holds at once (256; more are pushed),
    // so the agents hold all of them.
    let total = 10_000 * scale();
    let chunk = 200;
    let mut longest = 0;
    for c in 0..total / chunk {
        let mut pipe = redis::pipe();
        for i in 0..chunk {
            let to = &agents[i % agents.len()];
            queue_message(&mut pipe, &stream, to, format!("m{c}-{i}"));
        }
        pipe.query::<()>(&mut con).unwrap();
        // Each chunk handled before the next: no agent ever holds more than it may, so none
        // is pushed (whose acknowledgement by the reader would trim the stream too).
        eventually_blocking(Duration::from_secs(120), "the chunk handled", || {
            group(&mut con) == (0, 0)
        });
        let len: u64 = redis::cmd("XLEN").arg(&stream).query(&mut con).unwrap();
        longest = longest.max(len);
    }
    // Each agent answered its last message.
    let last_chunk = total / chunk - 1;
    for (n, id) in agents.iter().enumerate() {
        let last = (0..chunk)
            .rev()
            .find(|i| i % agents.len() == n)
            .unwrap_or(0);
        let answer = format!("echo: m{last_chunk}-{last}");
        p.wait_for("the last message answered", |p| {
            p.texts(id).last() == Some(&answer)
        });
    }
    assert!(dead_letters(&cluster).is_empty(), "nothing dead-lettered");
    eventually_blocking(Duration::from_secs(10), "the stream trimmed", || {
        redis::cmd("XLEN")
            .arg(&stream)
            .query::<u64>(&mut con)
            .is_ok_and(|n| n <= 200)
    });
    assert!(longest < 3 * chunk as u64, "the stream grew to {longest}");
}

/// `n` sub-agents spawned through `p` that share one partition.
fn subagents_in_one_partition(p: &AgentdProcess, n: usize) -> Vec<String> {
    let first = p.spawn_with(json!({"agent_type": "subagent"}));
    let mut agents = vec![first.clone()];
    while agents.len() < n {
        let id = p.spawn_with(json!({"agent_type": "subagent"}));
        if partition(&id) == partition(&first) {
            agents.push(id);
        }
    }
    agents
}

/// Adds to `pipe` the `XADD` of a message `text` for agent `to` onto partition stream `stream`,
/// as an outside sender sends it once.
fn queue_message(pipe: &mut redis::Pipeline, stream: &str, to: &str, text: String) {
    let env = Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(to),
        Item::Inbox(InboxItem::message(text)),
        1,
    );
    pipe.cmd("XADD")
        .arg(stream)
        .arg("*")
        .arg("m")
        .arg(encode_envelope(&env).unwrap())
        .ignore();
}

/// The entries of `stream` its consumer group has read and not acknowledged, and those it has
/// not read.
fn pending_and_lag(con: &mut TestConnection, stream: &str) -> (u64, u64) {
    let groups: Vec<HashMap<String, redis::Value>> = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(stream)
        .query(con)
        .unwrap();
    let num = |f: &str| redis::from_redis_value_ref::<u64>(&groups[0][f]).unwrap_or(0);
    (num("pending"), num("lag"))
}

/// A flood waits unread in its partition stream: once the agents of a partition hold 1,024 of
/// its entries (here 20 agents busy with a slow turn each, holding what arrives meanwhile), the
/// reader stops reading it — the entries stay pending or unread, at most a batch (100) past the
/// limit — instead of reading everything into agents (which would hold all of it, up to 256
/// each, and push the rest into their durable inboxes). Once the turns end, everything is
/// handled, each agent's messages in order.
#[test]
fn a_flood_waits_unread_in_its_stream_while_its_agents_hold_enough() {
    const MOST_OUT: u64 = 1_024;
    const BATCH: u64 = 100;
    let cluster = Cluster::new().with("AGENTD__REDIS__HOLD_MS", "60000".into());
    let p = cluster.process();
    let agents = subagents_in_one_partition(&p, 20);
    let first = agents[0].clone();
    for id in &agents {
        p.post(
            &format!("/v1/agents/{id}/messages"),
            json!({"text": "take a while"}),
        )
        .unwrap();
    }
    for id in &agents {
        p.wait_for("the slow turns", |p| p.status(id) == "running");
    }
    // 100 messages per agent: 2,000 in all.
    let per_agent = 100;
    let stream = keys().partition(partition(&first));
    let mut con = cluster.redis.client_for(&stream);
    // The slow turns' messages came through the stream (held) or straight to their agents
    // (pushed into their durable inboxes).
    let (pending, lag) = pending_and_lag(&mut con, &stream);
    let before = pending + lag;
    let inbox = |con: &mut TestConnection, id: &str| -> u64 {
        redis::cmd("ZCARD")
            .arg(keys().agent_part(id, "inbox"))
            .query(con)
            .unwrap()
    };
    let inboxes: Vec<u64> = agents.iter().map(|id| inbox(&mut con, id)).collect();
    let mut pipe = redis::pipe();
    for i in 0..per_agent {
        for id in &agents {
            queue_message(&mut pipe, &stream, id, format!("m{i}"));
        }
    }
    pipe.query::<()>(&mut con).unwrap();
    let sent = (per_agent * agents.len()) as u64;
    eventually_blocking(Duration::from_secs(5), "the limit reached", || {
        pending_and_lag(&mut con, &stream).0 >= MOST_OUT
    });
    // The slow turns run on for seconds (12 from their start, so that on a loaded machine these
    // checks end before they do): the reader stays held back meanwhile.
    for _ in 0..10 {
        let (pending, lag) = pending_and_lag(&mut con, &stream);
        assert!(pending <= MOST_OUT + BATCH, "{pending} entries read");
        assert_eq!(pending + lag, before + sent, "the rest unread");
        for (id, before) in agents.iter().zip(&inboxes) {
            assert_eq!(
                inbox(&mut con, id),
                *before,
                "an item pushed into `{id}`'s durable inbox"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let want: Vec<String> = std::iter::once("slow done".to_string())
        .chain((0..per_agent).map(|i| format!("echo: m{i}")))
        .collect();
    for id in &agents {
        p.wait_for("every message answered", |p| {
            let answers: Vec<String> = p
                .texts(id)
                .into_iter()
                .filter(|t| t == "slow done" || t.starts_with("echo: "))
                .collect();
            answers == want
        });
    }
    eventually_blocking(Duration::from_secs(30), "every entry acknowledged", || {
        pending_and_lag(&mut con, &stream) == (0, 0)
    });
    assert!(dead_letters(&cluster).is_empty(), "nothing dead-lettered");
}
