//! `redis_bytes_per_agent`: what a small agent costs in Redis. The real service (one process,
//! on a private redis-server, 8 partitions) spawns N roots that each get one prompt and give
//! one answer; then every key of the namespace's partitions is weighed with
//! `MEMORY USAGE … SAMPLES 0` (exact, every element counted). The figure is the sum over the
//! agents' own keys plus the per-partition keys (stream, lease, roots index, outbox), divided by
//! N. Process-wide keys (members, reply streams) and the events stream are not counted: they
//! do not grow with the agents.

use agentd_actors::Threads;
use agentd_proto::SpawnRequest;
use agentd_store::RedisStore;
use anyhow::{Context as _, bail};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const NS: &str = "benchb";

/// What the scenario weighed.
pub struct Bytes {
    /// `redis_bytes_per_agent`.
    pub per_agent: f64,
    /// Bytes per agent by kind of key: an agent key's part (`record` for the record itself),
    /// or a partition key's name; with how many such keys there were.
    pub by_kind: BTreeMap<String, (u64, usize)>,
}

/// Spawns `n` roots with one prompt each, waits until each has its answer in its thread, and
/// weighs the partitions' keys.
pub async fn run(url: &str, n: usize) -> anyhow::Result<Bytes> {
    let dir = tempfile::tempdir()?;
    crate::cluster::prepare(dir.path())?;
    let settings = crate::cluster::settings_in(
        &crate::cluster::RedisAt::Single(url.to_string()),
        dir.path(),
        NS,
    )?;
    let here = agentd::Builder::new(settings.clone()).serve().await?;
    let sys = here.system.clone();
    let partitions = crate::cluster::PARTITIONS;
    let store = RedisStore::connect(url, NS, partitions)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        let rec = sys
            .spawn(SpawnRequest {
                agent_type: Some("bworker".into()),
                prompt: Some("ping".into()),
                ..Default::default()
            })
            .await
            .map_err(crate::e)?;
        ids.push(rec.id);
    }
    // Every agent's prompt and answer are in its thread (the answer's flush writes the record
    // in the same script call).
    let t = Instant::now();
    for id in &ids {
        loop {
            if store
                .thread(id)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .len()
                >= 2
            {
                break;
            }
            if t.elapsed() > Duration::from_secs(300) {
                bail!("agent {id} did not answer in 300 s");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    // What the turns' ends leave behind (acknowledgements, trims) settles.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut con = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let mut found = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{{{NS}:p*"))
            .arg("COUNT")
            .arg(1_000)
            .query_async(&mut con)
            .await?;
        found.extend(keys);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let mut by_kind: BTreeMap<String, (u64, usize)> = BTreeMap::new();
    let mut total = 0u64;
    for chunk in found.chunks(500) {
        let mut pipe = redis::pipe();
        for key in chunk {
            pipe.cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .arg("SAMPLES")
                .arg(0);
        }
        let sizes: Vec<Option<u64>> = pipe.query_async(&mut con).await?;
        for (key, size) in chunk.iter().zip(sizes) {
            let size = size.unwrap_or(0);
            let kind = kind_of(key).with_context(|| format!("an unknown key {key}"))?;
            let slot = by_kind.entry(kind).or_default();
            slot.0 += size;
            slot.1 += 1;
            total += size;
        }
    }
    here.stop().await;
    Ok(Bytes {
        per_agent: total as f64 / n as f64,
        by_kind,
    })
}

/// The kind of a partition-tagged key: an agent key's part (`record` for the record), or the
/// partition key's own name.
fn kind_of(key: &str) -> Option<String> {
    let rest = key.split_once("}:")?.1;
    match rest.strip_prefix("a:") {
        Some(agent) => Some(match agent.split_once(':') {
            Some((_, part)) => part.to_string(),
            None => "record".to_string(),
        }),
        None => Some(rest.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::kind_of;

    #[test]
    fn keys_are_sorted_by_kind() {
        assert_eq!(kind_of("{b:p3}:a:0190-aa").as_deref(), Some("record"));
        assert_eq!(
            kind_of("{b:p3}:a:0190-aa:thread").as_deref(),
            Some("thread")
        );
        assert_eq!(kind_of("{b:p3}:stream").as_deref(), Some("stream"));
        assert_eq!(kind_of("nothing"), None);
    }
}
