//! Helpers for agentd's cross-crate tests: a whole in-process agent system on a scripted model,
//! and condition polling (tests wait for a state, they never sleep a fixed time and assert).
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod anthropic_sse;
pub mod failing_store;
pub mod mcp;
pub mod mock_http;
pub mod process;
pub mod recording_model;
pub mod redis_server;
pub mod scripted_files;
pub mod streaming_provider;
pub mod strict_provider;
mod workers;

pub use mock_http::{Canned, MockHttp};
pub use process::AgentdProcess;
pub use recording_model::RecordingModel;
pub use redis_server::RedisServer;
pub use streaming_provider::{Reply, StreamingProvider};
pub use strict_provider::{Answer, Dialect, StrictProvider};

use agentd_actors::{
    AgentSystem, AgentType, AgentTypes, Clock, Deps, ManualClock, RuntimeConfig, SystemClock,
    ThreadStore,
};
use agentd_bus::InProcessBus;
use agentd_models::ScriptedModel;
use agentd_proto::{AgentRecord, Event, ManageOptions, Role, ThreadEntry};
use agentd_store::MemoryStore;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A started in-process agent system and what a test needs to observe it.
pub struct TestSystem {
    /// The facade.
    pub system: AgentSystem,
    /// The store behind it.
    pub store: Arc<dyn ThreadStore>,
    /// The event bus behind it.
    pub bus: InProcessBus,
}

/// An agent type with a title and workers.
pub fn agent_type(name: &str, title: &str, workers: &[&str]) -> AgentType {
    AgentType {
        name: name.into(),
        title: title.into(),
        workers: workers.iter().map(|w| w.to_string()).collect(),
        ..Default::default()
    }
}

/// [`default_types`] with the `ops` worker allowed `current_time`, for
/// [`ops_two_answers!`]'s rules.
pub fn ops_with_clock(lead_manage: ManageOptions) -> Vec<AgentType> {
    let mut types = default_types(lead_manage);
    for ty in &mut types {
        if ty.name == "ops" {
            ty.tools = vec!["current_time".into()];
        }
    }
    types
}

/// Script rules (TOML) for an `ops` worker that answers a message containing `$contains`
/// twice: "part one" from a step that also calls `current_time`, then "part two" once the
/// tool answered. A macro, so that a script constant can `concat!` it where its rules' order
/// needs it; the `ops` type needs the tool ([`ops_with_clock`]).
#[macro_export]
macro_rules! ops_two_answers {
    ($contains:literal) => {
        concat!(
            "[[rule]]\nagent = \"ops\"\nrole = \"user\"\ncontains = \"",
            $contains,
            "\"\ntext = \"part one\"\n[[rule.tool_calls]]\nname = \"current_time\"\n",
            "arguments = {}\n\n[[rule]]\nagent = \"ops\"\nrole = \"tool\"\ntext = \"part two\"\n\n"
        )
    };
}

/// The usual cast: a `lead` with workers `ops` ("Ops") and `qa` ("QA"), plus `subagent`,
/// `coding` ("Coder") and a `plain` root type without workers.
pub fn default_types(lead_manage: ManageOptions) -> Vec<AgentType> {
    let mut lead = agent_type("lead", "Lead", &["ops", "qa"]);
    lead.manage = lead_manage;
    vec![
        lead,
        agent_type("ops", "  Ops  ", &[]),
        agent_type("qa", "QA", &[]),
        agent_type("subagent", "Sub-agent", &[]),
        agent_type("coding", "Coder", &[]),
        agent_type("plain", "Plain", &[]),
    ]
}

/// Starts an agent system. Must run inside an actix `System` (e.g. `#[actix_rt::test]`).
pub fn start(
    script: &str,
    types: Vec<AgentType>,
    store: Arc<dyn ThreadStore>,
    clock: Arc<dyn Clock>,
) -> TestSystem {
    start_custom(script, types, store, clock, |_| {})
}

/// [`start`] with a hook that adjusts the runtime config (limits, prompts, ...).
pub fn start_custom(
    script: &str,
    types: Vec<AgentType>,
    store: Arc<dyn ThreadStore>,
    clock: Arc<dyn Clock>,
    tweak: impl FnOnce(&mut RuntimeConfig),
) -> TestSystem {
    let model = ScriptedModel::from_toml_str(script, clock.clone()).expect("script");
    start_with_model(Arc::new(model), types, store, clock, tweak)
}

/// An agent system on any model backend.
pub fn start_with_model(
    model: Arc<dyn agentd_actors::ModelClient>,
    types: Vec<AgentType>,
    store: Arc<dyn ThreadStore>,
    clock: Arc<dyn Clock>,
    tweak: impl FnOnce(&mut RuntimeConfig),
) -> TestSystem {
    let bus = InProcessBus::default();
    let mut config = RuntimeConfig::with_types(AgentTypes::new(types).expect("types"));
    tweak(&mut config);
    let deps = Deps {
        store: store.clone(),
        model,
        events: Arc::new(bus.clone()),
        clock,
        config: Arc::new(config),
        tools: Default::default(),
        transport: None,
    };
    TestSystem {
        system: AgentSystem::start(deps),
        store,
        bus,
    }
}

/// [`start`] on a memory store and the real clock.
pub fn start_simple(script: &str, types: Vec<AgentType>) -> TestSystem {
    start(
        script,
        types,
        Arc::new(MemoryStore::new()),
        Arc::new(SystemClock),
    )
}

/// [`start`] on a memory store and a manual clock.
pub fn start_manual(script: &str, types: Vec<AgentType>) -> (TestSystem, ManualClock) {
    let clock = ManualClock::new(1_000_000);
    let sys = start(
        script,
        types,
        Arc::new(MemoryStore::new()),
        Arc::new(clock.clone()),
    );
    (sys, clock)
}

/// [`start_custom`] on a memory store and the real clock.
pub fn start_simple_with(
    script: &str,
    types: Vec<AgentType>,
    tweak: impl FnOnce(&mut RuntimeConfig),
) -> TestSystem {
    start_custom(
        script,
        types,
        Arc::new(MemoryStore::new()),
        Arc::new(SystemClock),
        tweak,
    )
}

/// [`start_custom`] on a memory store and a manual clock.
pub fn start_manual_with(
    script: &str,
    types: Vec<AgentType>,
    tweak: impl FnOnce(&mut RuntimeConfig),
) -> (TestSystem, ManualClock) {
    let clock = ManualClock::new(1_000_000);
    let sys = start_custom(
        script,
        types,
        Arc::new(MemoryStore::new()),
        Arc::new(clock.clone()),
        tweak,
    );
    (sys, clock)
}

/// Polls `cond` until it holds or 10 s pass (then panics with `what`).
pub async fn wait_until<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while !cond().await {
        if start.elapsed() > Duration::from_secs(10) {
            panic!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

impl TestSystem {
    /// Spawns a foreground root of `agent_type`, optionally with a first message.
    pub async fn root(&self, agent_type: &str, prompt: Option<&str>) -> AgentRecord {
        self.system
            .spawn(agentd_proto::SpawnRequest {
                agent_type: Some(agent_type.into()),
                prompt: prompt.map(str::to_string),
                ..Default::default()
            })
            .await
            .expect("spawn root")
    }

    /// Runs the `spawn_agent` tool as `parent` (a sub-agent of `agent_type` starting on
    /// `prompt`) and answers the child's id.
    pub async fn spawn_child(&self, parent: &str, agent_type: &str, prompt: &str) -> String {
        let r = self
            .system
            .invoke_tool(
                Some(parent),
                "spawn_agent",
                serde_json::json!({"agent_type": agent_type, "prompt": prompt}),
            )
            .await
            .expect("spawn_agent");
        r["agent_id"].as_str().expect("agent_id").to_string()
    }

    /// The thread of `id`.
    pub async fn thread(&self, id: &str) -> Vec<ThreadEntry> {
        self.store.thread(id).await.expect("thread")
    }

    /// The texts of `id`'s thread entries of `role`, in thread order.
    pub async fn texts_of(&self, id: &str, role: Role) -> Vec<String> {
        self.thread(id)
            .await
            .into_iter()
            .filter(|e| e.role == role)
            .map(|e| e.text)
            .collect()
    }

    /// Waits until `id`'s thread has an entry of `role` containing `text`; returns the thread.
    pub async fn wait_for_entry(&self, id: &str, role: Role, text: &str) -> Vec<ThreadEntry> {
        let what = format!("{role:?} entry containing {text:?} on {id}");
        wait_until(&what, || async {
            self.thread(id)
                .await
                .iter()
                .any(|e| e.role == role && e.text.contains(text))
        })
        .await;
        self.thread(id).await
    }

    /// The stored record of `id`.
    pub async fn record(&self, id: &str) -> AgentRecord {
        self.system.record(id).await.expect("record")
    }

    /// Waits until `id` has status `status`.
    pub async fn wait_for_status(
        &self,
        id: &str,
        status: agentd_proto::AgentStatus,
    ) -> AgentRecord {
        wait_until(&format!("{id} to be {status}"), || async {
            self.record(id).await.status == status
        })
        .await;
        self.record(id).await
    }

    /// A receiver of every event from now on.
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<Event> {
        self.bus.subscribe()
    }
}

/// Receives events until one satisfies `pred` (10 s limit).
pub async fn next_event(
    rx: &mut tokio::sync::broadcast::Receiver<Event>,
    what: &str,
    pred: impl Fn(&Event) -> bool,
) -> Event {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Ok(e)) if pred(&e) => return e,
            Ok(Ok(_)) | Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => continue,
            Ok(Err(e)) => panic!("event stream closed while waiting for {what}: {e}"),
            Err(_) => panic!("timed out waiting for event: {what}"),
        }
    }
}
