//! `sample_ratio`: with 0, agentd records no trace it starts itself, and still records the
//! traces a caller that samples them starts (the sampler follows a remote parent's flag).

use super::{Cluster, Receiver};
use serde_json::{Value, json};
use std::time::Duration;

#[test]
fn a_sample_ratio_of_zero_records_only_the_traces_a_sampled_caller_started() {
    let receiver = Receiver::start(0);
    let cluster = Cluster::new(&receiver.endpoint()).with("AGENTD__TELEMETRY__SAMPLE_RATIO", "0");
    let p = cluster.process();
    let unsampled = p.spawn("subagent", "hello");
    p.wait_for("the first turn", |p| {
        p.texts(&unsampled).last().map(String::as_str) == Some("ok")
    });
    // A caller that samples its trace: the work it causes is recorded.
    let caller = "00-3e1f0c4d5b6a79880a1b2c3d4e5f6071-0102030405060708-01";
    let spawned: Value = ureq::post(&format!("{}/v1/agents", p.url))
        .set("traceparent", caller)
        .send_json(json!({"agent_type": "subagent", "prompt": "hello again"}))
        .unwrap()
        .into_json()
        .unwrap();
    let sampled = spawned["agent_id"].as_str().unwrap();
    let turn = receiver.span("invoke_agent subagent", json!({"gen_ai.agent.id": sampled}));
    assert_eq!(turn["trace_id"], "3e1f0c4d5b6a79880a1b2c3d4e5f6071");
    // The first agent's spans ended before these: had they been sampled, they would be here.
    std::thread::sleep(Duration::from_millis(500));
    let spans = receiver.spans();
    assert!(
        spans
            .iter()
            .all(|s| s["trace_id"] == "3e1f0c4d5b6a79880a1b2c3d4e5f6071"),
        "only the sampled caller's trace: {spans:?}"
    );
    // Not sampled is not lost: the first agent's view still names its trace.
    let view = p.get(&format!("/v1/agents/{unsampled}"));
    assert_eq!(view["trace_id"].as_str().map(str::len), Some(32), "{view}");
}
