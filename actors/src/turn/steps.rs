//! The steps of a turn, one function each: the input taken ([`Turn::take_input`]); then, step
//! after step, the model asked or a recorded step replayed ([`Turn::ask`]), a fresh answer
//! recorded ([`Turn::record_answer`]), its protocol markers read ([`Turn::read_markers`]) and
//! its tool calls run ([`Turn::run_tools`]: per call, [`Turn::run_call`] runs it, through its
//! approval gate or as a service call, [`Turn::execute`] executes a built-in, configured or MCP
//! tool, and [`Turn::write_result`] writes its result). [`Turn::run_steps`] strings them
//! together until the model answers without tool calls, yields, waits, is paused or
//! rate-limited, or the step limit is reached.

use super::approvals::Gate;
use super::context_window::Fitted;
use super::request::CallOutcome;
use super::service_calls::ServiceCall;
use super::{OpenCall, Step, Turn, TurnInput, TurnProgress, TurnResult, WaitingCall};
use crate::ports::{ModelResponse, Purpose};
use crate::tools::{self, ToolOutcome};
use agentd_proto::ids::{derived_id, derived_step_id};
use agentd_proto::{AgentdError, ErrorCode, Marker, Role, ThreadEntry, ToolCall};
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;

/// What asking for a step came to.
enum Asked {
    /// The step's answer; `fresh`: the model gave it now (else a previous run recorded it);
    /// `at_ms`: when its entry was made (the time of the calls it makes).
    Answer {
        resp: ModelResponse,
        fresh: bool,
        at_ms: u64,
    },
    /// The turn ends here: a pause stopped it, or the provider rate-limited it (noted in the
    /// result).
    TurnEnds,
    /// The stop that aborted the model call was withdrawn (a resume right after a pause): the
    /// step asks again.
    Again,
}

/// How running a step's tool calls ended.
#[derive(PartialEq, Eq)]
enum CallsEnd {
    /// Each call has its result: the model is asked again (unless a marker asked to wait).
    Answered,
    /// A yield ended the turn, or service calls wait for their answers (noted in the result).
    TurnEnds,
}

/// What became of one tool call.
enum CallEnd {
    /// Its result is written (or, behind a service call that waits, will be once that one is
    /// answered; or the call itself waits).
    Done,
    /// It yielded this result (`None`: a recorded yield without one): the turn ends, and the
    /// calls after it never run.
    Yielded(Option<Value>),
}

/// A tool call's result, as the model gets it.
struct CallResult {
    text: String,
    /// Flagged as an error for the provider (Anthropic's `is_error`).
    is_error: bool,
}

impl Turn {
    /// Runs the turn on `input`, step after step (see the module doc).
    pub(super) async fn run_steps(&mut self, input: TurnInput) -> Result<TurnResult, AgentdError> {
        if let Some(ended) = self.take_input(input).await? {
            return Ok(ended);
        }
        let max_steps = self.deps.config.limits.max_steps_per_turn.max(1);
        let mut result = TurnResult::default();
        let mut step = 0;
        while step < max_steps {
            step += 1;
            if self.shared.stop_requested() {
                result.paused = true;
                return Ok(result);
            }
            self.stop_if_fenced()?;
            let step_id = derived_step_id(self.cause, u64::from(step));
            let (resp, fresh, at_ms) = match self.ask(step, step_id, &mut result).await? {
                Asked::Answer { resp, fresh, at_ms } => (resp, fresh, at_ms),
                Asked::TurnEnds => return Ok(result),
                Asked::Again => {
                    step -= 1;
                    continue;
                }
            };
            let waits = self.read_markers(&resp, fresh, step_id, &mut result);
            if resp.tool_calls.is_empty() {
                return Ok(result);
            }
            self.stop_if_fenced()?;
            let calls_end = self
                .run_tools(step, &resp.tool_calls, at_ms, &mut result)
                .await?;
            if calls_end == CallsEnd::TurnEnds {
                return Ok(result);
            }
            if waits {
                // The model asked for a dependency or a user answer: it waits for it.
                return Ok(result);
            }
        }
        result.step_limit = true;
        Ok(result)
    }

    /// Ends the turn with `unavailable` if this process has fenced itself off the agent's
    /// partition ([`crate::ports::Transport::fenced`]): cut off from Redis, it calls no model
    /// and runs no tool that the partition's next owner may be running too. The agent holds
    /// the item and runs the turn again (its recorded steps replayed) once the lease is
    /// renewed, or leaves it to the next owner when the partition moves.
    fn stop_if_fenced(&self) -> Result<(), AgentdError> {
        if self
            .deps
            .transport
            .as_ref()
            .is_some_and(|t| t.fenced(&self.rec.id))
        {
            return Err(AgentdError::new(
                agentd_proto::ErrorCode::Unavailable,
                "this process has fenced itself off the agent's partition (its lease not \
                 renewed in time: Redis unreachable or failing over); the turn goes on once it is",
            ));
        }
        Ok(())
    }

    /// Takes the turn's input: a message joins the known thread (its agent writes it), a reset
    /// clears the thread (seeding it if asked), a compaction runs whole.
    /// Answers the turn's result if it ends there.
    async fn take_input(&mut self, input: TurnInput) -> Result<Option<TurnResult>, AgentdError> {
        match input {
            TurnInput::Message(entry) => {
                // Its agent writes it, with the `running` record (now, or with a flush it
                // deferred, see `InputWritten`); the known thread has it now (read first,
                // without it, if the actor did not hand it over and it is not stored yet).
                if self.input_written.as_deref().is_some_and(|w| !w.is_set()) {
                    self.current_thread().await?;
                }
                self.remember(entry);
            }
            TurnInput::Reset(seed) => {
                self.replace_thread(Vec::new()).await?;
                match seed {
                    None => return Ok(Some(TurnResult::default())),
                    Some(text) => {
                        let entry = ThreadEntry::text(
                            derived_id(self.cause, "reset-seed"),
                            Role::User,
                            text,
                            self.now(),
                        );
                        self.append(Arc::new(entry)).await?;
                    }
                }
            }
            // Boxed, as a tool's future is below.
            TurnInput::Compact => {
                let compacted =
                    Box::pin(self.compact(agentd_proto::CompactionTrigger::Requested)).await?;
                return Ok(Some(compacted));
            }
            TurnInput::Continue => {}
        }
        Ok(None)
    }

    /// Step `step` (id `step_id`): replayed from the thread if a previous run recorded it (a
    /// retry after a rate limit or a crash resumes where that run stopped), else the model is
    /// asked, with the thread fitted into its context window, and its answer recorded.
    async fn ask(
        &mut self,
        step: u32,
        step_id: Uuid,
        result: &mut TurnResult,
    ) -> Result<Asked, AgentdError> {
        let thread = self.current_thread().await?;
        let replayed = if self.replaying {
            thread.iter().rev().find(|e| e.id == step_id).cloned()
        } else {
            None
        };
        if let Some(e) = replayed {
            // `thread` is gone before anything is appended: appends then need no copy of it.
            drop(thread);
            self.count_replayed_usage(step, &e);
            let resp = ModelResponse {
                text: e.text.clone(),
                tool_calls: e.tool_calls.to_vec(),
                ..Default::default()
            };
            return Ok(Asked::Answer {
                resp,
                fresh: false,
                at_ms: e.at_ms,
            });
        }
        if step > 1 {
            self.doing(Step::CallingModel);
        }
        let thread = if self.overflows(&thread) {
            drop(thread);
            match Box::pin(self.compact_to_fit()).await? {
                Fitted::Thread(thread) => thread,
                Fitted::RateLimited(ms) => {
                    result.rate_limited = Some(ms);
                    return Ok(Asked::TurnEnds);
                }
            }
        } else {
            thread
        };
        // `thread` is gone once the request is: appends then need no copy of it.
        match self
            .call_model(self.request(thread, Purpose::Turn), Some(step_id))
            .await?
        {
            CallOutcome::Stopped if self.shared.stop_requested() => {
                result.paused = true;
                Ok(Asked::TurnEnds)
            }
            CallOutcome::Stopped => Ok(Asked::Again),
            CallOutcome::Answer(r) if r.cut_off => {
                // Its tokens were spent all the same.
                self.progress.do_send(TurnProgress::Usage {
                    usage: r.usage,
                    step: Some(step),
                });
                Err(AgentdError::new(
                    ErrorCode::ModelError,
                    format!(
                        "the model's answer was cut off at its token limit (max_tokens) after {} output tokens; it is not taken as an answer",
                        r.usage.output
                    ),
                ))
            }
            CallOutcome::Answer(r) => {
                let at_ms = self.now();
                let resp = self.record_answer(step, step_id, r, at_ms, result).await?;
                Ok(Asked::Answer {
                    resp,
                    fresh: true,
                    at_ms,
                })
            }
            CallOutcome::RateLimited(ms) => {
                result.rate_limited = Some(ms);
                Ok(Asked::TurnEnds)
            }
        }
    }

    /// Records a fresh answer `r` to step `step`, made at `at_ms`: an agent CLI's own steps,
    /// the step's usage (sent now unless it is the last step's), and its assistant entry
    /// (written now if it calls tools; the last step's leaves with the turn's end). Answers `r`.
    async fn record_answer(
        &mut self,
        step: u32,
        step_id: Uuid,
        mut r: ModelResponse,
        at_ms: u64,
        result: &mut TurnResult,
    ) -> Result<ModelResponse, AgentdError> {
        if let Some(mut run) = r.cli_run.take() {
            // Boxed: only an agent CLI reports steps of its own, and inline its future would
            // make every turn's future (moved at each step's call) hundreds of bytes larger.
            Box::pin(self.record_cli_steps(step_id, std::mem::take(&mut run.steps))).await?;
            // agentd's tools are not the CLI's: a sub-agent it runs cannot call
            // `yield_to_parent`, so its answer is its yield.
            if matches!(self.rec.channel, agentd_proto::Channel::Spawn { .. }) {
                result.yielded = Some(serde_json::Value::String(r.text.clone()));
            }
            result.cli_run = Some(run);
        }
        if r.tool_calls.is_empty() {
            result.final_usage = Some(r.usage);
        } else {
            self.progress.do_send(TurnProgress::Usage {
                usage: r.usage,
                step: Some(step),
            });
        }
        let mut entry = ThreadEntry::text(step_id, Role::Assistant, r.text.clone(), at_ms);
        entry.tool_calls = r.tool_calls.as_slice().into();
        entry.usage = Some(Box::new(r.usage));
        if r.tool_calls.is_empty() {
            // A fresh step: its entry is not in the thread (a re-run looked for it first), so
            // no scan of the whole thread for it. The actor writes it, sharing this one entry
            // with the thread.
            let entry = Arc::new(entry);
            self.remember_new(Arc::clone(&entry));
            result.final_entry = Some(entry);
            result.final_entry_new = !self.replaying;
        } else {
            let reply = self.manage_reply(step_id, &r.text);
            self.append_sending(Arc::new(entry), reply.into_iter().collect())
                .await?;
        }
        Ok(r)
    }

    /// Reads the protocol markers of step `step_id`'s answer `resp` into the result, with its
    /// text as the turn's final text (and, for the last step of a fresh answer, a Manage
    /// worker's reply leaving with the turn's end). Answers whether a marker asks the agent to
    /// wait (a dependency request, a user question).
    fn read_markers(
        &self,
        resp: &ModelResponse,
        fresh: bool,
        step_id: Uuid,
        result: &mut TurnResult,
    ) -> bool {
        let (markers, malformed) = agentd_proto::markers::parse(&resp.text);
        let waits = markers.iter().any(|m| {
            matches!(
                m,
                Marker::DependencyRequest { .. } | Marker::UserQuestion { .. }
            )
        });
        result.markers.extend(markers);
        result.malformed.extend(malformed);
        if !resp.text.trim().is_empty() {
            result.final_text = resp.text.clone();
            // A step that calls tools sent its reply with its entry; the last step's reply
            // leaves with the turn's end.
            if fresh
                && result.final_entry.is_some()
                && let Some(reply) = self.manage_reply(step_id, &resp.text)
            {
                result.after_write.push(reply);
            }
        }
        waits
    }

    /// Runs step `step`'s tool `calls` (made at `made_at_ms`), in order, each to its one
    /// result. Results are written in the calls' order: once a service call waits, the calls
    /// after it wait too (service calls among them are still made, so they run at once).
    async fn run_tools(
        &mut self,
        step: u32,
        calls: &[ToolCall],
        made_at_ms: u64,
        result: &mut TurnResult,
    ) -> Result<CallsEnd, AgentdError> {
        let result_ids: Vec<Uuid> = (0..calls.len())
            .map(|i| derived_id(self.cause, &format!("step-{step}-tool-{i}")))
            .collect();
        self.shared.calls_opened(
            calls
                .iter()
                .zip(&result_ids)
                .filter(|(_, id)| !self.recorded(id))
                .map(|(call, id)| OpenCall {
                    result_id: *id,
                    call_id: call.id.as_str().into(),
                })
                .collect(),
        );
        let mut waiting: Vec<WaitingCall> = Vec::new();
        for (i, (call, &tool_id)) in calls.iter().zip(&result_ids).enumerate() {
            let end = self
                .run_call(call, tool_id, made_at_ms, &mut waiting)
                .await?;
            if let CallEnd::Yielded(value) = end {
                result.yielded = value;
                self.close_after_yield(&calls[i + 1..], &result_ids[i + 1..])
                    .await?;
                return Ok(CallsEnd::TurnEnds);
            }
        }
        if !waiting.is_empty() {
            // Its agent waits for the answers (`waiting_tool`), then runs this turn again.
            result.waiting = waiting;
            return Ok(CallsEnd::TurnEnds);
        }
        Ok(CallsEnd::Answered)
    }

    /// Runs `call` (its result `tool_id`), given the service calls before it that still wait
    /// (`waiting`, which a call that waits joins): a result a previous run recorded is kept; a
    /// call behind an approval gate runs only once a person approved it; a service call is
    /// made (stored and announced); any other tool is executed, unless calls before it wait.
    async fn run_call(
        &mut self,
        call: &ToolCall,
        tool_id: Uuid,
        made_at_ms: u64,
        waiting: &mut Vec<WaitingCall>,
    ) -> Result<CallEnd, AgentdError> {
        // Tool results a previous run recorded: their calls are not executed twice.
        if self.recorded(&tool_id) {
            // A yield whose result is an error (refused, rejected at its review) did not end
            // the turn: the steps after it follow.
            if crate::catalogue::BuiltinTool::YieldToParent.is_named(&call.name)
                && !self.recorded_error(&tool_id)
            {
                return Ok(CallEnd::Yielded(call.arguments.get("result").cloned()));
            }
            return Ok(CallEnd::Done);
        }
        let tool = tools::callable(&self.rec, &self.deps, &call.name);
        let mut gated = false;
        if let Ok(t) = &tool
            && self.needs_approval(t)
        {
            match Box::pin(self.approval_gate(t, call, tool_id)).await? {
                Gate::Waiting(w) => {
                    waiting.push(w);
                    return Ok(CallEnd::Done);
                }
                Gate::Closed(text) => {
                    if waiting.is_empty() {
                        let closed = CallResult {
                            text,
                            is_error: true,
                        };
                        self.write_result(call, tool_id, closed).await?;
                    }
                    return Ok(CallEnd::Done);
                }
                Gate::Approved => gated = true,
            }
        }
        let service = tool.as_ref().ok().and_then(|t| {
            t.configured()
                .filter(|c| c.kind() == agentd_proto::ToolKind::Service)
                .cloned()
        });
        if let Some(service) = service {
            match Box::pin(self.service_call(&service, call, tool_id)).await? {
                ServiceCall::Waiting(w) => waiting.push(w),
                ServiceCall::Closed(text, is_error) if waiting.is_empty() => {
                    self.write_result(call, tool_id, CallResult { text, is_error })
                        .await?;
                }
                // Written once the calls before it are answered.
                ServiceCall::Closed(..) => {}
            }
            return Ok(CallEnd::Done);
        }
        if !waiting.is_empty() {
            // Runs once the service calls before it are answered.
            return Ok(CallEnd::Done);
        }
        self.doing(Step::RunningTool(call.name.as_str().into()));
        let run_as = tools::Call {
            id: tool_id,
            made_at_ms,
            again: self.replaying,
        };
        let (done, yielded) = self.execute(tool, call, run_as).await;
        crate::failpoints::after_tool_effect(&call.name);
        let ran = gated.then(|| done.text.clone());
        let is_error = done.is_error;
        self.write_result(call, tool_id, done).await?;
        if let Some(text) = ran {
            self.gated_call_ran(tool_id, &text, is_error).await?;
        }
        Ok(match yielded {
            Some(value) => CallEnd::Yielded(Some(value)),
            None => CallEnd::Done,
        })
    }

    /// Executes `tool` (or answers why it cannot be called) for `call`: its result, and what
    /// it yielded if it is `yield_to_parent`.
    async fn execute(
        &self,
        tool: Result<crate::catalogue::Tool, AgentdError>,
        call: &ToolCall,
        run_as: tools::Call,
    ) -> (CallResult, Option<Value>) {
        // Boxed: a tool's future (Manage's above all) would otherwise make every turn's future
        // kilobytes bigger, copied whole when it is boxed to start.
        let outcome = match tool {
            Ok(tool) => {
                let run = Box::pin(tools::execute_tool(
                    &self.tools,
                    &tool,
                    run_as,
                    &call.arguments,
                ));
                if agentd_observe::telemetry::enabled() {
                    traced_tool(&tool, call, run).await
                } else {
                    run.await
                }
            }
            Err(e) => Err(e),
        };
        let (text, yielded, is_error) = match outcome {
            // A string result (an MCP server's text) reaches the model as it is.
            Ok(ToolOutcome::Value(Value::String(text))) => (text, None, false),
            Ok(ToolOutcome::Value(v)) => (v.to_string(), None, false),
            Ok(ToolOutcome::Yielded(v)) => {
                (json!({"status": "yielded"}).to_string(), Some(v), false)
            }
            Err(e) => (json!({ "error": e }).to_string(), None, true),
        };
        (CallResult { text, is_error }, yielded)
    }

    /// Writes `done` as the result `tool_id` of `call`: the call is answered.
    async fn write_result(
        &mut self,
        call: &ToolCall,
        tool_id: Uuid,
        done: CallResult,
    ) -> Result<(), AgentdError> {
        let mut te = ThreadEntry::text(tool_id, Role::Tool, done.text, self.now());
        te.tool_call_id = Some(call.id.as_str().into());
        te.is_error = done.is_error;
        self.append(Arc::new(te)).await?;
        self.shared.call_answered(tool_id);
        Ok(())
    }

    /// Records the steps an agent CLI ran by itself during step `step_id`'s call: each step's
    /// assistant entry with its calls, then one tool entry per call, right after it (the
    /// pairing rule holds: the CLI's steps carry one result per call). agentd never runs these
    /// calls. Ids derive from the step's, so a re-run writes the same ones.
    async fn record_cli_steps(
        &mut self,
        step_id: Uuid,
        steps: Vec<crate::ports::CliStep>,
    ) -> Result<(), AgentdError> {
        for (k, cli_step) in steps.into_iter().enumerate() {
            let mut entry = ThreadEntry::text(
                derived_id(step_id, &format!("cli-{k}")),
                Role::Assistant,
                cli_step.text,
                self.now(),
            );
            let result_ids: Vec<Uuid> = (0..cli_step.tool_calls.len())
                .map(|i| derived_id(step_id, &format!("cli-{k}-tool-{i}")))
                .collect();
            let call_ids: Vec<Box<str>> = cli_step
                .tool_calls
                .iter()
                .map(|c| c.id.as_str().into())
                .collect();
            // Open until their results are written: a turn ended in between closes them.
            self.shared.calls_opened(
                call_ids
                    .iter()
                    .zip(&result_ids)
                    .map(|(call_id, id)| OpenCall {
                        result_id: *id,
                        call_id: call_id.clone(),
                    })
                    .collect(),
            );
            entry.tool_calls = cli_step.tool_calls.into();
            self.append(Arc::new(entry)).await?;
            for ((call_id, text), result_id) in
                call_ids.into_iter().zip(cli_step.results).zip(result_ids)
            {
                let mut te = ThreadEntry::text(result_id, Role::Tool, text, self.now());
                te.tool_call_id = Some(call_id);
                self.append(Arc::new(te)).await?;
                self.shared.call_answered(result_id);
            }
        }
        Ok(())
    }

    /// Counts the usage a recorded step carries unless the agent's record counts it already
    /// (it was written before the crash this run follows, or this is a retry in the same
    /// process). Only steps that call tools are replayed: a step that answers ends its turn in
    /// the batch that records its usage.
    fn count_replayed_usage(&self, step: u32, entry: &ThreadEntry) {
        let counted =
            self.rec.current_task == Some(self.cause) && step <= self.rec.task_steps_counted;
        if let Some(usage) = entry.usage.as_deref().filter(|_| !counted) {
            self.progress.do_send(TurnProgress::Usage {
                usage: *usage,
                step: Some(step),
            });
        }
    }

    /// Answers the calls a step made after its `yield_to_parent`: the yield ends the turn, so
    /// they never run, and each still gets its one result.
    async fn close_after_yield(
        &mut self,
        calls: &[agentd_proto::ToolCall],
        result_ids: &[Uuid],
    ) -> Result<(), AgentdError> {
        for (call, &id) in calls.iter().zip(result_ids) {
            let closing = agentd_proto::conversation::interrupted_result(
                id,
                &call.id,
                "yield_to_parent ended the turn before this call ran",
                self.now(),
            );
            self.append(Arc::new(closing)).await?;
            self.shared.call_answered(id);
        }
        Ok(())
    }
}

/// Runs a tool call under its `execute_tool` span (telemetry on): what the call sends to other
/// agents (a Manage send, a spawn) carries the span's context, so their turns are its children.
#[cold]
async fn traced_tool<F>(
    tool: &crate::catalogue::Tool,
    call: &ToolCall,
    run: F,
) -> Result<ToolOutcome, AgentdError>
where
    F: std::future::Future<Output = Result<ToolOutcome, AgentdError>>,
{
    use tracing::Instrument;
    let span = agentd_observe::telemetry::execute_tool(tool.name(), &call.id, tool.mcp_server());
    let ctx =
        agentd_observe::telemetry::context_of(&span).or_else(agentd_observe::telemetry::current);
    let capture = agentd_observe::telemetry::capture_content();
    if capture {
        let args = call.arguments.to_string();
        agentd_observe::telemetry::set_content(&span, "gen_ai.tool.call.arguments", args);
    }
    let outcome = agentd_observe::telemetry::scope(ctx, run.instrument(span.clone())).await;
    match &outcome {
        Err(e) => agentd_observe::telemetry::failed(&span, e.code.as_str()),
        Ok(ToolOutcome::Value(v)) if capture => {
            agentd_observe::telemetry::set_content(&span, "gen_ai.tool.call.result", v.to_string());
        }
        Ok(_) => {}
    }
    outcome
}
