//! One trace across two processes, a turn lost to `kill -9`, a collector down at start.

use super::{Cluster, PARTITIONS, Receiver, matches};
use agentd_actors::fnv1a64;
use agentd_tests::process::wait_balanced;
use agentd_tests::{AgentdProcess, eventually_blocking};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::Duration;

fn partition(id: &str) -> u32 {
    (fnv1a64(id.as_bytes()) % u64::from(PARTITIONS)) as u32
}

/// Which of `a` and `b` owns agent `id` (0 or 1).
fn owner(a: &AgentdProcess, b: &AgentdProcess, id: &str) -> usize {
    let p = partition(id);
    if a.partitions_owned().contains(&p) {
        0
    } else {
        assert!(b.partitions_owned().contains(&p), "nobody owns {p}");
        1
    }
}

/// The id of `root`'s Manage worker, once it exists.
fn worker_of(p: &AgentdProcess, root: &str) -> String {
    eventually_blocking(Duration::from_secs(20), "the root's worker", || {
        p.get(&format!("/v1/agents?parent_id={root}"))["agents"]
            .as_array()
            .and_then(|a| a.first())
            .and_then(|w| w["agent_id"].as_str())
            .map(str::to_string)
    })
}

fn span_ids(spans: &[Value]) -> HashSet<String> {
    spans
        .iter()
        .map(|s| s["span_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_tree_over_two_processes_is_one_trace_of_genai_spans() {
    let receiver = Receiver::start(0);
    let cluster =
        Cluster::new(&receiver.endpoint()).with("AGENTD__TELEMETRY__CAPTURE_CONTENT", "true");
    let (a, b) = (cluster.process(), cluster.process());
    wait_balanced(&a, &b, PARTITIONS);
    // A root whose worker runs in the other process (a worker's id is new per root).
    let mut found = None;
    for _ in 0..16 {
        let spawned = a
            .post(
                "/v1/agents",
                json!({"agent_type": "lead", "prompt": "delegate the research"}),
            )
            .unwrap();
        let root = spawned["agent_id"].as_str().unwrap().to_string();
        let trace_id = spawned["trace_id"].as_str().unwrap().to_string();
        let worker = worker_of(&a, &root);
        if owner(&a, &b, &root) != owner(&a, &b, &worker) {
            found = Some((root, worker, trace_id));
            break;
        }
    }
    let (root, worker, trace_id) = found.expect("a worker in the other process");
    assert_eq!(trace_id.len(), 32, "{trace_id}");

    let root_turn = receiver.span(
        "invoke_agent lead",
        json!({"gen_ai.agent.id": root, "gen_ai.operation.name": "invoke_agent",
               "gen_ai.conversation.id": root, "gen_ai.agent.name": "lead",
               "gen_ai.provider.name": "scripted"}),
    );
    assert_eq!(root_turn["trace_id"], trace_id, "the 201 names the trace");
    assert_eq!(root_turn["kind"], "internal");
    // The request that spawned the root is its parent.
    let request = eventually_blocking(Duration::from_secs(30), "the spawn's request span", || {
        receiver
            .spans()
            .into_iter()
            .find(|s| s["name"] == "POST /v1/agents" && s["trace_id"] == trace_id)
    });
    assert_eq!(request["kind"], "server");
    assert_eq!(request["attributes"]["http.route"], "/v1/agents");
    assert_eq!(request["attributes"]["http.response.status_code"], 201);
    assert_eq!(root_turn["parent_span_id"], request["span_id"]);
    let chat = receiver.span(
        "chat",
        json!({"gen_ai.operation.name": "chat", "gen_ai.conversation.id": root,
               "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30}),
    );
    assert_eq!(chat["parent_span_id"], root_turn["span_id"]);
    assert_eq!(chat["kind"], "client");
    assert_eq!(
        chat["attributes"]["gen_ai.response.finish_reasons"],
        json!(["tool_calls"])
    );
    // capture_content: the messages, in the conventions' shape.
    let input: Value = serde_json::from_str(
        chat["attributes"]["gen_ai.input.messages"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(input[0]["role"], "user", "{input}");
    assert_eq!(input[0]["parts"][0]["content"], "delegate the research");
    let output: Value = serde_json::from_str(
        chat["attributes"]["gen_ai.output.messages"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(output[0]["parts"][1]["name"], "Manage", "{output}");
    let manage = receiver.child_of(&root_turn, "execute_tool Manage");
    assert!(matches(
        &manage["attributes"],
        &json!({"gen_ai.tool.name": "Manage", "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.type": "function"})
    ));
    assert!(manage["attributes"]["gen_ai.tool.call.id"].is_string());

    // The worker's turn, in the other process, is the Manage call's child.
    let worker_turn = receiver.span(
        "invoke_agent research",
        json!({"gen_ai.agent.id": worker, "gen_ai.conversation.id": worker}),
    );
    assert_eq!(
        worker_turn["trace_id"], trace_id,
        "one trace across processes"
    );
    assert_eq!(worker_turn["parent_span_id"], manage["span_id"]);
    let spawn = receiver.child_of(&worker_turn, "execute_tool spawn_agent");
    assert_eq!(spawn["attributes"]["gen_ai.tool.name"], "spawn_agent");
    let sub_turn = receiver.child_of(&spawn, "invoke_agent subagent");
    assert_eq!(sub_turn["trace_id"], trace_id);

    // The sub-agent's yield reaches the worker as a message: that turn follows the sub-agent's
    // span by a link, in a trace of its own.
    let after = eventually_blocking(
        Duration::from_secs(30),
        "the worker's turn on the yield",
        || {
            receiver.spans().into_iter().find(|s| {
                s["name"] == "invoke_agent research"
                    && s["attributes"]["gen_ai.agent.id"] == worker
                    && s["links"]
                        .as_array()
                        .is_some_and(|l| l.iter().any(|l| l["span_id"] == sub_turn["span_id"]))
            })
        },
    );
    assert_ne!(after["trace_id"], trace_id);

    // The views show the trace of the agent's latest turn (the root's is the one on its
    // worker's forwarded answer, in a trace of its own).
    let view = a.get(&format!("/v1/agents/{root}"));
    let latest = view["trace_id"].as_str().unwrap().to_string();
    receiver.span("invoke_agent lead", json!({"gen_ai.agent.id": root}));
    eventually_blocking(
        Duration::from_secs(30),
        "the root's latest turn span",
        || {
            receiver.spans().into_iter().find(|s| {
                s["name"] == "invoke_agent lead"
                    && s["attributes"]["gen_ai.agent.id"] == root
                    && s["trace_id"] == latest
            })
        },
    );

    // The GenAI metrics.
    eventually_blocking(Duration::from_secs(30), "gen_ai metrics", || {
        let metrics = receiver.of("metric");
        let tokens = metrics.iter().any(|m| {
            m["name"] == "gen_ai.client.token.usage"
                && m["unit"] == "{token}"
                && m["attributes"]["gen_ai.token.type"] == "input"
                && m["attributes"]["gen_ai.provider.name"] == "scripted"
        });
        let duration = metrics.iter().any(|m| {
            m["name"] == "gen_ai.client.operation.duration"
                && m["unit"] == "s"
                && m["attributes"]["gen_ai.operation.name"] == "chat"
        });
        tokens && duration
    });

    // Only agentd's own spans: nothing the exporter or its HTTP client did came back.
    let names: HashSet<String> = receiver
        .spans()
        .iter()
        .map(|s| {
            s["name"]
                .as_str()
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    for name in &names {
        assert!(
            [
                "invoke_agent",
                "chat",
                "execute_tool",
                "POST",
                "PUT",
                "DELETE",
                "wait"
            ]
            .contains(&name.as_str()),
            "unexpected span {name}"
        );
    }
}

#[test]
fn a_turn_run_again_after_kill_9_links_to_the_lost_one() {
    let receiver = Receiver::start(0);
    let cluster = Cluster::new(&receiver.endpoint());
    let (a, b) = (cluster.process(), cluster.process());
    wait_balanced(&a, &b, PARTITIONS);
    // A research root owned by B, spawned through A: its first turn runs in B.
    let (agent, trace_id) = loop {
        let spawned = a
            .post("/v1/agents", json!({"agent_type": "research"}))
            .unwrap();
        let id = spawned["agent_id"].as_str().unwrap().to_string();
        if owner(&a, &b, &id) == 1 {
            break (id, spawned["trace_id"].as_str().unwrap().to_string());
        }
    };
    let sent = a
        .post(
            &format!("/v1/agents/{agent}/messages"),
            json!({"text": "go slowly"}),
        )
        .unwrap();
    let trace_id_sent = sent["trace_id"].as_str().unwrap().to_string();
    assert_ne!(trace_id_sent, trace_id, "each request starts its own trace");
    b.wait_for("the turn to run in B", |p| {
        p.get(&format!("/v1/agents/{agent}"))["turn_running"] == true
    });
    // B holds the message in its stream entry, and writes the turn's start (the `running`
    // record that counts the attempt) once the turn has run `redis.hold_ms`: a run lost before
    // that left nothing to link to, and its re-run is a first attempt.
    let mut con = cluster.redis.client();
    let key = agentd_store::Keys::new("otel", PARTITIONS).agent(&agent);
    eventually_blocking(Duration::from_secs(10), "the turn's start stored", || {
        let bytes: Option<Vec<u8>> = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
        bytes
            .and_then(|b| agentd_proto::codec::decode::<agentd_proto::AgentRecord>(&b).ok())
            .is_some_and(|rec| rec.status == agentd_proto::AgentStatus::Running)
    });
    let before = a.get(&format!("/v1/agents/{agent}"));
    assert_eq!(before["trace_id"], trace_id_sent, "{before}");
    b.kill9();
    // A takes B's partitions over and runs the turn again.
    a.wait_for("the turn to be done in A", |p| {
        p.texts(&agent).iter().any(|t| t == "slow done")
    });
    let again = receiver.span("invoke_agent research", json!({"gen_ai.agent.id": agent}));
    assert_eq!(again["trace_id"], trace_id_sent);
    let request = receiver.span(
        "POST /v1/agents/{id}/messages",
        json!({"http.route": "/v1/agents/{id}/messages"}),
    );
    // Still a child of the request that sent the message, and linked to the run B lost,
    // which the receiver never got.
    assert_eq!(again["parent_span_id"], request["span_id"]);
    let links = again["links"].as_array().unwrap();
    assert_eq!(links.len(), 1, "{again}");
    assert_eq!(links[0]["trace_id"], trace_id_sent);
    let lost = links[0]["span_id"].as_str().unwrap();
    assert_ne!(lost, again["span_id"].as_str().unwrap());
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !span_ids(&receiver.spans()).contains(lost),
        "the lost run's span was never exported"
    );
}

#[test]
fn a_collector_down_at_start_loses_no_work_and_counts_the_dropped_spans() {
    // Nobody listens on the port yet.
    let port = agentd_tests::mcp::free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let cluster = Cluster::new(&endpoint);
    let p = cluster.process();
    let first = p.spawn("subagent", "hello");
    p.wait_for("the first turn", |p| {
        p.texts(&first).last().map(String::as_str) == Some("ok")
    });
    p.wait_for_log("telemetry: dropping spans");
    let dropped = eventually_blocking(Duration::from_secs(20), "dropped spans counted", || {
        let metrics = ureq::get(&format!("{}/metrics", p.url))
            .call()
            .unwrap()
            .into_string()
            .unwrap();
        metrics
            .lines()
            .find(|l| l.starts_with("agentd_telemetry_spans_dropped_total"))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|n| *n > 0.0)
    });
    assert!(dropped >= 1.0);
    // The collector comes up: the next turn's spans arrive.
    let receiver = Receiver::start(port);
    let second = p.spawn("subagent", "hello again");
    let turn = receiver.span("invoke_agent subagent", json!({"gen_ai.agent.id": second}));
    let chat = receiver.child_of(&turn, "chat");
    assert!(
        chat["attributes"].get("gen_ai.input.messages").is_none(),
        "no message contents unless capture_content: {chat}"
    );
    p.wait_for("the second turn", |p| {
        p.texts(&second).last().map(String::as_str) == Some("ok")
    });
    p.wait_for_log("telemetry: the collector takes spans again");

    // A provider's rate limit: the wait is a span under the turn it stopped, and the turn
    // run again after it links to that one.
    let limited = p.spawn("subagent", "limit me");
    p.wait_for("the rate-limited turn to end", |p| {
        p.texts(&limited).last().map(String::as_str) == Some("ok")
    });
    let wait = receiver.span(
        "wait waiting_rate_limit",
        json!({"gen_ai.agent.id": limited, "agentd.wait": "waiting_rate_limit"}),
    );
    let first = eventually_blocking(Duration::from_secs(30), "the limited turn", || {
        receiver
            .spans()
            .into_iter()
            .find(|s| s["span_id"] == wait["parent_span_id"])
    });
    assert_eq!(first["name"], "invoke_agent subagent");
    let chat = receiver.child_of(&first, "chat");
    assert_eq!(chat["attributes"]["error.type"], "rate_limited");
    let again = eventually_blocking(Duration::from_secs(30), "the turn run again", || {
        receiver.spans().into_iter().find(|s| {
            s["attributes"]["gen_ai.agent.id"] == limited
                && s["name"] == "invoke_agent subagent"
                && s["links"]
                    .as_array()
                    .is_some_and(|l| l.iter().any(|l| l["span_id"] == first["span_id"]))
        })
    });
    assert_eq!(again["parent_span_id"], first["parent_span_id"]);
    assert_eq!(again["trace_id"], first["trace_id"]);

    // A caller's `traceparent`: the request joins its trace, and the turn it starts with it.
    let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let sent: Value = ureq::post(&format!("{}/v1/agents/{limited}/messages", p.url))
        .set("traceparent", caller)
        .send_json(json!({"text": "joined"}))
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(
        sent["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736",
        "{sent}"
    );
    let request = receiver.span(
        "POST /v1/agents/{id}/messages",
        json!({"url.path": format!("/v1/agents/{limited}/messages")}),
    );
    assert_eq!(request["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(request["parent_span_id"], "00f067aa0ba902b7");
    let joined = receiver.child_of(&request, "invoke_agent subagent");
    assert_eq!(joined["attributes"]["gen_ai.agent.id"], limited);
}
