//! The real `agentd` binary on its embedded store: the demo round trip over HTTP, agentctl
//! against it, then a restart on the same data directory keeps threads, aliases and the
//! parent→child map.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Agentd {
    child: Child,
    url: String,
}

impl Agentd {
    fn start(data_dir: &Path) -> Agentd {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentd"))
            .env("AGENTD__SERVER__BIND", "127.0.0.1:0")
            .env("AGENTD__STORE__DATA_DIR", data_dir)
            .env("AGENTD__RUNTIME__ARBITERS", "2")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start agentd");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("agentd exited before listening")
                .unwrap();
            if let Some(rest) = line.strip_prefix("agentd listening on ") {
                break rest.split_whitespace().next().unwrap().to_string();
            }
        };
        // Keep draining stdout so the process never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.by_ref() {});
        Agentd { child, url }
    }

    fn get(&self, path: &str) -> Value {
        ureq::get(&format!("{}{path}", self.url))
            .call()
            .unwrap()
            .into_json()
            .unwrap()
    }

    fn post(&self, path: &str, body: Value) -> Result<Value, (u16, Value)> {
        match ureq::post(&format!("{}{path}", self.url)).send_json(body) {
            Ok(r) => Ok(r.into_json().unwrap()),
            Err(ureq::Error::Status(code, r)) => Err((code, r.into_json().unwrap())),
            Err(e) => panic!("{e}"),
        }
    }

    fn wait_for<F: Fn(&Agentd) -> bool>(&self, what: &str, cond: F) {
        let start = Instant::now();
        while !cond(self) {
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "timed out waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM, then wait for a clean exit.
    fn stop(mut self) {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "agentd exited with {status}");
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "agentd did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Agentd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
    let p = Path::new(env!("CARGO_BIN_EXE_agentd")).with_file_name("agentctl");
    assert!(
        p.exists(),
        "agentctl is built with the workspace tests (cargo test --workspace): {}",
        p.display()
    );
    p
}

#[test]
fn demo_round_trip_agentctl_and_restart_on_the_same_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let agentd = Agentd::start(dir.path());
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
        .post("/v1/agents/nope/messages", json!({"text": "hi"}))
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
    let out = Command::new(agentctl())
        .args(["--url", &agentd.url, "inspect", "missing-id"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("agent_not_found"));
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
    agentd.wait_for("researcher idle", |a| {
        a.get(&format!("/v1/agents/{researcher_id}"))["status"] == "idle"
    });
    let before = agentd.get(&thread_path);

    // Restart on the same data directory.
    agentd.stop();
    let agentd = Agentd::start(dir.path());
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
