//! Calls out carry the trace and calls in join it: an MCP tool call carries the W3C trace
//! context of its `execute_tool` span in `params._meta.traceparent` (the MCP semantic
//! conventions), read back by a server written with the official Python SDK
//! (tests/mcp/exiting_server.py); a remote A2A agent's call carries its `chat` span's in the
//! `traceparent` header (tests/a2a/remote.py, on the official a2a-sdk); a command on the Redis
//! command stream, a request to agentd's A2A server and an answer to an agent's question that
//! carry one join the caller's trace.
//! A `chat` span names the model the provider's answer says answered; a failed tool call or
//! model call names its class in `error.type`. Export is set up by the standard
//! `OTEL_EXPORTER_OTLP_*` and `OTEL_SERVICE_NAME` variables alone.

use super::{Cluster, Receiver, matches};
use agentd_proto::TraceContext;
use agentd_tests::a2a_remote::RemoteAgent;
use agentd_tests::eventually_blocking;
use agentd_tests::mcp::{mcp_dir, python as mcp_python};
use agentd_tests::streaming_provider::{Reply, StreamingProvider, anthropic_text, openai_text};
use serde_json::{Value, json};
use std::time::Duration;

/// The trace context `text` (a tool result, JSON in JSON) names as its `traceparent`.
fn traceparent_in(text: &str) -> Option<TraceContext> {
    let at = text.find("traceparent")?;
    let rest = &text[at..];
    let start = rest.find("00-")?;
    TraceContext::parse(rest.get(start..start + 55)?)
}

/// The span ids of `ctx` as the receiver writes them.
fn ids(ctx: &TraceContext) -> (String, String) {
    (
        format!("{:032x}", ctx.trace_id),
        format!("{:016x}", ctx.span_id),
    )
}

/// The server span of the request that carried `traceparent`, a child of the caller's span.
fn request_in(receiver: &Receiver, traceparent: &str) -> Value {
    let caller = TraceContext::parse(traceparent).unwrap();
    let (trace_id, span_id) = ids(&caller);
    eventually_blocking(Duration::from_secs(30), "the request's span", || {
        receiver.spans().into_iter().find(|s| {
            s["kind"] == "server" && s["trace_id"] == trace_id && s["parent_span_id"] == span_id
        })
    })
}

/// `reply` (Anthropic events) reporting 7 input tokens read from the cache and 5 written to it.
fn with_cache(reply: Reply) -> Reply {
    let Reply::Stream(mut events) = reply else {
        return reply;
    };
    for e in &mut events {
        if e.name.as_deref() == Some("message_start") {
            let mut v: Value = serde_json::from_str(&e.data).unwrap();
            v["message"]["usage"]["cache_read_input_tokens"] = json!(7);
            v["message"]["usage"]["cache_creation_input_tokens"] = json!(5);
            e.data = v.to_string();
        }
    }
    Reply::Stream(events)
}

/// OTLP's `Status.code` of a span ended in error.
const STATUS_CODE_ERROR: u64 = 2;

fn toml_str(s: impl std::fmt::Display) -> String {
    toml::Value::String(s.to_string()).to_string()
}

#[test]
fn calls_out_carry_the_trace_and_calls_in_join_it() {
    let receiver = Receiver::start(0);
    let a2a_python = agentd_tests::a2a_remote::python()
        .expect("target/.venv-a2a with the A2A SDK is missing: run scripts/test.sh");
    let remote = RemoteAgent::start(&a2a_python, true);
    let openai = StreamingProvider::start(vec![
        openai_text(&["fine"], "stop", Some((9, 2))).naming_model("gpt-answered-2025-01-01"),
    ]);
    let anthropic = StreamingProvider::start(vec![with_cache(
        anthropic_text(&["fine"], "end_turn", 9, 2).naming_model("claude-answered-20250101"),
    )]);
    let config = format!(
        r#"
[a2a]
expose = ["subagent"]
[mcp.servers.probe]
command = [{python}, {server}]
[providers.live]
backend = "openai"
base_url = {openai}
model = "gpt-configured"
[providers.claude]
backend = "anthropic"
base_url = {anthropic}
[providers.far]
kind = "a2a"
card_url = {card}
"#,
        python = toml_str(mcp_python().display()),
        server = toml_str(mcp_dir().join("exiting_server.py").display()),
        openai = toml_str(&openai.url),
        anthropic = toml_str(&anthropic.url),
        card = toml_str(remote.card_url()),
    );
    // Export set up by the standard variables alone.
    let cluster = Cluster::new("")
        .with("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint())
        .with("OTEL_SERVICE_NAME", "agentd-calls")
        .with("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=k-123")
        .with_type(
            "prober",
            "title = \"Prober\"\ntools = [\"mcp__probe__meta\"]\n",
        )
        .with_config(&config);
    let p = cluster.process();
    p.wait_for("the MCP server's tools", |p| {
        p.get("/v1/info")["mcp_servers"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == "probe"))
            .and_then(|s| s["tools"].as_array())
            .is_some_and(|t| !t.is_empty())
    });

    // MCP: the call's `_meta` names its `execute_tool` span.
    let prober = p.spawn("prober", "probe");
    let result = eventually_blocking(Duration::from_secs(20), "the tool's result", || {
        p.texts(&prober)
            .into_iter()
            .find(|t| t.contains("traceparent"))
    });
    let sent = traceparent_in(&result).unwrap_or_else(|| panic!("no traceparent: {result}"));
    let tool = receiver.span(
        "execute_tool mcp__probe__meta",
        json!({"mcp.server.name": "probe", "gen_ai.tool.type": "extension",
               "gen_ai.tool.name": "mcp__probe__meta"}),
    );
    assert_eq!(
        ids(&sent),
        (
            tool["trace_id"].as_str().unwrap().to_string(),
            tool["span_id"].as_str().unwrap().to_string()
        ),
        "the MCP request names the tool call's span"
    );
    let turn = receiver.span("invoke_agent prober", json!({"gen_ai.agent.id": prober}));
    assert_eq!(tool["parent_span_id"], turn["span_id"]);
    assert_eq!(turn["service"], "agentd-calls", "OTEL_SERVICE_NAME");
    let requests = receiver.of("request");
    assert!(
        requests
            .iter()
            .any(|r| r["path"] == "/v1/traces" && r["headers"]["x-collector-key"] == "k-123"),
        "OTEL_EXPORTER_OTLP_HEADERS: {requests:?}"
    );

    // A2A out: the remote's request names the turn's `chat` span.
    let far = p
        .spawn_with(json!({"agent_type": "subagent", "provider": "far", "prompt": "hello remote"}));
    p.wait_for("the remote's answer", |p| {
        p.texts(&far)
            .iter()
            .any(|t| t == "remote #1 heard: hello remote")
    });
    let header = remote
        .received()
        .into_iter()
        .find(|m| m["text"] == "hello remote")
        .expect("the remote got the message");
    let sent = TraceContext::parse(header["traceparent"].as_str().unwrap_or_default())
        .unwrap_or_else(|| panic!("no traceparent header: {header}"));
    let turn = receiver.span("invoke_agent subagent", json!({"gen_ai.agent.id": far}));
    let chat = receiver.child_of(&turn, "chat");
    assert_eq!(chat["attributes"]["gen_ai.provider.name"], "a2a");
    assert_eq!(
        ids(&sent),
        (
            chat["trace_id"].as_str().unwrap().to_string(),
            chat["span_id"].as_str().unwrap().to_string()
        ),
        "the A2A request names the chat span"
    );

    // A command on the Redis command stream with the caller's context joins its trace.
    let caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let command = json!({
        "v": 1, "id": uuid::Uuid::now_v7().to_string(),
        "from": {"type": "external", "name": "billing"}, "to": {"type": "system"},
        "reply_to": "billing:replies", "sent_at": 1, "trace": caller,
        "item": {"kind": "command", "type": "spawn", "agent_type": "subagent",
                 "prompt": "from billing"}
    });
    let mut con = cluster.redis.client();
    let _: String = redis::cmd("XADD")
        .arg("otel:commands")
        .arg("*")
        .arg("m")
        .arg(rmp_serde::to_vec_named(&command).unwrap())
        .query(&mut con)
        .unwrap();
    let joined = eventually_blocking(Duration::from_secs(30), "the command's turn", || {
        receiver.spans().into_iter().find(|s| {
            s["name"] == "invoke_agent subagent"
                && s["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
        })
    });
    assert_eq!(joined["parent_span_id"], "b7ad6b7169203331", "{joined}");

    // A request to agentd's A2A server with the caller's context joins its trace.
    let caller = "00-5b8efff798038103d269b633813fc60c-eee19b7ec3c1b174-01";
    let task: Value = ureq::post(&format!("{}/a2a/subagent", p.url))
        .set("A2A-Version", "1.0")
        .set("traceparent", caller)
        .send_json(
            json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": "otel-1", "role": "ROLE_USER",
                        "parts": [{"text": "hello over A2A"}]},
            "configuration": {"returnImmediately": true}}}),
        )
        .unwrap()
        .into_json()
        .unwrap();
    assert!(task["result"].is_object(), "{task}");
    let request = request_in(&receiver, caller);
    assert_eq!(request["name"], "POST /a2a/{agent_type}");
    receiver.child_of(&request, "invoke_agent subagent");

    // So does an answer to an agent's question.
    let asking = p.spawn("subagent", "ask me something");
    p.wait_for("the question", |p| p.status(&asking) == "waiting_question");
    let caller = "00-9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f-1a2b3c4d5e6f7a8b-01";
    ureq::post(&format!("{}/v1/agents/{asking}/answer", p.url))
        .set("traceparent", caller)
        .send_json(json!({"answer": "north"}))
        .unwrap();
    let request = request_in(&receiver, caller);
    let turn = receiver.child_of(&request, "invoke_agent subagent");
    assert_eq!(turn["attributes"]["gen_ai.agent.id"], asking);

    // The model that answered, as the provider names it, beside the one asked for (the
    // spawn's, else the provider's configured one).
    for (provider, spawned_with, asked, answered, backend) in [
        (
            "live",
            Some("gpt-asked"),
            "gpt-asked",
            "gpt-answered-2025-01-01",
            "openai",
        ),
        (
            "live",
            None,
            "gpt-configured",
            "gpt-answered-2025-01-01",
            "openai",
        ),
        (
            "claude",
            Some("claude-asked"),
            "claude-asked",
            "claude-answered-20250101",
            "anthropic",
        ),
    ] {
        let id = p.spawn_with(json!({"agent_type": "subagent", "provider": provider,
                                     "model": spawned_with, "prompt": "which model?"}));
        let turn = receiver.span("invoke_agent subagent", json!({"gen_ai.agent.id": id}));
        let chat = receiver.child_of(&turn, &format!("chat {asked}"));
        assert!(
            matches(
                &chat["attributes"],
                &json!({"gen_ai.provider.name": backend, "gen_ai.request.model": asked,
                        "gen_ai.response.model": answered})
            ),
            "{chat}"
        );
        if backend == "anthropic" {
            assert!(
                matches(
                    &chat["attributes"],
                    &json!({"gen_ai.usage.cache_read.input_tokens": 7,
                            "gen_ai.usage.cache_creation.input_tokens": 5})
                ),
                "{chat}"
            );
        }
        eventually_blocking(Duration::from_secs(30), "the token metric", || {
            receiver.of("metric").iter().any(|m| {
                m["name"] == "gen_ai.client.token.usage"
                    && m["attributes"]["gen_ai.response.model"] == answered
                    && m["attributes"]["gen_ai.request.model"] == asked
            })
        });
    }

    // A failed call names its class: a tool's error code, `model_error` for a model's failure.
    let spawner = p.spawn("research", "spawn a stranger");
    let turn = receiver.span("invoke_agent research", json!({"gen_ai.agent.id": spawner}));
    let tool = receiver.child_of(&turn, "execute_tool spawn_agent");
    assert_eq!(
        tool["attributes"]["error.type"], "unknown_agent_type",
        "{tool}"
    );
    assert_eq!(tool["status"], STATUS_CODE_ERROR, "{tool}");
    let broken = p.spawn("subagent", "break the model");
    let turn = receiver.span("invoke_agent subagent", json!({"gen_ai.agent.id": broken}));
    let chat = receiver.child_of(&turn, "chat");
    assert_eq!(chat["attributes"]["error.type"], "model_error", "{chat}");
    assert_eq!(chat["status"], STATUS_CODE_ERROR, "{chat}");
}
