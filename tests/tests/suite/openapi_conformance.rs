//! The running service against its own OpenAPI document, with schemathesis: no route answers a
//! server error, and every status, content type and body a route answers is the one the
//! document declares, while input the document rules out is refused with a 4xx.
//!
//! schemathesis is pinned and installed by `scripts/test.sh` into
//! `target/.venv-schemathesis` (or named by `AGENTD_SCHEMATHESIS`, the path of its `st`). The
//! test skips, saying so, only when neither exists: CI runs `scripts/test.sh`, which always
//! installs it.

use agentd_tests::AgentdProcess;
use serde_json::json;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The checks the issue asks for; each must pass on every operation.
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
                      response_schema_conformance,negative_data_rejection";

/// Longest the run may take before the test gives up on it.
const RUN_LIMIT: Duration = Duration::from_secs(300);

fn schemathesis() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("AGENTD_SCHEMATHESIS") {
        return Some(PathBuf::from(path));
    }
    let st = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/.venv-schemathesis/bin/st");
    st.exists().then_some(st)
}

#[test]
fn the_service_conforms_to_its_openapi_document() {
    let Some(st) = schemathesis() else {
        eprintln!(
            "SKIPPED: schemathesis is not installed (target/.venv-schemathesis); \
             `bash scripts/test.sh` installs it"
        );
        return;
    };
    let p = AgentdProcess::start(&[("AGENTD__STORE__KIND", "memory".to_string())]);
    // One agent with a checkpoint, so the run reaches real agents beside the ones its own
    // spawns create (it follows ids from one answer into the next request by itself).
    let lead = p
        .post(
            "/v1/agents",
            json!({"agent_type": "lead", "title": "Fuzzed"}),
        )
        .unwrap()["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    p.post(&format!("/v1/agents/{lead}/checkpoints"), json!({}))
        .unwrap();

    let seed = std::env::var("AGENTD_SCHEMATHESIS_SEED").unwrap_or_else(|_| "26".into());
    let workdir = tempfile::tempdir().unwrap(); // schemathesis keeps its .hypothesis there
    let mut child = Command::new(&st)
        .current_dir(workdir.path())
        .args([
            "run",
            &format!("{}/v1/openapi.json", p.url),
            "--checks",
            CHECKS,
            "--max-examples",
            "20",
            "--seed",
            &seed,
            "--request-timeout",
            "10",
            "--no-color",
            // A stream that stays open until the client leaves: nothing to compare.
            "--exclude-path",
            "/v1/events",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {}: {e}", st.display()));
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        start.elapsed() <= RUN_LIMIT,
        "schemathesis ran over {RUN_LIMIT:?}:\n{report}"
    );
    assert!(
        out.status.success(),
        "schemathesis found the service and its document disagree (seed {seed}):\n{report}"
    );
    // The run reached the API (a document it could not load exits non-zero too, but say so).
    assert!(report.contains("Tested:"), "{report}");
    p.stop();
}
