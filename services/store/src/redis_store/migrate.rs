//! `agentd migrate`: moves a namespace of an earlier key layout to this one
//! ([`crate::Keys`], version [`LAYOUT_VERSION`]), once. Two earlier layouts are moved:
//!
//! - version 1 (no layout key): every agent's keys under its own hash tag
//!   `<ns>:agent:{<id>}…`, partitions `<ns>:p:{<k>}`, one roots index. It ran on one Redis only,
//!   so the move runs there: `RENAME` keeps every value, its expiry and a stream's consumer
//!   group with its pending entries. Then its threads and records are rewritten as below.
//! - version 2: this layout's key names, but each thread a stream (fields `id`, `e`) with a set
//!   of its entry ids beside it, and each record a hash (the encoded record in field `rec`,
//!   and copies of a few fields). Each thread becomes a list of `<id> <entry>` pairs (its id
//!   set dropped), each record one string holding the record re-encoded without its defaulted
//!   fields.
//! - version 3: this layout, with a set of entry ids (`…:eids`) beside each thread of 32
//!   entries or more. The sets are dropped: this code looks ids up in the list itself, and only
//!   when an entry may be there already.
//!
//! Every step is idempotent (a thread is rewritten only while it is a stream, a record only
//! while it is a hash, each by a script that swaps the new value in at once) and the layout
//! key says `migrating` until the last one is done, so a migration cut off is finished by
//! running it again, and no agentd of any version runs on the namespace meanwhile: this one
//! refuses a layout that is not `ready`, one of version 2 refuses the version, and one of
//! version 1 stops at its start on the string left at its partition 0 stream key
//! ([`super::layout::TOMBSTONE`]).

use super::layout::{self, TOMBSTONE, legacy_partition};
use super::{RedisStore, be, de};
use crate::RedisConnection;
use crate::redis_keys::{AGENT_PARTS, Keys, LAYOUT_VERSION};
use agentd_ports::{StoreError, StoreErrorKind, StoreResult};
use agentd_proto::codec::{decode, encode};
use agentd_proto::{AgentRecord, ThreadEntry};
use redis::streams::StreamRangeReply;
use redis::{Script, cmd};
use std::time::{SystemTime, UNIX_EPOCH};

/// What a migration did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Migrated {
    /// The namespace had this layout already: nothing was changed.
    AlreadyDone,
    /// The namespace held nothing of either layout: it now has this one, empty.
    Empty,
    /// The namespace was moved.
    Moved {
        /// Agents whose keys were moved from version 1's names.
        agents: usize,
        /// Keys renamed in all.
        keys: usize,
        /// Threads and records rewritten in this layout's form (from version 1 or 2).
        rewritten: usize,
    },
}

/// A refusal with its reason.
fn refused(message: String) -> StoreError {
    StoreError::new(StoreErrorKind::Unsupported, message)
}

impl RedisStore {
    /// Moves namespace `namespace` at `url` to this key layout with `partitions` partitions
    /// (see the module doc). Refuses while a process is live in the namespace (a heartbeat in
    /// its member set within `live_ms`), when the earlier layout's partition count is not
    /// `partitions` (an agent's partition must not change), and a layout newer than this one.
    pub async fn migrate(
        url: &str,
        namespace: &str,
        partitions: u32,
        live_ms: u64,
    ) -> StoreResult<Migrated> {
        Self::migrate_on(
            &crate::RedisTarget::single(url),
            namespace,
            partitions,
            live_ms,
        )
        .await
    }

    /// [`Self::migrate`] on `target`: one Redis, or a Redis Cluster (whose namespaces have
    /// layout 2 at the earliest: layout 1 ran on one Redis only).
    pub async fn migrate_on(
        target: &crate::RedisTarget,
        namespace: &str,
        partitions: u32,
        live_ms: u64,
    ) -> StoreResult<Migrated> {
        let store = Self::connect_unchecked(target, namespace, partitions).await?;
        let mut con = store.connection();
        let keys = store.keys().clone();
        let ns = keys.ns().to_string();
        let current = layout::read(&mut con, &keys).await?;
        let version = current.get("version").map(String::as_str);
        let ready = current.get("state").map(String::as_str) == Some("ready");
        if ready && version == Some(&LAYOUT_VERSION.to_string()) {
            layout::check(&current, &keys)?;
            return Ok(Migrated::AlreadyDone);
        }
        if let Some(v) = version
            && v.parse::<u32>().map_or(true, |v| v > LAYOUT_VERSION)
        {
            return Err(refused(format!(
                "namespace `{ns}` has key layout version {v}, which this agentd (version \
                 {LAYOUT_VERSION}) does not know: run a newer agentd"
            )));
        }
        refuse_live(
            &mut con,
            &[format!("{ns}:members"), keys.members()],
            live_ms,
        )
        .await?;
        if current.is_empty() && !layout::legacy_present(&mut con, &ns).await? {
            layout::ensure(&mut con, &keys).await?;
            return Ok(Migrated::Empty);
        }
        if let Some(p) = current.get("partitions")
            && *p != partitions.to_string()
        {
            return Err(refused(if ready {
                format!(
                    "namespace `{ns}` has {p} partitions, fixed for its life: run the \
                     migration (and agentd) with redis.partitions = {p}"
                )
            } else {
                format!(
                    "a migration of namespace `{ns}` to {p} partitions was cut off: run it \
                     again with redis.partitions = {p}"
                )
            }));
        }
        let cluster = con.is_cluster();
        if cluster && current.is_empty() {
            return Err(refused(format!(
                "namespace `{ns}` holds keys of agentd's key layout 1, which ran on one Redis \
                 server only: this cluster's keys were not written by agentd"
            )));
        }
        if !cluster {
            let old_count = legacy_partition_count(&mut con, &ns).await?;
            if old_count > 0 && old_count != partitions {
                return Err(refused(format!(
                    "namespace `{ns}` has {old_count} partitions, fixed for its life: run the \
                     migration (and agentd) with redis.partitions = {old_count}"
                )));
            }
        }
        cmd("HSET")
            .arg(keys.layout())
            .arg("version")
            .arg(LAYOUT_VERSION)
            .arg("partitions")
            .arg(partitions)
            .arg("state")
            .arg("migrating")
            .query_async::<()>(&mut con)
            .await
            .map_err(be)?;
        // Layout 1's keys (none on a cluster, where it never ran).
        let (agents, moved) = if cluster {
            (0, 0)
        } else {
            move_layout_1(&mut con, &keys).await?
        };
        let rewritten = rewrite_agents(&mut con, &keys).await?;
        drop_entry_id_sets(&mut con, &keys).await?;
        cmd("HSET")
            .arg(keys.layout())
            .arg("state")
            .arg("ready")
            .query_async::<()>(&mut con)
            .await
            .map_err(be)?;
        Ok(Migrated::Moved {
            agents,
            keys: moved,
            rewritten,
        })
    }
}

/// Moves layout 1's keys to this layout's names (see the module doc); answers the agents
/// (records) and keys moved.
async fn move_layout_1(con: &mut RedisConnection, keys: &Keys) -> StoreResult<(usize, usize)> {
    let ns = keys.ns().to_string();
    let mut moved = 0;
    for k in 0..keys.partitions() {
        let old = legacy_partition(&ns, k);
        moved += rename_if(con, &old, &keys.partition(k), "stream").await?;
        if k == 0 {
            cmd("SET")
                .arg(&old)
                .arg(TOMBSTONE)
                .query_async::<()>(con)
                .await
                .map_err(be)?;
        }
        // Leases of processes that are gone.
        cmd("DEL")
            .arg(format!("{ns}:lease:{{{k}}}"))
            .query_async::<()>(con)
            .await
            .map_err(be)?;
    }
    let (agents, agent_keys) = move_agents(con, keys).await?;
    moved += agent_keys;
    moved += move_roots(con, keys).await?;
    for (old, new) in [
        (format!("{ns}:{{tool_calls}}"), keys.tool_calls()),
        (
            format!("{ns}:{{tool_calls}}:status"),
            keys.tool_call_status(),
        ),
    ] {
        moved += rename_if(con, &old, &new, "hash").await?;
    }
    let prefix = format!("{ns}:ratelimit:");
    for old in layout::scan(con, &format!("{prefix}*"), None).await? {
        let provider = old.trim_start_matches(&prefix).to_string();
        moved += rename_if(con, &old, &keys.provider_gate(&provider), "string").await?;
    }
    // What only live processes use: their member set and reply streams.
    let mut gone = layout::scan(con, &format!("{ns}:replies:{{*"), None).await?;
    gone.push(format!("{ns}:members"));
    for key in gone {
        cmd("DEL")
            .arg(key)
            .query_async::<()>(con)
            .await
            .map_err(be)?;
    }
    Ok((agents, moved))
}

/// Refuses while any of member sets `sets` has a heartbeat within `live_ms`.
async fn refuse_live(con: &mut RedisConnection, sets: &[String], live_ms: u64) -> StoreResult<()> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    for set in sets {
        let kind: String = cmd("TYPE").arg(set).query_async(con).await.map_err(be)?;
        if kind != "zset" {
            continue;
        }
        let live: Vec<String> = cmd("ZRANGEBYSCORE")
            .arg(set)
            .arg(now.saturating_sub(live_ms))
            .arg("+inf")
            .query_async(con)
            .await
            .map_err(be)?;
        if !live.is_empty() {
            return Err(refused(format!(
                "{} agentd process(es) are live on this namespace ({}): stop them all before \
                 migrating",
                live.len(),
                live.join(", ")
            )));
        }
    }
    Ok(())
}

/// How many partition streams the earlier layout has (the highest `<ns>:p:{<k>}` stream + 1;
/// agentd created every one at its start), 0 if none.
async fn legacy_partition_count(con: &mut RedisConnection, ns: &str) -> StoreResult<u32> {
    let prefix = format!("{ns}:p:{{");
    let mut count = 0;
    for key in layout::scan(con, &format!("{prefix}*}}"), None).await? {
        let Some(k) = key
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_suffix('}'))
            .and_then(|k| k.parse::<u32>().ok())
        else {
            continue;
        };
        let kind: String = cmd("TYPE").arg(&key).query_async(con).await.map_err(be)?;
        if kind == "stream" {
            count = count.max(k + 1);
        }
    }
    Ok(count)
}

/// Renames `old` to `new` if `old` exists with type `kind`; answers 1 if it did. (A key
/// renamed by an earlier run that was cut off is simply not there any more.)
async fn rename_if(
    con: &mut RedisConnection,
    old: &str,
    new: &str,
    kind: &str,
) -> StoreResult<usize> {
    let found: String = cmd("TYPE").arg(old).query_async(con).await.map_err(be)?;
    if found != kind {
        return Ok(0);
    }
    cmd("RENAME")
        .arg(old)
        .arg(new)
        .query_async::<()>(con)
        .await
        .map_err(be)?;
    Ok(1)
}

/// Moves every agent key `<ns>:agent:{<id>}[:<part>]` to its partition's slot; answers the
/// agents (records) and keys moved.
async fn move_agents(con: &mut RedisConnection, keys: &Keys) -> StoreResult<(usize, usize)> {
    let prefix = format!("{}:agent:{{", keys.ns());
    let (mut agents, mut moved) = (0, 0);
    let mut cursor: u64 = 0;
    loop {
        let (next, found): (u64, Vec<String>) = cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1_000)
            .query_async(con)
            .await
            .map_err(be)?;
        let mut pipe = redis::pipe();
        for old in &found {
            let Some((id, part)) = legacy_agent_key(&prefix, old) else {
                tracing::warn!(key = %old, "a key under the agents' prefix that is no agent key; left alone");
                continue;
            };
            let new = match part {
                None => {
                    agents += 1;
                    keys.agent(id)
                }
                Some(part) => keys.agent_part(id, part),
            };
            pipe.cmd("RENAME").arg(old).arg(new).ignore();
            moved += 1;
        }
        // Keys renamed since the scan returned them (an earlier run) fail the `RENAME`: each
        // is sent on its own only then.
        if let Err(e) = pipe.query_async::<()>(con).await {
            tracing::debug!(error = %e, "renaming one by one");
            for old in &found {
                if let Some((id, part)) = legacy_agent_key(&prefix, old) {
                    let new = part.map_or_else(|| keys.agent(id), |p| keys.agent_part(id, p));
                    let _: redis::RedisResult<()> =
                        cmd("RENAME").arg(old).arg(new).query_async(con).await;
                }
            }
        }
        if next == 0 {
            return Ok((agents, moved));
        }
        cursor = next;
    }
}

/// The agent id and the part (`None`: the record) of an earlier layout's agent key.
fn legacy_agent_key<'k>(prefix: &str, key: &'k str) -> Option<(&'k str, Option<&'static str>)> {
    let rest = key.strip_prefix(prefix)?;
    if let Some(id) = rest.strip_suffix('}') {
        return Some((id, None));
    }
    AGENT_PARTS.iter().chain(&[ENTRY_ID_SET]).find_map(|part| {
        rest.strip_suffix(part)
            .and_then(|r| r.strip_suffix("}:"))
            .map(|id| (id, Some(*part)))
    })
}

/// The part of an agent key layouts 1 to 3 kept beside a thread: a set of its entry ids.
const ENTRY_ID_SET: &str = "eids";

/// Moves the earlier layout's one roots index into one per partition; answers 1 if there was
/// one.
async fn move_roots(con: &mut RedisConnection, keys: &Keys) -> StoreResult<usize> {
    let old = format!("{}:roots", keys.ns());
    let roots: Vec<(String, f64)> = cmd("ZRANGE")
        .arg(&old)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(con)
        .await
        .map_err(be)?;
    if roots.is_empty() {
        return Ok(0);
    }
    for (id, score) in &roots {
        cmd("ZADD")
            .arg(keys.roots(keys.partition_of(id)))
            .arg(*score)
            .arg(id)
            .query_async::<()>(con)
            .await
            .map_err(be)?;
    }
    cmd("DEL")
        .arg(&old)
        .query_async::<()>(con)
        .await
        .map_err(be)?;
    Ok(1)
}

/// Swaps a thread rewritten as a list (built in KEYS[1]) in for its stream (KEYS[2]) and drops
/// its id set (KEYS[3]), if the thread is still a stream; answers 1 if it was. Without a list
/// (an empty stream) the stream is just dropped.
const SWAP_THREAD: &str = r"
if redis.call('TYPE', KEYS[2]).ok ~= 'stream' then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('DEL', KEYS[3])
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('RENAME', KEYS[1], KEYS[2])
else
  redis.call('DEL', KEYS[2])
end
return 1";

/// Replaces a record hash (KEYS[1]) by the string ARGV[1], if it is still a hash; answers 1 if
/// it was.
const SWAP_RECORD: &str = r"
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1])
return 1";

/// Rewrites every agent's thread stream as a list and every record hash as one string (layout
/// version 2's forms, also what version 1's keys are once renamed); answers how many were.
async fn rewrite_agents(con: &mut RedisConnection, keys: &Keys) -> StoreResult<usize> {
    let pattern = format!("{{{}:p*:a:*", keys.ns());
    let mut rewritten = 0;
    for key in layout::scan_where(con, &pattern, Some("stream"), None).await? {
        if let Some(base) = key.strip_suffix(":thread") {
            rewritten += rewrite_thread(con, base, &key).await?;
        }
    }
    for key in layout::scan_where(con, &pattern, Some("hash"), None).await? {
        let part = AGENT_PARTS
            .iter()
            .any(|p| key.strip_suffix(p).is_some_and(|rest| rest.ends_with(':')));
        if !part {
            rewritten += rewrite_record(con, &key).await?;
        }
    }
    Ok(rewritten)
}

/// Deletes the set of entry ids the earlier layouts kept beside a thread (`…:eids`; layout 1's
/// moved to this layout's names first).
async fn drop_entry_id_sets(con: &mut RedisConnection, keys: &Keys) -> StoreResult<()> {
    let pattern = format!("{{{}:p*:a:*:{ENTRY_ID_SET}", keys.ns());
    for key in layout::scan_where(con, &pattern, Some("set"), None).await? {
        cmd("DEL")
            .arg(key)
            .query_async::<()>(con)
            .await
            .map_err(be)?;
    }
    Ok(())
}

/// Rewrites thread stream `thread` (agent key `base` + `:thread`) as a list of `<id> <entry>`
/// pairs, in order, built beside it and swapped in by one script; answers 1 if it was.
async fn rewrite_thread(con: &mut RedisConnection, base: &str, thread: &str) -> StoreResult<usize> {
    let building = format!("{thread}:rewriting");
    cmd("DEL")
        .arg(&building)
        .query_async::<()>(con)
        .await
        .map_err(be)?;
    let mut start = "-".to_string();
    loop {
        let page: StreamRangeReply = cmd("XRANGE")
            .arg(thread)
            .arg(&start)
            .arg("+")
            .arg("COUNT")
            .arg(500)
            .query_async(con)
            .await
            .map_err(be)?;
        let Some(last) = page.ids.last() else {
            break;
        };
        start = format!("({}", last.id);
        let mut push = cmd("RPUSH");
        push.arg(&building);
        for sid in &page.ids {
            let bytes: Vec<u8> = sid.get("e").ok_or_else(|| {
                StoreError::corrupt(format!(
                    "thread `{thread}`: entry {} has no `e` field; repair or delete it, then \
                     run the migration again",
                    sid.id
                ))
            })?;
            let id = match sid
                .get::<String>("id")
                .and_then(|t| uuid::Uuid::parse_str(&t).ok())
            {
                Some(id) => id,
                None => decode::<ThreadEntry>(&bytes).map_err(de)?.id,
            };
            push.arg(id.as_bytes().as_slice()).arg(bytes);
        }
        push.query_async::<()>(con).await.map_err(be)?;
    }
    let swapped: usize = Script::new(SWAP_THREAD)
        .key(&building)
        .key(thread)
        .key(format!("{base}:{ENTRY_ID_SET}"))
        .invoke_async(con)
        .await
        .map_err(be)?;
    Ok(swapped)
}

/// Rewrites record hash `key` as one string: its encoded record (field `rec`), re-encoded
/// without defaulted fields (kept as it was if it does not decode: nothing is lost, and it
/// reads as well as before); answers 1 if it was.
async fn rewrite_record(con: &mut RedisConnection, key: &str) -> StoreResult<usize> {
    let bytes: Option<Vec<u8>> = cmd("HGET")
        .arg(key)
        .arg("rec")
        .query_async(con)
        .await
        .map_err(be)?;
    let Some(bytes) = bytes else {
        return Err(refused(format!(
            "record hash `{key}` has no field `rec`: repair or delete it, then run the \
             migration again"
        )));
    };
    let compact = match decode::<AgentRecord>(&bytes) {
        Ok(rec) => encode(&rec).map_err(de)?,
        Err(e) => {
            tracing::warn!(key, error = %e, "a record that does not decode, kept as it is");
            bytes
        }
    };
    Script::new(SWAP_RECORD)
        .key(key)
        .arg(compact)
        .invoke_async(con)
        .await
        .map_err(be)
}

#[cfg(test)]
mod tests {
    use super::legacy_agent_key;

    #[test]
    fn earlier_agent_keys_are_read() {
        let p = "ns:agent:{";
        assert_eq!(legacy_agent_key(p, "ns:agent:{a-1}"), Some(("a-1", None)));
        assert_eq!(
            legacy_agent_key(p, "ns:agent:{a-1}:thread"),
            Some(("a-1", Some("thread")))
        );
        assert_eq!(
            legacy_agent_key(p, "ns:agent:{a-1}:seenseq"),
            Some(("a-1", Some("seenseq")))
        );
        assert_eq!(legacy_agent_key(p, "ns:agent:{a-1}:other"), None);
    }
}
