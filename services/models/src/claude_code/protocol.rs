//! The Claude Code CLI's stream-json protocol, as plain code (no I/O): the flags agentd starts
//! the CLI with, the `user` line each agentd message becomes, and the assembly of the lines
//! the CLI writes during one turn into one [`ModelResponse`].
//!
//! The CLI writes, per turn: a `system` line with `subtype: "init"` (its `session_id`), then
//! `assistant` lines (one message's content blocks: `text`, `tool_use`, `thinking`, each with
//! the message's `id` and its `usage` as known then), `user` lines with the `tool_result`s of the
//! tools it ran itself, and one `result` line that ends the turn: `is_error` (not `subtype`,
//! which says `success` on a failed request), `result` (the answer), `usage` in four kinds, and
//! its own cost figures. A request its usage limits refused is reported by a
//! `rate_limit_event` whose `rate_limit_info` has `status: "rejected"` and `resetsAt` (seconds
//! since the epoch), before the `result` line that fails with `api_error_status: 429`. Lines of
//! its sub-agents (a non-null `parent_tool_use_id`) are its own business and are skipped.

use agentd_actors::{AnswerObserver, CliRun, CliStep, CliTools, ModelError, ModelResponse};
use agentd_proto::conversation::heard_role;
use agentd_proto::{Role, ThreadEntry, ToolCall, Usage};
use serde_json::{Value, json};
use std::sync::Arc;

/// What a call asks of the CLI beyond its message: how to start a process for it.
pub struct Launch<'a> {
    /// The agent's layered system prompt (`--append-system-prompt`).
    pub system_prompt: &'a str,
    /// The tools the CLI may run without asking, and its permission mode.
    pub tools: &'a CliTools,
    /// The model the agent names, if it names one (`--model`).
    pub model: Option<&'a str>,
    /// The session to resume (`--resume`), if any.
    pub resume: Option<&'a str>,
}

/// The flags agentd adds to `model.command` (after the command's own arguments).
pub fn flags(launch: &Launch<'_>) -> Vec<String> {
    let mut args: Vec<String> = [
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
    ]
    .map(String::from)
    .to_vec();
    if !launch.system_prompt.trim().is_empty() {
        args.extend(["--append-system-prompt".into(), launch.system_prompt.into()]);
    }
    if !launch.tools.allowed.is_empty() {
        args.extend(["--allowedTools".into(), launch.tools.allowed.join(",")]);
    }
    if let Some(mode) = &launch.tools.permission_mode {
        args.extend(["--permission-mode".into(), mode.clone()]);
    }
    if let Some(model) = launch.model {
        args.extend(["--model".into(), model.into()]);
    }
    if let Some(session) = launch.resume {
        args.extend(["--resume".into(), session.into()]);
    }
    args
}

/// The entries at the end of `thread` the CLI has not seen: those after `sent_through` (the
/// last entry written to this process), or, when that names nothing later, those after the last
/// of the CLI's own answers (its assistant and tool entries; a retry sends its message again).
/// A forward from another agent is never one of the CLI's answers, whatever role the thread
/// keeps it in (a relayed forward is an assistant entry): it is input the CLI is sent.
fn unseen(thread: &[Arc<ThreadEntry>], sent_through: Option<uuid::Uuid>) -> &[Arc<ThreadEntry>] {
    let after_answers = thread
        .iter()
        .rposition(|e| matches!(heard_role(e), Role::Assistant | Role::Tool))
        .map_or(0, |i| i + 1);
    let after_sent = sent_through
        .and_then(|id| thread.iter().rposition(|e| e.id == id))
        .map_or(0, |i| i + 1);
    let start = after_answers.max(after_sent);
    if start < thread.len() {
        &thread[start..]
    } else {
        &thread[after_answers..]
    }
}

/// One entry as the CLI reads it.
fn render(entry: &ThreadEntry) -> String {
    match &entry.from_agent {
        Some(from) => format!("[from agent {from}] {}", entry.text),
        None => entry.text.clone(),
    }
}

/// The text of the `user` line for `thread`: the entries the CLI has not seen (`sent_through`:
/// the last entry written to its process, if it still runs). A new session (no process and no
/// session to resume) on a thread that has history gets that history first, as a transcript, so
/// the CLI knows what came before it.
pub fn message_text(
    thread: &[Arc<ThreadEntry>],
    new_session: bool,
    sent_through: Option<uuid::Uuid>,
) -> String {
    let new = unseen(thread, sent_through.filter(|_| !new_session));
    let mut text = new
        .iter()
        .map(|e| render(e))
        .filter(|t| !t.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    let history = &thread[..thread.len() - new.len()];
    if new_session && !history.is_empty() {
        let transcript = history
            .iter()
            .map(|e| {
                let calls = e
                    .tool_calls
                    .iter()
                    .map(|c| format!(" [called {} {}]", c.name, c.arguments))
                    .collect::<String>();
                format!("{}: {}{calls}", role_name(heard_role(e)), render(e))
            })
            .collect::<Vec<_>>()
            .join("\n");
        text = format!(
            "The conversation so far (from before this session):\n{transcript}\n\n---\n\n{text}"
        );
    }
    text
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
        Role::System => "system",
    }
}

/// The message that makes the CLI compact its session (its `/compact` command).
pub const COMPACT: &str = "/compact";

/// The stream-json `user` line (without its newline) that sends `text`.
pub fn user_line(text: &str) -> String {
    json!({
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
        "parent_tool_use_id": null,
    })
    .to_string()
}

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

/// Usage in the four kinds the CLI reports (any other field of [`Usage`] at its default).
pub fn four_kinds(input: u64, output: u64, cache_write: u64, cache_read: u64) -> Usage {
    let mut usage = Usage::default();
    (
        usage.input,
        usage.output,
        usage.cache_write,
        usage.cache_read,
    ) = (input, output, cache_write, cache_read);
    usage
}

/// A `usage` object of the Messages API, in four kinds.
fn usage_in(u: Option<&Value>) -> Usage {
    let count = |key: &str| {
        u.and_then(|u| u.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    four_kinds(
        count("input_tokens"),
        count("output_tokens"),
        count("cache_creation_input_tokens"),
        count("cache_read_input_tokens"),
    )
}

/// The turn's usage: the result line's `usage`; when that is empty (a `/compact`, whose call
/// the CLI reports only per model), the sum of `model_usage_since_last_result`.
fn usage_of(v: &Value) -> Usage {
    let usage = usage_in(v.get("usage"));
    if usage.total() > 0 {
        return usage;
    }
    let mut sum = Usage::default();
    for m in v
        .get("model_usage_since_last_result")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|models| models.values())
    {
        let count = |key: &str| m.get(key).and_then(Value::as_u64).unwrap_or(0);
        sum += four_kinds(
            count("inputTokens"),
            count("outputTokens"),
            count("cacheCreationInputTokens"),
            count("cacheReadInputTokens"),
        );
    }
    sum
}

/// The turn's cost as the CLI reports it: the `costUSD`s of `model_usage_since_last_result`,
/// else the growth of its running `total_cost_usd`.
fn reported_cost(v: &Value, prior_cost_usd: f64) -> Option<f64> {
    if let Some(models) = v
        .get("model_usage_since_last_result")
        .and_then(Value::as_object)
    {
        return Some(
            models
                .values()
                .filter_map(|m| m.get("costUSD").and_then(Value::as_f64))
                .sum(),
        );
    }
    v.get("total_cost_usd")
        .and_then(Value::as_f64)
        .map(|total| (total - prior_cost_usd).max(0.0))
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
    fn the_message_is_what_the_cli_has_not_seen_with_history_for_a_new_session() {
        let e = |role, text: &str| {
            Arc::new(ThreadEntry::text(
                agentd_proto::ids::new_id(),
                role,
                text,
                0,
            ))
        };
        let thread = vec![
            e(Role::User, "first"),
            e(Role::Assistant, "answer"),
            e(Role::System, "(interrupted)"),
            e(Role::User, "second"),
        ];
        assert_eq!(
            message_text(&thread, false, None),
            "(interrupted)\n\nsecond"
        );
        let fresh = message_text(&thread, true, None);
        assert!(fresh.contains("user: first\nassistant: answer"), "{fresh}");
        assert!(fresh.ends_with("(interrupted)\n\nsecond"), "{fresh}");
        assert_eq!(message_text(&thread[..1], true, None), "first");
        // What was written to the process already is not written again (an interrupted
        // call's message), unless nothing came after it (a retry).
        assert_eq!(message_text(&thread, false, Some(thread[2].id)), "second");
        assert_eq!(
            message_text(&thread, false, Some(thread[3].id)),
            "(interrupted)\n\nsecond"
        );
    }

    #[test]
    fn a_forward_is_sent_as_input_even_where_the_thread_keeps_it_as_an_answer() {
        let e = |role, text: &str, from: Option<&str>| {
            let mut entry = ThreadEntry::text(agentd_proto::ids::new_id(), role, text, 0);
            entry.from_agent = from.map(Into::into);
            Arc::new(entry)
        };
        let thread = vec![
            e(Role::User, "hello", None),
            e(Role::Assistant, "hi", None),
            e(Role::Assistant, "From Ops: done", Some("w1")),
            e(Role::User, "what did Ops say", None),
        ];
        // Relayed (kept as an assistant entry), then the next message: both are sent.
        assert_eq!(
            message_text(&thread, false, Some(thread[1].id)),
            "[from agent w1] From Ops: done\n\nwhat did Ops say"
        );
        // A forward that starts a turn is the message.
        assert_eq!(
            message_text(&thread[..3], false, Some(thread[1].id)),
            "[from agent w1] From Ops: done"
        );
        // In a new session's transcript, it is the user's too.
        let history = vec![
            thread[0].clone(),
            thread[2].clone(),
            e(Role::Assistant, "noted", None),
            e(Role::User, "next", None),
        ];
        let fresh = message_text(&history, true, None);
        assert!(
            fresh.contains("user: hello\nuser: [from agent w1] From Ops: done\nassistant: noted"),
            "{fresh}"
        );
        assert!(fresh.ends_with("next"), "{fresh}");
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

    #[test]
    fn flags_carry_the_prompt_tools_mode_and_session() {
        let tools = CliTools {
            allowed: vec!["Bash".into(), "Read".into()],
            permission_mode: Some("acceptEdits".into()),
        };
        let f = flags(&Launch {
            system_prompt: "be brief",
            tools: &tools,
            model: None,
            resume: Some("s-1"),
        });
        let joined = f.join(" ");
        assert!(
            joined
                .starts_with("-p --input-format stream-json --output-format stream-json --verbose")
        );
        assert!(joined.contains("--append-system-prompt be brief"));
        assert!(joined.contains("--allowedTools Bash,Read"));
        assert!(joined.contains("--permission-mode acceptEdits"));
        assert!(joined.ends_with("--resume s-1"));
        assert!(!joined.contains("--model"));
    }
}
