//! The real `agentd` binary on its embedded store: the demo round trip over HTTP, agentctl
//! against it, then a restart on the same data directory keeps threads, aliases and the
//! parent→child map.

use agentd_tests::AgentdProcess;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

type Agentd = AgentdProcess;

fn start_agentd(data_dir: &Path) -> Agentd {
    AgentdProcess::start(&[
        ("AGENTD__STORE__DATA_DIR", data_dir.display().to_string()),
        ("AGENTD__RUNTIME__ARBITERS", "2".to_string()),
    ])
}

fn texts(thread: &Value) -> Vec<String> {
    thread["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["text"].as_str().unwrap_or("").to_string())
        .collect()
}

fn agentctl() -> PathBuf {
    agentd_tests::process::binary("agentctl")
}

#[test]
fn demo_round_trip_agentctl_and_restart_on_the_same_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let agentd = start_agentd(dir.path());
    let info = agentd.get("/v1/info");
    assert_eq!(info["model_backend"], "scripted");
    assert_eq!(info["store"], "embedded");

    // spawn → Manage (sync) → Researcher → spawn_agent → Coder → yield → Lead answers.
    let lead = agentd
        .post(
            "/v1/agents",
            json!({"agent_type": "lead", "prompt": "build a parser"}),
        )
        .unwrap();
    let lead_id = lead["agent_id"].as_str().unwrap().to_string();
    let thread_path = format!("/v1/agents/{lead_id}/thread");
    agentd.wait_for("the lead's final answer", |a| {
        texts(&a.get(&thread_path))
            .iter()
            .any(|t| t.starts_with("All done."))
    });
    let before = agentd.get(&thread_path);
    let t = texts(&before);
    assert!(
        t.iter()
            .any(|x| x == "From Coder: Implemented the tokenizer, the grammar and 12 tests."),
        "{t:#?}"
    );

    let tree = agentd.get("/v1/tree");
    let root = &tree["roots"][0];
    assert_eq!(root["agent_id"], lead_id.as_str());
    let kids = root["children"].as_array().unwrap();
    let titles: Vec<&str> = kids.iter().map(|k| k["title"].as_str().unwrap()).collect();
    assert_eq!(titles, vec!["Researcher", "Coder"]);
    let coder = kids.iter().find(|k| k["title"] == "Coder").unwrap();
    agentd.wait_for("coder completed", |a| {
        a.get(&format!(
            "/v1/agents/{}",
            coder["agent_id"].as_str().unwrap()
        ))["status"]
            == "completed"
    });
    let researcher_id = kids[0]["agent_id"].as_str().unwrap().to_string();

    // A Manage call without a thread id is refused with the seed's code, as JSON.
    let err = agentd
        .post(
            "/v1/tools/Manage",
            json!({"args": {"command": "check_status", "threadAlias": "x"}}),
        )
        .unwrap_err();
    assert_eq!(err.0, 400);
    assert_eq!(err.1["code"], "missing_thread_id");
    let err = agentd
        .post(
            "/v1/agents/0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162/messages",
            json!({"text": "hi"}),
        )
        .unwrap_err();
    assert_eq!(
        (err.0, err.1["code"].as_str()),
        (404, Some("agent_not_found"))
    );

    // agentctl drives the same API.
    let out = Command::new(agentctl())
        .args(["--url", &agentd.url, "tree"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains(&format!("Lead [idle] {lead_id} (lead)")),
        "{shown}"
    );
    assert!(shown.contains("  Coder [completed]"), "{shown}");
    let out = Command::new(agentctl())
        .args(["--url", &agentd.url, "--json", "inspect", &researcher_id])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["title"], "Researcher");
    let missing = "0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162";
    let out = Command::new(agentctl())
        .args(["--url", &agentd.url, "inspect", missing])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("agent_not_found"));
    let out = Command::new(agentctl())
        .args(["--url", &agentd.url, "inspect", "missing-id"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_argument"));
    // A direct follow-up to the worker: its answer stays on its own thread (sync mode, no wait).
    let out = Command::new(agentctl())
        .args(["--url", &agentd.url, "send", &researcher_id, "thanks"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let researcher_thread = format!("/v1/agents/{researcher_id}/thread");
    agentd.wait_for("second finding", |a| {
        texts(&a.get(&researcher_thread))
            .iter()
            .filter(|t| t.starts_with("Findings"))
            .count()
            == 2
    });
    let out = Command::new(agentctl())
        .args(["--url", &agentd.url, "thread", &researcher_id])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("user: thanks"));
    agentd.wait_for("researcher idle", |a| a.status(&researcher_id) == "idle");
    let before = agentd.get(&thread_path);

    // Restart on the same data directory.
    agentd.stop();
    let agentd = start_agentd(dir.path());
    assert_eq!(
        agentd.get(&thread_path)["entries"],
        before["entries"],
        "thread survives"
    );
    let children = agentd.get(&format!("/v1/agents/{lead_id}/children"));
    let ids: Vec<&str> = children["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["agent_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], researcher_id);
    // The alias still names the same child thread.
    let r = agentd
        .post(&format!("/v1/agents/{lead_id}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "more", "threadAlias": "research"}))
        .unwrap();
    assert_eq!(r["childThreadId"], researcher_id.as_str());
    assert_eq!(r["created"], false);
    assert_eq!(r["status"], "ok");
    let rt = texts(&agentd.get(&format!("/v1/agents/{researcher_id}/thread")));
    assert_eq!(
        rt.iter().filter(|t| t.starts_with("Findings")).count(),
        3,
        "{rt:#?}"
    );
    agentd.stop();
}

/// The start-up hint names where this process listens (a free port here, not agentctl's
/// default 7878): the `AGENTD_URL` it prints takes agentctl there, and with a token set it
/// says to export one (never printing the token).
#[test]
fn the_start_up_hint_points_agentctl_at_the_service_s_address() {
    let dir = tempfile::tempdir().unwrap();
    let agentd = AgentdProcess::start(&[
        ("AGENTD__STORE__DATA_DIR", dir.path().display().to_string()),
        ("AGENTD__AUTH__TOKEN", "hint-s3cret".to_string()),
    ]);
    let line = agentd.wait_for_log("export AGENTD_URL=");
    let url = line
        .split_once("export AGENTD_URL=")
        .map(|(_, url)| url.trim())
        .unwrap();
    assert_eq!(url, agentd.url, "{line}");
    assert_ne!(url, "http://127.0.0.1:7878", "a free port, not the default");
    let token_line = agentd.wait_for_log("export AGENTD_TOKEN=");
    let printed = agentd.log_lines().join("\n");
    assert!(!printed.contains("hint-s3cret"), "{token_line}");
    let out = Command::new(agentctl())
        .args(["--json", "info"])
        .env("AGENTD_URL", url)
        .env("AGENTD_TOKEN", "hint-s3cret")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["service"], "agentd");
    agentd.stop();
}

/// Runs `agentd` (the service, not `check-config`) with `env` and a settings file holding
/// `file`, which must refuse to start: what it wrote to stderr. A start that goes on fails
/// the test instead of hanging it.
fn refused_start(env: &[(&str, &str)], file: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentd.toml");
    std::fs::write(&config, file).unwrap();
    let mut cmd = Command::new(agentd_tests::process::binary("agentd"));
    cmd.env("AGENTD__SERVER__BIND", "127.0.0.1:0")
        .env("AGENTD__STORE__DATA_DIR", dir.path().join("data"))
        .env("AGENTD_CONFIG", &config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("agentd started with {env:?} and {file:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    stderr
}

/// Start-up refuses, in one line naming the setting, a `store.kind` that `redis.url`
/// contradicts (the URL no longer overrides it silently), a kind or a backend that does not
/// exist, and a key of another backend than its table's — from the environment or from a
/// settings file written for the flat `[model]` of before.
#[test]
fn start_up_refuses_contradicting_stores_unknown_kinds_and_other_backends_keys() {
    let url = "redis://127.0.0.1:1/0";
    for (env, file, says) in [
        (
            vec![
                ("AGENTD__STORE__KIND", "memory"),
                ("AGENTD__REDIS__URL", url),
            ],
            "",
            "error: configuration: store.kind is memory but redis.url is set: redis.url no \
             longer overrides store.kind. Set store.kind = \"redis\" (or leave it unset) to \
             run on Redis, or leave redis.url empty",
        ),
        (
            vec![("AGENTD__REDIS__URL", url)],
            "[store]\nkind = \"embedded\"\n",
            "store.kind is embedded but redis.url is set",
        ),
        (
            vec![("AGENTD__STORE__KIND", "redis")],
            "",
            "store.kind is redis: set redis.url",
        ),
        (
            vec![("AGENTD__STORE__KIND", "postgres")],
            "",
            "unknown variant `postgres`, expected one of `embedded`, `memory`, `redis` for key \
             `store.kind`",
        ),
        (
            vec![("AGENTD__MODEL__BACKEND", "gemini")],
            "",
            "model.backend `gemini` is not one of scripted, openai, anthropic, process, a2a",
        ),
        (
            vec![],
            "[providers.far]\nkind = \"grpc\"\n",
            "providers.far.backend `grpc` is not one of scripted, openai",
        ),
        (
            vec![
                ("AGENTD__MODEL__BACKEND", "openai"),
                ("AGENTD__MODEL__SCRIPT", "script.toml"),
            ],
            "",
            "model.script is a setting of the scripted backend, not of openai (model.backend)",
        ),
        (
            vec![],
            // A file of the flat `[model]` of before: a scripted default with HTTP timeouts.
            "[model]\nscript = \"s.toml\"\ntimeout_ms = 60000\n",
            "model.timeout_ms is a setting of the openai, anthropic, process and a2a \
             backends, not of scripted (model.backend): each backend takes only its own \
             settings",
        ),
        (
            vec![(
                "AGENTD__PROVIDERS__FAR__CARD_URL",
                "http://127.0.0.1:1/card",
            )],
            "[providers.far]\nbackend = \"anthropic\"\n",
            "providers.far.card_url is a setting of the a2a backend, not of anthropic",
        ),
    ] {
        let said = refused_start(&env, file);
        assert!(said.contains(says), "{env:?} {file:?}: {said}");
        assert_eq!(said.trim_end().lines().count(), 1, "one line: {said}");
    }
}

/// `store.kind = "redis"` runs on `redis.url`'s server, and so does `redis.url` alone (the kind
/// left unset); `/v1/info` names the store.
#[test]
fn redis_is_the_store_by_its_kind_or_by_its_url_alone() {
    let redis = agentd_tests::RedisServer::start();
    for kind in [Some("redis"), None] {
        let mut env = vec![
            ("AGENTD__REDIS__URL", redis.url()),
            ("AGENTD__REDIS__PARTITIONS", "4".to_string()),
        ];
        env.extend(kind.map(|k| ("AGENTD__STORE__KIND", k.to_string())));
        let agentd = AgentdProcess::start(&env);
        assert_eq!(agentd.get("/v1/info")["store"], "redis", "{kind:?}");
        agentd.stop();
    }
}

/// `/v1/info` lists every provider with its backend and the capabilities the backend reports:
/// an HTTP API's limits are shared and its aborted input billed, Anthropic caches prompts,
/// and text streams in as its settings say; a process's limits are its own.
#[test]
fn the_info_shows_each_provider_s_backend_and_what_it_can_do() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentd.toml");
    std::fs::write(
        &config,
        "[store]\nkind = \"memory\"\n\
         [providers.live]\nbackend = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\n\
         [providers.whole]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\nstream = false\n\
         [providers.cli]\nbackend = \"process\"\ncommand = [\"cat\"]\n",
    )
    .unwrap();
    let agentd = AgentdProcess::start(&[("AGENTD_CONFIG", config.display().to_string())]);
    let info = agentd.get("/v1/info");
    let can = |shared, billed, strict, caching, streams| {
        json!({"shared_rate_limit": shared, "bills_aborted_input": billed,
               "strict_tool_pairing": strict, "prompt_caching": caching, "streams": streams})
    };
    assert_eq!(
        info["providers"],
        json!([
            {"name": "default", "backend": "scripted",
             "capabilities": can(false, false, false, false, true)},
            {"name": "cli", "backend": "process",
             "capabilities": can(false, false, false, false, false)},
            {"name": "live", "backend": "openai",
             "capabilities": can(true, true, true, false, true)},
            {"name": "whole", "backend": "anthropic",
             "capabilities": can(true, true, true, true, false)},
        ]),
        "{info:#}"
    );
    agentd.stop();
}
