//! What a call has seen of a remote task: the events of a stream, a `SendMessage` answer, a
//! task read again, folded into its state, its answer so far and the usage it reported.

use agentd_ports::AnswerObserver;
use agentd_proto::Usage;
use serde_json::Value;

/// The metadata key under which a remote reports the tokens its task used so far (A2A has
/// no standard field for usage): `{"input", "output", "cacheWrite", "cacheRead"}`, on the
/// task, a status update or the answering message. The last value seen is the task's total.
pub const USAGE_KEY: &str = "agentd.usage";

/// Where a remote task ended up, as far as a call follows it.
#[derive(Debug, Default)]
pub(super) struct Seen {
    pub(super) task_id: Option<String>,
    pub(super) context_id: Option<String>,
    pub(super) state: String,
    /// The status message's text (a question, an error).
    pub(super) status_text: String,
    /// The artifacts' text, by artifact id, in order of arrival.
    artifacts: Vec<(String, String)>,
    /// A direct `Message` answer's text (no task).
    pub(super) message: Option<String>,
    /// The tokens the remote reported for the task (under [`USAGE_KEY`]).
    pub(super) usage: Option<Usage>,
}

impl Seen {
    /// The task is where a turn's call ends: answered, failed, or waiting for input.
    pub(super) fn settled(&self) -> bool {
        self.message.is_some()
            || matches!(
                self.state.as_str(),
                "TASK_STATE_COMPLETED"
                    | "TASK_STATE_FAILED"
                    | "TASK_STATE_CANCELED"
                    | "TASK_STATE_REJECTED"
                    | "TASK_STATE_INPUT_REQUIRED"
                    | "TASK_STATE_AUTH_REQUIRED"
            )
    }

    /// A whole task (a snapshot): its artifacts replace those seen so far.
    pub(super) fn take_task(&mut self, task: &Value) {
        self.ids(task.get("id"), task.get("contextId"));
        self.take_usage(task);
        if let Some(status) = task.get("status") {
            self.take_status(status);
        }
        if let Some(artifacts) = task.get("artifacts").and_then(Value::as_array) {
            self.artifacts.clear();
            for a in artifacts {
                self.take_artifact(a, false, None);
            }
        }
    }

    fn ids(&mut self, task: Option<&Value>, context: Option<&Value>) {
        if let Some(t) = task.and_then(Value::as_str) {
            self.task_id = Some(t.to_string());
        }
        if let Some(c) = context.and_then(Value::as_str) {
            self.context_id = Some(c.to_string());
        }
    }

    fn take_status(&mut self, status: &Value) {
        if let Some(s) = status.get("state").and_then(Value::as_str) {
            self.state = s.to_string();
        }
        if let Some(m) = status.get("message") {
            self.take_usage(m);
        }
        self.status_text = status.get("message").map(text_of).unwrap_or_default();
    }

    /// The usage `holder`'s metadata reports, if any (a malformed one is ignored: the
    /// answer matters more than its count).
    fn take_usage(&mut self, holder: &Value) {
        let Some(u) = holder.pointer(&format!("/metadata/{USAGE_KEY}")) else {
            return;
        };
        // Protocol Buffers' JSON writes a `Struct`'s numbers as doubles (`11.0`).
        let n = |k: &str| {
            u.get(k)
                .and_then(|v| {
                    v.as_u64()
                        .or_else(|| v.as_f64().map(|f| f.max(0.0).round() as u64))
                })
                .unwrap_or(0)
        };
        self.usage = Some(Usage {
            input: n("input"),
            output: n("output"),
            cache_write: n("cacheWrite"),
            cache_read: n("cacheRead"),
            estimated: false,
        });
    }

    /// Adds an artifact (or a chunk of one, `append`), telling `observer` its new text.
    fn take_artifact(
        &mut self,
        artifact: &Value,
        append: bool,
        observer: Option<&dyn AnswerObserver>,
    ) {
        let id = artifact
            .get("artifactId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let text = parts_text(artifact.get("parts"), "");
        if let Some(o) = observer {
            o.text(&text);
        }
        match self.artifacts.iter_mut().find(|(a, _)| *a == id) {
            Some((_, t)) if append => t.push_str(&text),
            Some((_, t)) => *t = text,
            None => self.artifacts.push((id, text)),
        }
    }

    /// One `StreamResponse` (or `SendMessageResponse`): `task`, `message`, `statusUpdate` or
    /// `artifactUpdate`.
    pub(super) fn take(&mut self, result: &Value, observer: Option<&dyn AnswerObserver>) {
        if let Some(task) = result.get("task") {
            self.take_task(task);
        } else if let Some(m) = result.get("message") {
            self.ids(m.get("taskId"), m.get("contextId"));
            self.take_usage(m);
            let text = text_of(m);
            if let Some(o) = observer {
                o.text(&text);
            }
            self.message = Some(text);
        } else if let Some(u) = result.get("statusUpdate") {
            self.ids(u.get("taskId"), u.get("contextId"));
            self.take_usage(u);
            if let Some(status) = u.get("status") {
                self.take_status(status);
            }
        } else if let Some(u) = result.get("artifactUpdate") {
            self.ids(u.get("taskId"), u.get("contextId"));
            let append = u.get("append").and_then(Value::as_bool).unwrap_or(false);
            if let Some(a) = u.get("artifact") {
                self.take_artifact(a, append, observer);
            }
        }
    }

    /// The answer: a direct message's text, else the artifacts' (joined by blank lines),
    /// else the status message's.
    pub(super) fn answer_text(&self) -> String {
        if let Some(m) = &self.message {
            return m.clone();
        }
        let artifacts: Vec<&str> = self
            .artifacts
            .iter()
            .map(|(_, t)| t.as_str())
            .filter(|t| !t.is_empty())
            .collect();
        if artifacts.is_empty() {
            self.status_text.clone()
        } else {
            artifacts.join("\n\n")
        }
    }
}

/// A message's text: its parts, on lines of their own.
fn text_of(message: &Value) -> String {
    parts_text(message.get("parts"), "\n")
}

/// The text of `parts`: text parts joined by `sep`; a data part as its JSON (compact, as
/// agentd's server gives data parts to a model), on a line of its own. File parts (`raw`,
/// `url`) are not read.
fn parts_text(parts: Option<&Value>, sep: &str) -> String {
    let mut out = String::new();
    for p in parts.and_then(Value::as_array).into_iter().flatten() {
        if let Some(t) = p.get("text").and_then(Value::as_str) {
            if !out.is_empty() {
                out.push_str(sep);
            }
            out.push_str(t);
        } else if let Some(d) = p.get("data") {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&d.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn streamed_chunks_and_statuses_make_the_answer() {
        let mut seen = Seen::default();
        seen.take(
            &json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}}),
            None,
        );
        assert!(!seen.settled());
        for (i, chunk) in ["one", " two"].iter().enumerate() {
            seen.take(
                &json!({"artifactUpdate": {"taskId": "t", "append": i > 0,
                    "artifact": {"artifactId": "a", "parts": [{"text": chunk}]}}}),
                None,
            );
        }
        seen.take(
            &json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"}}}),
            None,
        );
        assert!(seen.settled());
        assert_eq!(seen.answer_text(), "one two");
        assert_eq!(seen.task_id.as_deref(), Some("t"));
        assert_eq!(seen.context_id.as_deref(), Some("c"));
        assert_eq!(seen.usage, None);
    }

    #[test]
    fn data_parts_are_json_text_and_usage_is_the_last_reported() {
        let mut seen = Seen::default();
        seen.take(
            &json!({"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"},
                "metadata": {"agentd.usage": {"input": 5, "output": 1}},
                "artifacts": [{"artifactId": "a", "parts": [
                    {"text": "the count"}, {"data": {"ships": 3}}, {"url": "https://x/y.png"}]}]}}),
            None,
        );
        assert_eq!(seen.answer_text(), "the count\n{\"ships\":3}");
        seen.take(
            &json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"},
                "metadata": {"agentd.usage": {"input": 7.0, "output": 2, "cacheRead": 4}}}}),
            None,
        );
        let u = seen.usage.unwrap_or_default();
        assert_eq!((u.input, u.output, u.cache_read), (7, 2, 4));
    }
}
