//! A streamable-HTTP server that restarts (a new session) or goes away (shown down, calls wait for it).

use super::*;

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
