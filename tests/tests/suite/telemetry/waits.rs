//! The waits that matter are spans (`wait {what}`) under the work they hold up: a turn slot
//! (`queued`, beside the turn it delays, under the request that sent its item), a person's
//! review and a service tool's answer (`waiting_review`, `waiting_tool`, under the turn that
//! made the call). The service call is handed to the tool's workers in an `execute_tool` span,
//! whose trace context its envelope carries. (The rate-limit wait is in `one_trace`.)

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
