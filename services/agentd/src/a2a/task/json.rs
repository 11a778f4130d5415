//! The ProtoJSON of a task, as every method answers it.

use super::{Origin, TaskView};
use agentd_models::a2a::USAGE_KEY;
use agentd_proto::ids::derived_id;
use serde_json::{Value, json};
use uuid::Uuid;

/// The ProtoJSON of a task.
pub fn task_json(v: &TaskView, history: Option<usize>, artifacts: bool) -> Value {
    let t = &v.task;
    let mut status = json!({
        "state": v.state().wire(),
        "timestamp": agentd_proto::time::rfc3339_utc(v.outcome.at_ms),
    });
    if let Some(text) = &v.outcome.status_text {
        status["message"] = json!({
            "messageId": derived_id(Uuid::try_parse(&t.context_id).unwrap_or_default(),
                &format!("{}:{}", t.id, v.state().wire())).to_string(),
            "contextId": t.shown_context(),
            "taskId": t.id,
            "role": "ROLE_AGENT",
            "parts": [{"text": text}],
        });
    }
    let mut out = json!({"id": t.id, "contextId": t.shown_context(), "status": status});
    if t.origin == Origin::Agent {
        out["metadata"] = json!({"agentd.origin": "agent"});
    }
    if v.outcome.usage.total() > 0 {
        // No standard field: agentd's own key, which agentd's A2A client reads back.
        let u = &v.outcome.usage;
        out["metadata"][USAGE_KEY] = json!({
            "input": u.input, "output": u.output,
            "cacheWrite": u.cache_write, "cacheRead": u.cache_read,
        });
    }
    if artifacts && let Some(a) = v.outcome.answer.as_ref().filter(|a| !a.is_empty()) {
        out["artifacts"] = json!([artifact(a)]);
    }
    let keep = history.unwrap_or(usize::MAX);
    if keep > 0 && !t.history.is_empty() {
        let skip = t.history.len().saturating_sub(keep);
        out["history"] = Value::Array(t.history[skip..].to_vec());
    }
    out
}

/// The answer as the task's one artifact.
pub fn artifact(text: &str) -> Value {
    json!({"artifactId": "answer", "name": "answer", "parts": [{"text": text}]})
}
