//! The real `agentctl` binary against a real `agentd` on its embedded store and the scripted
//! model: every route of the API document is what some command sends; `spawn` prints the
//! status the agent has and `inspect` a summary; the open tool calls, an agent's tools and
//! children; events with their ids, resumed after one; a reader that stops reading
//! (`agentctl --json tree | head -c 100`) ends agentctl quietly; `--json metrics` is refused,
//! `spawn --help` explains `--depends-on`, and an unreachable agentd is named once.

use agentd_tests::AgentdProcess;
use agentd_tests::mock_http::{Canned, MockHttp};
use agentd_tests::process::succeeded;
use agentd_tests::scripted_files::{
    CLERK, CLERK_SCRIPT, embedded_store, lookup_order, scripted_deployment,
};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// agentd with the clerk, whose turn on a message about an order calls `lookup_order`, a
/// service tool that waits for approval (for ever) and then for its answer.
fn start(dir: &Path) -> AgentdProcess {
    let settings = format!(
        "[limits]\napproval_timeout_ms = 0\n{}",
        lookup_order(600_000, "always")
    );
    let mut env = scripted_deployment(dir, &[("clerk", CLERK)], CLERK_SCRIPT, &settings);
    env.push(embedded_store(dir));
    AgentdProcess::start(&env)
}

/// A clerk that waits for the approval of its `lookup_order` call.
fn waiting_clerk(p: &AgentdProcess) -> String {
    let id = p.spawn("clerk", "where is order A-1?");
    p.wait_for("waiting_review", |p| p.status(&id) == "waiting_review");
    id
}

/// Each route of the API document with the agentctl arguments that call it (`A` an agent id,
/// `C` a call id, `K` a checkpoint id, `T` a tool).
const ROUTES: &[(&str, &[&str])] = &[
    ("GET /healthz", &["health"]),
    ("GET /readyz", &["ready"]),
    ("GET /metrics", &["metrics"]),
    ("GET /v1/info", &["info"]),
    ("GET /v1/openapi.json", &["openapi"]),
    ("GET /v1/events", &["events", "--count", "1"]),
    ("POST /v1/agents", &["spawn", "hello"]),
    ("GET /v1/agents", &["list"]),
    ("GET /v1/tree", &["tree"]),
    ("GET /v1/queue", &["queue"]),
    ("POST /v1/commands", &["command", r#"{"type": "list"}"#]),
    ("GET /v1/tool_calls", &["tool-calls"]),
    ("GET /v1/agents/{id}", &["inspect", "A"]),
    ("DELETE /v1/agents/{id}", &["delete", "A"]),
    ("POST /v1/agents/{id}/messages", &["send", "A", "hi"]),
    ("POST /v1/agents/{id}/control", &["pause", "A"]),
    ("POST /v1/agents/{id}/reset", &["reset", "A"]),
    ("POST /v1/agents/{id}/compact", &["compact", "A"]),
    ("POST /v1/agents/{id}/dependency", &["provide", "A", "v"]),
    ("POST /v1/agents/{id}/answer", &["answer", "A", "v"]),
    (
        "POST /v1/agents/{id}/budget",
        &["budget", "A", "--max-tokens", "5"],
    ),
    ("POST /v1/agents/{id}/env", &["env", "A", "K=V"]),
    ("GET /v1/agents/{id}/thread", &["thread", "A"]),
    ("GET /v1/agents/{id}/children", &["children", "A"]),
    ("GET /v1/agents/{id}/tools", &["tools", "A"]),
    ("POST /v1/agents/{id}/tools/{tool}", &["invoke", "A", "T"]),
    (
        "POST /v1/agents/{id}/tool_results/{call_id}",
        &["tool-result", "A", "C", "--result", "1"],
    ),
    (
        "POST /v1/agents/{id}/approvals/{call_id}",
        &["approve", "A", "C"],
    ),
    ("GET /v1/agents/{id}/checkpoints", &["checkpoints", "A"]),
    ("POST /v1/agents/{id}/checkpoints", &["checkpoint", "A"]),
    (
        "GET /v1/agents/{id}/checkpoints/{checkpoint}",
        &["checkpoints", "A", "K"],
    ),
    ("POST /v1/agents/{id}/restore", &["restore", "A"]),
    ("POST /v1/agents/{id}/fork", &["fork", "A"]),
];

/// `POST /v1/tools/{tool}` is `POST /v1/agents/{id}/tools/{tool}` with the agent id in the
/// body (the form callers that name the thread in the body use); `invoke` sends the latter.
const SAME_CALL_AS_INVOKE: &str = "POST /v1/tools/{tool}";

#[test]
fn every_route_of_the_api_document_is_what_a_command_sends() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(dir.path());
    let document = p.get("/v1/openapi.json");
    let mut routes = BTreeSet::new();
    for (path, operations) in document["paths"].as_object().unwrap() {
        for method in operations.as_object().unwrap().keys() {
            routes.insert(format!("{} {path}", method.to_uppercase()));
        }
    }
    let mut covered: BTreeSet<String> = ROUTES.iter().map(|(r, _)| r.to_string()).collect();
    covered.insert(SAME_CALL_AS_INVOKE.to_string());
    assert_eq!(
        covered, routes,
        "a route without a command, or a command without a route"
    );

    // Each command sends its route, as a server that records what it is sent sees it.
    let (agent, call, checkpoint) = (
        uuid::Uuid::now_v7().to_string(),
        uuid::Uuid::now_v7().to_string(),
        uuid::Uuid::now_v7().to_string(),
    );
    let mock = MockHttp::start(vec![Canned::json(json!({}))]);
    for (route, args) in ROUTES {
        let args: Vec<&str> = args
            .iter()
            .map(|a| match *a {
                "A" => agent.as_str(),
                "C" => call.as_str(),
                "K" => checkpoint.as_str(),
                "T" => "current_time",
                other => other,
            })
            .collect();
        let expected = route
            .replace("{id}", &agent)
            .replace("{call_id}", &call)
            .replace("{checkpoint}", &checkpoint)
            .replace("{tool}", "current_time");
        let before = mock.requests().len();
        succeeded(
            std::process::Command::new(agentd_tests::process::binary("agentctl"))
                .args(["--url", &mock.url])
                .args(&args),
        );
        let sent: Vec<String> = mock.requests()[before..]
            .iter()
            .map(|r| format!("{} {}", r.method, r.path.split('?').next().unwrap_or("")))
            .collect();
        assert!(
            sent.contains(&expected),
            "agentctl {args:?} sent {sent:?}, not {expected}"
        );
    }
}

#[test]
fn spawn_prints_the_status_the_agent_has_and_inspect_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(dir.path());
    // Created idle, the clerk starts on its first message at once and then waits for the
    // approval of its call: it is never idle again before that.
    let shown = p.agentctl_text(&["spawn", "--type", "clerk", "where is order A-1?"]);
    let words: Vec<&str> = shown.split_whitespace().collect();
    assert_eq!((words[0], words[2]), ("spawned", "(clerk,"), "{shown}");
    let id = words[1].to_string();
    let status = words[3].trim_end_matches(')');
    assert!(
        ["queued", "running", "waiting_review"].contains(&status),
        "{shown}"
    );
    // With --json: the agent as `inspect` shows it.
    let second = p.agentctl(&[
        "spawn",
        "--type",
        "clerk",
        "--title",
        "Second",
        "order A-1?",
    ]);
    assert_ne!(second["status"], "idle", "{second:#}");
    assert_eq!(second["title"], "Second");
    assert_eq!(second["live"], true, "{second:#}");

    p.wait_for("waiting_review", |p| p.status(&id) == "waiting_review");
    let summary = p.agentctl_text(&["inspect", &id]);
    let lines: Vec<&str> = summary.lines().collect();
    assert_eq!(lines[0], format!("Clerk {id} (clerk)"), "{summary}");
    let line = |label: &str| {
        lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(label))
            .unwrap_or_else(|| panic!("no `{label}` line: {summary}"))
            .to_string()
    };
    assert!(line("status").contains("waiting_review"), "{summary}");
    assert!(line("tree").contains(&format!("root {id}")), "{summary}");
    assert!(line("actor").starts_with("  actor       live"), "{summary}");
    assert!(line("usage").contains("tokens"), "{summary}");
    let inspected = p.agentctl(&["inspect", &id]);
    let direct = p.get(&format!("/v1/agents/{id}"));
    // The trace of its latest turn (telemetry off: agentd chose the ids).
    let trace_id = direct["trace_id"].as_str().unwrap_or_default();
    assert_eq!(trace_id.len(), 32, "{direct}");
    assert_eq!(line("trace").split_whitespace().nth(1), Some(trace_id));
    for field in [
        "agent_id",
        "status",
        "title",
        "live",
        "inbox",
        "turn_running",
        "trace_id",
    ] {
        assert_eq!(inspected[field], direct[field], "{field}");
    }
}

#[test]
fn tool_calls_by_status_an_agents_tools_and_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(dir.path());
    let id = waiting_clerk(&p);

    let gated = p.agentctl(&["tool-calls", "--status", "awaiting_approval"]);
    assert_eq!(gated, p.get("/v1/tool_calls?status=awaiting_approval"));
    let calls = gated["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{gated:#}");
    let call_id = calls[0]["call_id"].as_str().unwrap().to_string();
    assert_eq!(
        p.agentctl(&["tool-calls", "--status", "pending"]),
        json!({"tool_calls": []})
    );
    let table = p.agentctl_text(&["tool-calls"]);
    let row = table.lines().find(|l| l.starts_with(&call_id)).unwrap();
    assert!(row.contains("awaiting_approval"), "{table}");
    assert!(row.contains(&id), "{table}");
    assert!(
        row.contains(r#"lookup_order (service) {"order_id":"A-1"}"#),
        "{table}"
    );
    assert_eq!(
        p.agentctl_text(&["tool-calls", "--status", "pending"]),
        "(no open tool calls)\n"
    );

    p.agentctl(&["approve", &id, &call_id]);
    p.wait_for("waiting_tool", |p| p.status(&id) == "waiting_tool");
    let pending = p.agentctl(&["tool-calls", "--status", "pending"]);
    assert_eq!(pending["tool_calls"][0]["call_id"], call_id.as_str());
    assert_eq!(pending["tool_calls"][0]["status"], "pending");
    // A status that is not an open one is the API's error: exit code 1, its code on stderr.
    let out = p
        .agentctl_command()
        .args(["tool-calls", "--status", "answered"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_argument"));

    let tools = p.agentctl(&["tools", &id]);
    assert_eq!(tools, p.get(&format!("/v1/agents/{id}/tools")));
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"lookup_order") && names.contains(&"current_time"),
        "{names:?}"
    );
    let shown = p.agentctl_text(&["tools", &id]);
    let listed: Vec<&str> = shown
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(listed, names, "{shown}");
    let lookup = shown
        .lines()
        .find(|l| l.starts_with("lookup_order "))
        .unwrap();
    assert!(lookup.ends_with(" Look an order up by id."), "{shown}");

    assert_eq!(p.agentctl_text(&["children", &id]), "(no agents)\n");
    let child = p.agentctl(&[
        "spawn", "--parent", &id, "--type", "clerk", "--title", "Helper",
    ]);
    let child_id = child["agent_id"].as_str().unwrap();
    let kids = p.agentctl(&["children", &id]);
    assert_eq!(kids, p.get(&format!("/v1/agents/{id}/children")));
    assert_eq!(kids["agents"][0]["agent_id"], child_id);
    let shown = p.agentctl_text(&["children", &id]);
    assert!(shown.starts_with(child_id), "{shown}");
    assert!(shown.trim_end().ends_with("Helper"), "{shown}");
}

/// One event of a raw SSE stream: its id and type.
fn next_event(lines: &mut impl Iterator<Item = String>) -> (String, String) {
    let (mut id, mut kind) = (None, None);
    for line in lines.by_ref() {
        if let Some(v) = line.strip_prefix("id: ") {
            id = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("event: ") {
            kind = Some(v.to_string());
        } else if line.is_empty()
            && let (Some(id), Some(kind)) = (id.take(), kind.take())
        {
            return (id, kind);
        }
    }
    panic!("the event stream ended");
}

/// `agentctl --json events <args>`: one JSON value per line.
fn events(p: &AgentdProcess, args: &[&str]) -> Vec<Value> {
    let out = succeeded(p.agentctl_command().args(["--json", "events"]).args(args));
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn events_carry_their_ids_and_resume_after_one() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(dir.path());
    // The stream as it goes out, read directly: the ids to compare with.
    let stream = ureq::get(&format!("{}/v1/events", p.url)).call().unwrap();
    let mut lines = BufReader::new(stream.into_reader())
        .lines()
        .map(Result::unwrap);
    let id = p.spawn("clerk", "hello");
    let seen: Vec<(String, String)> = (0..4).map(|_| next_event(&mut lines)).collect();
    assert_eq!(seen[0].1, "spawned");

    let resumed = events(&p, &["--last-event-id", &seen[0].0, "--count", "3"]);
    let got: Vec<(String, String)> = resumed
        .iter()
        .map(|e| {
            (
                e["event_id"].as_str().unwrap().to_string(),
                e["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(got, seen[1..]);
    assert_eq!(resumed[0]["agent_id"], id.as_str());
    let narrowed = events(
        &p,
        &[
            "--agent",
            &id,
            "--last-event-id",
            &seen[0].0,
            "--count",
            "1",
        ],
    );
    assert_eq!(narrowed[0]["event_id"], seen[1].0.as_str());
    // A person sees the id first, to resume after it.
    let shown = p.agentctl_text(&["events", "--last-event-id", &seen[0].0, "--count", "1"]);
    assert!(
        shown.starts_with(&format!("{} {}", seen[1].0, seen[1].1)),
        "{shown}"
    );
    // An id no longer kept: `lagged`, which has no id.
    let lagged = events(&p, &["--last-event-id", "1-1", "--count", "1"]);
    assert_eq!(
        lagged,
        [json!({"type": "lagged", "missed": null, "event_id": null})]
    );
}

/// A pipe nobody reads from any more: writing to it fails with `EPIPE`.
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer
}

#[test]
fn a_reader_that_stops_reading_ends_agentctl_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(dir.path());
    p.spawn("clerk", "hello");
    // `agentctl --json tree | head -c 100` once head has exited.
    let out = p
        .agentctl_command()
        .args(["--json", "tree"])
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stderr)),
        (Some(0), "".into())
    );

    // Following events: it stops at the first event it cannot write.
    let mut follower = p
        .agentctl_command()
        .args(["--json", "events"])
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = follower.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "agentctl events kept running"
        );
        p.spawn("clerk", "hello");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    follower
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!((status.code(), stderr), (Some(0), String::new()));
}

/// `--json metrics` refuses `--json` (the metrics are Prometheus text) instead of printing text
/// where JSON was asked for; `spawn --help` says what `--depends-on` takes; an agentd that
/// cannot be reached is named once, with why.
#[test]
fn json_metrics_is_refused_depends_on_is_explained_and_an_unreachable_url_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(dir.path());
    let out = p
        .agentctl_command()
        .args(["--json", "metrics"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(out.stdout.is_empty(), "nothing that is not JSON on stdout");
    assert!(said.contains("--json"), "{said}");
    let text = p.agentctl_text(&["metrics"]);
    assert!(text.contains("# TYPE "), "metrics without --json: {text}");

    let help = p.agentctl_text(&["spawn", "--help"]);
    let line = help
        .lines()
        .find(|l| l.contains("--depends-on"))
        .unwrap_or_else(|| panic!("{help}"));
    assert!(
        line.contains("<AGENT_ID>") && line.contains("waits for"),
        "{line}"
    );

    let port = agentd_tests::mcp::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let out = std::process::Command::new(agentd_tests::process::binary("agentctl"))
        .args(["--url", &url, "tree"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert_eq!(said.matches(&url).count(), 1, "the URL once: {said}");
    assert!(
        said.contains("cannot reach agentd") && said.contains("refused"),
        "{said}"
    );
}
