//! Operating agentd as a real process: metrics after a run, live events over SSE, the OpenAPI
//! document against the real routes, bearer-token auth, the health check, SIGTERM with event
//! streams open and in the middle of a run.

use agentd_tests::AgentdProcess;
use agentd_tests::process::binary;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

fn metric(text: &str, line_prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(line_prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no metric {line_prefix} in:\n{text}"))
}

#[test]
fn metrics_events_and_openapi_after_a_scripted_run() {
    let p = AgentdProcess::start(&[("AGENTD__STORE__KIND", "memory".to_string())]);
    let lead = p.post("/v1/agents", json!({"agent_type": "lead"})).unwrap()["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    // Follow the lead's subtree over SSE before the run starts.
    let (tx, rx) = mpsc::channel::<Value>();
    let url = format!("{}/v1/events?agent_id={lead}", p.url);
    std::thread::spawn(move || {
        let resp = ureq::get(&url).call().unwrap();
        assert_eq!(resp.header("content-type"), Some("text/event-stream"));
        for line in BufReader::new(resp.into_reader()).lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data: ")
                && tx.send(serde_json::from_str(data).unwrap()).is_err()
            {
                return;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    p.post(
        &format!("/v1/agents/{lead}/messages"),
        json!({"text": "build a parser"}),
    )
    .unwrap();
    p.wait_for("the lead's answer", |p| {
        p.texts(&lead).iter().any(|t| t.starts_with("All done."))
    });
    // The child's yield reached the lead's event stream, tagged with the child's id.
    let mut spawned_children = Vec::new();
    let yielded = loop {
        let e = rx.recv_timeout(Duration::from_secs(10)).expect("events");
        if e["type"] == "spawned" && e["parent_id"] == lead.as_str() {
            spawned_children.push(e["agent_id"].as_str().unwrap().to_string());
        }
        if e["type"] == "yielded" {
            break e;
        }
    };
    assert_eq!(yielded["parent_id"], lead.as_str());
    assert!(spawned_children.contains(&yielded["agent_id"].as_str().unwrap().to_string()));

    let (status, _) = p.get_status("/metrics", None);
    assert_eq!(status, 200);
    let text = ureq::get(&format!("{}/metrics", p.url))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    assert!(metric(&text, "agentd_messages_in_total{kind=\"message\"}") >= 4.0);
    assert_eq!(
        metric(&text, "agentd_messages_out_total{kind=\"yield\"}"),
        1.0
    );
    assert_eq!(
        metric(&text, "agentd_agents{status=\"completed\"}"),
        1.0,
        "the coder"
    );
    assert!(metric(&text, "agentd_turn_seconds_count{agent_type=\"lead\"}") >= 2.0);
    assert!(
        metric(
            &text,
            "agentd_model_call_seconds_count{provider=\"default\",backend=\"scripted\"}"
        ) >= 5.0
    );
    assert!(
        metric(
            &text,
            "agentd_tokens_total{model=\"default\",kind=\"input\"}"
        ) > 0.0
    );
    assert!(metric(&text, "agentd_cost_usd_total{model=\"default\"}") > 0.0);
    assert_eq!(metric(&text, "agentd_inbox_depth"), 0.0);

    // Every route of the OpenAPI document exists on the server.
    let doc = p.get("/v1/openapi.json");
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 18);
    let mut routes: Vec<(String, String)> = paths
        .iter()
        .flat_map(|(path, methods)| {
            methods
                .as_object()
                .unwrap()
                .keys()
                .map(move |m| (path.clone(), m.clone()))
        })
        .collect();
    routes.sort_by_key(|(_, m)| m == "delete"); // delete the agent last
    {
        for (path, method) in &routes {
            let (path, method) = (path.as_str(), method.as_str());
            let real = path.replace("{id}", &lead).replace("{tool}", "Manage");
            let url = format!("{}{real}", p.url);
            if real == "/v1/events" {
                continue; // a stream; covered above
            }
            let req = ureq::request(&method.to_uppercase(), &url).timeout(Duration::from_secs(5));
            let status = match if method == "get" || method == "delete" {
                req.call()
            } else {
                req.send_json(json!({}))
            } {
                Ok(r) => r.status(),
                Err(ureq::Error::Status(code, _)) => code,
                Err(e) => panic!("{method} {real}: {e}"),
            };
            assert!(
                status != 404 && status != 405,
                "{method} {real} answered {status}"
            );
        }
    }
}

#[test]
fn the_api_requires_the_bearer_token_when_auth_is_on() {
    let p = AgentdProcess::start(&[
        ("AGENTD__STORE__KIND", "memory".to_string()),
        ("AGENTD__AUTH__REQUIRED", "true".to_string()),
        ("AGENTD__AUTH__TOKEN", "s3cret-token".to_string()),
    ]);
    let (status, body) = p.get_status("/v1/info", None);
    assert_eq!((status, body["code"].as_str()), (401, Some("unauthorized")));
    assert_eq!(p.get_status("/v1/info", Some("wrong")).0, 401);
    assert_eq!(p.get_status("/v1/events", None).0, 401);
    assert_eq!(p.get_status("/metrics", None).0, 401);
    assert_eq!(p.get_status("/v1/info", Some("s3cret-token")).0, 200);
    // The scheme's name is case-insensitive (RFC 7235); the token is not.
    for (value, status) in [
        ("bearer s3cret-token", 200),
        ("BEARER s3cret-token", 200),
        ("Bearer S3CRET-TOKEN", 401),
        ("Basic s3cret-token", 401),
    ] {
        let got = match ureq::get(&format!("{}/v1/info", p.url))
            .set("Authorization", value)
            .call()
        {
            Ok(r) => r.status(),
            Err(ureq::Error::Status(code, _)) => code,
            Err(e) => panic!("{value}: {e}"),
        };
        assert_eq!(got, status, "{value}");
    }
    // The container health check needs no token: /healthz of the bound port.
    let addr = p.url.trim_start_matches("http://");
    let out = Command::new(binary("agentd"))
        .args(["healthcheck", "--addr", addr])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(binary("agentd"))
        .args(["healthcheck", "--addr", "127.0.0.1:9"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "nothing listens there");
    assert_eq!(p.get_status("/healthz", None).0, 200, "probes stay open");
    assert_eq!(p.get_status("/readyz", None).0, 200);
    let out = Command::new(binary("agentctl"))
        .args(["--url", &p.url, "tree"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unauthorized"));
    let out = Command::new(binary("agentctl"))
        .args([
            "--url",
            &p.url,
            "--token",
            "s3cret-token",
            "spawn",
            "--type",
            "lead",
            "hi",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A non-loopback bind without a token is refused at start-up, with the reason.
    let out = Command::new(binary("agentd"))
        .arg("check-config")
        .env("AGENTD__SERVER__BIND", "0.0.0.0:7878")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("auth.token"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // check-config masks secrets.
    let out = Command::new(binary("agentd"))
        .arg("check-config")
        .env("AGENTD__AUTH__TOKEN", "s3cret-token")
        .env("AGENTD__STORE__KIND", "memory")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("max_depth = 1") && !shown.contains("s3cret-token"),
        "{shown}"
    );
}

#[test]
fn sigterm_with_event_streams_connected_exits_at_once() {
    let p = AgentdProcess::start(&[("AGENTD__STORE__KIND", "memory".to_string())]);
    let url = format!("{}/v1/events", p.url);
    // An open dashboard: a client that stays connected and reads ...
    let (tx, rx) = mpsc::channel::<&'static str>();
    let reader_url = url.clone();
    std::thread::spawn(move || {
        let resp = ureq::get(&reader_url).call().unwrap();
        tx.send("connected").unwrap();
        let mut body = resp.into_reader();
        let mut buf = [0u8; 1024];
        while matches!(std::io::Read::read(&mut body, &mut buf), Ok(n) if n > 0) {}
        let _ = tx.send("ended");
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok("connected"));
    // ... and one that went away without the server noticing yet (no event since).
    drop(ureq::get(&url).call().unwrap());
    let took = p.stop_within(Duration::from_secs(5));
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(1)),
        Ok("ended"),
        "the stream ended"
    );
}

#[test]
fn sigterm_while_it_starts_stops_it_cleanly_once_it_is_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(binary("agentd"))
        .env("AGENTD__SERVER__BIND", "127.0.0.1:0")
        .env("AGENTD__STORE__DATA_DIR", dir.path().join("data"))
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    // The first thing it logs, before it opens its store or binds its port.
    for line in lines.by_ref() {
        let line = line.unwrap();
        let starting = line.contains("agentd starting");
        seen.push(line);
        if starting {
            break;
        }
    }
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    seen.extend(lines.map_while(Result::ok));
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "killed by the signal instead of stopping: {status}; logged {seen:#?}"
    );
    assert!(
        seen.iter().any(|l| l.contains("shutting down")),
        "{seen:#?}"
    );
}

#[test]
fn sigterm_in_the_middle_of_a_run_exits_cleanly_and_the_run_finishes_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, "[[rule]]\ncontains = \"slow\"\ndelay_ms = 1500\ntext = \"done: {{input}}\"\n\n[[rule]]\ntext = \"done: {{input}}\"\n").unwrap();
    let env = [
        (
            "AGENTD__STORE__DATA_DIR",
            dir.path().join("data").display().to_string(),
        ),
        ("AGENTD__MODEL__SCRIPT", script.display().to_string()),
    ];
    let p = AgentdProcess::start(&env);
    let id = p.spawn("subagent", "slow job");
    p.post(
        &format!("/v1/agents/{id}/messages"),
        json!({"text": "queued after"}),
    )
    .unwrap();
    p.wait_for("turn running", |p| {
        p.get(&format!("/v1/agents/{id}"))["turn_running"] == true
    });
    p.stop(); // asserts exit status 0
    let p = AgentdProcess::start(&env);
    p.wait_for("the run finished", |p| {
        p.texts(&id).iter().any(|t| t == "done: queued after")
    });
    assert_eq!(
        p.texts(&id),
        vec![
            "slow job",
            "done: slow job",
            "queued after",
            "done: queued after"
        ]
    );
}

#[test]
fn kill_9_mid_run_on_the_embedded_store_finishes_after_restart_with_every_message_once() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, "[[rule]]\ncontains = \"slow\"\ndelay_ms = 300\ntext = \"done: {{input}}\"\n\n[[rule]]\ntext = \"done: {{input}}\"\n").unwrap();
    let env = [
        (
            "AGENTD__STORE__DATA_DIR",
            dir.path().join("data").display().to_string(),
        ),
        ("AGENTD__MODEL__SCRIPT", script.display().to_string()),
    ];
    let p = AgentdProcess::start(&env);
    let agents: Vec<String> = (0..3)
        .map(|_| {
            p.post("/v1/agents", json!({"agent_type": "subagent"}))
                .unwrap()["agent_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let mut sent = Vec::new();
    for n in 0..12 {
        let id = &agents[n % 3];
        let text = format!("slow m{n}");
        p.post(&format!("/v1/agents/{id}/messages"), json!({"text": text}))
            .unwrap();
        sent.push((id.clone(), text));
    }
    // Kill while turns are running and items are queued.
    p.wait_for("a turn running", |p| {
        agents
            .iter()
            .any(|id| p.get(&format!("/v1/agents/{id}"))["turn_running"] == true)
    });
    p.kill9();
    let p = AgentdProcess::start(&env);
    // A turn that was running when agentd died runs again, as attempt 2 (a 300 ms window).
    p.wait_for("a re-run turn shown as attempt 2", |p| {
        agents
            .iter()
            .any(|id| p.get(&format!("/v1/agents/{id}"))["attempts"] == 2)
    });
    for (id, text) in &sent {
        p.wait_for(&format!("{text} answered"), |p| {
            p.texts(id).iter().any(|t| *t == format!("done: {text}"))
        });
    }
    // The same threads as a run that was never interrupted: each message once, in order.
    for id in &agents {
        let expected: Vec<String> = sent
            .iter()
            .filter(|(i, _)| i == id)
            .flat_map(|(_, t)| [t.clone(), format!("done: {t}")])
            .collect();
        assert_eq!(p.texts(id), expected, "thread of {id}");
    }
}

/// Runs agentctl against `p`; `(exit code, stdout)`.
fn agentctl(p: &AgentdProcess, args: &[&str]) -> (i32, String) {
    let out = Command::new(binary("agentctl"))
        .args(["--url", &p.url])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn agentctl_takes_lists_and_restores_checkpoints_and_sets_env() {
    let dir = tempfile::tempdir().unwrap();
    let p = AgentdProcess::start(&[(
        "AGENTD__STORE__DATA_DIR",
        dir.path().join("data").display().to_string(),
    )]);
    let (code, out) = agentctl(
        &p,
        &[
            "--json",
            "spawn",
            "first task",
            "--type",
            "subagent",
            "--env",
            "REGION=eu",
            "--priority",
            "high",
        ],
    );
    assert_eq!(code, 0, "{out}");
    let spawned: Value = serde_json::from_str(&out).unwrap();
    let id = spawned["agent_id"].as_str().unwrap().to_string();
    assert_eq!(spawned["env"], json!(["REGION"]));
    assert_eq!(spawned["priority"], "high");
    p.wait_for("the first answer", |p| p.texts(&id).len() == 2);

    let (code, out) = agentctl(&p, &["--json", "checkpoint", &id]);
    assert_eq!(code, 0, "{out}");
    let cp: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(cp["reason"], "manual");
    let cp_id = cp["checkpoint_id"].as_str().unwrap().to_string();

    let (code, _) = agentctl(&p, &["send", &id, "second task"]);
    assert_eq!(code, 0);
    p.wait_for("the second answer", |p| p.texts(&id).len() == 4);

    let (code, out) = agentctl(&p, &["checkpoints", &id]);
    assert_eq!(code, 0);
    assert!(out.contains(&cp_id) && out.contains("manual"), "{out}");
    let (code, out) = agentctl(&p, &["env", &id, "REGION=us", "TIER=gold"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        p.get(&format!("/v1/agents/{id}"))["env"],
        json!(["REGION", "TIER"])
    );

    let (code, out) = agentctl(&p, &["--json", "restore", &id, "--checkpoint", &cp_id]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        p.texts(&id).len(),
        2,
        "the thread is back at the checkpoint"
    );
    assert_eq!(p.get(&format!("/v1/agents/{id}"))["env"], json!(["REGION"]));
    let full = p.get(&format!("/v1/agents/{id}/checkpoints/{cp_id}"));
    assert_eq!(full["environment"]["REGION"], "eu");
    assert_eq!(full["conversation"].as_array().unwrap().len(), 2);

    // Exit codes scripts can test: 1 for an API error.
    let (code, out) = agentctl(
        &p,
        &[
            "--json",
            "restore",
            &id,
            "--checkpoint",
            &uuid::Uuid::nil().to_string(),
        ],
    );
    assert_eq!(code, 1);
    assert!(out.contains("checkpoint_not_found"), "{out}");
}
