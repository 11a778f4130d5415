//! agentd as an A2A *client*: a provider of `backend = "a2a"` whose agents' turns are answered
//! by a remote agent written with the official SDK's server classes (`tests/a2a/remote.py`,
//! `a2a-sdk` installed by `scripts/test.sh` into `target/.venv-a2a`). The remote is a Manage
//! worker (sync and async, one remote context per named thread), a `spawn_agent` child, a root
//! that asks a question through `input-required`, streams its answer as `text_delta` events,
//! answers with data parts and reports its tokens, and has its task cancelled with the agent —
//! with the embedded store, in one process; and across two agentd processes on Redis (a worker
//! or sub-agent in one process for a root in the other), through a `kill -9` of agentd while
//! the remote works in each case. The tests skip, saying so, only when the venv is
//! missing: CI runs `scripts/test.sh`, which always installs it.

use agentd_actors::ModelClient;
use agentd_models::{A2aModel, HttpSettings, ModelRouter, ScriptedModel};
use agentd_proto::{AgentStatus, Control, Event, ManageOptions, Role};
use agentd_tests::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python() -> Option<PathBuf> {
    let py = root().join("target/.venv-a2a/bin/python");
    py.exists().then_some(py)
}

/// The SDK remote agent, killed when dropped.
struct RemoteAgent {
    child: Child,
    url: String,
    log: PathBuf,
    calls: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for RemoteAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How a [`RemoteAgent`] runs.
struct Options {
    /// Its card says it streams.
    streams: bool,
    /// It asks for `Authorization: Bearer <token>`.
    token: Option<&'static str>,
    /// How long it works on a message containing "slow".
    slow_secs: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            streams: true,
            token: None,
            slow_secs: 3,
        }
    }
}

impl RemoteAgent {
    fn start(py: &PathBuf, streams: bool) -> RemoteAgent {
        Self::start_with(
            py,
            Options {
                streams,
                ..Options::default()
            },
        )
    }

    fn start_with(py: &PathBuf, options: Options) -> RemoteAgent {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("received.jsonl");
        let calls = dir.path().join("calls.jsonl");
        let mut cmd = Command::new(py);
        cmd.arg(root().join("tests/a2a/remote.py"))
            .args(["--port", &port.to_string()])
            .args(["--log", &log.display().to_string()])
            .args(["--calls", &calls.display().to_string()])
            .args(["--slow", &options.slow_secs.to_string()]);
        if !options.streams {
            cmd.arg("--no-stream");
        }
        if let Some(t) = options.token {
            cmd.args(["--token", t]);
        }
        let child = cmd.spawn().expect("start the remote agent");
        let url = format!("http://127.0.0.1:{port}");
        let card = format!("{url}/.well-known/agent-card.json");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while ureq::get(&card).call().is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the remote agent did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        RemoteAgent {
            child,
            url,
            log,
            calls,
            _dir: dir,
        }
    }

    /// The JSON-RPC methods called at the remote, in order.
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.calls)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["method"].as_str().map(str::to_string))
            .collect()
    }

    fn card_url(&self) -> String {
        format!("{}/.well-known/agent-card.json", self.url)
    }

    /// The messages the remote received.
    fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// A JSON-RPC call to the remote, as any A2A client makes it.
    fn rpc(&self, method: &str, params: Value) -> Value {
        let reply: Value = ureq::post(&format!("{}/", self.url))
            .set("A2A-Version", "1.0")
            .set("Authorization", "Bearer remote-secret")
            .send_json(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .unwrap()
            .into_json()
            .unwrap();
        reply["result"].clone()
    }

    fn backend(&self) -> Arc<dyn ModelClient> {
        Arc::new(
            A2aModel::new(
                self.card_url(),
                Vec::new(),
                HttpSettings {
                    base_url: String::new(),
                    api_key: String::new(),
                    timeout: Duration::from_secs(30),
                    stream: true,
                    idle_timeout: Duration::from_secs(30),
                    max_retries: 0,
                    backoff: Duration::from_millis(100),
                },
            )
            .unwrap(),
        )
    }
}

const SCRIPT: &str = r#"
[[rule]]
agent = "lead"
role = "user"
contains = "From Ops"
text = "Noted the forward."

[[rule]]
agent = "lead"
role = "tool"
text = "Tool said: {{input}}"

[[rule]]
agent = "lead"
text = "lead here"
"#;

/// A system on the embedded store (in the directory it answers with) whose `ops` worker (of
/// `lead`) is the remote agent (provider `remote`).
fn system(remote: &RemoteAgent) -> (TestSystem, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let script =
        ScriptedModel::from_toml_str(SCRIPT, Arc::new(agentd_actors::SystemClock)).unwrap();
    let model = ModelRouter::new(Arc::new(script)).with("remote", remote.backend());
    let mut types = default_types(ManageOptions::default());
    for t in &mut types {
        if t.name == "ops" {
            t.provider = Some("remote".into());
        }
        if t.name == "subagent" || t.name == "plain" {
            t.workers.clear();
        }
    }
    let mut sub = agent_type("remote_sub", "Remote sub-agent", &[]);
    sub.provider = Some("remote".into());
    types.push(sub);
    let sys = TestSystem::builder()
        .model(Arc::new(model))
        .embedded(dir.path())
        .types(types)
        .config(|c| {
            c.providers.insert("remote".into());
        })
        .start();
    (sys, dir)
}

async fn manage(sys: &TestSystem, caller: &str, args: Value) -> Value {
    sys.system
        .invoke_tool(Some(caller), "Manage", args)
        .await
        .expect("Manage")
}

macro_rules! remote_or_skip {
    ($streams:expr) => {{
        let Some(py) = python() else {
            eprintln!(
                "SKIPPED: the A2A SDK is not installed (target/.venv-a2a); `bash scripts/test.sh` installs it"
            );
            return;
        };
        RemoteAgent::start(&py, $streams)
    }};
}

#[actix_rt::test]
async fn a_remote_agent_answers_as_a_sync_manage_worker_in_one_remote_context() {
    for streams in [false, true] {
        let remote = remote_or_skip!(streams);
        let (sys, _dir) = system(&remote);
        let lead = sys.root("lead", None).await;
        let send = |message: &str, alias: &str| json!({"command": "send_message", "worker": "Ops", "message": message, "threadAlias": alias});
        let first = manage(&sys, &lead.id, send("hello there", "r")).await;
        assert_eq!(first["status"], "ok", "{first}");
        assert_eq!(first["messages"], json!(["remote #1 heard: hello there"]));
        let child = first["childThreadId"].as_str().unwrap().to_string();
        // The same named thread is the same remote conversation.
        let second = manage(&sys, &lead.id, send("and again", "r")).await;
        assert_eq!(second["childThreadId"], child.as_str());
        assert_eq!(second["messages"], json!(["remote #2 heard: and again"]));
        // Another named thread is another remote context.
        let other = manage(&sys, &lead.id, send("elsewhere", "s")).await;
        assert_eq!(other["messages"], json!(["remote #1 heard: elsewhere"]));

        let received = remote.received();
        assert_eq!(received.len(), 3, "{received:?}");
        assert_eq!(received[0]["contextId"], received[1]["contextId"]);
        assert_ne!(received[0]["contextId"], received[2]["contextId"]);
        // Message ids derive from the input entries: the first is the child's first entry's.
        let thread = sys.thread(&child).await;
        assert_eq!(
            received[0]["messageId"],
            json!(format!("agentd-{}", thread[0].id))
        );
        let rec = sys.wait_for_status(&child, AgentStatus::Idle).await;
        let session: Value = serde_json::from_str(
            &rec.agent_cli
                .and_then(|c| c.session_id)
                .expect("the remote context on the record"),
        )
        .unwrap();
        assert_eq!(session["contextId"], received[0]["contextId"]);
        assert_eq!(
            sys.system.deps().model.backend_of(Some("remote")),
            "a2a",
            "streams: {streams}"
        );
    }
}

#[actix_rt::test]
async fn a_remote_agent_answers_an_async_manage_worker_and_the_answer_is_forwarded() {
    let remote = remote_or_skip!(true);
    let (sys, _dir) = system(&remote);
    let lead = sys.root("lead", None).await;
    let sent = manage(
        &sys,
        &lead.id,
        json!({"command": "send_message", "worker": "Ops", "message": "status please", "threadAlias": "bg", "mode": "async"}),
    )
    .await;
    let child = sent["childThreadId"].as_str().unwrap().to_string();
    sys.wait_for_entry(&child, Role::Assistant, "remote #1 heard: status please")
        .await;
    sys.wait_for_entry(&lead.id, Role::User, "remote #1 heard: status please")
        .await;
    assert_eq!(remote.received().len(), 1);
}

#[actix_rt::test]
async fn a_streaming_remote_sends_text_deltas_and_a_spawned_remote_yields_its_answer() {
    let remote = remote_or_skip!(true);
    let (sys, _dir) = system(&remote);
    let mut events = sys.events();
    let lead = sys.root("lead", None).await;
    let child = sys
        .spawn_child(&lead.id, "remote_sub", "count the ships")
        .await;
    let mut deltas = String::new();
    while deltas != "remote #1 heard: count the ships" {
        let e = next_event(
            &mut events,
            "the remote's text deltas",
            |e| matches!(e, Event::TextDelta { agent_id, .. } if *agent_id == child),
        )
        .await;
        if let Event::TextDelta { text, .. } = e {
            deltas.push_str(&text);
        }
    }
    let rec = sys.wait_for_status(&child, AgentStatus::Completed).await;
    assert_eq!(
        rec.result.as_deref(),
        Some(&json!("remote #1 heard: count the ships"))
    );
}

#[actix_rt::test]
async fn input_required_makes_the_agent_wait_and_the_answer_goes_to_the_same_remote_task() {
    for streams in [true, false] {
        let remote = remote_or_skip!(streams);
        let (sys, _dir) = system(&remote);
        let ops = sys.root("ops", Some("ask me where")).await;
        let rec = sys
            .wait_for_status(&ops.id, AgentStatus::WaitingQuestion)
            .await;
        assert_eq!(rec.status_reason.as_deref(), Some("Which region?"));
        let shown = agentd_proto::view::AgentSummary::of(&rec);
        assert_eq!(
            shown.remote_task_id.as_deref(),
            remote.received()[0]["taskId"].as_str(),
            "inspect names the remote task that waits"
        );
        sys.system
            .provide(&ops.id, AgentStatus::WaitingQuestion, "north")
            .await
            .unwrap();
        // The answer reaches the remote as agentd writes it in the thread.
        sys.wait_for_entry(&ops.id, Role::Assistant, "region noted: Answer: north")
            .await;
        let received = remote.received();
        assert_eq!(received.len(), 2, "{received:?}");
        assert_eq!(
            received[0]["taskId"], received[1]["taskId"],
            "the answer continues the remote task"
        );
        let task = remote.rpc("GetTask", json!({"id": received[0]["taskId"]}));
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    }
}

#[actix_rt::test]
async fn a_remotes_data_parts_are_json_text_and_its_reported_tokens_count() {
    for streams in [true, false] {
        let remote = remote_or_skip!(streams);
        let (sys, _dir) = system(&remote);
        let ops = sys.root("ops", Some("data please")).await;
        // (Protocol Buffers' JSON writes the `Struct`'s number as a double.)
        sys.wait_for_entry(&ops.id, Role::Assistant, "counted\n{\"ships\":3.0}")
            .await;
        // The remote reports its tokens under `agentd.usage`: they are the agent's usage,
        // which its budgets count.
        let rec = sys.wait_for_status(&ops.id, AgentStatus::Idle).await;
        assert_eq!(
            (rec.usage.input, rec.usage.output),
            (11, 7),
            "streams: {streams}"
        );
    }
    // A budget of fewer tokens than the remote reports pauses the agent after its answer.
    let remote = remote_or_skip!(true);
    let (sys, _dir) = system(&remote);
    let capped = sys
        .system
        .spawn(agentd_proto::SpawnRequest {
            agent_type: Some("ops".into()),
            prompt: Some("data please".into()),
            budget: Some(agentd_proto::Budget {
                max_tokens: Some(10),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let rec = sys.wait_for_status(&capped.id, AgentStatus::Paused).await;
    assert_eq!(
        rec.status_reason.as_deref(),
        Some("budget_exceeded: tokens")
    );
}

#[actix_rt::test]
async fn cancelling_the_agent_cancels_its_remote_task() {
    let remote = remote_or_skip!(true);
    let (sys, _dir) = system(&remote);
    let ops = sys.root("ops", Some("slow work")).await;
    wait_until("the remote to receive the message", || async {
        !remote.received().is_empty()
    })
    .await;
    // Wait for the first streamed event to have named the task.
    tokio::time::sleep(Duration::from_millis(300)).await;
    sys.system.control(&ops.id, Control::Cancel).await.unwrap();
    let task_id = remote.received()[0]["taskId"].clone();
    wait_until("the remote task to be cancelled", || async {
        remote.rpc("GetTask", json!({"id": task_id}))["status"]["state"] == "TASK_STATE_CANCELED"
    })
    .await;
    // A question the remote waits on is cancelled with its agent too.
    let asker = sys.root("ops", Some("ask me now")).await;
    sys.wait_for_status(&asker.id, AgentStatus::WaitingQuestion)
        .await;
    let waiting = remote.received()[1]["taskId"].clone();
    sys.system
        .control(&asker.id, Control::Terminate)
        .await
        .unwrap();
    wait_until("the waiting remote task to be cancelled", || async {
        remote.rpc("GetTask", json!({"id": waiting}))["status"]["state"] == "TASK_STATE_CANCELED"
    })
    .await;
}

#[test]
fn a_remote_answer_lands_once_across_a_kill_9_of_agentd_while_the_remote_works() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    for streams in [true, false] {
        kill_9_of_agentd_while_the_remote_works(&py, streams);
    }
}

/// An embedded agentd killed while a remote (streaming or not) works on its agent's message;
/// the restarted agentd finds the remote task and follows it (`SubscribeToTask` when the
/// remote streams, else `GetTask`) instead of sending the message again.
fn kill_9_of_agentd_while_the_remote_works(py: &PathBuf, streams: bool) {
    let remote = RemoteAgent::start_with(
        py,
        Options {
            streams,
            token: Some("remote-secret"),
            slow_secs: 5,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let types = dir.path().join("types");
    std::fs::create_dir_all(&types).unwrap();
    std::fs::write(
        types.join("far.toml"),
        "name = \"far\"\ntitle = \"Far\"\nprovider = \"remote\"\n",
    )
    .unwrap();
    // The provider as a config file writes it: `kind`, the card, a header naming a variable.
    let config = dir.path().join("agentd.toml");
    std::fs::write(
        &config,
        format!(
            "[providers.remote]\nkind = \"a2a\"\ncard_url = \"{}\"\ntimeout_ms = 30000\n\
             headers = {{ Authorization = \"Bearer ${{REMOTE_TOKEN}}\" }}\n",
            remote.card_url()
        ),
    )
    .unwrap();
    let env = [
        ("AGENTD_CONFIG", config.display().to_string()),
        ("REMOTE_TOKEN", "remote-secret".to_string()),
        ("AGENTD__STORE__KIND", "embedded".to_string()),
        (
            "AGENTD__STORE__DATA_DIR",
            dir.path().join("data").display().to_string(),
        ),
        ("AGENTD__AGENTS__DIR", types.display().to_string()),
    ];
    let a = AgentdProcess::start(&env);
    // A plain answer first: the header reached the remote (it refuses requests without it).
    let quick = a.spawn("far", "warm up");
    a.wait_for("the first answer", |p| {
        p.texts(&quick)
            .iter()
            .any(|t| t == "remote #1 heard: warm up")
    });
    let id = a.spawn("far", "slow job");
    eventually_blocking(Duration::from_secs(20), "the remote to get the job", || {
        remote.received().len() == 2
    });
    a.kill9();
    let b = AgentdProcess::start(&env);
    b.wait_for("the remote's answer after the restart", |p| {
        p.texts(&id)
            .iter()
            .any(|t| t == "remote #1 heard: slow job")
    });
    b.wait_for("the agent to be idle", |p| p.status(&id) == "idle");
    let answers: Vec<String> = b
        .texts(&id)
        .into_iter()
        .filter(|t| t.contains("heard"))
        .collect();
    assert_eq!(
        answers,
        vec!["remote #1 heard: slow job"],
        "the answer lands once"
    );
    let received = remote.received();
    assert_eq!(
        received.len(),
        2,
        "the job reached the remote once: {received:?}"
    );
    // The restarted process found the task still working and followed it: by its stream
    // when the remote streams, else by reading it.
    let calls = remote.calls();
    let followed = if streams {
        "SubscribeToTask"
    } else {
        "GetTask"
    };
    assert!(calls.iter().any(|m| m == followed), "{calls:?}");
    assert!(
        streams || !calls.iter().any(|m| m == "SubscribeToTask"),
        "{calls:?}"
    );
}

/// The Redis namespace and partitions of [`RemoteCluster`].
const NS: &str = "a2aclient";
const PARTITIONS: u32 = 4;

/// agentd processes on a private redis-server (4 partitions, 1 s leases) whose `far` agents
/// are answered by a remote agent (provider `remote`, `kind = "a2a"`) and whose `boss` roots
/// have `far` as their Manage worker (`Far`, sync by default, async forwards relayed).
struct RemoteCluster {
    _redis: RedisServer,
    _dir: tempfile::TempDir,
    env: Vec<(&'static str, String)>,
}

impl RemoteCluster {
    fn new(remote: &RemoteAgent) -> RemoteCluster {
        let redis = RedisServer::start();
        let dir = tempfile::tempdir().unwrap();
        let types = dir.path().join("types");
        std::fs::create_dir_all(&types).unwrap();
        std::fs::write(
            types.join("far.toml"),
            "name = \"far\"\ntitle = \"Far\"\nprovider = \"remote\"\n",
        )
        .unwrap();
        std::fs::write(
            types.join("boss.toml"),
            "name = \"boss\"\ntitle = \"Boss\"\nworkers = [\"far\"]\n\n[manage]\nmode = \"sync\"\n\
             sync_timeout_ms = 20000\nasync_prefix = \"From {{agentTitle}}: \"\n\
             async_forward = \"relay\"\n",
        )
        .unwrap();
        let config = dir.path().join("agentd.toml");
        std::fs::write(
            &config,
            format!(
                "[providers.remote]\nkind = \"a2a\"\ncard_url = \"{}\"\ntimeout_ms = 30000\n",
                remote.card_url()
            ),
        )
        .unwrap();
        let env = vec![
            ("AGENTD_CONFIG", config.display().to_string()),
            ("AGENTD__AGENTS__DIR", types.display().to_string()),
            ("AGENTD__REDIS__URL", redis.url()),
            ("AGENTD__REDIS__NAMESPACE", NS.to_string()),
            ("AGENTD__REDIS__PARTITIONS", PARTITIONS.to_string()),
            ("AGENTD__REDIS__LEASE_MS", "1000".to_string()),
        ];
        RemoteCluster {
            _redis: redis,
            _dir: dir,
            env,
        }
    }

    /// Two processes, once they have split the partitions between them.
    fn balanced_pair(&self) -> (AgentdProcess, AgentdProcess) {
        let (a, b) = (
            AgentdProcess::start(&self.env),
            AgentdProcess::start(&self.env),
        );
        agentd_tests::process::wait_balanced(&a, &b, PARTITIONS);
        (a, b)
    }
}

fn owns(p: &AgentdProcess, id: &str) -> bool {
    let partition = agentd_store::Keys::new(NS, PARTITIONS).partition_of(id);
    p.partitions_owned().contains(&partition)
}

/// `Manage` of `root`'s `Far` worker through process `p`: its answer.
fn manage_far(p: &AgentdProcess, root: &str, message: &str, alias: &str, mode: &str) -> Value {
    let r = p
        .post(
            &format!("/v1/agents/{root}/tools/Manage"),
            json!({"command": "send_message", "worker": "Far", "message": message, "threadAlias": alias, "mode": mode}),
        )
        .unwrap_or_else(|e| panic!("Manage {message:?}: {e:?}"));
    assert!(r["status"] == "ok" || r["status"] == "sent", "{r}");
    r
}

/// A `boss` root that `a` owns and the alias of a `Far` worker thread that `b` owns (made by
/// sync sends until one lands there, each answered by the remote): `(root, alias, worker)`.
fn root_and_worker_across(a: &AgentdProcess, b: &AgentdProcess) -> (String, String, String) {
    let root = loop {
        let id = a.spawn_with(json!({"agent_type": "boss"}));
        if owns(a, &id) {
            break id;
        }
    };
    for i in 0..32 {
        let alias = format!("w{i}");
        let r = manage_far(a, &root, &format!("hello {i}"), &alias, "sync");
        assert_eq!(
            r["messages"],
            json!([format!("remote #1 heard: hello {i}")])
        );
        let worker = r["childThreadId"].as_str().unwrap().to_string();
        if owns(b, &worker) {
            return (root, alias, worker);
        }
    }
    panic!("no worker landed on the other process");
}

/// The entries of `id`'s thread that contain `text`.
fn count_texts(p: &AgentdProcess, id: &str, text: &str) -> usize {
    p.texts(id).iter().filter(|t| t.contains(text)).count()
}

#[test]
fn a_remote_worker_in_one_process_answers_a_root_in_the_other_sync_and_async() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let remote = RemoteAgent::start(&py, true);
    let cluster = RemoteCluster::new(&remote);
    let (a, b) = cluster.balanced_pair();
    let (root, alias, worker) = root_and_worker_across(&a, &b);
    assert!(
        b.get(&format!("/v1/agents/{worker}"))["live"] == true,
        "the worker runs in B"
    );
    // Sync again, through either process: the same thread, the same remote conversation.
    let r = manage_far(&b, &root, "sync again", &alias, "sync");
    assert_eq!(r["childThreadId"], worker.as_str());
    assert_eq!(r["messages"], json!(["remote #2 heard: sync again"]));
    // Async: the remote's answer is forwarded to the root in A, once.
    manage_far(&a, &root, "async now", &alias, "async");
    a.wait_for("the forward", |p| {
        count_texts(p, &root, "From Far: remote #3 heard: async now") == 1
    });
    let mine: Vec<Value> = remote
        .received()
        .into_iter()
        .filter(|m| m["text"] == "sync again" || m["text"] == "async now")
        .collect();
    assert_eq!(mine.len(), 2, "{mine:?}");
    assert_eq!(mine[0]["contextId"], mine[1]["contextId"]);
    // The remote context the worker talks in, as any process shows it.
    let view = a.get(&format!("/v1/agents/{worker}"));
    assert_eq!(view["remote_context_id"], mine[0]["contextId"], "{view}");
    assert_eq!(view["remote_task_id"], Value::Null);
    // A `far` sub-agent of the root that runs in B: its remote answer is its result.
    let child = (0..16)
        .map(|_| {
            a.post(
                &format!("/v1/agents/{root}/tools/spawn_agent"),
                json!({"agent_type": "far", "prompt": "count the ships"}),
            )
            .unwrap()["agent_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .find(|id| owns(&b, id))
        .expect("a sub-agent on the other process");
    a.wait_for("the sub-agent's result", |p| {
        p.get(&format!("/v1/agents/{child}"))["result"] == "remote #1 heard: count the ships"
    });
    assert_eq!(a.status(&child), "completed");
    // A remote question to an agent in B, answered through A: the answer goes to the same
    // remote task.
    let asker = loop {
        let id = a.spawn("far", "ask me where");
        if owns(&b, &id) {
            break id;
        }
    };
    a.wait_for("the remote's question", |p| {
        p.status(&asker) == "waiting_question"
    });
    let waiting = a.get(&format!("/v1/agents/{asker}"))["remote_task_id"].clone();
    assert!(waiting.is_string(), "the remote task that waits: {waiting}");
    a.post(
        &format!("/v1/agents/{asker}/answer"),
        json!({"answer": "north"}),
    )
    .unwrap();
    a.wait_for("the answer to reach the remote task", |p| {
        count_texts(p, &asker, "region noted:") == 1
    });
    let answer = remote
        .received()
        .into_iter()
        .find(|m| m["text"].as_str().is_some_and(|t| t.contains("north")))
        .expect("the answer at the remote");
    assert_eq!(
        answer["taskId"], waiting,
        "the answer continues the remote task"
    );
    assert_eq!(count_texts(&a, &worker, "remote #3 heard: async now"), 1);
}

#[test]
fn kill_9_of_the_process_running_a_remote_task_lands_its_answer_once_in_the_other() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let remote = RemoteAgent::start_with(
        &py,
        Options {
            slow_secs: 6,
            ..Options::default()
        },
    );
    let cluster = RemoteCluster::new(&remote);
    let (a, b) = cluster.balanced_pair();
    let (root, alias, worker) = root_and_worker_across(&a, &b);
    let before = remote.received().len();
    manage_far(&a, &root, "slow job", &alias, "async");
    eventually_blocking(Duration::from_secs(20), "the remote to get the job", || {
        remote.received().len() == before + 1
    });
    b.kill9();
    // A takes B's partitions over, runs the worker's turn again, finds the message at the
    // remote and follows its task (streamed: SubscribeToTask) instead of sending it again.
    a.wait_for("all partitions on A", |p| {
        p.partitions_owned().len() == PARTITIONS as usize
    });
    eventually_blocking(Duration::from_secs(30), "the forward of the answer", || {
        count_texts(&a, &root, "From Far: remote #2 heard: slow job") == 1
    });
    a.wait_for("the worker to be idle", |p| p.status(&worker) == "idle");
    assert_eq!(
        count_texts(&a, &worker, "remote #2 heard: slow job"),
        1,
        "the answer lands once: {:?}",
        a.texts(&worker)
    );
    assert_eq!(
        count_texts(&a, &root, "heard: slow job"),
        1,
        "forwarded once: {:?}",
        a.texts(&root)
    );
    let jobs = remote
        .received()
        .into_iter()
        .filter(|m| m["text"] == "slow job")
        .count();
    assert_eq!(jobs, 1, "the job reached the remote once");
    assert!(
        remote.calls().iter().any(|m| m == "SubscribeToTask"),
        "the recovered task was followed by SubscribeToTask: {:?}",
        remote.calls()
    );
}

/// agentd's own A2A server as the remote of another agentd: an agent of one process whose
/// provider is the other's `research` type talks to a context there, its answer streamed, and
/// the tokens the remote's turn used (reported as `agentd.usage`) are its own.
#[test]
fn an_agentd_agent_type_is_the_remote_of_another_agentd() {
    let dir = tempfile::tempdir().unwrap();
    let server = AgentdProcess::start(&[
        ("AGENTD__A2A__EXPOSE", "research".to_string()),
        (
            "AGENTD__MODEL__SCRIPT",
            root().join("tests/a2a/script.toml").display().to_string(),
        ),
        ("AGENTD__STORE__KIND", "memory".to_string()),
    ]);
    let types = dir.path().join("types");
    std::fs::create_dir_all(&types).unwrap();
    std::fs::write(
        types.join("far.toml"),
        "name = \"far\"\ntitle = \"Far\"\nprovider = \"other\"\n",
    )
    .unwrap();
    let config = dir.path().join("agentd.toml");
    std::fs::write(
        &config,
        format!(
            "[providers.other]\nkind = \"a2a\"\ncard_url = \"{}/a2a/research/.well-known/agent-card.json\"\n",
            server.url
        ),
    )
    .unwrap();
    let client = AgentdProcess::start(&[
        ("AGENTD_CONFIG", config.display().to_string()),
        ("AGENTD__AGENTS__DIR", types.display().to_string()),
        ("AGENTD__STORE__KIND", "memory".to_string()),
    ]);
    let far = client.spawn("far", "hello over there");
    client.wait_for("the remote agentd's answer", |p| {
        p.texts(&far).iter().any(|t| t == "echo: hello over there")
    });
    client.wait_for("the agent to be idle", |p| p.status(&far) == "idle");
    let mine = client.get(&format!("/v1/agents/{far}"));
    let context = mine["remote_context_id"]
        .as_str()
        .expect("the remote context")
        .to_string();
    // The context there is a root of `research` whose turn answered; its tokens are ours.
    let theirs = server.get(&format!("/v1/agents/{context}"));
    assert_eq!(theirs["agent_type"], "research", "{theirs}");
    assert!(mine["tokens_used"].as_u64().unwrap_or(0) > 0, "{mine}");
    assert_eq!(mine["usage"], theirs["usage"], "{mine}\n{theirs}");
}
