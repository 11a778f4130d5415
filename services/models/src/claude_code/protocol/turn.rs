//! The lines the CLI writes during one turn, assembled as they come into one
//! [`ModelResponse`]: its steps (the tools it ran, paired with their results), its answer,
//! its usage and cost, or why it failed.

use super::usage::{reported_cost, usage_in, usage_of};
use agentd_ports::{AnswerObserver, CliRun, CliStep, ModelError, ModelResponse};
use agentd_proto::{ToolCall, Usage};
use serde_json::{Value, json};

/// A line that ended the turn: the call's answer, or why it failed.
pub type Ended = Result<ModelResponse, ModelError>;

/// How long a rate-limited call waits when the CLI reports no reset still to come (an API key's
/// limits are reported without one).
pub const DEFAULT_RATE_LIMIT_WAIT_MS: u64 = 60_000;

/// The wait of a rate-limited call: until the reset the CLI reported, if it is still to come.
pub fn rate_limit_wait(resets_at_ms: Option<u64>, now_ms: u64) -> u64 {
    match resets_at_ms {
        Some(at) if at > now_ms => at - now_ms,
        _ => DEFAULT_RATE_LIMIT_WAIT_MS,
    }
}

/// What a line is read with, besides itself.
#[derive(Clone, Copy)]
pub struct Reading<'a> {
    /// The CLI's running `total_cost_usd` before this turn, for CLIs that report no per-turn
    /// figure.
    pub prior_cost_usd: f64,
    /// The time, ms since the epoch: a rate limit's reset is a moment, its wait is from now.
    pub now_ms: u64,
    /// Told what the turn has cost so far as its lines arrive, as the HTTP backends tell
    /// theirs while a message streams: a call abandoned before its `result` line (an
    /// interrupt, a cancel) counts what it cost.
    pub observer: Option<&'a dyn AnswerObserver>,
}

/// The lines of one turn, assembled as they come.
#[derive(Debug, Default)]
pub struct TurnAssembly {
    /// The session its `system/init` line named.
    pub session_id: Option<String>,
    steps: Vec<CliStep>,
    /// Text and calls of the step under way; `answered[i]` holds call `i`'s result.
    text: String,
    calls: Vec<ToolCall>,
    answered: Vec<Option<String>>,
    /// A `compact_boundary` was seen: the next plain `user` line is the CLI's summary.
    compacted: bool,
    summary: Option<String>,
    /// The usage of each of the turn's messages (by message id), as its last line said.
    message_usage: Vec<(String, Usage)>,
    /// The reset of a usage limit that refused a request, ms since the epoch.
    rate_limit_resets_at_ms: Option<u64>,
}

impl TurnAssembly {
    /// Takes one line, telling `reading.observer` what it cost; answers `Some` when it ended
    /// the turn.
    pub fn line(&mut self, v: &Value, reading: Reading<'_>) -> Option<Ended> {
        if v.get("parent_tool_use_id").is_some_and(|p| !p.is_null()) {
            return None;
        }
        match v.get("type").and_then(Value::as_str) {
            Some("system") if v.get("subtype").and_then(Value::as_str) == Some("init") => {
                if let Some(id) = v.get("session_id").and_then(Value::as_str) {
                    self.session_id = Some(id.to_string());
                }
                None
            }
            Some("system")
                if v.get("subtype").and_then(Value::as_str) == Some("compact_boundary") =>
            {
                self.compacted = true;
                None
            }
            Some("assistant") => {
                // The CLI's own error messages (`is_api_error_message`) are not the model's
                // output and cost nothing.
                let observer = reading
                    .observer
                    .filter(|_| v.get("is_api_error_message") != Some(&Value::Bool(true)));
                self.assistant(v.pointer("/message/content"), observer);
                self.count(v.get("message"), observer);
                None
            }
            Some("rate_limit_event") => {
                let info = v.get("rate_limit_info");
                if info.and_then(|i| i.get("status")).and_then(Value::as_str) == Some("rejected") {
                    self.rate_limit_resets_at_ms = info
                        .and_then(|i| i.get("resetsAt"))
                        .and_then(Value::as_u64)
                        .map(|secs| secs.saturating_mul(1000));
                }
                None
            }
            Some("user") => {
                let content = v.pointer("/message/content");
                if self.compacted
                    && self.summary.is_none()
                    && let Some(summary) = content.and_then(Value::as_str)
                {
                    self.summary = Some(summary.to_string());
                }
                self.tool_results(content);
                None
            }
            Some("result") => Some(self.end(v, reading)),
            _ => None,
        }
    }

    /// Keeps the usage an `assistant` line's `message` reports (each line of a message repeats
    /// it, as known when the line was written) and tells `observer` the turn's so far. A line
    /// reporting none (the CLI's own error messages) changes nothing.
    fn count(&mut self, message: Option<&Value>, observer: Option<&dyn AnswerObserver>) {
        let Some(message) = message else { return };
        let usage = usage_in(message.get("usage"));
        if usage.total() == 0 {
            return;
        }
        let id = message
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match self.message_usage.iter_mut().find(|(m, _)| m == id) {
            Some((_, known)) => *known = usage,
            None => self.message_usage.push((id.to_string(), usage)),
        }
        if let Some(o) = observer {
            let mut so_far = Usage::default();
            for (_, u) in &self.message_usage {
                so_far += *u;
            }
            o.usage(so_far);
        }
    }

    fn assistant(&mut self, content: Option<&Value>, observer: Option<&dyn AnswerObserver>) {
        // Output so far, for the estimate of an abandoned call's output tokens; as
        // `other_output`, not text: the CLI's steps are not the answer, so they are not
        // streamed as `text_delta`s of it.
        let output = |chars: usize| {
            if let Some(o) = observer {
                o.other_output(chars);
            }
        };
        let Some(blocks) = content.and_then(Value::as_array) else {
            if let Some(text) = content.and_then(Value::as_str) {
                output(text.len());
                self.say(text);
            }
            return;
        };
        for block in blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                    output(text.len());
                    self.say(text);
                }
                Some("tool_use") => {
                    self.calls.push(ToolCall {
                        id: block
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        name: block
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        arguments: block.get("input").cloned().unwrap_or_else(|| json!({})),
                    });
                    if let Some(call) = self.calls.last() {
                        output(call.name.len() + call.arguments.to_string().len());
                    }
                    self.answered.push(None);
                }
                _ => {}
            }
        }
    }

    fn say(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(text);
    }

    fn tool_results(&mut self, content: Option<&Value>) {
        let Some(blocks) = content.and_then(Value::as_array) else {
            return;
        };
        for block in blocks {
            if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                continue;
            }
            let Some(call_id) = block.get("tool_use_id").and_then(Value::as_str) else {
                continue;
            };
            // A result of no call of this step, or a second one, is dropped: one per call.
            let Some(i) = self
                .calls
                .iter()
                .zip(&self.answered)
                .position(|(c, a)| c.id == call_id && a.is_none())
            else {
                continue;
            };
            let text = result_text(block.get("content"));
            let is_error = block
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            self.answered[i] = Some(if is_error {
                json!({"error": {"code": "tool_failed", "message": text}}).to_string()
            } else {
                text
            });
        }
        if !self.calls.is_empty() && self.answered.iter().all(Option::is_some) {
            self.close_step();
        }
    }

    /// Closes the step under way; a call the CLI reported no result for gets one saying so.
    fn close_step(&mut self) {
        let results = std::mem::take(&mut self.answered)
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    json!({"error": {"code": "interrupted", "message": "the agent CLI reported no result for this call"}})
                    .to_string()
                })
            })
            .collect();
        self.steps.push(CliStep {
            text: std::mem::take(&mut self.text),
            tool_calls: std::mem::take(&mut self.calls),
            results,
        });
    }

    fn end(&mut self, v: &Value, reading: Reading<'_>) -> Ended {
        if !self.calls.is_empty() {
            self.close_step();
        }
        let mut answer = v
            .get("result")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| std::mem::take(&mut self.text));
        if answer.trim().is_empty()
            && let Some(summary) = self.summary.take()
        {
            answer = summary;
        }
        if v.get("is_error").and_then(Value::as_bool).unwrap_or(false) {
            let status = v.get("api_error_status").and_then(Value::as_u64);
            if status == Some(429) || self.rate_limit_resets_at_ms.is_some() {
                return Err(ModelError::RateLimited {
                    retry_after_ms: rate_limit_wait(self.rate_limit_resets_at_ms, reading.now_ms),
                });
            }
            let why = if answer.trim().is_empty() {
                v.get("errors")
                    .map(Value::to_string)
                    .or_else(|| v.get("subtype").map(Value::to_string))
                    .unwrap_or_else(|| "no reason given".into())
            } else {
                answer
            };
            return Err(ModelError::Failed(format!(
                "the agent CLI reported an error: {why}"
            )));
        }
        let usage = usage_of(v);
        // No calls left for agentd to run; not cut off (the CLI continues an answer cut off
        // at its token limit itself).
        Ok(ModelResponse {
            text: answer,
            usage,
            cli_run: Some(Box::new(CliRun {
                steps: std::mem::take(&mut self.steps),
                session_id: self.session_id.clone(),
                reported_cost_usd: reported_cost(v, reading.prior_cost_usd),
            })),
            ..ModelResponse::default()
        })
    }
}

/// A tool result's content as text: a string as it is, text blocks joined, anything else as
/// JSON.
fn result_text(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match b.get("text").and_then(Value::as_str) {
                Some(t) => t.to_string(),
                None => b.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claude_code::protocol::four_kinds;

    /// A reading at `NOW_MS`, telling nobody.
    const NOW_MS: u64 = 1_800_000_000_000;

    fn reading(prior_cost_usd: f64) -> Reading<'static> {
        Reading {
            prior_cost_usd,
            now_ms: NOW_MS,
            observer: None,
        }
    }

    fn feed(lines: &[Value]) -> Option<Ended> {
        let mut turn = TurnAssembly::default();
        lines.iter().find_map(|l| turn.line(l, reading(0.0)))
    }

    fn init() -> Value {
        json!({"type": "system", "subtype": "init", "session_id": "s-1"})
    }

    fn result(text: &str) -> Value {
        json!({"type": "result", "subtype": "success", "is_error": false, "result": text,
            "usage": {"input_tokens": 11, "output_tokens": 7, "cache_creation_input_tokens": 3,
                "cache_read_input_tokens": 2},
            "total_cost_usd": 0.5,
            "model_usage_since_last_result": {"m": {"costUSD": 0.25}}})
    }

    #[test]
    fn a_turn_with_a_tool_the_cli_ran_becomes_one_paired_step_and_an_answer() {
        let ended = feed(&[
            init(),
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "running"}]}}),
            json!({"type": "assistant", "message": {"content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "echo hi"}}]}}),
            json!({"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "hi", "is_error": false}]}}),
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "done: hi"}]}}),
            result("done: hi"),
        ]);
        let r = ended.and_then(Result::ok).unwrap_or_default();
        assert_eq!(r.text, "done: hi");
        assert!(r.tool_calls.is_empty(), "nothing is left for agentd to run");
        assert_eq!(r.usage, four_kinds(11, 7, 3, 2));
        let run = r.cli_run.unwrap_or_default();
        assert_eq!(run.session_id.as_deref(), Some("s-1"));
        assert_eq!(run.reported_cost_usd, Some(0.25));
        assert_eq!(run.steps.len(), 1);
        assert_eq!(run.steps[0].text, "running");
        assert_eq!(run.steps[0].tool_calls[0].name, "Bash");
        assert_eq!(run.steps[0].results, vec!["hi".to_string()]);
    }

    #[test]
    fn every_call_gets_exactly_one_result() {
        let ended = feed(&[
            json!({"type": "assistant", "message": {"content": [
                {"type": "tool_use", "id": "a", "name": "Read", "input": {}},
                {"type": "tool_use", "id": "b", "name": "Bash", "input": {}}]}}),
            json!({"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "b", "content": [{"type": "text", "text": "denied"}], "is_error": true},
                {"type": "tool_result", "tool_use_id": "b", "content": "again"},
                {"type": "tool_result", "tool_use_id": "nobody", "content": "stray"}]}}),
            result(""),
        ]);
        let run = ended
            .and_then(Result::ok)
            .and_then(|r| r.cli_run)
            .unwrap_or_default();
        assert_eq!(run.steps.len(), 1);
        let results = &run.steps[0].results;
        assert_eq!(results.len(), 2);
        assert!(results[0].contains("interrupted"), "{results:?}");
        assert!(
            results[1].contains("tool_failed") && results[1].contains("denied"),
            "{results:?}"
        );
    }

    #[test]
    fn is_error_fails_the_call_whatever_the_subtype_says() {
        let ended = feed(&[
            json!({"type": "result", "subtype": "success", "is_error": true,
            "result": "Not logged in"}),
        ]);
        assert!(matches!(ended, Some(Err(ModelError::Failed(m))) if m.contains("Not logged in")));
        let limited = feed(&[json!({"type": "result", "is_error": true, "api_error_status": 429})]);
        assert!(matches!(
            limited,
            Some(Err(ModelError::RateLimited {
                retry_after_ms: DEFAULT_RATE_LIMIT_WAIT_MS
            }))
        ));
    }

    #[test]
    fn a_rate_limit_waits_until_the_reset_the_cli_reported() {
        let refused = |status: &str, resets_at_secs: u64| {
            json!({"type": "rate_limit_event", "rate_limit_info": {"status": status,
                "resetsAt": resets_at_secs, "rateLimitType": "five_hour", "isUsingOverage": false}})
        };
        let failed = json!({"type": "result", "subtype": "success", "is_error": true,
            "api_error_status": 429, "result": "You've hit your 5-hour limit"});
        let wait = |lines: &[Value]| match feed(lines) {
            Some(Err(ModelError::RateLimited { retry_after_ms })) => Some(retry_after_ms),
            _ => None,
        };
        let in_an_hour = NOW_MS / 1000 + 3600;
        assert_eq!(
            wait(&[init(), refused("rejected", in_an_hour), failed.clone()]),
            Some(3_600_000)
        );
        // A reset already past, or a warning that refused nothing: the usual wait.
        assert_eq!(
            wait(&[refused("rejected", NOW_MS / 1000 - 5), failed.clone()]),
            Some(DEFAULT_RATE_LIMIT_WAIT_MS)
        );
        assert_eq!(
            wait(&[refused("allowed_warning", in_an_hour), failed]),
            Some(DEFAULT_RATE_LIMIT_WAIT_MS)
        );
    }

    #[derive(Debug, Default)]
    struct Told(std::sync::Mutex<(Option<Usage>, usize)>);

    impl AnswerObserver for Told {
        fn text(&self, delta: &str) {
            self.other_output(delta.len());
        }
        fn other_output(&self, chars: usize) {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).1 += chars;
        }
        fn usage(&self, usage: Usage) {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).0 = Some(usage);
        }
    }

    #[test]
    fn the_observer_hears_the_usage_of_every_message_so_far_and_the_output() {
        let told = Told::default();
        let mut turn = TurnAssembly::default();
        let at = Reading {
            observer: Some(&told),
            ..reading(0.0)
        };
        let line = |id: &str, output: u64, block: Value| {
            json!({"type": "assistant", "message": {"id": id, "content": [block],
                "usage": {"input_tokens": 11, "output_tokens": output,
                    "cache_creation_input_tokens": 3, "cache_read_input_tokens": 2}}})
        };
        for l in [
            line("m1", 1, json!({"type": "text", "text": "12345678"})),
            line(
                "m1",
                7,
                json!({"type": "tool_use", "id": "t", "name": "Bash", "input": {}}),
            ),
            line("m2", 1, json!({"type": "text", "text": "done"})),
            // The CLI's own error message is not the model's output.
            json!({"type": "assistant", "is_api_error_message": true, "message": {"id": "x",
                "model": "<synthetic>", "content": [{"type": "text", "text": "API Error"}],
                "usage": {"input_tokens": 0, "output_tokens": 0}}}),
        ] {
            assert!(turn.line(&l, at).is_none());
        }
        let (usage, chars) = *told.0.lock().unwrap_or_else(|p| p.into_inner());
        assert_eq!(
            usage,
            Some(four_kinds(22, 8, 6, 4)),
            "m1 as last said, and m2"
        );
        assert_eq!(chars, 8 + "Bash{}".len() + 4);
    }

    #[test]
    fn sub_agent_lines_are_skipped_and_the_cost_falls_back_to_the_running_total() {
        let mut turn = TurnAssembly::default();
        let nested = json!({"type": "assistant", "parent_tool_use_id": "task-1",
            "message": {"content": [{"type": "tool_use", "id": "x", "name": "Bash", "input": {}}]}});
        assert!(turn.line(&nested, reading(0.0)).is_none());
        let end =
            json!({"type": "result", "is_error": false, "result": "ok", "total_cost_usd": 0.75});
        let run = turn
            .line(&end, reading(0.5))
            .and_then(Result::ok)
            .and_then(|r| r.cli_run)
            .unwrap_or_default();
        assert!(run.steps.is_empty());
        assert_eq!(run.reported_cost_usd, Some(0.25));
    }

    #[test]
    fn a_compaction_answers_the_cli_summary_and_its_usage_per_model() {
        let ended = feed(&[
            json!({"type": "system", "subtype": "compact_boundary"}),
            json!({"type": "user", "message": {"role": "user", "content": "the summary"}}),
            json!({"type": "user", "message": {"role": "user", "content": "<local-command-stdout>Compacted </local-command-stdout>"}}),
            json!({"type": "result", "is_error": false, "result": "",
                "usage": {"input_tokens": 0, "output_tokens": 0},
                "model_usage_since_last_result": {"m": {"inputTokens": 20, "outputTokens": 5,
                    "cacheCreationInputTokens": 1, "cacheReadInputTokens": 2, "costUSD": 0.1}}}),
        ]);
        let r = ended.and_then(Result::ok).unwrap_or_default();
        assert_eq!(r.text, "the summary");
        assert_eq!(r.usage, four_kinds(20, 5, 1, 2));
    }
}
