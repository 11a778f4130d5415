//! Helpers for agentd's cross-crate tests (the suite in `tests/tests/suite`): a whole in-process
//! agent system on a scripted model, built by the service's own `agentd::Builder` ([`TestSystem::builder`]), the usual agent types, real
//! `agentd` processes and servers, and condition polling ([`eventually`]: tests wait for a state,
//! they never sleep a fixed time and assert).
//!
//! | module | what it holds |
//! |---|---|
//! | [`mod@eventually`] | polling for a condition with a time limit |
//! | [`process`] | a real `agentd` process ([`AgentdProcess`]) and the workspace's binaries |
//! | [`scripted_files`] | the files of a real `agentd` on the scripted model: types, script, `agentd.toml` |
//! | [`redis_server`] | a private `redis-server` ([`RedisServer`]) a test can stop, kill and restart |
//! | [`redis_cluster`] | a private Redis Cluster ([`RedisCluster`]), and [`TestRedis`]: the Redis a suite runs on |
//! | [`tcp_cut`] | a TCP relay a test can cut ([`TcpCut`]) |
//! | [`failing_store`] | a store whose batch writes can be made to fail, and that keeps what was written |
//! | [`recording_model`] | a model that notes every request before another answers it ([`RecordingModel`]) |
//! | [`mock_http`] | a canned HTTP server for the model backends ([`MockHttp`]) |
//! | [`streaming_provider`] | a provider that streams as the OpenAI and Anthropic APIs do ([`StreamingProvider`]) |
//! | [`strict_provider`] | a provider that refuses what the real APIs refuse about tool calls ([`StrictProvider`]) |
//! | [`anthropic_sse`] | a local Anthropic Messages endpoint streaming SSE, for the real Claude Code CLI offline |
//! | [`a2a_remote`] | a remote A2A agent on the official SDK's server, for agentd as an A2A client |
//! | [`mcp`] | the MCP servers the MCP tests run (npm reference servers, a Python SDK server) |
//! | `workers` | driving a lead's Manage workers from a test, as the lead's `Manage` would |

pub mod a2a_remote;
pub mod anthropic_sse;
pub mod eventually;
pub mod failing_store;
pub mod mcp;
pub mod mock_http;
pub mod process;
pub mod recording_model;
pub mod redis_cluster;
pub mod redis_server;
pub mod scripted_files;
pub mod streaming_provider;
pub mod strict_provider;
pub mod tcp_cut;
mod workers;

pub use mock_http::{Canned, MockHttp};
pub use process::AgentdProcess;
pub use recording_model::RecordingModel;
pub use redis_cluster::{RedisCluster, TestConnection, TestRedis};
pub use redis_server::RedisServer;
pub use streaming_provider::{Reply, StreamingProvider};
pub use strict_provider::{Answer, Dialect, StrictProvider};
pub use tcp_cut::TcpCut;

pub use eventually::{Poll, eventually, eventually_blocking};

use agentd_actors::{
    AgentSystem, AgentType, AgentTypes, Clock, ManualClock, ModelClient, RuntimeConfig,
    SystemClock, ThreadStore,
};
use agentd_bus::InProcessBus;
use agentd_models::ScriptedModel;
use agentd_proto::{AgentRecord, Event, ManageOptions, Role, SpawnRequest, ThreadEntry};
use agentd_store::{MemoryStore, RedbStore};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The builder's model unless a test gives one: every agent answers `echo: <its input>`.
pub const ECHO_SCRIPT: &str = "[[rule]]\ntext = \"echo: {{input}}\"\n";

/// A started in-process agent system and what a test needs to observe it.
pub struct TestSystem {
    /// The facade.
    pub system: AgentSystem,
    /// The store behind it.
    pub store: Arc<dyn ThreadStore>,
    /// The event bus behind it.
    pub bus: InProcessBus,
    /// Its clock, when the builder gave it a manual one.
    manual: Option<ManualClock>,
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
    default_types(lead_manage).with_tools("ops", &["current_time"])
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

/// The agent types a test starts with unless it names others: [`default_types`] with default
/// management options.
pub fn cast() -> Vec<AgentType> {
    default_types(ManageOptions::default())
}

/// [`cast`] with the `plain` type allowed `current_time`: a root that calls a tool.
pub fn plain_with_clock() -> Vec<AgentType> {
    cast().with_tools("plain", &["current_time"])
}

/// A test's variant of a list of agent types (usually [`cast`]), adjusted in place.
pub trait TypesExt {
    /// The type `name` may call `tools` (and no others).
    fn with_tools(self, name: &str, tools: &[&str]) -> Self;
    /// The type `name`, changed by `edit`.
    fn edited(self, name: &str, edit: impl FnOnce(&mut AgentType)) -> Self;
    /// One type more.
    fn and(self, ty: AgentType) -> Self;
}

impl TypesExt for Vec<AgentType> {
    fn with_tools(self, name: &str, tools: &[&str]) -> Self {
        self.edited(name, |ty| {
            ty.tools = tools.iter().map(|t| t.to_string()).collect()
        })
    }

    fn edited(mut self, name: &str, edit: impl FnOnce(&mut AgentType)) -> Self {
        let ty = self
            .iter_mut()
            .find(|ty| ty.name == name)
            .unwrap_or_else(|| panic!("no agent type {name:?} to change"));
        edit(ty);
        self
    }

    fn and(mut self, ty: AgentType) -> Self {
        self.push(ty);
        self
    }
}

/// Polls `cond` until it holds or 10 s pass (then panics with `what`): [`eventually`] with the
/// in-process tests' usual limit.
pub async fn wait_until<F, Fut>(what: &str, cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually(Duration::from_secs(10), what, cond).await
}

/// An adjustment of the runtime config ([`TestSystemBuilder::config`]).
type ConfigTweak<'a> = Box<dyn FnOnce(&mut RuntimeConfig) + 'a>;

/// The model a [`TestSystemBuilder`] starts the system on.
enum ModelChoice {
    /// A [`ScriptedModel`] read from these TOML rules, on the system's clock.
    Script(String),
    /// Any backend.
    Client(Arc<dyn ModelClient>),
}

/// The clock a [`TestSystemBuilder`] starts the system on.
enum ClockChoice {
    /// The real clock.
    System,
    /// A [`ManualClock`] the test moves ([`TestSystem::manual_clock`]).
    Manual(ManualClock),
    /// A clock of the test's own.
    Custom(Arc<dyn Clock>),
}

/// How to start a [`TestSystem`]: the model (a script or any backend), agent types, store,
/// clock and runtime-config adjustments, each with a default (an echoing script, [`cast`], a
/// memory store, the real clock, the default config). Must start inside an actix `System`
/// (e.g. `#[actix_rt::test]`).
pub struct TestSystemBuilder<'a> {
    model: ModelChoice,
    types: Option<Vec<AgentType>>,
    store: Option<Arc<dyn ThreadStore>>,
    clock: ClockChoice,
    tweaks: Vec<ConfigTweak<'a>>,
    recover: bool,
}

impl<'a> TestSystemBuilder<'a> {
    /// The scripted model's rules (TOML); the script is read with the system's clock.
    pub fn script(mut self, script: &str) -> Self {
        self.model = ModelChoice::Script(script.to_string());
        self
    }

    /// A model backend of the test's own instead of a script.
    pub fn model(mut self, model: Arc<dyn ModelClient>) -> Self {
        self.model = ModelChoice::Client(model);
        self
    }

    /// The agent types (else [`cast`]).
    pub fn types(mut self, types: Vec<AgentType>) -> Self {
        self.types = Some(types);
        self
    }

    /// The store (else a fresh [`MemoryStore`]).
    pub fn store(mut self, store: Arc<dyn ThreadStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The embedded store (redb) in `dir`.
    pub fn embedded(self, dir: &Path) -> Self {
        let store = RedbStore::open(dir).expect("open the embedded store");
        self.store(Arc::new(store))
    }

    /// A clock of the test's own (else the real clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = ClockChoice::Custom(clock);
        self
    }

    /// A [`ManualClock`] at 1,000,000 ms, which the test moves: [`TestSystem::manual_clock`].
    pub fn manual_clock(mut self) -> Self {
        self.clock = ClockChoice::Manual(ManualClock::new(1_000_000));
        self
    }

    /// Adjusts the runtime config (limits, prompts, ...) before the system starts; adjustments
    /// apply in the order given.
    pub fn config(mut self, tweak: impl FnOnce(&mut RuntimeConfig) + 'a) -> Self {
        self.tweaks.push(Box::new(tweak));
        self
    }

    /// Starts without recovering what the store holds: the test looks at it first, then calls
    /// `system.recover()` (else the system recovers at start, as the service does).
    pub fn without_recovery(mut self) -> Self {
        self.recover = false;
        self
    }

    /// Starts the system through the service's own [`agentd::Builder`] (the wiring `main`
    /// uses), from the default settings with this builder's store, model, types, clock and
    /// config changes in place of what the settings would make.
    pub async fn start(self) -> TestSystem {
        let (clock, manual): (Arc<dyn Clock>, _) = match self.clock {
            ClockChoice::System => (Arc::new(SystemClock), None),
            ClockChoice::Manual(manual) => (Arc::new(manual.clone()), Some(manual)),
            ClockChoice::Custom(clock) => (clock, None),
        };
        let model: Arc<dyn ModelClient> = match self.model {
            ModelChoice::Script(script) => {
                Arc::new(ScriptedModel::from_toml_str(&script, clock.clone()).expect("script"))
            }
            ModelChoice::Client(model) => model,
        };
        let types = AgentTypes::new(self.types.unwrap_or_else(cast)).expect("types");
        let store = self
            .store
            .unwrap_or_else(|| Arc::new(MemoryStore::new()) as Arc<dyn ThreadStore>);
        let settings = agentd::Settings::from_overrides("").expect("the default settings");
        let mut builder = agentd::Builder::new(settings)
            .clock(clock)
            .store(store.clone())
            .model(model)
            .types(types);
        for tweak in self.tweaks {
            builder = builder.config(tweak);
        }
        if !self.recover {
            builder = builder.without_recovery();
        }
        let service = builder.build().await.expect("the agent system starts");
        TestSystem {
            system: service.system.clone(),
            store,
            bus: service.bus.clone(),
            manual,
        }
    }
}

impl TestSystem {
    /// How to start one: see [`TestSystemBuilder`].
    pub fn builder<'a>() -> TestSystemBuilder<'a> {
        TestSystemBuilder {
            model: ModelChoice::Script(ECHO_SCRIPT.to_string()),
            types: None,
            store: None,
            clock: ClockChoice::System,
            tweaks: Vec::new(),
            recover: true,
        }
    }

    /// The manual clock the builder started it on ([`TestSystemBuilder::manual_clock`]), to
    /// move time and count sleepers.
    pub fn manual_clock(&self) -> ManualClock {
        self.manual
            .clone()
            .expect("the system was built with .manual_clock()")
    }

    /// Spawns an agent as `request` says, which must succeed: its record.
    pub async fn spawn(&self, request: SpawnRequest) -> AgentRecord {
        self.system.spawn(request).await.expect("spawn")
    }

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
