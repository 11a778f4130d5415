//! agentd as an MCP server, driven by the official Python SDK (`mcp`, pinned by
//! `scripts/test.sh` in `target/.venv-mcp`) against the real `agentd` binary with the scripted
//! model (`tests/mcp/server_script.toml`: it says which user turn of its conversation it
//! answers). The client lists the tools, asks `ask_research` twice in one thread (the second
//! answer is turn 2 of the same root) and once without (turn 1 of a fresh root, closed after),
//! sends a message with `send_message` (answered at once) and reads its answer with
//! `get_thread`, cancels a running turn, lists the threads, then calls an unknown tool, an
//! unknown thread, bad arguments and an oversized message, answered as MCP errors with nothing
//! queued; in both the handshake-era mode and the current revision's. With Redis, a thread
//! asked through two processes in turn is one conversation. `/mcp` needs the API's token when
//! it has one, and a start-up naming an agent type that does not exist is refused.

use agentd_tests::AgentdProcess;
use agentd_tests::mcp::python;
use agentd_tests::process::binary;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn env(extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("AGENTD__STORE__KIND", "memory".to_string()),
        ("AGENTD__MCP_SERVER__EXPOSE", "research,lead".to_string()),
        (
            "AGENTD__MODEL__SCRIPT",
            root()
                .join("tests/mcp/server_script.toml")
                .display()
                .to_string(),
        ),
    ];
    env.extend(extra.iter().cloned());
    env
}

/// Runs the SDK client against `url` in `mode` with thread `thread`; its output.
fn client(url: &str, mode: &str, thread: &str) -> String {
    let out = Command::new(python())
        .arg(root().join("tests/mcp/server_client.py"))
        .args([&format!("{url}/mcp"), mode, thread])
        .output()
        .expect("run the MCP client");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success() && stdout.ends_with("ok\n"),
        "the MCP client failed ({mode}):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The structured content a line of the client's output shows.
fn structured(line: &str) -> Value {
    let json = line.split_once(" | ").map(|(_, j)| j).unwrap_or("null");
    serde_json::from_str(json).unwrap_or(Value::Null)
}

fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{out}"))
}

/// The agents `p` holds.
fn agents(p: &AgentdProcess) -> Vec<Value> {
    let v: Value = ureq::get(&format!("{}/v1/agents", p.url))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    v.as_array()
        .cloned()
        .or_else(|| v["agents"].as_array().cloned())
        .unwrap_or_default()
}

#[test]
fn the_sdk_client_asks_an_agent_in_a_thread_and_alone_and_bad_calls_are_refused() {
    let p = AgentdProcess::start(&env(&[]));
    for (mode, thread, revision, threads) in [
        (
            "legacy",
            "harbour",
            "2025-11-25",
            r#"["harbour", "harbour-async", "harbour-slow"]"#,
        ),
        (
            "auto",
            "harbour-2",
            "2026-07-28",
            r#"["harbour", "harbour-2", "harbour-2-async", "harbour-2-slow", "harbour-async", "harbour-slow"]"#,
        ),
    ] {
        let out = client(&p.url, mode, thread);
        // The handshake era's newest revision, and the current one.
        assert!(
            out.contains(&format!("revision {revision}\n")),
            "{mode}:\n{out}"
        );
        // One tool per exposed type, in the settings' order, each requiring a message.
        let tools: Vec<&str> = out.lines().filter(|l| l.starts_with("tool ")).collect();
        assert_eq!(
            tools,
            [
                "tool ask_research required=message",
                "tool ask_lead required=message",
                "tool send_message required=type,thread,message",
                "tool get_thread required=type,thread",
                "tool cancel required=type,thread",
                "tool list_threads required=",
            ],
            "{mode}:\n{out}"
        );
        // Two calls in one thread: one root, which saw the first turn.
        let first = line(&out, "thread call 1: ");
        let second = line(&out, "thread call 2: ");
        assert!(
            first.contains("echo: remember the harbour (turn 1)"),
            "{mode}: {first}"
        );
        assert!(
            second.contains("echo: what did I say? (turn 2)"),
            "{mode}: {second}"
        );
        let (s1, s2) = (structured(first), structured(second));
        assert_eq!(s1["status"], "completed", "{mode}: {first}");
        assert_eq!(s1["agent_id"], s2["agent_id"], "{mode}: one root");
        assert!(s1["usage"].is_object(), "{mode}: {first}");
        // Without a thread: a fresh root, its first turn.
        let fresh = line(&out, "fresh call: ");
        assert!(fresh.contains("echo: alone (turn 1)"), "{mode}: {fresh}");
        assert_ne!(structured(fresh)["agent_id"], s1["agent_id"], "{mode}");
        // A message sent without waiting: pending at once, its answer read through get_thread.
        assert!(out.contains("sent: \"pending\"\n"), "{mode}:\n{out}");
        assert!(
            out.contains("async answer: \"echo: later (turn 1)\"\n"),
            "{mode}:\n{out}"
        );
        // The first thread as text: both turns, in order.
        let history = line(&out, "history: ");
        assert!(
            history.contains(
                "user: remember the harbour\\n\\nassistant: echo: remember the harbour (turn 1)\\n\\nuser: what did I say?"
            ),
            "{mode}: {history}"
        );
        // A slow run cancelled while it runs: cancelled, and so it stays; a second cancel finds
        // nothing to cancel.
        assert!(out.contains("cancel: \"cancelled\"\n"), "{mode}:\n{out}");
        assert!(
            out.contains("after cancel: \"cancelled\"\n"),
            "{mode}:\n{out}"
        );
        // The threads opened so far (not the fresh root), of the type asked only.
        assert!(
            out.contains(&format!("threads: {threads}\n")),
            "{mode}:\n{out}"
        );
        assert!(out.contains("lead threads: []\n"), "{mode}:\n{out}");
        // Bad calls: MCP errors (invalid params) with a stable code.
        for (tool, code, says) in [
            (
                "cancel",
                "not_cancelable",
                "is cancelled: there is nothing to cancel",
            ),
            (
                "get_thread",
                "unknown_thread",
                "unknown thread `never-opened`",
            ),
            (
                "send_message",
                "unknown_type",
                "agent type `nobody` is not served",
            ),
            ("ask_nobody", "unknown_tool", "unknown tool `ask_nobody`"),
            (
                "ask_research",
                "invalid_arguments",
                "`message` must be a string",
            ),
        ] {
            let l = line(&out, &format!("error {tool}: -32602"));
            assert!(
                l.contains(says) && l.contains(&format!("\"code\": \"{code}\"")),
                "{mode}: {l}"
            );
        }
        assert!(
            out.contains("`message` is required"),
            "{mode}: a missing message:\n{out}"
        );
        assert!(
            out.contains("\"code\": \"message_too_large\""),
            "{mode}: an oversized message:\n{out}"
        );
    }
    // Per mode: three thread roots and one fresh root; the bad calls made none, queued nothing.
    let agents = agents(&p);
    assert_eq!(agents.len(), 8, "{agents:#?}");
    let closed = agents.iter().filter(|a| a["status"] == "closed").count();
    assert_eq!(
        closed, 2,
        "the fresh roots are closed once they answered: {agents:#?}"
    );
}

/// With Redis, no process keeps anything of a call or a thread in memory (rmcp serves
/// statelessly, the alias is in the store): one thread asked through two processes in turn is
/// one root, which sees every turn, whichever process owns it.
#[test]
fn a_thread_is_one_conversation_through_either_of_two_processes_on_redis() {
    let redis = agentd_tests::TestRedis::from_env();
    let settings = || {
        let mut extra = redis.env();
        extra.extend([
            ("AGENTD__REDIS__PARTITIONS", "4".to_string()),
            ("AGENTD__REDIS__LEASE_MS", "1000".to_string()),
        ]);
        let mut all = env(&extra);
        all.retain(|(k, _)| *k != "AGENTD__STORE__KIND");
        all
    };
    let a = AgentdProcess::start(&settings());
    let b = AgentdProcess::start(&settings());
    agentd_tests::process::wait_balanced(&a, &b, 4);
    let (ua, ub) = (format!("{}/mcp", a.url), format!("{}/mcp", b.url));
    let out = Command::new(python())
        .arg(root().join("tests/mcp/server_client.py"))
        .args(["across", "quay", &ua, &ub, &ua, &ub])
        .output()
        .expect("run the MCP client");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success() && stdout.ends_with("ok\n"),
        "the MCP client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut roots = Vec::new();
    for n in 1..=4 {
        let l = line(&stdout, &format!("across {n}: "));
        assert!(l.contains(&format!("echo: step {n} (turn {n})")), "{l}");
        roots.push(structured(l)["agent_id"].clone());
    }
    roots.dedup();
    assert_eq!(roots.len(), 1, "one root: {stdout}");
}

#[test]
fn mcp_needs_the_token_when_the_api_has_one() {
    let p = AgentdProcess::start(&env(&[("AGENTD__AUTH__TOKEN", "s3cret".to_string())]));
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}
        }
    });
    let post = |token: Option<&str>| {
        let mut req = ureq::post(&format!("{}/mcp", p.url))
            .set("Accept", "application/json, text/event-stream")
            .timeout(Duration::from_secs(10));
        if let Some(t) = token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        match req.send_json(init.clone()) {
            Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
            Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap_or_default()),
            Err(e) => panic!("POST /mcp: {e}"),
        }
    };
    let (status, body) = post(None);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("unauthorized"), "{body}");
    let (status, body) = post(Some("wrong"));
    assert_eq!(status, 401, "{body}");
    let (status, body) = post(Some("s3cret"));
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"serverInfo\"") && body.contains("agentd"),
        "{body}"
    );
}

#[test]
fn a_start_up_exposing_an_agent_type_that_does_not_exist_is_refused() {
    let out = Command::new(binary("agentd"))
        .env("AGENTD__SERVER__BIND", "127.0.0.1:0")
        .env("AGENTD__STORE__KIND", "memory")
        .env("AGENTD__MCP_SERVER__EXPOSE", "research,nobody")
        .output()
        .expect("run agentd");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains("[mcp_server] expose names `nobody`, which is not an agent type"),
        "{all}"
    );
}
