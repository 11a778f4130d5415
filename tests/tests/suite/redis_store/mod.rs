//! The Redis store passes the same conformance suite as the memory and embedded stores, and
//! keeps its own layout, fences and window, on a private redis-server or, with
//! `AGENTD_TEST_REDIS=cluster`, a private Redis Cluster (the tests of one server's behaviour —
//! an unreachable server, a namespace's partitions, a cluster-mode node, Redis's script counts —
//! always run on one server).
//!
//! | module | what it tests |
//! |---|---|
//! | `layout` | The store's semantics and layout: the conformance suite, outside ids of before, compact records and threads, a clear error for an unreachable server, nothing left after a delete, a namespace's partition count, the dedup window, one slot per command, script and pipeline. |
//! | `fencing` | Writes fenced by the partition's lease: pushes, flushes of a live agent's record and of new entries, and a forward after the writes before it. |
//! | `grouping` | Pushes and flushes made at once grouped into fewer round trips, each with its own answer, in order from any thread. |

mod fencing;
mod grouping;
mod layout;

use agentd_actors::{AgentRecords, Batches, Inboxes, Threads};
use agentd_store::RedisStore;
use agentd_store::conformance;
use agentd_tests::{RedisServer, TestConnection, TestRedis};
use std::sync::Arc;

/// A private Redis (one server, or a cluster with `AGENTD_TEST_REDIS=cluster`) and a Redis store on
/// it with namespace `ns` and 8 partitions; the Redis stops when the first is dropped.
async fn store_on(ns: &str) -> (TestRedis, RedisStore) {
    let redis = TestRedis::from_env();
    let store = RedisStore::connect_to(&redis.target(), ns, 8)
        .await
        .unwrap();
    (redis, store)
}

fn set_key(con: &mut impl redis::ConnectionLike, key: &str, value: &str) {
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query::<()>(con)
        .unwrap();
}

/// The `m` fields of a stream's entries.
fn read_stream(con: &mut impl redis::ConnectionLike, key: &str) -> Vec<Vec<u8>> {
    let entries: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(con)
        .unwrap();
    entries.ids.iter().filter_map(|e| e.get("m")).collect()
}

/// How many calls of the commands `stats` (`INFO commandstats` line prefixes) Redis has run.
fn command_calls(con: &mut impl redis::ConnectionLike, stats: &[&str]) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    info.lines()
        .filter(|l| stats.iter().any(|s| l.starts_with(s)))
        .filter_map(|l| {
            l.split([':', ','])
                .find_map(|f| f.strip_prefix("calls="))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .sum()
}
