//! One turn of an agent: build the context (layered system prompt, thread, allowed tools), call
//! the model, execute tool calls, append results, repeat until the model answers without tool
//! calls, yields, is paused, or hits the step limit. Reset and compaction run here too, because
//! they are turns of a kind: they rewrite the thread in the agent's inbox order.
//!
//! Every entry a turn writes has an id derived from the turn's input id and its step, so a
//! turn re-run after a crash writes the same ids and the store de-duplicates them.
//!
//! | module | what it holds |
//! |---|---|
//! | [`request`] | what the model is asked: names, the layered system prompt, metered calls |
//! | [`known_thread`] | the thread as the turn knows it: appends, replays, replacement |
//! | [`compact`] | compaction: old history becomes a summary |
//! | [`context_window`] | compaction before a call that would overflow the provider's window |
//! | [`live_answer`] | an answer while it arrives: `text_delta` events, what an aborted call cost |
//! | [`service_calls`] | calls of service tools: stored, announced, waited for, their results |
//! | [`shared`] | what the turn shares with its actor: a stop request, the calls it has open, the model call in flight |

mod approvals;
mod compact;
mod context_window;
mod known_thread;
mod live_answer;
mod progress;
mod request;
mod service_calls;
mod shared;

pub(crate) use progress::{Step, TurnProgress};
pub(crate) use request::{RequestNames, system_prompt};
pub(crate) use service_calls::WaitingCall;
pub(crate) use shared::{OpenCall, TurnShared};

use context_window::Fitted;
use request::CallOutcome;

use crate::deps::Deps;
use crate::messages::ChildOutput;
use crate::ports::Purpose;
use crate::rate_gate::RateGates;
use crate::tools::{self, ToolContext, ToolOutcome};
use actix::Recipient;
use agentd_proto::ids::{derived_id, derived_step_id};
use agentd_proto::{AgentRecord, AgentdError, ErrorCode, Marker, Role, ThreadEntry};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use uuid::Uuid;

/// What a turn starts from.
#[derive(Debug, Clone)]
pub(crate) enum TurnInput {
    /// A new entry to append, then run the model (shared with the actor's copy of the thread
    /// and the batch that writes it).
    Message(Arc<ThreadEntry>),
    /// Clear the thread, optionally seeding it.
    Reset(Option<String>),
    /// Replace old history with a summary.
    Compact,
    /// Continue a turn that a pause stopped at a step boundary.
    Continue,
}

/// How a turn ended.
#[derive(Debug, Default)]
pub(crate) struct TurnResult {
    /// The text of the last assistant message.
    pub final_text: String,
    /// `yield_to_parent` was called with this result.
    pub yielded: Option<serde_json::Value>,
    /// A pause stopped the turn at a step boundary.
    pub paused: bool,
    /// The step limit ended the turn.
    pub step_limit: bool,
    /// Protocol markers found in the turn's assistant messages, in order.
    pub markers: Vec<Marker>,
    /// Malformed markers found.
    pub malformed: Vec<String>,
    /// The provider rate-limited the turn; retry after this many ms.
    pub rate_limited: Option<u64>,
    /// The thread as stored when the turn ended (the actor keeps it for the next turn).
    pub thread: Option<Arc<crate::ports::ThreadEntries>>,
    /// The last step's assistant entry, not stored yet: a step without tool calls ends the
    /// turn, so its entry goes into the store with the turn's end (record and inbox item
    /// done) as one batch, one write per turn less. A crash before that batch re-runs the
    /// step, as a crash before its own write did.
    pub final_entry: Option<Arc<ThreadEntry>>,
    /// Outputs made from `final_entry` (a Manage worker's reply): the actor sends them once
    /// that batch is written, so a parent never sees a reply its worker's thread lacks.
    pub after_write: Vec<ChildOutput>,
    /// The last step's token usage, counted by the actor at the turn's end. The steps before
    /// it send theirs at once ([`TurnProgress::Usage`]), so a budget can stop a turn between
    /// steps; the last one's would arrive while this turn still shares the agent's record, and
    /// the actor would have to copy the record to count it.
    pub final_usage: Option<agentd_proto::Usage>,
    /// What an agent CLI reported besides its steps (its session, its own cost figure), for
    /// the record; its steps are in the thread already.
    pub cli_run: Option<Box<crate::ports::CliRun>>,
    /// Calls of service tools the last step made that wait for their answers: the turn ended
    /// there, and runs again (same cause) once each is closed.
    pub waiting: Vec<WaitingCall>,
}

/// What a running turn needs; cloned from the actor when the turn starts.
pub(crate) struct Turn {
    /// The thread as stored, if the actor knew it (read from the store otherwise). Shared
    /// with the model requests made from it; appends copy it only while one is still alive.
    pub thread: Option<Arc<crate::ports::ThreadEntries>>,
    /// Set once the actor's flush wrote the input entry; the turn writes it if not.
    pub input_written: Option<Arc<AtomicBool>>,
    /// The tools the model is shown (the agent's, built once).
    pub tool_specs: Arc<Vec<crate::ports::ToolSpec>>,
    /// The layered system prompt (the agent's, built once).
    pub system_prompt: Arc<str>,
    /// What the agent's model requests name it by (built once).
    pub names: Arc<RequestNames>,
    /// Whether this run may find its own earlier entries in the thread (a retry after a rate
    /// limit, a failure, an unreachable store or a crash, or a paused turn continuing).
    pub replaying: bool,
    /// The record as the turn started (shared with the actor until it changes).
    pub rec: Arc<AgentRecord>,
    pub deps: Arc<Deps>,
    /// What the turn's tool calls see: the caller, the ports, the [`crate::tools::Agents`] port.
    pub tools: ToolContext,
    /// Where the child outputs the turn makes go when they did not leave with its store batch
    /// (the channel router).
    pub outputs: Recipient<ChildOutput>,
    /// Providers that rate-limited this process, and until when (paces the model calls).
    pub rate_gates: Arc<RateGates>,
    /// Where the usage of each step but the last goes (the agent counts it at once, so a
    /// budget can stop the turn between steps), and what the turn does now (its agent's
    /// `current_step`; the first model call is the agent's to note, saving a message a turn).
    pub progress: Recipient<TurnProgress>,
    /// A stop request from the actor, and the calls this turn has open (which the actor closes
    /// if it ends the turn first).
    pub shared: Arc<TurnShared>,
    pub cause: Uuid,
}

impl Turn {
    pub(super) fn now(&self) -> u64 {
        self.deps.clock.now_ms()
    }

    /// Tells the agent what the turn does now.
    fn doing(&self, step: Step) {
        let cause = self.cause;
        self.progress
            .do_send(TurnProgress::Doing { cause, doing: step });
    }

    pub(crate) async fn run(mut self, input: TurnInput) -> Result<TurnResult, AgentdError> {
        let mut result = self.run_steps(input).await?;
        result.thread = self.thread.take();
        Ok(result)
    }

    async fn run_steps(&mut self, input: TurnInput) -> Result<TurnResult, AgentdError> {
        match input {
            TurnInput::Message(entry) => {
                let written = self
                    .input_written
                    .as_ref()
                    .is_some_and(|w| w.load(Ordering::SeqCst));
                if written {
                    self.remember(entry);
                } else {
                    self.append(entry).await?;
                }
            }
            TurnInput::Reset(seed) => {
                self.replace_thread(Vec::new()).await?;
                match seed {
                    None => return Ok(TurnResult::default()),
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
                return Box::pin(self.compact(agentd_proto::CompactionTrigger::Requested)).await;
            }
            TurnInput::Continue => {}
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
            let thread = self.current_thread().await?;
            let step_id = derived_step_id(self.cause, u64::from(step));
            // A step a previous run already recorded (a retry after a rate limit or a crash)
            // is replayed from the thread, not asked of the model again: the retry resumes
            // where that run stopped.
            let replayed = if self.replaying {
                thread.iter().rev().find(|e| e.id == step_id).cloned()
            } else {
                None
            };
            let fresh = replayed.is_none();
            if fresh && step > 1 {
                self.doing(Step::CallingModel);
            }
            let thread = if fresh {
                match Box::pin(self.fit_context(thread)).await? {
                    Fitted::Thread(thread) => thread,
                    Fitted::RateLimited(ms) => {
                        result.rate_limited = Some(ms);
                        return Ok(result);
                    }
                }
            } else {
                thread
            };
            // `thread` is gone once the request is: appends then need no copy of it.
            let resp = match replayed {
                Some(e) => {
                    drop(thread);
                    self.count_replayed_usage(step, &e);
                    crate::ports::ModelResponse {
                        text: e.text.clone(),
                        tool_calls: e.tool_calls.to_vec(),
                        ..Default::default()
                    }
                }
                None => match self
                    .call_model(self.request(thread, Purpose::Turn), Some(step_id))
                    .await?
                {
                    CallOutcome::Stopped if self.shared.stop_requested() => {
                        result.paused = true;
                        return Ok(result);
                    }
                    CallOutcome::Stopped => {
                        // The stop that aborted the call was withdrawn (a resume right after
                        // a pause): the step asks again.
                        step -= 1;
                        continue;
                    }
                    CallOutcome::Answer(r) if r.cut_off => {
                        // Its tokens were spent all the same.
                        self.progress.do_send(TurnProgress::Usage {
                            usage: r.usage,
                            step: Some(step),
                        });
                        return Err(AgentdError::new(
                            ErrorCode::ModelError,
                            format!(
                                "the model's answer was cut off at its token limit (max_tokens) after {} output tokens; it is not taken as an answer",
                                r.usage.output
                            ),
                        ));
                    }
                    CallOutcome::Answer(mut r) => {
                        if let Some(mut run) = r.cli_run.take() {
                            self.record_cli_steps(step_id, std::mem::take(&mut run.steps))
                                .await?;
                            // agentd's tools are not the CLI's: a sub-agent it runs cannot
                            // call `yield_to_parent`, so its answer is its yield.
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
                        let mut entry =
                            ThreadEntry::text(step_id, Role::Assistant, r.text.clone(), self.now());
                        entry.tool_calls = r.tool_calls.as_slice().into();
                        entry.usage = Some(Box::new(r.usage));
                        if r.tool_calls.is_empty() {
                            // A fresh step: its entry is not in the thread (a re-run looked
                            // for it above), so no scan of the whole thread for it. The actor
                            // writes it, sharing this one entry with the thread.
                            let entry = Arc::new(entry);
                            self.remember_new(Arc::clone(&entry));
                            result.final_entry = Some(entry);
                        } else {
                            let reply = self.manage_reply(step_id, &r.text);
                            self.append_sending(Arc::new(entry), reply.into_iter().collect())
                                .await?;
                        }
                        r
                    }
                    CallOutcome::RateLimited(ms) => {
                        result.rate_limited = Some(ms);
                        return Ok(result);
                    }
                },
            };
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
                // A step that calls tools sent its reply with its entry; the last step's
                // reply leaves with the turn's end.
                if fresh
                    && result.final_entry.is_some()
                    && let Some(reply) = self.manage_reply(step_id, &resp.text)
                {
                    result.after_write.push(reply);
                }
            }
            if resp.tool_calls.is_empty() {
                return Ok(result);
            }
            let result_ids: Vec<Uuid> = (0..resp.tool_calls.len())
                .map(|i| derived_id(self.cause, &format!("step-{step}-tool-{i}")))
                .collect();
            self.shared.calls_opened(
                resp.tool_calls
                    .iter()
                    .zip(&result_ids)
                    .filter(|(_, id)| !self.recorded(id))
                    .map(|(call, id)| OpenCall {
                        result_id: *id,
                        call_id: call.id.as_str().into(),
                    })
                    .collect(),
            );
            // Results are written in the calls' order: once a service call waits, the calls
            // after it wait too (service calls among them are still made, so they run at once).
            let mut waiting: Vec<WaitingCall> = Vec::new();
            for (i, (call, &tool_id)) in resp.tool_calls.iter().zip(&result_ids).enumerate() {
                // Tool results a previous run recorded: their calls are not executed twice.
                if self.recorded(&tool_id) {
                    // A yield whose result is an error (refused, rejected at its review) did
                    // not end the turn: the steps after it follow.
                    if crate::catalogue::BuiltinTool::YieldToParent.is_named(&call.name)
                        && !self.recorded_error(&tool_id)
                    {
                        result.yielded = call.arguments.get("result").cloned();
                        self.close_after_yield(&resp.tool_calls[i + 1..], &result_ids[i + 1..])
                            .await?;
                        return Ok(result);
                    }
                    continue;
                }
                let tool = tools::callable(&self.rec, &self.deps, &call.name);
                // A call behind an approval gate runs only once a person approved it.
                let mut gated = false;
                if let Ok(t) = &tool
                    && self.needs_approval(t)
                {
                    match Box::pin(self.approval_gate(t, call, tool_id)).await? {
                        approvals::Gate::Waiting(w) => {
                            waiting.push(w);
                            continue;
                        }
                        approvals::Gate::Closed(text) => {
                            if waiting.is_empty() {
                                let mut te =
                                    ThreadEntry::text(tool_id, Role::Tool, text, self.now());
                                te.tool_call_id = Some(call.id.as_str().into());
                                te.is_error = true;
                                self.append(Arc::new(te)).await?;
                                self.shared.call_answered(tool_id);
                            }
                            continue;
                        }
                        approvals::Gate::Approved => gated = true,
                    }
                }
                let service = tool.as_ref().ok().and_then(|t| {
                    t.configured()
                        .filter(|c| c.kind() == agentd_proto::ToolKind::Service)
                        .cloned()
                });
                if let Some(service) = service {
                    match Box::pin(self.service_call(&service, call, tool_id)).await? {
                        service_calls::ServiceCall::Waiting(w) => waiting.push(w),
                        service_calls::ServiceCall::Closed(text, is_error)
                            if waiting.is_empty() =>
                        {
                            let mut te = ThreadEntry::text(tool_id, Role::Tool, text, self.now());
                            te.tool_call_id = Some(call.id.as_str().into());
                            te.is_error = is_error;
                            self.append(Arc::new(te)).await?;
                            self.shared.call_answered(tool_id);
                        }
                        // Written once the calls before it are answered.
                        service_calls::ServiceCall::Closed(..) => {}
                    }
                    continue;
                }
                if !waiting.is_empty() {
                    // Runs once the service calls before it are answered.
                    continue;
                }
                self.doing(Step::RunningTool(call.name.as_str().into()));
                // Boxed: a tool's future (Manage's above all) would otherwise make every
                // turn's future kilobytes bigger, copied whole when it is boxed to start.
                let outcome = match tool {
                    Ok(tool) => {
                        Box::pin(tools::execute_tool(
                            &self.tools,
                            &tool,
                            tool_id,
                            &call.arguments,
                        ))
                        .await
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
                let mut te = ThreadEntry::text(tool_id, Role::Tool, text, self.now());
                te.tool_call_id = Some(call.id.as_str().into());
                te.is_error = is_error;
                let ran = gated.then(|| te.text.clone());
                self.append(Arc::new(te)).await?;
                self.shared.call_answered(tool_id);
                if let Some(text) = ran {
                    self.gated_call_ran(tool_id, &text, is_error).await?;
                }
                if yielded.is_some() {
                    result.yielded = yielded;
                    self.close_after_yield(&resp.tool_calls[i + 1..], &result_ids[i + 1..])
                        .await?;
                    return Ok(result);
                }
            }
            if !waiting.is_empty() {
                // Its agent waits for the answers (`waiting_tool`), then runs this turn again.
                result.waiting = waiting;
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
