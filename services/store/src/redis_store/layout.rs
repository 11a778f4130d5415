//! The namespace's key layout, checked at every start: `{<ns>:layout}` holds the layout's
//! `version`, the namespace's `partitions` (fixed for its life: an agent's keys are named by
//! its partition) and a `state` (`ready`, or `migrating` while `agentd migrate` runs).
//!
//! A namespace no process has used yet gets this layout and, at the key the earlier code
//! created first at its start (its partition 0 stream `<ns>:p:{0}`), a string
//! ([`TOMBSTONE`]): the earlier code's `XGROUP CREATE … MKSTREAM` there fails with
//! `WRONGTYPE`, so an older agentd stops at start instead of mixing its keys into this layout.
//! A namespace that holds the earlier layout is refused with the advice to migrate it.

use super::be;
use crate::RedisConnection;
use crate::redis_keys::{Keys, LAYOUT_VERSION};
use agentd_ports::{StoreError, StoreErrorKind, StoreResult};
use redis::aio::ConnectionLike;
use redis::{Script, cmd};
use std::collections::HashMap;

/// What the earlier layout's partition 0 stream key holds once this layout owns the
/// namespace: a string, where the earlier code expects a stream.
pub(crate) const TOMBSTONE: &str = "agentd key layout 2 or later: this namespace was moved by \
     `agentd migrate` (or created by an agentd of layout 2 or later); an agentd of layout 1 must \
     not run on it";

/// The layout is written only if there is none (two processes starting at once on an empty
/// namespace agree on one). KEYS: the layout; ARGV: version, partitions. Answers the layout's
/// fields and values.
const CREATE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'version', ARGV[1], 'partitions', ARGV[2], 'state', 'ready')
end
return redis.call('HGETALL', KEYS[1])";

/// A namespace layout problem: the message says what to do.
fn refused(message: String) -> StoreError {
    StoreError::new(StoreErrorKind::Unsupported, message)
}

/// The earlier layout's partition stream `k` (`<ns>:p:{<k>}`).
pub(crate) fn legacy_partition(ns: &str, k: u32) -> String {
    format!("{ns}:p:{{{k}}}")
}

/// Checks that the namespace of `keys` has this code's layout with `keys.partitions()`
/// partitions, creating it on a namespace no process has used yet.
pub(crate) async fn ensure(con: &mut RedisConnection, keys: &Keys) -> StoreResult<()> {
    let mut layout = read(con, keys).await?;
    if layout.is_empty() {
        if legacy_present(con, keys.ns()).await? {
            return Err(refused(format!(
                "namespace `{}` holds agentd's earlier Redis key layout: stop every agentd \
                 process on it and run `agentd migrate` (once) before starting this version",
                keys.ns()
            )));
        }
        cmd("SET")
            .arg(legacy_partition(keys.ns(), 0))
            .arg(TOMBSTONE)
            .query_async::<()>(con)
            .await
            .map_err(be)?;
        let fields: Vec<String> = Script::new(CREATE)
            .key(keys.layout())
            .arg(LAYOUT_VERSION)
            .arg(keys.partitions())
            .invoke_async(con)
            .await
            .map_err(be)?;
        layout = pairs(fields);
    }
    check(&layout, keys)
}

/// The layout hash (empty if there is none).
pub(crate) async fn read<C: ConnectionLike>(
    con: &mut C,
    keys: &Keys,
) -> StoreResult<HashMap<String, String>> {
    cmd("HGETALL")
        .arg(keys.layout())
        .query_async(con)
        .await
        .map_err(be)
}

/// Whether layout `layout` is this code's, ready, with `keys.partitions()` partitions.
pub(crate) fn check(layout: &HashMap<String, String>, keys: &Keys) -> StoreResult<()> {
    let ns = keys.ns();
    // A migration under way or cut off, whatever its version: it is to be finished first.
    if layout.get("state").map(String::as_str) != Some("ready") {
        return Err(refused(format!(
            "namespace `{ns}` is being migrated, or its migration was cut off: run \
             `agentd migrate` again (with every agentd process on it stopped)"
        )));
    }
    let version = layout.get("version").map(String::as_str).unwrap_or("?");
    if version != LAYOUT_VERSION.to_string() {
        return Err(refused(match version.parse::<u32>() {
            Ok(v) if v < LAYOUT_VERSION => format!(
                "namespace `{ns}` has key layout version {version}, an earlier agentd's; this \
                 agentd reads version {LAYOUT_VERSION}: stop every agentd process on it and run \
                 `agentd migrate` (once) before starting this version"
            ),
            _ => format!(
                "namespace `{ns}` has key layout version {version}; this agentd reads version \
                 {LAYOUT_VERSION}"
            ),
        }));
    }
    let partitions = layout.get("partitions").map(String::as_str).unwrap_or("?");
    if partitions != keys.partitions().to_string() {
        return Err(refused(format!(
            "namespace `{ns}` has {partitions} partitions for its whole life (agents' keys are \
             named by their partition); redis.partitions is {}: set it to {partitions}",
            keys.partitions()
        )));
    }
    Ok(())
}

/// Whether namespace `ns` holds keys of the earlier layout: its partition 0 stream, its roots
/// index, its member set, or any agent key.
pub(crate) async fn legacy_present(con: &mut RedisConnection, ns: &str) -> StoreResult<bool> {
    let kind: String = cmd("TYPE")
        .arg(legacy_partition(ns, 0))
        .query_async(con)
        .await
        .map_err(be)?;
    if kind == "stream" {
        return Ok(true);
    }
    // One key per command: they are in different slots.
    for key in [
        format!("{ns}:roots"),
        format!("{ns}:members"),
        format!("{ns}:{{tool_calls}}"),
    ] {
        let found: usize = cmd("EXISTS").arg(key).query_async(con).await.map_err(be)?;
        if found > 0 {
            return Ok(true);
        }
    }
    // An agent key of the earliest layout, looked for on one Redis only: that layout never ran
    // on a cluster.
    if con.is_cluster() {
        return Ok(false);
    }
    Ok(!scan(con, &format!("{ns}:agent:{{*"), Some(1))
        .await?
        .is_empty())
}

/// The keys matching `pattern` (`SCAN`), up to `limit` of them; on a cluster, of every master
/// (a cluster's `SCAN` walks the one node it is sent to).
pub(crate) async fn scan(
    con: &mut RedisConnection,
    pattern: &str,
    limit: Option<usize>,
) -> StoreResult<Vec<String>> {
    scan_where(con, pattern, None, limit).await
}

/// [`scan`] of the keys of type `kind` only (`SCAN … TYPE`), or of any type.
pub(crate) async fn scan_where(
    con: &mut RedisConnection,
    pattern: &str,
    kind: Option<&str>,
    limit: Option<usize>,
) -> StoreResult<Vec<String>> {
    let nodes = if con.is_cluster() {
        masters(con).await?.into_iter().map(Some).collect()
    } else {
        vec![None]
    };
    let mut out = Vec::new();
    for node in nodes {
        let mut cursor: u64 = 0;
        loop {
            let mut scan = cmd("SCAN");
            scan.arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1_000);
            if let Some(kind) = kind {
                scan.arg("TYPE").arg(kind);
            }
            let (next, found): (u64, Vec<String>) = match &node {
                Some((host, port)) => con.query_on_node(host, *port, &scan).await,
                None => scan.query_async(con).await,
            }
            .map_err(be)?;
            out.extend(found);
            if limit.is_some_and(|l| out.len() >= l) {
                return Ok(out);
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(out)
}

/// The cluster's masters that are not failing, as `host`, `port` (`CLUSTER NODES`: a line per
/// node, `<id> <host:port@bus[,hostname]> <flags> …`).
async fn masters(con: &mut RedisConnection) -> StoreResult<Vec<(String, u16)>> {
    let text: String = cmd("CLUSTER")
        .arg("NODES")
        .query_async(con)
        .await
        .map_err(be)?;
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(addr), Some(flags)) = (fields.get(1), fields.get(2)) else {
            continue;
        };
        let flags: Vec<&str> = flags.split(',').collect();
        if !flags.contains(&"master") || flags.iter().any(|f| f.starts_with("fail")) {
            continue;
        }
        let addr = addr.split(['@', ',']).next().unwrap_or_default();
        if let Some((host, port)) = addr.rsplit_once(':')
            && let Ok(port) = port.parse()
        {
            out.push((host.to_string(), port));
        }
    }
    if out.is_empty() {
        return Err(StoreError::transient(
            "`CLUSTER NODES` named no master that is up",
        ));
    }
    Ok(out)
}

/// A flat list of fields and values as a map.
fn pairs(flat: Vec<String>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut it = flat.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.insert(k, v);
    }
    out
}
