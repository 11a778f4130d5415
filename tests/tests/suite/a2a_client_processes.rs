//! agentd as an A2A client, as real processes: a remote agent written with the SDK's server
//! classes (`agentd_tests::a2a_remote`) answering the agents of an embedded agentd killed
//! (`kill -9`) while the remote works; of two agentd processes on Redis (a Manage worker, sync
//! and async, a sub-agent and a question in one process for a root in the other, and a
//! `kill -9` of the process running the remote task); and agentd's own A2A server as the
//! remote of another agentd. The tests skip, saying so, only when the venv is missing: CI runs
//! `scripts/test.sh`, which always installs it.

use agentd_tests::a2a_remote::{Options, RemoteAgent, python};
use agentd_tests::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn a_remote_answer_lands_once_across_a_kill_9_of_agentd_while_the_remote_works() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    for (streams, rest) in [(true, false), (false, false), (true, true)] {
        kill_9_of_agentd_while_the_remote_works(&py, streams, rest);
    }
}

/// An embedded agentd killed while a remote (streaming or not, over JSON-RPC or HTTP+JSON)
/// works on its agent's message;
/// the restarted agentd finds the remote task and follows it (`SubscribeToTask` when the
/// remote streams, else `GetTask`) instead of sending the message again.
fn kill_9_of_agentd_while_the_remote_works(py: &PathBuf, streams: bool, rest: bool) {
    let remote = RemoteAgent::start_with(
        py,
        Options {
            streams,
            rest,
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
    let subscribed = |c: &String| c == "SubscribeToTask" || c.ends_with(":subscribe");
    let read = |c: &String| c == "GetTask" || c.starts_with("GET /tasks/");
    if streams {
        assert!(calls.iter().any(subscribed), "{calls:?}");
    } else {
        assert!(calls.iter().any(read), "{calls:?}");
        assert!(!calls.iter().any(subscribed), "{calls:?}");
    }
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
