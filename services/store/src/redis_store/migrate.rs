//! `agentd migrate`: moves a namespace of the earlier key layout (version 1: every agent's
//! keys under its own hash tag `<ns>:agent:{<id>}…`, partitions `<ns>:p:{<k>}`, one roots
//! index) to this one ([`crate::Keys`]), once. The earlier layout ran on one Redis only, so
//! the move runs there: `RENAME` keeps every value, its expiry and a stream's consumer group
//! with its pending entries.
//!
//! Every step is idempotent and the layout key says `migrating` until the last one is done, so
//! a migration cut off is finished by running it again, and no agentd of either version runs
//! on the namespace meanwhile: this one refuses a layout that is not `ready`, and an earlier
//! one stops at its start on the string left at its partition 0 stream key
//! ([`super::layout::TOMBSTONE`]), written once that stream has moved.

use super::layout::{self, TOMBSTONE, legacy_partition};
use super::{RedisStore, be};
use crate::RedisConnection;
use crate::redis_keys::{AGENT_PARTS, Keys, LAYOUT_VERSION};
use agentd_actors::{StoreError, StoreErrorKind, StoreResult};
use redis::cmd;
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
        /// Agents whose keys were moved.
        agents: usize,
        /// Keys renamed in all.
        keys: usize,
    },
}

/// A refusal with its reason.
fn refused(message: String) -> StoreError {
    StoreError::new(StoreErrorKind::Unsupported, message)
}

impl RedisStore {
    /// Moves namespace `namespace` at `url` to this key layout with `partitions` partitions
    /// (see the module doc). Refuses while a process is live in the namespace (a heartbeat in
    /// its member set within `live_ms`), and when the earlier layout's partition count is not
    /// `partitions` (an agent's partition must not change).
    pub async fn migrate(
        url: &str,
        namespace: &str,
        partitions: u32,
        live_ms: u64,
    ) -> StoreResult<Migrated> {
        let store =
            Self::connect_unchecked(&crate::RedisTarget::single(url), namespace, partitions)
                .await?;
        let mut con = store.connection();
        let keys = store.keys().clone();
        let ns = keys.ns().to_string();
        let current = layout::read(&mut con, &keys).await?;
        if current.get("state").map(String::as_str) == Some("ready") {
            layout::check(&current, &keys)?;
            return Ok(Migrated::AlreadyDone);
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
            return Err(refused(format!(
                "a migration of namespace `{ns}` to {p} partitions was cut off: run it again \
                 with redis.partitions = {p}"
            )));
        }
        let old_count = legacy_partition_count(&mut con, &ns).await?;
        if old_count > 0 && old_count != partitions {
            return Err(refused(format!(
                "namespace `{ns}` has {old_count} partitions, fixed for its life: run the \
                 migration (and agentd) with redis.partitions = {old_count}"
            )));
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
        let mut moved = 0;
        for k in 0..partitions {
            let old = legacy_partition(&ns, k);
            moved += rename_if(&mut con, &old, &keys.partition(k), "stream").await?;
            if k == 0 {
                cmd("SET")
                    .arg(&old)
                    .arg(TOMBSTONE)
                    .query_async::<()>(&mut con)
                    .await
                    .map_err(be)?;
            }
            // Leases of processes that are gone.
            cmd("DEL")
                .arg(format!("{ns}:lease:{{{k}}}"))
                .query_async::<()>(&mut con)
                .await
                .map_err(be)?;
        }
        let (agents, agent_keys) = move_agents(&mut con, &keys).await?;
        moved += agent_keys;
        moved += move_roots(&mut con, &keys).await?;
        for (old, new) in [
            (format!("{ns}:{{tool_calls}}"), keys.tool_calls()),
            (
                format!("{ns}:{{tool_calls}}:status"),
                keys.tool_call_status(),
            ),
        ] {
            moved += rename_if(&mut con, &old, &new, "hash").await?;
        }
        let prefix = format!("{ns}:ratelimit:");
        for old in layout::scan(&mut con, &format!("{prefix}*"), None).await? {
            let provider = old.trim_start_matches(&prefix).to_string();
            moved += rename_if(&mut con, &old, &keys.provider_gate(&provider), "string").await?;
        }
        // What only live processes use: their member set and reply streams.
        let mut gone = layout::scan(&mut con, &format!("{ns}:replies:{{*"), None).await?;
        gone.push(format!("{ns}:members"));
        for key in gone {
            cmd("DEL")
                .arg(key)
                .query_async::<()>(&mut con)
                .await
                .map_err(be)?;
        }
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
        })
    }
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
    AGENT_PARTS.iter().find_map(|part| {
        rest.strip_suffix(part)
            .and_then(|r| r.strip_suffix("}:"))
            .map(|id| (id, Some(*part)))
    })
}

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
