//! The in-process and embedded scenarios: Manage round trips, one-way messages, spawns and the
//! memory an idle agent takes, on the agent system as the service builds it.

use crate::{SCRIPT, e, percentile};
use agentd_actors::{AgentSystem, AgentType, AgentTypes, RuntimeConfig, SystemClock, ThreadStore};
use agentd_models::ScriptedModel;
use agentd_proto::{ManageOptions, SpawnRequest};
use agentd_store::MemoryStore;
use anyhow::bail;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn types() -> anyhow::Result<AgentTypes> {
    let mut root = AgentType {
        name: "root".into(),
        title: "Root".into(),
        workers: vec!["worker".into()],
        ..Default::default()
    };
    root.manage = ManageOptions::default();
    let worker = AgentType {
        name: "worker".into(),
        title: "Worker".into(),
        ..Default::default()
    };
    let sink = AgentType {
        name: "sink".into(),
        title: "Sink".into(),
        ..Default::default()
    };
    let sub = AgentType {
        name: "subagent".into(),
        title: "Sub".into(),
        ..Default::default()
    };
    AgentTypes::new([root, worker, sink, sub]).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The agent system as the service builds it (`agentd::Builder`: the default settings, the
/// event log's fan-out), on `store`, with the bench's script and types, one Arbiter.
async fn system(
    store: Arc<dyn ThreadStore>,
    tweak: impl FnOnce(&mut RuntimeConfig),
) -> anyhow::Result<AgentSystem> {
    let clock = Arc::new(SystemClock);
    let model = ScriptedModel::from_toml_str(SCRIPT, clock.clone())?;
    let service = agentd::Builder::new(agentd::Settings::from_overrides("")?)
        .clock(clock)
        .store(store)
        .model(Arc::new(model))
        .types(types()?)
        .config(|config| {
            config.arbiters = 1;
            config.limits.max_live_agents = 1_000_000;
            tweak(config);
        })
        .build()
        .await?;
    Ok(service.system)
}

/// Root → Manage send_message (sync) → worker → reply, memory store, one Arbiter.
pub(crate) async fn inproc_roundtrip(
    store: Arc<dyn ThreadStore>,
    n: usize,
) -> anyhow::Result<(f64, f64)> {
    let sys = system(store, |_| {}).await?;
    let root = sys
        .spawn(SpawnRequest {
            agent_type: Some("root".into()),
            ..Default::default()
        })
        .await
        .map_err(e)?;
    let args_for = |alias: &str| json!({"command": "send_message", "worker": "Worker", "message": "ping", "threadAlias": alias});
    let mut args = args_for("bench");
    for _ in 0..50 {
        sys.invoke_tool(Some(&root.id), "Manage", &args)
            .await
            .map_err(e)?;
    }
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        // A new worker thread every 100 round trips keeps threads short (each turn reads its
        // whole thread; long conversations are what compaction is for). The arguments are
        // made once per thread and lent to each call: the harness's own JSON is not counted.
        if i % 100 == 0 {
            args = args_for(&format!("bench-{}", i / 100));
            sys.invoke_tool(Some(&root.id), "Manage", &args)
                .await
                .map_err(e)?;
        }
        let t = Instant::now();
        let r = sys
            .invoke_tool(Some(&root.id), "Manage", &args)
            .await
            .map_err(e)?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
        if r["status"] != "ok" {
            bail!("round trip answered {r}");
        }
    }
    sys.shutdown().await;
    Ok((
        percentile(&mut samples, 0.5),
        percentile(&mut samples, 0.99),
    ))
}

/// One-way messages into the threads of `agents` agents whose script answers nothing.
pub(crate) async fn msgs_per_s(
    store: Arc<dyn ThreadStore>,
    agents: usize,
    messages: usize,
) -> anyhow::Result<f64> {
    let sys = system(store.clone(), |_| {}).await?;
    let mut ids = Vec::with_capacity(agents);
    for _ in 0..agents {
        ids.push(
            sys.spawn(SpawnRequest {
                agent_type: Some("sink".into()),
                ..Default::default()
            })
            .await
            .map_err(e)?
            .id,
        );
    }
    let t = Instant::now();
    let mut sends = futures::stream::FuturesUnordered::new();
    for i in 0..messages {
        let s = sys.clone();
        let id = ids[i % agents].clone();
        sends.push(async move { s.send(&id, &format!("m{i}"), false).await });
        if sends.len() >= 256 {
            use futures::StreamExt;
            if let Some(r) = sends.next().await {
                r.map_err(e)?;
            }
        }
    }
    use futures::StreamExt;
    while let Some(r) = sends.next().await {
        r.map_err(e)?;
    }
    // Delivered into the threads: the last agents have all their inputs.
    let per = messages / agents;
    loop {
        let mut done = true;
        for id in ids.iter().rev().take(8) {
            if store.thread(id).await?.len() < per * 2 {
                done = false;
                break;
            }
        }
        if done {
            break;
        }
        if t.elapsed() > Duration::from_secs(300) {
            bail!("messages not delivered in 300 s");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let rate = messages as f64 / t.elapsed().as_secs_f64();
    sys.shutdown().await;
    Ok(rate)
}

pub(crate) async fn spawn_per_s(n: usize) -> anyhow::Result<f64> {
    let sys = system(Arc::new(MemoryStore::new()), |c| {
        c.limits.max_children = u32::MAX
    })
    .await?;
    let root = sys
        .spawn(SpawnRequest {
            agent_type: Some("root".into()),
            ..Default::default()
        })
        .await
        .map_err(e)?;
    let t = Instant::now();
    for _ in 0..n {
        sys.spawn(SpawnRequest {
            agent_type: Some("subagent".into()),
            parent_id: Some(root.id.clone()),
            ..Default::default()
        })
        .await
        .map_err(e)?;
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    sys.shutdown().await;
    Ok(rate)
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

pub(crate) async fn rss_per_idle_agent(n: usize) -> anyhow::Result<f64> {
    let sys = system(Arc::new(MemoryStore::new()), |_| {}).await?;
    let before = rss_bytes();
    for _ in 0..n {
        sys.spawn(SpawnRequest {
            agent_type: Some("subagent".into()),
            ..Default::default()
        })
        .await
        .map_err(e)?;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = rss_bytes();
    sys.shutdown().await;
    Ok((after.saturating_sub(before)) as f64 / n as f64)
}

/// [`rss_per_idle_agent`] in a new process (this binary, `--rss N`): memory that earlier
/// scenarios freed would otherwise be reused by the idle agents and flatter the figure, and
/// 100,000 agents' leftovers would slow the scenarios after it.
pub(crate) fn rss_in_fresh_process(n: usize) -> anyhow::Result<f64> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .args(["--rss", &n.to_string()])
        .output()?;
    if !out.status.success() {
        bail!(
            "the rss scenario failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
}
