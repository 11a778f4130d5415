//! Calls of the reference servers' tools over stdio and streamable HTTP: files, restarts, cancels, visibility, and approval gating one tool but not another.

use super::*;

/// agentd with the servers configured, the script and the agent types in `dir`.
struct Setup {
    agentd: AgentdProcess,
    /// The directory server-filesystem is confined to.
    root: std::path::PathBuf,
    _dir: tempfile::TempDir,
    _http: agentd_tests::mcp::ServerProcess,
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
