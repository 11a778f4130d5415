//! Pushes and flushes made at once grouped into fewer round trips, each with its own answer, in order from any thread.

use super::*;

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
