//! The web dashboard in a real browser: the real `agentd` binary with auth required on the
//! scripted model, a small tree of agents spawned through the API, then
//! `tests/browser/dashboard.mjs` drives Debian's chromium (playwright-core) through the page —
//! token form, live tree and queue, a pause made through the API showing up without a reload,
//! resume and close (behind a confirm) from the page, and a follow-up typed into the page that
//! must reach the agent's thread (whose details then link its latest trace through
//! `[telemetry] trace_url`), and an answer streamed slowly by a local provider that the
//! page shows as it arrives (`text_delta` events) before it lands in the thread; and three
//! agents each waiting in `waiting_review` on a call of a gated service tool: one approved and
//! one rejected with a reason by clicking the page's buttons, one decided through the API while
//! the page's list was stale (the page shows the `409`), each decision checked through the API
//! (the approved call published and answered, the reason in the rejected agent's model's
//! answer); two roots of one type told apart by their prompts and ages; and the URL naming the
//! open agent (kept by a reload, followed by Back, opened from a link in a new tab).
//! Screenshots of each step go to `target/test-output/dashboard/`.
//!
//! Needs `node`, `/usr/bin/chromium` (or `CHROMIUM_PATH`) and `tests/browser/node_modules`;
//! `scripts/test.sh` installs them. Missing ones fail the test with the fix, never skip it.

use agentd_tests::process::bin_dir;
use agentd_tests::streaming_provider::{StreamingProvider, openai_text};
use agentd_tests::{AgentdProcess, eventually_blocking};
use serde_json::{Value, json};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "dashboard-s3cret";

/// `[telemetry] trace_url`: a Jaeger-like link the agent's details must show.
const TRACE_URL: &str = "http://jaeger.test:16686/trace/{trace_id}";

/// Deterministic answers: a coder that yields, a rate-limited agent that waits ten minutes,
/// and a recognisable answer to the follow-up the browser sends.
const SCRIPT: &str = r#"
[[rule]]
contains = "rate me"
rate_limit_ms = 600000

[[rule]]
contains = "dashboard follow-up"
text = "Noted: {{input}}"
usage = { input = 30, output = 10 }

[[rule]]
agent = "coding"
role = "user"
text = "Working on it."
usage = { input = 120, output = 40 }
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = "Parser implemented." }

[[rule]]
agent = "clerk"
role = "user"
contains = "order A-1"
text = "looking A-1 up"
[[rule.tool_calls]]
name = "lookup_order"
arguments = { order_id = "A-1" }

[[rule]]
agent = "clerk"
role = "user"
contains = "order B-2"
text = "looking B-2 up"
[[rule.tool_calls]]
name = "lookup_order"
arguments = { order_id = "<img src=x onerror=\"window.__xss=1\"><b>B-2</b>" }

[[rule]]
agent = "clerk"
role = "user"
contains = "order C-3"
text = "looking C-3 up"
[[rule.tool_calls]]
name = "lookup_order"
arguments = { order_id = "C-3" }

[[rule]]
agent = "clerk"
role = "tool"
text = "Result: {{input}}"

[[rule]]
text = "OK: {{input}}"
usage = { input = 50, output = 20 }
"#;

/// A service tool behind an approval gate, and the type whose agents may call it.
const TOOLS: &str = r#"
[tools.lookup_order]
kind = "service"
description = "Look an order up by id."
parameters = { type = "object", properties = { order_id = { type = "string" } }, required = ["order_id"] }
timeout_ms = 600000
approval = "always"
"#;
const CLERK: &str = "name = \"clerk\"\ntitle = \"Clerk\"\ntools = [\"lookup_order\"]\n";

/// A call to the API with the bearer token; `(status, body)` whatever the status.
fn call(p: &AgentdProcess, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let req = ureq::request(method, &format!("{}{path}", p.url))
        .set("Authorization", &format!("Bearer {TOKEN}"))
        .timeout(Duration::from_secs(10));
    let res = match body {
        Some(b) => req.send_json(b),
        None => req.call(),
    };
    match res {
        Ok(r) => (r.status(), r.into_json().unwrap_or(Value::Null)),
        Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap_or(Value::Null)),
        Err(e) => panic!("{method} {path}: {e}"),
    }
}

fn get(p: &AgentdProcess, path: &str) -> Value {
    let (status, v) = call(p, "GET", path, None);
    assert_eq!(status, 200, "GET {path}: {v}");
    v
}

fn spawn(p: &AgentdProcess, body: Value) -> String {
    let (status, v) = call(p, "POST", "/v1/agents", Some(body.clone()));
    assert_eq!(status, 201, "spawn {body}: {v}");
    v["agent_id"].as_str().unwrap().to_string()
}

fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    eventually_blocking(Duration::from_secs(20), what, cond)
}

/// Node, chromium and playwright-core, or a panic that says how to get them.
fn browser_tools(browser_dir: &Path) -> PathBuf {
    let fix = "run scripts/test.sh (it installs them) or: apt-get install -y chromium nodejs npm \
               && npm ci --prefix tests/browser";
    let chromium = std::env::var_os("CHROMIUM_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        chromium.exists(),
        "the dashboard test needs chromium at {} (or CHROMIUM_PATH); {fix}",
        chromium.display()
    );
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.as_ref().is_ok_and(|o| o.status.success()),
        "the dashboard test needs `node` on PATH ({node:?}); {fix}"
    );
    let playwright = browser_dir.join("node_modules/playwright-core/package.json");
    assert!(
        playwright.exists(),
        "the dashboard test needs {}; {fix}",
        playwright.display()
    );
    chromium
}

#[test]
fn the_dashboard_shows_the_live_tree_and_drives_agents_in_a_real_browser() {
    let browser_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("browser");
    let chromium = browser_tools(&browser_dir);

    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let config = dir.path().join("agentd.toml");
    std::fs::write(&config, TOOLS).unwrap();
    let types = dir.path().join("types");
    std::fs::create_dir_all(&types).unwrap();
    std::fs::write(types.join("clerk.toml"), CLERK).unwrap();
    // A provider that streams its answer slowly: the page shows the text as it arrives.
    let mut story: Vec<String> = (1..=30).map(|i| format!("word{i} ")).collect();
    story.push("The end.".into());
    let story: Vec<&str> = story.iter().map(String::as_str).collect();
    let provider = StreamingProvider::start(vec![
        openai_text(&story, "stop", Some((40, 31))).paced(2, Duration::from_millis(150)),
    ]);
    let p = AgentdProcess::start(&[
        ("AGENTD__PROVIDERS__LIVE__BACKEND", "openai".to_string()),
        ("AGENTD__PROVIDERS__LIVE__BASE_URL", provider.url.clone()),
        ("AGENTD__PROVIDERS__LIVE__MODEL", "live-test".to_string()),
        ("AGENTD__STORE__KIND", "memory".to_string()),
        ("AGENTD__AUTH__REQUIRED", "true".to_string()),
        ("AGENTD__AUTH__TOKEN", TOKEN.to_string()),
        ("AGENTD__MODEL__SCRIPT", script.display().to_string()),
        ("AGENTD__LIMITS__MAX_DEPTH", "2".to_string()),
        ("AGENTD_CONFIG", config.display().to_string()),
        ("AGENTD__AGENTS__DIR", types.display().to_string()),
        // Telemetry export stays off: trace ids and their link need none.
        ("AGENTD__TELEMETRY__TRACE_URL", TRACE_URL.to_string()),
    ]);

    // The static shell is open, with its content types; the API is not.
    for (path, ty) in [
        ("/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/detail.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ] {
        let r = ureq::get(&format!("{}{path}", p.url)).call().unwrap();
        assert!(
            r.content_type().starts_with(ty),
            "{path}: {}",
            r.content_type()
        );
        assert_eq!(r.header("cache-control"), Some("no-cache"), "{path}");
    }
    assert_eq!(p.get_status("/v1/tree", None).0, 401);

    // Lead ─┬ Parser Coder (yields → completed)
    //       ├ Docs Researcher ── Grandchild Checker
    //       ├ Release Notes (high, depends on Docs Researcher → waiting_dependency)
    //       └ Rate Limited Bot (waiting_rate_limit for 10 min)
    let lead = spawn(
        &p,
        json!({"agent_type": "lead", "title": "Dashboard Lead", "prompt": "plan the release"}),
    );
    let coder = spawn(
        &p,
        json!({"agent_type": "coding", "title": "Parser Coder", "parent_id": lead, "prompt": "write the parser"}),
    );
    let researcher = spawn(
        &p,
        json!({"agent_type": "research", "title": "Docs Researcher", "parent_id": lead, "prompt": "collect docs"}),
    );
    let grandchild = spawn(
        &p,
        json!({"agent_type": "subagent", "title": "Grandchild Checker", "parent_id": researcher}),
    );
    let notes = spawn(
        &p,
        json!({"agent_type": "subagent", "title": "Release Notes", "parent_id": lead,
               "prompt": "write notes", "priority": "high", "depends_on": [researcher]}),
    );
    let rate = spawn(
        &p,
        json!({"agent_type": "subagent", "title": "Rate Limited Bot", "parent_id": lead, "prompt": "rate me"}),
    );
    let writer = spawn(
        &p,
        json!({"agent_type": "subagent", "title": "Live Writer", "parent_id": lead, "provider": "live"}),
    );
    // Three roots of their own, each stopped at an approval gate.
    let clerks: Vec<String> = ["A-1", "B-2", "C-3"]
        .iter()
        .zip(["Approval Clerk A", "Approval Clerk B", "Approval Clerk C"])
        .map(|(order, title)| {
            spawn(
                &p,
                json!({"agent_type": "clerk", "title": title, "prompt": format!("where is order {order}?")}),
            )
        })
        .collect();
    // Two roots of one type with its default title: the tree tells them apart by their
    // prompts and ages.
    let twins: Vec<String> = ["audit the billing code", "plan the summer release"]
        .iter()
        .map(|prompt| spawn(&p, json!({"agent_type": "lead", "prompt": prompt})))
        .collect();
    let status = |id: &str| get(&p, &format!("/v1/agents/{id}"))["status"].clone();
    wait_until("the tree to settle", || {
        clerks.iter().all(|c| status(c) == "waiting_review")
            && twins.iter().all(|t| status(t) == "idle")
            && status(&coder) == "completed"
            && status(&notes) == "waiting_dependency"
            && status(&rate) == "waiting_rate_limit"
            && get(&p, &format!("/v1/agents/{researcher}"))["turns"] == 1
            && {
                let l = get(&p, &format!("/v1/agents/{lead}"));
                l["status"] == "idle" && l["turn_running"] == false && l["inbox"] == 0
            }
    });

    let out_dir = bin_dir()
        .parent()
        .expect("target dir")
        .join("test-output/dashboard");
    let _ = std::fs::remove_dir_all(&out_dir);
    std::fs::create_dir_all(&out_dir).unwrap();

    let mut child = Command::new("node")
        .arg(browser_dir.join("dashboard.mjs"))
        .arg(&p.url)
        .arg(TOKEN)
        .arg(&out_dir)
        .args(["--pause", "Docs Researcher"])
        .args(["--followup", "Dashboard Lead"])
        .args(["--close", "Grandchild Checker"])
        .args(["--live", "Live Writer"])
        .args(["--approve", "Approval Clerk A"])
        .args(["--reject", "Approval Clerk B"])
        .args(["--closed", "Approval Clerk C"])
        .args(["--trace-url", TRACE_URL])
        .args(["--twins", "Lead"])
        .env("CHROMIUM_PATH", &chromium)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start node");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let exit = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out_reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    eprintln!("--- dashboard.mjs stdout ---\n{stdout}--- stderr ---\n{stderr}");
    let exit = exit.expect("the browser script did not finish within 90 s");
    assert!(
        exit.success(),
        "the browser script failed ({exit}); screenshots in {}:\n{stderr}",
        out_dir.display()
    );
    assert!(stdout.contains("DASHBOARD OK"), "{stdout}");

    // What the page showed, as the script reported it.
    for title in [
        "Dashboard Lead",
        "Parser Coder",
        "Docs Researcher",
        "Grandchild Checker",
        "Release Notes",
        "Rate Limited Bot",
    ] {
        assert!(
            stdout.contains(&format!("TREE {title} [")),
            "{title}: {stdout}"
        );
    }
    assert!(stdout.contains("QUEUE Release Notes [waiting_dependency]"));
    // The twins' rows, and the URL that named an agent.
    let twins_line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("TWINS "))
        .unwrap_or_else(|| panic!("the script compared the twins: {stdout}"));
    assert!(
        twins_line.contains("audit the billing code")
            && twins_line.contains("plan the summer release"),
        "{twins_line}"
    );
    assert!(
        stdout.contains(&format!("URL {researcher}")),
        "the shared link opened the researcher: {stdout}"
    );
    assert!(stdout.contains("QUEUE Rate Limited Bot [waiting_rate_limit]"));

    // What the page did, checked through the API.
    let followup = stdout
        .lines()
        .find_map(|l| l.strip_prefix("FOLLOWUP "))
        .expect("the script names its follow-up");
    let (agent, text) = followup.split_once(' ').unwrap();
    assert_eq!(agent, lead);
    // The details linked the trace the API named (the script compared them).
    let link = stdout
        .lines()
        .find_map(|l| l.strip_prefix("TRACE LINK "))
        .expect("the script checked the trace link");
    let trace_id = link
        .strip_prefix("http://jaeger.test:16686/trace/")
        .unwrap_or_default();
    assert!(
        trace_id.len() == 32 && trace_id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{link}"
    );
    let thread = get(&p, &format!("/v1/agents/{lead}/thread"));
    let entries = thread["entries"].as_array().unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e["role"] == "user" && e["text"] == text),
        "the follow-up reached the lead's thread: {thread}"
    );
    assert!(
        entries
            .iter()
            .any(|e| e["text"] == format!("Noted: {text}")),
        "the lead answered it: {thread}"
    );
    assert!(stdout.contains(&format!("LIVE {writer} ")), "{stdout}");
    let thread = get(&p, &format!("/v1/agents/{writer}/thread"));
    assert!(
        thread["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["role"] == "assistant"
                && e["text"].as_str().unwrap_or("").ends_with("The end.")),
        "the streamed answer is stored whole: {thread}"
    );
    assert_ne!(status(&researcher), "paused", "resumed from the page");

    // The decisions made by clicking, checked through the API.
    let decided = |prefix: &str| -> Vec<String> {
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("the script names its {prefix}: {stdout}"));
        line.splitn(3, ' ').map(str::to_string).collect()
    };
    let approved = decided("APPROVED ");
    assert_eq!(approved[0], clerks[0]);
    let rejected = decided("REJECTED ");
    assert_eq!(rejected[0], clerks[1]);
    let reason = &rejected[2];
    let thread_texts = |id: &str| -> Vec<(String, String)> {
        get(&p, &format!("/v1/agents/{id}/thread"))["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["role"].as_str().unwrap_or("").to_string(),
                    e["text"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    // Approved: the service call was published and waits for its answer in `waiting_tool`.
    assert_eq!(status(&clerks[0]), "waiting_tool");
    let pending = get(&p, "/v1/tool_calls?status=pending")["tool_calls"].clone();
    assert_eq!(pending.as_array().unwrap().len(), 1, "{pending}");
    assert_eq!(pending[0]["call_id"], approved[1].as_str());
    let (code, body) = call(
        &p,
        "POST",
        &format!("/v1/agents/{}/tool_results/{}", clerks[0], approved[1]),
        Some(json!({"result": {"status": "shipped"}})),
    );
    assert_eq!((code, &body["status"]), (200, &json!("answered")), "{body}");
    wait_until("the approved clerk's turn to end", || {
        thread_texts(&clerks[0])
            .iter()
            .any(|(role, t)| role == "assistant" && t == r#"Result: {"status":"shipped"}"#)
    });
    // Rejected: the model got a tool error carrying the reason, and its turn went on.
    wait_until("the rejected clerk's turn to end", || {
        thread_texts(&clerks[1])
            .iter()
            .any(|(role, t)| role == "assistant" && t.starts_with("Result: "))
    });
    let texts = thread_texts(&clerks[1]);
    assert!(
        texts.iter().any(|(role, t)| role == "tool"
            && t.contains("rejected")
            && t.contains(reason.as_str())),
        "the rejection and its reason are the tool's result: {texts:#?}"
    );
    assert!(
        texts.iter().any(|(role, t)| role == "assistant"
            && t.starts_with("Result: ")
            && t.contains(reason.as_str())),
        "the model saw the reason: {texts:#?}"
    );
    // Decided through the API (the page's later click got 409 and changed nothing).
    assert!(
        thread_texts(&clerks[2])
            .iter()
            .any(|(role, t)| role == "tool" && t.contains("decided through the API")),
        "the API's decision stands"
    );
    for clerk in &clerks {
        wait_until("the clerks to be idle", || status(clerk) == "idle");
    }
    assert_eq!(get(&p, "/v1/tool_calls")["tool_calls"], json!([]));
    assert_eq!(status(&grandchild), "closed", "closed from the page");

    let shots = std::fs::read_dir(&out_dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "png"))
        .count();
    assert!(shots >= 6, "screenshots in {}: {shots}", out_dir.display());
}
