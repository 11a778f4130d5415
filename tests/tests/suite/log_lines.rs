//! What the real `agentd` binary logs and prints, read from its output: on Redis it names its
//! store `Redis` and says in one line that its partitions drained; a line a turn writes names
//! its trace id, with telemetry off; a second answer to a service tool's call is logged (INFO)
//! and acknowledged, as docs/redis.md says; an MCP
//! server's `peer_info` (its instructions) is DEBUG, not INFO; a configuration error is printed
//! once, without a backtrace, even with `RUST_BACKTRACE=1`; the core tools are listed in one
//! DEBUG line at start.

use agentd_tests::mcp::node_server;
use agentd_tests::scripted_files::{CLERK, CLERK_SCRIPT, lookup_order, scripted_deployment};
use agentd_tests::{AgentdProcess, RedisServer, eventually_blocking};
use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;

/// A worker's reply to call `call_id` on `agentd:tool_replies`.
fn reply(con: &mut redis::Connection, call_id: &str, result: Value) {
    let reply = json!({
        "v": 1, "id": uuid::Uuid::now_v7().to_string(), "correlation_id": call_id,
        "from": {"type": "external", "name": "orders"}, "to": {"type": "system"},
        "sent_at": 1, "item": {"kind": "reply", "result": result},
    });
    let _: String = redis::cmd("XADD")
        .arg("agentd:tool_replies")
        .arg("*")
        .arg("m")
        .arg(rmp_serde::to_vec_named(&reply).unwrap())
        .query(con)
        .unwrap();
}

#[test]
fn on_redis_the_store_is_named_redis_one_line_says_the_partitions_drained_and_a_second_answer_is_logged()
 {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut env = scripted_deployment(
        dir.path(),
        &[("clerk", CLERK)],
        CLERK_SCRIPT,
        &lookup_order(60_000, "never"),
    );
    env.extend([
        ("AGENTD__REDIS__URL", redis.url()),
        // The tools' DEBUG line: one a turn writes.
        ("RUST_LOG", "info,agentd_actors::tools=debug".to_string()),
    ]);
    let p = AgentdProcess::start(&env);

    let up = p.wait_for_log("agentd is up");
    assert!(up.contains("store=Redis"), "{up}");
    // The 64 partitions it took at start drained together: one line says so.
    let drained = p.wait_for_log("drained");
    assert!(
        drained.contains("INFO") && drained.contains("count=64"),
        "{drained}"
    );
    assert!(drained.contains("partitions=0-63"), "{drained}");

    // A call of the service tool, answered twice (delivery to workers is at least once).
    let clerk = p.spawn("clerk", "order A-1");
    let mut con = redis.client();
    let (call_id, trace) =
        eventually_blocking(Duration::from_secs(20), "the call to be published", || {
            let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
                .arg("agentd:tools:lookup_order")
                .arg("-")
                .arg("+")
                .query(&mut con)
                .unwrap();
            let m = reply.ids.first().and_then(|id| id.get::<Vec<u8>>("m"))?;
            let call: Value = rmp_serde::from_slice(&m).unwrap();
            Some((
                call["item"]["call_id"].as_str().unwrap().to_string(),
                call["trace"].as_str().unwrap_or_default().to_string(),
            ))
        });
    // The call carries the calling turn's W3C trace context (telemetry off: ids only).
    let turn_trace = p.get(&format!("/v1/agents/{clerk}"))["trace_id"].clone();
    assert_eq!(
        trace.get(3..35),
        turn_trace.as_str(),
        "the call's traceparent {trace:?} names the turn's trace"
    );
    reply(&mut con, &call_id, json!({"status": "shipped"}));
    p.wait_for("the answer", |p| {
        p.texts(&clerk).iter().any(|t| t.starts_with("Result: "))
    });
    // A line the turn wrote names its trace (telemetry off: agentd chose the ids).
    let line = eventually_blocking(Duration::from_secs(20), "the tool call's line", || {
        p.log_lines()
            .into_iter()
            .find(|l| l.contains("tool call") && l.contains("current_time"))
    });
    assert!(
        line.contains(&format!("trace_id={}", turn_trace.as_str().unwrap())),
        "{line}"
    );
    reply(&mut con, &call_id, json!({"status": "lost"}));
    let later = p.wait_for_log("a later answer to a closed tool call");
    assert!(
        later.contains("INFO") && later.contains(&call_id),
        "{later}"
    );
    let dead: u64 = redis::cmd("XLEN")
        .arg("agentd:dead")
        .query(&mut con)
        .unwrap();
    assert_eq!(dead, 0, "no dead letter");

    let lines = p.log_lines();
    assert!(!lines.iter().any(|l| l.contains("Embedded")), "{lines:#?}");
    let drained: Vec<&String> = lines.iter().filter(|l| l.contains("drained")).collect();
    assert_eq!(drained.len(), 1, "{drained:#?}");
    p.stop();
}

/// agentd with server-everything over stdio, logging at `log`.
fn with_everything(log: &str) -> (AgentdProcess, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentd.toml");
    std::fs::write(
        &config,
        format!(
            "[store]\nkind = \"memory\"\n[mcp.servers.everything]\ncommand = [\"node\", {}, \"stdio\"]\n",
            serde_json::to_string(&node_server("server-everything").display().to_string())
                .unwrap()
        ),
    )
    .unwrap();
    let p = AgentdProcess::start(&[
        ("AGENTD_CONFIG", config.display().to_string()),
        ("RUST_LOG", log.to_string()),
    ]);
    p.wait_for_log("MCP tools listed");
    (p, dir)
}

#[test]
fn an_mcp_server_s_peer_info_is_debug() {
    // At INFO: the connection and its tools, not what the server says of itself.
    let (p, _dir) = with_everything("info");
    let connected = p.wait_for_log("MCP server connected");
    assert!(connected.contains("server=everything"), "{connected}");
    let lines = p.log_lines();
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("peer_info") || l.contains("Server Instructions")),
        "{lines:#?}"
    );
    p.stop();

    // At DEBUG for agentd's MCP client: the server's name and instructions.
    let (p, _dir) = with_everything("info,agentd_mcp=debug");
    let initialised = p.wait_for_log("MCP server initialised");
    assert!(
        initialised.contains("DEBUG")
            && initialised.contains("Everything Reference Server")
            && initialised.contains("Server Instructions"),
        "{initialised}"
    );
    let lines = p.log_lines();
    assert_eq!(
        lines.iter().filter(|l| l.contains("peer_info")).count(),
        1,
        "{lines:#?}"
    );
    p.stop();
}

/// `agentd --config <config> <args>` with `RUST_BACKTRACE=1`: its exit code and stderr.
fn agentd_with(config: &str, args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentd.toml");
    std::fs::write(&path, config).unwrap();
    let out = Command::new(agentd_tests::process::binary("agentd"))
        .arg("--config")
        .arg(&path)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .env("AGENTD__SERVER__BIND", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .env_remove("LOG_LINES_UNSET_VARIABLE")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_configuration_error_is_printed_once_without_a_backtrace() {
    let cases = [
        (
            "[store]\nkind = \"nope\"\n",
            "unknown variant `nope`, expected one of `embedded`, `memory`, `redis`",
        ),
        ("[store\n", "unclosed table"),
        (
            "[log]\nformat = \"xml\"\n",
            "log.format `xml` must be human or json",
        ),
        // gRPC export is not built in.
        (
            "[store]\nkind = \"memory\"\n[telemetry]\nprotocol = \"grpc\"\n",
            "telemetry.protocol `grpc` is not supported",
        ),
        (
            "[store]\nkind = \"memory\"\n[telemetry]\nsample_ratio = 2.0\n",
            "telemetry.sample_ratio 2 is not between 0 and 1",
        ),
        // Found while wiring, once the logs are set up.
        (
            "[store]\nkind = \"memory\"\n[mcp.servers.files]\ncommand = [\"x\"]\nenv = { TOKEN = \"${LOG_LINES_UNSET_VARIABLE}\" }\n",
            "LOG_LINES_UNSET_VARIABLE",
        ),
    ];
    for (config, message) in cases {
        for args in [&[][..], &["check-config"][..]] {
            let (code, stderr) = agentd_with(config, args);
            assert_eq!(code, Some(1), "{args:?} {config}: {stderr}");
            assert_eq!(
                stderr.matches(message).count(),
                1,
                "{args:?} {config}: printed once: {stderr}"
            );
            assert!(
                stderr.starts_with("error: ") && !stderr.to_lowercase().contains("backtrace"),
                "{args:?} {config}: {stderr}"
            );
        }
    }
}

/// Seed 000: the core tools are listed in one DEBUG line when they are registered.
#[test]
fn the_core_tools_are_listed_in_one_debug_line_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let p = AgentdProcess::start(&[
        (
            "AGENTD__STORE__DATA_DIR",
            dir.path().join("data").display().to_string(),
        ),
        ("RUST_LOG", "warn,agentd_actors::system=debug".to_string()),
    ]);
    let line = p.wait_for_log("core tools registered");
    for tool in [
        "Manage",
        "spawn_agent",
        "send_agent_followup",
        "inspect_agent",
        "list_agents",
        "close_agent",
        "delete_agent",
        "agent_reset",
        "agent_compact",
        "current_time",
        "yield_to_parent",
    ] {
        assert!(line.contains(tool), "{tool} in {line}");
    }
    assert!(line.contains("DEBUG"), "{line}");
}
