//! The waits that matter are spans (`wait {what}`) under the work they hold up: a turn slot
//! (`queued`, beside the turn it delays, under the request that sent its item), a person's
//! review and a service tool's answer (`waiting_review`, `waiting_tool`, under the turn that
//! made the call). A review decided while other service calls of the step still wait ends its
//! wait, and a `waiting_tool` one under the same turn takes over. The service call is handed to
//! the tool's workers in an `execute_tool` span, whose trace context its envelope carries. (The
//! rate-limit wait is in `one_trace`.)

use super::{Cluster, Receiver};
use agentd_proto::TraceContext;
use agentd_tests::eventually_blocking;
use agentd_tests::scripted_files::lookup_order;
use serde_json::{Value, json};
use std::time::Duration;

/// A worker's reply to call `call_id` on the cluster's `otel:tool_replies`.
fn reply(con: &mut redis::Connection, call_id: &str, result: Value) {
    let reply = json!({
        "v": 1, "id": uuid::Uuid::now_v7().to_string(), "correlation_id": call_id,
        "from": {"type": "external", "name": "orders"}, "to": {"type": "system"},
        "sent_at": 1, "item": {"kind": "reply", "result": result},
    });
    let _: String = redis::cmd("XADD")
        .arg("otel:tool_replies")
        .arg("*")
        .arg("m")
        .arg(rmp_serde::to_vec_named(&reply).unwrap())
        .query(con)
        .unwrap();
}

/// The span `id` names, once the receiver has it.
fn span_by_id(receiver: &Receiver, id: &Value) -> Value {
    eventually_blocking(Duration::from_secs(30), &format!("the span {id}"), || {
        receiver.spans().into_iter().find(|s| s["span_id"] == *id)
    })
}

#[test]
fn the_waits_are_spans_under_the_work_they_hold_up() {
    let receiver = Receiver::start(0);
    let cluster = Cluster::new(&receiver.endpoint())
        .with("AGENTD__LIMITS__MAX_RUNNING_TURNS", "1")
        .with("AGENTD__TELEMETRY__SERVICE_NAME", "agentd-waits")
        .with_type("clerk", "title = \"Clerk\"\ntools = [\"lookup_order\"]\n")
        .with_config(&lookup_order(60_000, "always"));
    let p = cluster.process();

    // One turn at a time: a second agent's first turn waits for the slot the first holds.
    let slow = p.spawn("research", "take a while");
    p.wait_for("the slow turn to run", |p| {
        p.get(&format!("/v1/agents/{slow}"))["turn_running"] == true
    });
    let spawned = p
        .post(
            "/v1/agents",
            json!({"agent_type": "subagent", "prompt": "next"}),
        )
        .unwrap();
    let next = spawned["agent_id"].as_str().unwrap().to_string();
    let queued = receiver.span(
        "wait queued",
        json!({"gen_ai.agent.id": next, "agentd.wait": "queued"}),
    );
    assert_eq!(queued["trace_id"], spawned["trace_id"]);
    assert_eq!(queued["service"], "agentd-waits", "telemetry.service_name");
    let request = span_by_id(&receiver, &queued["parent_span_id"]);
    assert_eq!(request["name"], "POST /v1/agents", "{request}");
    let turn = receiver.child_of(&request, "invoke_agent subagent");
    assert_eq!(turn["attributes"]["gen_ai.agent.id"], next);
    assert!(
        queued["end"].as_u64() <= turn["start"].as_u64(),
        "the wait ends before the turn starts: {queued} {turn}"
    );
    assert!(
        queued["end"].as_u64() > queued["start"].as_u64(),
        "{queued}"
    );

    // A service tool behind a review: the turn waits for the person, then for the answer.
    let spawned = p
        .post(
            "/v1/agents",
            json!({"agent_type": "clerk", "prompt": "where is order A-1?"}),
        )
        .unwrap();
    let clerk = spawned["agent_id"].as_str().unwrap().to_string();
    let call_id = eventually_blocking(Duration::from_secs(20), "the call at the gate", || {
        p.get("/v1/tool_calls?status=awaiting_approval")["tool_calls"]
            .as_array()?
            .iter()
            .find(|c| c["agent_id"] == clerk.as_str())
            .and_then(|c| c["call_id"].as_str().map(str::to_string))
    });
    p.post(
        &format!("/v1/agents/{clerk}/approvals/{call_id}"),
        json!({"approve": true}),
    )
    .unwrap();
    // The approved call reaches the tool's workers in the turn's trace.
    let mut con = cluster.redis.client();
    let trace = eventually_blocking(Duration::from_secs(20), "the published call", || {
        let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg("otel:tools:lookup_order")
            .arg("-")
            .arg("+")
            .query(&mut con)
            .unwrap();
        let m = reply.ids.first().and_then(|id| id.get::<Vec<u8>>("m"))?;
        let call: Value = rmp_serde::from_slice(&m).unwrap();
        call["trace"].as_str().and_then(TraceContext::parse)
    });
    reply(&mut con, &call_id, json!({"status": "shipped"}));
    p.wait_for("the answer", |p| {
        p.texts(&clerk).iter().any(|t| t.starts_with("Result: "))
    });

    let review = receiver.span(
        "wait waiting_review",
        json!({"gen_ai.agent.id": clerk, "agentd.wait": "waiting_review"}),
    );
    let tool = receiver.span(
        "wait waiting_tool",
        json!({"gen_ai.agent.id": clerk, "agentd.wait": "waiting_tool"}),
    );
    // Both under the turn that made the call: the clerk's first, the spawn's child.
    let first = span_by_id(&receiver, &review["parent_span_id"]);
    assert_eq!(first["name"], "invoke_agent clerk", "{first}");
    assert_eq!(first["trace_id"], spawned["trace_id"]);
    let request = span_by_id(&receiver, &first["parent_span_id"]);
    assert_eq!(request["name"], "POST /v1/agents", "{request}");
    assert_eq!(tool["parent_span_id"], first["span_id"]);
    assert_eq!(tool["trace_id"], first["trace_id"]);
    assert!(
        review["end"].as_u64() <= tool["start"].as_u64(),
        "one wait after the other: {review} {tool}"
    );
    // The call named its `execute_tool` span, in the clerk's turn going on after the review.
    let handed = span_by_id(&receiver, &json!(format!("{:016x}", trace.span_id)));
    assert_eq!(
        format!("{:032x}", trace.trace_id),
        first["trace_id"].as_str().unwrap()
    );
    assert_eq!(handed["name"], "execute_tool lookup_order", "{handed}");
    assert_eq!(handed["attributes"]["gen_ai.tool.name"], "lookup_order");
    let publisher = span_by_id(&receiver, &handed["parent_span_id"]);
    assert_eq!(publisher["name"], "invoke_agent clerk", "{publisher}");
    assert_eq!(publisher["parent_span_id"], first["span_id"]);
}

/// `[tools.ship_order]`: a service tool without review, beside `lookup_order`.
const SHIP_ORDER: &str = r#"
[tools.ship_order]
kind = "service"
description = "Ship an order."
parameters = { type = "object", properties = { order_id = { type = "string" } }, required = ["order_id"] }
timeout_ms = 60000
approval = "never"
"#;

/// The open call of `agent` to `tool` with status `status`, once the API lists it.
fn call_of(p: &agentd_tests::AgentdProcess, agent: &str, tool: &str, status: &str) -> String {
    eventually_blocking(
        Duration::from_secs(20),
        &format!("a {status} {tool}"),
        || {
            p.get(&format!("/v1/tool_calls?status={status}"))["tool_calls"]
                .as_array()?
                .iter()
                .find(|c| c["agent_id"] == agent && c["tool"] == tool)
                .and_then(|c| c["call_id"].as_str().map(str::to_string))
        },
    )
}

#[test]
fn a_decided_review_hands_the_wait_to_the_calls_left() {
    let receiver = Receiver::start(0);
    let cluster = Cluster::new(&receiver.endpoint())
        .with_type(
            "dispatcher",
            "title = \"Dispatcher\"\ntools = [\"lookup_order\", \"ship_order\"]\n",
        )
        .with_config(&format!("{}{SHIP_ORDER}", lookup_order(60_000, "always")));
    let p = cluster.process();

    // One step, two service calls: `lookup_order` at the gate, `ship_order` sent at once.
    let spawned = p
        .post(
            "/v1/agents",
            json!({"agent_type": "dispatcher", "prompt": "ship A-2"}),
        )
        .unwrap();
    let id = spawned["agent_id"].as_str().unwrap().to_string();
    let gated = call_of(&p, &id, "lookup_order", "awaiting_approval");
    let shipping = call_of(&p, &id, "ship_order", "pending");
    p.post(
        &format!("/v1/agents/{id}/approvals/{gated}"),
        json!({"approve": true}),
    )
    .unwrap();

    // Decided while `ship_order` still waits: the review's wait ends (so it is exported)
    // before any answer, and the agent waits for the tool.
    let review = receiver.span(
        "wait waiting_review",
        json!({"gen_ai.agent.id": id, "agentd.wait": "waiting_review"}),
    );
    p.wait_for("the wait for ship_order", |p| {
        p.status(&id) == "waiting_tool"
    });
    let first = span_by_id(&receiver, &review["parent_span_id"]);
    assert_eq!(first["name"], "invoke_agent dispatcher", "{first}");
    assert_eq!(first["trace_id"], spawned["trace_id"]);

    // The answer ends the tool's wait, which took over from the review's under the same turn,
    // and the turn goes on.
    let mut con = cluster.redis.client();
    reply(&mut con, &shipping, json!({"shipped": true}));
    let tool = receiver.span(
        "wait waiting_tool",
        json!({"gen_ai.agent.id": id, "agentd.wait": "waiting_tool"}),
    );
    assert_eq!(tool["parent_span_id"], first["span_id"], "{tool}");
    assert_eq!(tool["trace_id"], first["trace_id"]);
    assert!(
        review["end"].as_u64() <= tool["start"].as_u64(),
        "the tool's wait starts when the review's ends: {review} {tool}"
    );
    let again = receiver.child_of(&first, "invoke_agent dispatcher");
    assert!(
        tool["end"].as_u64() <= again["start"].as_u64(),
        "the wait ends before the turn goes on: {tool} {again}"
    );
}
