//! `agentd migrate`: a namespace written in an earlier Redis key layout — version 1, every
//! agent's keys under its own hash tag; version 2, partition-tagged keys with threads in
//! streams and records in hashes; or version 3, this one with a set of entry ids beside each
//! long thread — is moved to this one (threads as lists, records as one string, no id sets),
//! once, with nothing lost; this version refuses to run on an unmigrated namespace, and the
//! earlier code's first command at its start fails on a migrated one.
//!
//! The earlier layouts are written here with their key names spelled out, as the earlier code
//! wrote them, not with any of this version's code.
//!
//! | module | what it tests |
//! |---|---|
//! | `earlier_layout` | The first layout (a key per agent part, unpartitioned streams) moved to partitions: everything read back once, a cut-off migration finished by running it again, live processes and other partition counts refused. |
//! | `layout_2` | Layouts 2 and 3 moved to compact threads and records: read back once, layout 3's entry-id sets dropped, a cut-off migration finished, the same on a Redis Cluster. |

mod earlier_layout;
mod layout_2;

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
