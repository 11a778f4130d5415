//! Tools from MCP servers, through the real `agentd` binary and real servers: the npm reference
//! servers (server-everything over stdio and over streamable HTTP, server-filesystem confined
//! to a temp dir) and a Python SDK server that exits in the middle of a call or waits to be
//! cancelled. The scripted model calls the tools, so each call takes the real path (visibility,
//! schema check, MCP call, result in the thread). With `approval = ["write_file"]`, the
//! filesystem server's `write_file` waits for approval (the file is not written before) while
//! its `read_text_file` does not. A streamable-HTTP server that restarts on the same port
//! refuses the old session (server-everything with 400, the Python SDK with 404): the call that
//! finds out fails at once, and agentd opens a new session. One that goes away shows down (and
//! is logged), and calls wait for it to come back within their timeout.

use agentd_tests::mcp::{
    free_port, mcp_dir, node_server, python, start_everything_http, start_everything_http_on,
    start_python_http_on,
};
use agentd_tests::scripted_files::scripted_deployment;
use agentd_tests::{AgentdProcess, eventually_blocking};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The scripted model: a user message that names a tool calls it (echo and sum arguments);
/// the rest are written for the files, exiting and helper cases.
fn script(root: &Path, outside: &Path) -> String {
    let root = root.display();
    let outside = outside.display();
    format!(
        r#"
[defaults]
text = "OK"

[[rule]]
agent = "helper"
role = "user"
text = "tools: {{{{tools}}}}"
[[rule.tool_calls]]
name = "mcp__everything__echo"
arguments = {{ message = "from a helper" }}

[[rule]]
role = "user"
contains = "__echo"
[[rule.tool_calls]]
name = "{{{{input}}}}"
arguments = {{ message = "hello from agentd" }}

[[rule]]
role = "user"
contains = "sum"
[[rule.tool_calls]]
name = "{{{{input}}}}"
arguments = {{ a = 2, b = 3 }}

[[rule]]
role = "user"
contains = "call-missing"
[[rule.tool_calls]]
name = "mcp__everything__no_such_tool"
arguments = {{}}

[[rule]]
role = "user"
contains = "bad-arguments"
[[rule.tool_calls]]
name = "mcp__everything__echo"
arguments = {{ message = 42 }}

[[rule]]
role = "user"
contains = "write-note"
[[rule.tool_calls]]
name = "mcp__files__write_file"
arguments = {{ path = "{root}/note.txt", content = "hello from agentd" }}

[[rule]]
role = "tool"
contains = "Successfully wrote"
[[rule.tool_calls]]
name = "mcp__files__read_text_file"
arguments = {{ path = "{root}/note.txt" }}

[[rule]]
role = "user"
contains = "read-outside"
[[rule.tool_calls]]
name = "mcp__files__read_text_file"
arguments = {{ path = "{outside}/secret.txt" }}

[[rule]]
role = "user"
contains = "work-exit"
[[rule.tool_calls]]
name = "mcp__exiting__work"
arguments = {{ mode = "exit" }}

[[rule]]
role = "user"
contains = "work-ok"
[[rule.tool_calls]]
name = "mcp__exiting__work"
arguments = {{ mode = "ok" }}

[[rule]]
role = "user"
contains = "slow:"
[[rule.tool_calls]]
name = "mcp__exiting__slow"
arguments = {{ marker = "{root}/slow-marker" }}

[[rule]]
role = "tool"
text = "result: {{{{input}}}}"
"#
    )
}

/// agentd with the servers configured, the script and the agent types in `dir`.
struct Setup {
    agentd: AgentdProcess,
    /// The directory server-filesystem is confined to.
    root: std::path::PathBuf,
    _dir: tempfile::TempDir,
    _http: agentd_tests::mcp::ServerProcess,
}

fn toml_str(s: impl std::fmt::Display) -> String {
    serde_json::to_string(&s.to_string()).unwrap()
}

fn setup() -> Setup {
    let everything = node_server("server-everything");
    let filesystem = node_server("server-filesystem");
    let python = python();
    let (http, url) = start_everything_http();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    // server-filesystem compares real paths.
    let root = root.canonicalize().unwrap();
    let outside = outside.canonicalize().unwrap();
    std::fs::write(dir.path().join("script.toml"), script(&root, &outside)).unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("mcpuser.toml"),
        r#"name = "mcpuser"
title = "MCP user"
description = "Uses MCP tools."
tools = ["mcp__everything__*", "mcp__web__*", "mcp__files__*", "mcp__exiting__work", "mcp__exiting__slow", "mcp__everything__no_such_tool"]
"#,
    )
    .unwrap();
    std::fs::write(
        agents.join("helper.toml"),
        r#"name = "helper"
title = "Helper"
description = "A sub-agent that may be given MCP tools."
tools = ["mcp__everything__*", "current_time"]
"#,
    )
    .unwrap();
    let config = format!(
        r#"
[store]
kind = "memory"
[model]
script = {script}
[agents]
dir = {agents}
[mcp.servers.everything]
command = ["node", {everything}, "stdio"]
[mcp.servers.web]
url = {url}
headers = {{ X-Test-Token = "Bearer ${{MCP_TEST_TOKEN}}" }}
[mcp.servers.files]
command = ["node", {filesystem}, {root}]
approval = []
[mcp.servers.exiting]
command = [{python}, {exiting}]
timeout_ms = 30000
[mcp.servers.down]
url = "http://127.0.0.1:1/mcp"
"#,
        script = toml_str(dir.path().join("script.toml").display()),
        agents = toml_str(agents.display()),
        everything = toml_str(everything.display()),
        url = toml_str(&url),
        filesystem = toml_str(filesystem.display()),
        root = toml_str(root.display()),
        python = toml_str(python.display()),
        exiting = toml_str(mcp_dir().join("exiting_server.py").display()),
    );
    let config_path = dir.path().join("agentd.toml");
    std::fs::write(&config_path, config).unwrap();
    let agentd = AgentdProcess::start(&[
        ("AGENTD_CONFIG", config_path.display().to_string()),
        ("MCP_TEST_TOKEN", "t0ken".to_string()),
    ]);
    agentd.wait_for("the MCP servers listed their tools", |a| {
        let info = a.get("/v1/info");
        ["everything", "web", "files", "exiting"]
            .iter()
            .all(|name| {
                server(&info, name)["tools"]
                    .as_array()
                    .is_some_and(|t| !t.is_empty())
            })
    });
    Setup {
        agentd,
        root,
        _dir: dir,
        _http: http,
    }
}

fn server<'a>(info: &'a Value, name: &str) -> &'a Value {
    info["mcp_servers"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or(&Value::Null)
}

/// The exposed name among `server`'s tools that ends with `suffix` (the reference servers
/// rename tools between versions: the tests read the names from `tools/list`).
fn tool_named(info: &Value, server_name: &str, suffix: &str) -> String {
    server(info, server_name)["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|t| t.ends_with(suffix))
        .unwrap_or_else(|| panic!("{server_name} lists no tool ending with {suffix}: {info}"))
        .to_string()
}

/// The agent's tool results: `(text, is_error)`, in order.
fn tool_results(agentd: &AgentdProcess, id: &str) -> Vec<(String, bool)> {
    agentd.get(&format!("/v1/agents/{id}/thread"))["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["role"] == "tool")
        .map(|e| {
            (
                e["text"].as_str().unwrap_or("").to_string(),
                e["is_error"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

fn wait_for_results(agentd: &AgentdProcess, id: &str, n: usize) -> Vec<(String, bool)> {
    agentd.wait_for(&format!("{n} tool results of {id}"), |a| {
        tool_results(a, id).len() >= n
    });
    tool_results(agentd, id)
}

fn send(agentd: &AgentdProcess, id: &str, text: &str) {
    agentd
        .post(
            &format!("/v1/agents/{id}/messages"),
            json!({ "message": text }),
        )
        .unwrap();
}

#[test]
fn mcp_tools_over_stdio_and_http_files_restarts_cancels_and_visibility() {
    let setup = setup();
    let (agentd, root) = (&setup.agentd, &setup.root);
    let info = agentd.get("/v1/info");

    // A remote server that is down does not hold start-up, and shows so.
    let down = server(&info, "down");
    assert_eq!(down["up"], false, "{down}");
    assert_eq!(down["transport"], "streamable_http");
    // A tool a type names that its server does not list is reported.
    assert_eq!(
        server(&info, "everything")["missing"],
        json!(["no_such_tool"])
    );
    assert!(!info.to_string().contains("t0ken"), "no secret in /v1/info");

    // server-everything over stdio and over streamable HTTP: echo and the sum.
    for server_name in ["everything", "web"] {
        let echo = tool_named(&info, server_name, "__echo");
        let sum = tool_named(&info, server_name, "sum");
        let a = agentd.spawn_with(json!({"agent_type": "mcpuser", "prompt": echo}));
        let results = wait_for_results(agentd, &a, 1);
        assert!(
            results[0].0.contains("hello from agentd") && !results[0].1,
            "{server_name} echo: {results:?}"
        );
        let b = agentd.spawn_with(json!({"agent_type": "mcpuser", "prompt": sum}));
        let results = wait_for_results(agentd, &b, 1);
        assert!(
            results[0].0.contains('5') && !results[0].1,
            "{server_name} sum: {results:?}"
        );
        agentd.wait_for("the answer after the tool", |a| {
            a.texts(&b).iter().any(|t| t.starts_with("result: "))
        });
    }

    // Arguments that do not fit the server's schema are refused before the call.
    let bad = agentd.spawn_with(json!({"agent_type": "mcpuser", "prompt": "bad-arguments"}));
    let results = wait_for_results(agentd, &bad, 1);
    assert!(
        results[0].0.contains("invalid_argument") && results[0].1,
        "{results:?}"
    );

    // A named tool the server does not list: unknown_tool, and the agent goes on.
    let missing = agentd.spawn_with(json!({"agent_type": "mcpuser", "prompt": "call-missing"}));
    let results = wait_for_results(agentd, &missing, 1);
    assert!(results[0].0.contains("unknown_tool"), "{results:?}");

    // server-filesystem confined to `root`: write, read back; outside the root: a tool error.
    let files = agentd.spawn_with(json!({"agent_type": "mcpuser", "prompt": "write-note"}));
    let results = wait_for_results(agentd, &files, 2);
    assert!(!results[0].1, "{results:?}");
    assert!(
        results[1].0.contains("hello from agentd") && !results[1].1,
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("note.txt")).unwrap(),
        "hello from agentd"
    );
    let outside = agentd.spawn_with(json!({"agent_type": "mcpuser", "prompt": "read-outside"}));
    let results = wait_for_results(agentd, &outside, 1);
    assert!(
        results[0].1 && results[0].0.contains("tool_failed"),
        "{results:?}"
    );
    assert!(!results[0].0.contains("secret\""), "{results:?}");
    agentd.wait_for("the agent goes on after a tool error", |a| {
        a.texts(&outside).iter().any(|t| t.starts_with("result: "))
    });

    // The Python server exits in the middle of a call: a tool error; the next call restarts
    // it and succeeds.
    let exiting = agentd.spawn_with(json!({"agent_type": "mcpuser", "prompt": "work-exit"}));
    let results = wait_for_results(agentd, &exiting, 1);
    assert!(
        results[0].1 && results[0].0.contains("tool_failed"),
        "{results:?}"
    );
    agentd.wait_for("the agent is idle again", |a| {
        a.status(&exiting) != "running"
    });
    send(agentd, &exiting, "work-ok");
    let results = wait_for_results(agentd, &exiting, 2);
    assert!(
        results[1].0.contains("worked (ok)") && !results[1].1,
        "{results:?}"
    );

    // A sub-agent not allowed the MCP tools neither sees them nor may call them.
    let boss = agentd.spawn_with(json!({"agent_type": "mcpuser"}));
    let narrowed = agentd.spawn_with(
        json!({"agent_type": "helper", "parent_id": boss, "prompt": "go",
               "allowed_tools": ["current_time"]}),
    );
    let tools = agentd.get(&format!("/v1/agents/{narrowed}/tools"));
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"current_time"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("mcp__")), "{names:?}");
    let results = wait_for_results(agentd, &narrowed, 1);
    assert!(results[0].0.contains("tool_not_allowed"), "{results:?}");
    assert!(
        agentd
            .texts(&narrowed)
            .iter()
            .any(|t| t.starts_with("tools: ") && !t.contains("mcp__")),
        "the model was not shown them"
    );
    // Allowed the whole server, a sub-agent sees and calls them.
    let allowed = agentd.spawn_with(
        json!({"agent_type": "helper", "parent_id": boss, "prompt": "go",
               "allowed_tools": ["mcp__everything__*"]}),
    );
    let results = wait_for_results(agentd, &allowed, 1);
    assert!(
        results[0].0.contains("from a helper") && !results[0].1,
        "{results:?}"
    );

    // Interrupting a turn cancels the MCP call in flight (notifications/cancelled).
    let marker = root.join("slow-marker");
    let slow = agentd.spawn_with(json!({"agent_type": "mcpuser", "prompt": "slow: wait"}));
    wait_file(&marker, "started");
    agentd
        .post(
            &format!("/v1/agents/{slow}/control"),
            json!({"control": "cancel"}),
        )
        .unwrap();
    wait_file(&marker, "cancelled");

    // The metric says which servers are up.
    let metrics = ureq::get(&format!("{}/metrics", agentd.url))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    assert!(
        metrics.contains("agentd_mcp_server_up{server=\"everything\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("agentd_mcp_server_up{server=\"down\"} 0"));
    setup.agentd.stop();
}

#[test]
fn a_gated_write_file_waits_for_approval_and_read_text_file_does_not() {
    let filesystem = node_server("server-filesystem");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    std::fs::write(dir.path().join("script.toml"), script(&root, &root)).unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("mcpuser.toml"),
        "name = \"mcpuser\"\ntitle = \"MCP user\"\ntools = [\"mcp__files__*\"]\n",
    )
    .unwrap();
    let config = format!(
        r#"
[store]
kind = "memory"
[model]
script = {script}
[agents]
dir = {agents}
[mcp.servers.files]
command = ["node", {filesystem}, {root}]
approval = ["write_file"]
"#,
        script = toml_str(dir.path().join("script.toml").display()),
        agents = toml_str(agents.display()),
        filesystem = toml_str(filesystem.display()),
        root = toml_str(root.display()),
    );
    let config_path = dir.path().join("agentd.toml");
    std::fs::write(&config_path, config).unwrap();
    let agentd = AgentdProcess::start(&[("AGENTD_CONFIG", config_path.display().to_string())]);
    agentd.wait_for("server-filesystem listed its tools", |a| {
        server(&a.get("/v1/info"), "files")["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    });
    let note = root.join("note.txt");
    let id = agentd.spawn_with(json!({"agent_type": "mcpuser", "prompt": "write-note"}));
    agentd.wait_for("waiting_review", |a| a.status(&id) == "waiting_review");
    let gated = agentd.get("/v1/tool_calls?status=awaiting_approval")["tool_calls"].clone();
    assert_eq!(gated.as_array().unwrap().len(), 1, "{gated:#}");
    assert_eq!(gated[0]["tool"], "mcp__files__write_file");
    assert_eq!(gated[0]["kind"], "mcp");
    assert_eq!(gated[0]["arguments"]["content"], "hello from agentd");
    let call_id = gated[0]["call_id"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!note.exists(), "written before the approval");
    assert!(tool_results(&agentd, &id).is_empty());

    // Outside a turn, the gated tool is refused; the ungated one of the same server runs.
    let direct = agentd.post(
        &format!("/v1/agents/{id}/tools/mcp__files__write_file"),
        json!({"path": note.display().to_string(), "content": "sneaky"}),
    );
    let (code, body) = direct.unwrap_err();
    assert_eq!(code, 409, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("approval")),
        "{body}"
    );
    assert!(!note.exists());

    agentd
        .post(
            &format!("/v1/agents/{id}/approvals/{call_id}"),
            json!({"approve": true}),
        )
        .unwrap();
    // Written once approved; read back without a second gate.
    let results = wait_for_results(&agentd, &id, 2);
    assert!(!results[0].1, "{results:?}");
    assert!(
        results[1].0.contains("hello from agentd") && !results[1].1,
        "{results:?}"
    );
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "hello from agentd");
    agentd.wait_for("the answer after the read", |a| {
        a.texts(&id).iter().any(|t| t.starts_with("result: "))
    });
    assert_eq!(agentd.get("/v1/tool_calls")["tool_calls"], json!([]));
    let read = agentd
        .post(
            &format!("/v1/agents/{id}/tools/mcp__files__read_text_file"),
            json!({"path": note.display().to_string()}),
        )
        .unwrap();
    assert!(read.to_string().contains("hello from agentd"), "{read}");
    agentd.stop();
}

/// Restarted on the same port, a streamable-HTTP server no longer knows agentd's session:
/// server-everything answers it with 400, the Python SDK with 404. A call that meets the
/// refusal fails at once (`tool_failed`, not `tool_timeout`); agentd usually sees the server
/// away during the restart first and opens a new session before any call. Either way
/// `/v1/info` says why it was down, and the next call runs on a new session of the restarted
/// server.
#[test]
fn a_streamable_http_server_that_restarts_gets_a_new_session() {
    python();
    let everything_port = free_port();
    let python_port = free_port();
    let mut everything = start_everything_http_on(everything_port);
    let mut python_server = start_python_http_on(python_port);
    assert!(
        everything.is_some() && python_server.is_some(),
        "ports taken"
    );
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
[defaults]
text = "OK"

[[rule]]
role = "user"
contains = "__echo"
[[rule.tool_calls]]
name = "{{input}}"
arguments = { message = "hello again" }

[[rule]]
role = "user"
contains = "__work"
[[rule.tool_calls]]
name = "{{input}}"
arguments = { mode = "ok" }

[[rule]]
role = "tool"
text = "result: {{input}}"
"#;
    let mcpuser =
        "name = \"mcpuser\"\ntitle = \"MCP user\"\ntools = [\"mcp__web__*\", \"mcp__py__*\"]\n";
    // A call that waited for its timeout would end in `tool_timeout` after 20 s.
    let settings = format!(
        r#"
[store]
kind = "memory"
[mcp.servers.web]
url = "http://127.0.0.1:{everything_port}/mcp"
timeout_ms = 20000
[mcp.servers.py]
url = "http://127.0.0.1:{python_port}/mcp"
timeout_ms = 20000
"#
    );
    let env = scripted_deployment(dir.path(), &[("mcpuser", mcpuser)], script, &settings);
    let agentd = AgentdProcess::start(&env);
    agentd.wait_for("both servers listed their tools", |a| {
        let info = a.get("/v1/info");
        ["web", "py"].iter().all(|name| {
            server(&info, name)["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty())
        })
    });
    let info = agentd.get("/v1/info");
    let echo = tool_named(&info, "web", "__echo");
    let work = tool_named(&info, "py", "__work");

    for (name, tool, status) in [("web", &echo, "HTTP 400"), ("py", &work, "HTTP 404")] {
        assert_eq!(
            server(&agentd.get("/v1/info"), name)["last_error"],
            Value::Null
        );
        let agent = agentd.spawn_with(json!({"agent_type": "mcpuser", "prompt": tool}));
        let results = wait_for_results(&agentd, &agent, 1);
        assert!(!results[0].1, "{name} before the restart: {results:?}");
        agentd.wait_for("the first turn's end", |a| a.status(&agent) == "idle");

        match name {
            "web" => {
                drop(everything.take());
                everything = start_everything_http_on(everything_port);
                assert!(everything.is_some(), "server-everything restarted");
            }
            _ => {
                drop(python_server.take());
                python_server = start_python_http_on(python_port);
                assert!(python_server.is_some(), "the Python server restarted");
            }
        }

        // Either agentd saw the server away while it restarted (its event stream could not
        // connect) and opened a new session by itself, and the call runs there; or the call
        // meets the refused session and fails at once saying why. Never a wait for the
        // timeout.
        send(&agentd, &agent, tool);
        let results = wait_for_results(&agentd, &agent, 2);
        let (text, is_error) = &results[1];
        assert!(
            !*is_error
                || (text.contains("tool_failed")
                    && text.contains(status)
                    && text.contains("session")),
            "{name} after the restart: {results:?}"
        );
        // The server was down for one of those reasons, and is up again on a new session.
        agentd.wait_for(&format!("{name} up again"), |a| {
            let info = a.get("/v1/info");
            let s = server(&info, name);
            s["up"] == true
                && s["last_error"]
                    .as_str()
                    .is_some_and(|e| e.contains(status) || e.contains("cannot be reached"))
        });
        agentd.wait_for("the second turn's end", |a| a.status(&agent) == "idle");
        send(&agentd, &agent, tool);
        let results = wait_for_results(&agentd, &agent, 3);
        assert!(!results[2].1, "{name} on the new session: {results:?}");
        if name == "web" {
            assert!(results[2].0.contains("hello again"), "{results:?}");
        } else {
            // Answered by the restarted process, not by the one before.
            assert!(
                results[2].0.contains("worked (ok) in process"),
                "{results:?}"
            );
            assert_ne!(results[0].0, results[2].0, "{results:?}");
        }
    }
    agentd.stop();
}

/// A streamable-HTTP server that goes away (stopped mid-test): the call that finds out is not
/// failed with a transport error but waits for the server, which shows down in `/v1/info` with
/// why (and is logged) meanwhile; a server that comes back within the call's timeout answers
/// it, one that does not makes it `tool_timeout` saying the server is down and why.
#[test]
fn a_streamable_http_server_that_goes_away_shows_down_and_calls_wait_for_it() {
    python();
    let everything_port = free_port();
    let python_port = free_port();
    let mut everything = start_everything_http_on(everything_port);
    let mut python_server = start_python_http_on(python_port);
    assert!(
        everything.is_some() && python_server.is_some(),
        "ports taken"
    );
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
[defaults]
text = "OK"

[[rule]]
role = "user"
contains = "__echo"
[[rule.tool_calls]]
name = "{{input}}"
arguments = { message = "hello again" }

[[rule]]
role = "user"
contains = "__work"
[[rule.tool_calls]]
name = "{{input}}"
arguments = { mode = "ok" }

[[rule]]
role = "tool"
text = "result: {{input}}"
"#;
    let mcpuser =
        "name = \"mcpuser\"\ntitle = \"MCP user\"\ntools = [\"mcp__web__*\", \"mcp__py__*\"]\n";
    let settings = format!(
        r#"
[store]
kind = "memory"
[mcp.servers.web]
url = "http://127.0.0.1:{everything_port}/mcp"
timeout_ms = 30000
[mcp.servers.py]
url = "http://127.0.0.1:{python_port}/mcp"
timeout_ms = 3000
"#
    );
    let env = scripted_deployment(dir.path(), &[("mcpuser", mcpuser)], script, &settings);
    let agentd = AgentdProcess::start(&env);
    agentd.wait_for("both servers listed their tools", |a| {
        let info = a.get("/v1/info");
        ["web", "py"].iter().all(|name| {
            server(&info, name)["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty())
        })
    });
    let info = agentd.get("/v1/info");
    let echo = tool_named(&info, "web", "__echo");
    let work = tool_named(&info, "py", "__work");
    let web_down = |a: &AgentdProcess| {
        let info = a.get("/v1/info");
        let s = server(&info, "web").clone();
        s["up"] == false
            && s["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("cannot be reached"))
    };

    // Up: a call is answered.
    let agent = agentd.spawn_with(json!({"agent_type": "mcpuser", "prompt": echo}));
    let results = wait_for_results(&agentd, &agent, 1);
    assert!(!results[0].1, "before the stop: {results:?}");
    agentd.wait_for("the first turn's end", |a| a.status(&agent) == "idle");

    // Stopped: the server shows down, logged, without a call; the next call waits for it.
    drop(everything.take());
    agentd.wait_for("web shown down", web_down);
    agentd.wait_for_log("MCP server disconnected");
    send(&agentd, &agent, &echo);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        tool_results(&agentd, &agent).len(),
        1,
        "the call waits for the server: {:?}",
        tool_results(&agentd, &agent)
    );
    assert_eq!(agentd.status(&agent), "running");

    // Back on the same port within the call's timeout: the waiting call is answered.
    everything = start_everything_http_on(everything_port);
    assert!(everything.is_some(), "server-everything restarted");
    let results = wait_for_results(&agentd, &agent, 2);
    assert!(
        !results[1].1 && results[1].0.contains("hello again"),
        "the call waited for the server and was answered: {results:?}"
    );
    agentd.wait_for("web up again", |a| {
        server(&a.get("/v1/info"), "web")["up"] == true
    });

    // A server that stays away: the call ends at its timeout (3 s), saying the server is down
    // and why, not with a raw transport error at once.
    let py_agent = agentd.spawn_with(json!({"agent_type": "mcpuser", "prompt": work}));
    let results = wait_for_results(&agentd, &py_agent, 1);
    assert!(!results[0].1, "py before the stop: {results:?}");
    agentd.wait_for("the py turn's end", |a| a.status(&py_agent) == "idle");
    drop(python_server.take());
    agentd.wait_for("py shown down", |a| {
        server(&a.get("/v1/info"), "py")["up"] == false
    });
    let sent = std::time::Instant::now();
    send(&agentd, &py_agent, &work);
    let results = wait_for_results(&agentd, &py_agent, 2);
    let waited = sent.elapsed();
    let (text, is_error) = &results[1];
    assert!(
        *is_error && text.contains("tool_timeout") && text.contains("is down"),
        "{results:?}"
    );
    assert!(text.contains("cannot be reached"), "{text}");
    assert!(waited >= Duration::from_millis(2500), "{waited:?}");
    let info = agentd.get("/v1/info");
    assert_eq!(server(&info, "py")["up"], false, "{info}");
    agentd.stop();
}

fn wait_file(path: &Path, content: &str) {
    let what = format!("{} to say {content}", path.display());
    eventually_blocking(
        Duration::from_secs(20),
        &what,
        || match std::fs::read_to_string(path) {
            Ok(c) if c == content => Ok(()),
            said => Err(format!(
                "{} never said {content} (it says {:?})",
                path.display(),
                said.ok()
            )),
        },
    )
}

/// `agentd check-config` with `config`, and `env` set: its exit status and stderr.
fn check_config(config: &str, env: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentd.toml");
    std::fs::write(&path, config).unwrap();
    let mut cmd = Command::new(agentd_tests::process::binary("agentd"));
    cmd.arg("--config")
        .arg(&path)
        .arg("check-config")
        .env("AGENTD__STORE__KIND", "memory")
        .env_remove("MCP_UNSET_VARIABLE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn mcp_configuration_errors_stop_start_up_and_secrets_stay_hidden() {
    let (ok, out) = check_config("[mcp.servers.\"Bad__Name\"]\ncommand = [\"x\"]\n", &[]);
    assert!(!ok && out.contains("a server name must match"), "{out}");
    let (ok, out) = check_config(
        "[mcp.servers.files]\ncommand = [\"x\"]\nenv = { TOKEN = \"${MCP_UNSET_VARIABLE}\" }\n",
        &[],
    );
    assert!(
        !ok && out.contains("MCP_UNSET_VARIABLE") && out.contains("not set"),
        "{out}"
    );
    let (ok, out) = check_config("[mcp.servers.files]\ncommand = [\"x\"]\n", &[]);
    assert!(ok, "{out}");
    // A type naming a server that is not configured, or a tool that does not exist.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("t.toml"),
        "name = \"t\"\ntools = [\"mcp__nope__*\"]\n",
    )
    .unwrap();
    let (ok, out) = check_config(
        &format!(
            "[agents]\ndir = {}\n[mcp.servers.files]\ncommand = [\"x\"]\n",
            toml_str(dir.path().display())
        ),
        &[],
    );
    assert!(
        !ok && out.contains("`nope`, which is not configured"),
        "{out}"
    );
    std::fs::write(
        dir.path().join("t.toml"),
        "name = \"t\"\ntools = [\"no_such_tool\"]\n",
    )
    .unwrap();
    let (ok, out) = check_config(
        &format!("[agents]\ndir = {}\n", toml_str(dir.path().display())),
        &[],
    );
    assert!(!ok && out.contains("no_such_tool"), "{out}");
    // Secrets written in place are masked in check-config's output.
    let (ok, out) = check_config(
        "[mcp.servers.search]\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = { Authorization = \"Bearer ${MCP_SET_VARIABLE} plain-s3cret\" }\n",
        &[("MCP_SET_VARIABLE", "v4lue")],
    );
    assert!(ok, "{out}");
    assert!(
        !out.contains("s3cret") && !out.contains("v4lue") && out.contains("Authorization"),
        "{out}"
    );
}
