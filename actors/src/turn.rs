//! One turn of an agent: build the context (layered system prompt, thread, allowed tools), call
//! the model, execute tool calls, append results, repeat until the model answers without tool
//! calls, yields, is paused, or hits the step limit. Reset and compaction run here too, because
//! they are turns of a kind: they rewrite the thread in the agent's inbox order.
//!
//! Every entry a turn writes has an id derived from the turn's input id and its step, so a
//! turn re-run after a crash writes the same ids and the store de-duplicates them.

use crate::agent::AgentActor;
use crate::deps::Deps;
use crate::messages::{AddUsage, ChildOutput, Output};
use crate::ports::{ModelError, ModelRequest, Purpose, StoreWrite};
use crate::tools::{self, ToolContext, ToolOutcome};
use actix::Addr;
use agentd_proto::ids::{derived_id, derived_step_id};
use agentd_proto::{AgentRecord, AgentdError, Channel, ErrorCode, Marker, Role, ThreadEntry};
use serde_json::json;
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
    /// it send theirs at once ([`AddUsage`]), so a budget can stop a turn between steps; the
    /// last one's would arrive while this turn still shares the agent's record, and the
    /// actor would have to copy the record to count it.
    pub final_usage: Option<agentd_proto::Usage>,
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
    pub tools: ToolContext,
    pub me: Addr<AgentActor>,
    pub stop: Arc<AtomicBool>,
    pub cause: Uuid,
}

/// What every model request of an agent names it by, made once per agent: a request copied
/// three strings and looked the type's model up otherwise. (Type and title never change.)
pub(crate) struct RequestNames {
    pub agent_id: Arc<str>,
    pub agent_type: Arc<str>,
    pub title: Arc<str>,
    /// The model its type names, used when the agent names none itself.
    pub type_model: Option<String>,
    /// The meters of its calls to the provider it names (counted on every call).
    pub calls: ModelCallMeters,
}

/// The model-call meters of one provider, resolved once per agent: looking a series up by
/// its labels on every call cost more than the count itself.
pub(crate) struct ModelCallMeters {
    provider: Option<String>,
    seconds: crate::metrics::Timer,
    errors: crate::metrics::Counter,
}

impl ModelCallMeters {
    fn of(provider: Option<String>, deps: &Deps) -> Self {
        let backend = deps.model.backend_of(provider.as_deref());
        let labels = [
            ("provider", provider.as_deref().unwrap_or("default")),
            ("backend", backend),
        ];
        let m = crate::metrics::global();
        ModelCallMeters {
            seconds: m.histogram(MODEL_CALL_SECONDS.0, MODEL_CALL_SECONDS.1, &labels),
            errors: m.counter(MODEL_ERRORS.0, MODEL_ERRORS.1, &labels),
            provider,
        }
    }
}

const MODEL_CALL_SECONDS: (&str, &str) = (
    "agentd_model_call_seconds",
    "Model call latency, by provider and backend.",
);
const MODEL_ERRORS: (&str, &str) = (
    "agentd_model_errors_total",
    "Failed model calls, by provider and backend.",
);

impl RequestNames {
    pub(crate) fn of(rec: &AgentRecord, deps: &Deps) -> Self {
        RequestNames {
            calls: ModelCallMeters::of(rec.provider.clone(), deps),
            agent_id: rec.id.as_str().into(),
            agent_type: rec.agent_type.as_str().into(),
            title: rec.title.as_str().into(),
            type_model: deps
                .config
                .types
                .get(&rec.agent_type)
                .and_then(|t| t.model.clone()),
        }
    }
}

fn model_error(e: ModelError) -> AgentdError {
    AgentdError::new(ErrorCode::ModelError, e.to_string())
}

/// The layered system prompt: base + sub-agent role (sub-agents only) + agent type overlay.
pub(crate) fn system_prompt(rec: &AgentRecord, deps: &Deps) -> String {
    let cfg = &deps.config;
    let mut layers = vec![cfg.base_prompt.trim().to_string()];
    if rec.parent_id.is_some() {
        layers.push(cfg.subagent_prompt.trim().to_string());
    }
    if let Some(t) = cfg.types.get(&rec.agent_type) {
        layers.push(t.prompt.trim().to_string());
    }
    layers.retain(|l| !l.is_empty());
    layers.join("\n\n")
}

impl Turn {
    fn now(&self) -> u64 {
        self.deps.clock.now_ms()
    }

    /// One model call, timed and counted per backend. `Ok(Err(ms))` is a rate limit.
    async fn call_model(
        &self,
        req: ModelRequest,
    ) -> Result<Result<crate::ports::ModelResponse, u64>, AgentdError> {
        // Another provider than the one the agent's meters were made for (changed since):
        // its meters are looked up for this call.
        let other = (req.provider != self.names.calls.provider)
            .then(|| ModelCallMeters::of(req.provider.clone(), &self.deps));
        let started = std::time::Instant::now();
        let res = self.deps.model.complete(req).await;
        let meters = other.as_ref().unwrap_or(&self.names.calls);
        meters.seconds.observe(started.elapsed().as_secs_f64());
        if res.is_err() {
            meters.errors.add(1.0);
        }
        match res {
            Ok(r) => Ok(Ok(r)),
            Err(ModelError::RateLimited { retry_after_ms }) => Ok(Err(retry_after_ms)),
            Err(e) => Err(model_error(e)),
        }
    }

    async fn append(&mut self, entry: Arc<ThreadEntry>) -> Result<(), AgentdError> {
        let appended = self.deps.store.append(&self.rec.id, &entry).await?;
        if appended {
            // New to the store, so new to the known copy too: no need to look for it.
            self.remember_new(entry);
        } else {
            self.remember(entry);
        }
        Ok(())
    }

    /// Appends `entry` and sends `outputs` made from it (a Manage worker's reply from a step
    /// that also calls tools): in the same store batch where the store carries outputs
    /// ([`crate::channel_router::outputs_into_batch`]), so a crash right after the entry is
    /// written cannot lose them (a re-run finds the step recorded and does not send it again).
    async fn append_sending(
        &mut self,
        entry: Arc<ThreadEntry>,
        mut outputs: Vec<ChildOutput>,
    ) -> Result<(), AgentdError> {
        if outputs.is_empty() {
            return self.append(entry).await;
        }
        let mut writes = vec![StoreWrite::Append {
            agent_id: self.names.agent_id.clone(),
            entry: Arc::clone(&entry),
        }];
        crate::channel_router::outputs_into_batch(&self.deps, &mut writes, &mut outputs);
        self.deps.store.write_batch(&writes).await?;
        self.remember(entry);
        for out in outputs {
            self.tools.router.do_send(out);
        }
        Ok(())
    }

    /// What a Manage worker's assistant message `text` sends its parent (every one goes to
    /// the thread outbox); `None` for other agents and empty text.
    fn manage_reply(&self, step_id: Uuid, text: &str) -> Option<ChildOutput> {
        (matches!(self.rec.channel, Channel::Manage(_)) && !text.trim().is_empty()).then(|| {
            ChildOutput {
                child: self.rec.clone(),
                output: Output::Reply {
                    text: text.to_string(),
                },
                cause: step_id,
                kept: false,
            }
        })
    }

    /// Adds `entry`, known not to be in the thread, to the known thread.
    fn remember_new(&mut self, entry: Arc<ThreadEntry>) {
        if let Some(thread) = &mut self.thread {
            Arc::make_mut(thread).push(entry);
        }
    }

    /// Adds `entry` to the known thread (once).
    fn remember(&mut self, entry: Arc<ThreadEntry>) {
        if let Some(thread) = &mut self.thread
            && !thread.iter().rev().any(|e| e.id == entry.id)
        {
            Arc::make_mut(thread).push(entry);
        }
    }

    /// Whether the thread holds an entry `id` (scanned from the end, where a turn's own
    /// entries are).
    fn recorded(&self, id: &Uuid) -> bool {
        self.replaying
            && self
                .thread
                .as_ref()
                .is_some_and(|t| t.iter().rev().any(|e| e.id == *id))
    }

    /// The thread as stored: the known copy, or read once from the store.
    async fn current_thread(&mut self) -> Result<Arc<crate::ports::ThreadEntries>, AgentdError> {
        if let Some(thread) = &self.thread {
            return Ok(thread.clone());
        }
        let stored = self.deps.store.thread(&self.rec.id).await?;
        let thread = Arc::new(stored.into_iter().map(Arc::new).collect());
        self.thread = Some(Arc::clone(&thread));
        Ok(thread)
    }

    /// Replaces the whole thread (reset, compaction) in the store and in the known copy.
    async fn replace_thread(&mut self, entries: Vec<ThreadEntry>) -> Result<(), AgentdError> {
        self.thread = None;
        self.deps
            .store
            .replace_thread(&self.rec.id, &entries)
            .await?;
        self.thread = Some(Arc::new(entries.into_iter().map(Arc::new).collect()));
        Ok(())
    }

    fn request(&self, thread: Arc<crate::ports::ThreadEntries>, purpose: Purpose) -> ModelRequest {
        let tools = match purpose {
            Purpose::Turn => self.tool_specs.clone(),
            Purpose::Compact => Arc::default(),
        };
        ModelRequest {
            agent_id: self.names.agent_id.clone(),
            agent_type: self.names.agent_type.clone(),
            title: self.names.title.clone(),
            model: self
                .rec
                .model
                .clone()
                .or_else(|| self.names.type_model.clone()),
            provider: self.rec.provider.clone(),
            env: self.rec.env.clone(),
            system_prompt: self.system_prompt.clone(),
            thread,
            tools,
            purpose,
        }
    }

    /// Runs the turn to its end; the result carries the thread back to the actor.
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
            TurnInput::Compact => return Box::pin(self.compact()).await,
            TurnInput::Continue => {}
        }
        let max_steps = self.deps.config.limits.max_steps_per_turn.max(1);
        let mut result = TurnResult::default();
        for step in 1..=max_steps {
            if self.stop.load(Ordering::SeqCst) {
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
            // `thread` is gone once the request is: appends then need no copy of it.
            let resp = match replayed {
                Some(e) => {
                    drop(thread);
                    crate::ports::ModelResponse {
                        text: e.text.clone(),
                        tool_calls: e.tool_calls.to_vec(),
                        usage: Default::default(),
                    }
                }
                None => match self.call_model(self.request(thread, Purpose::Turn)).await? {
                    Ok(r) => {
                        if r.tool_calls.is_empty() {
                            result.final_usage = Some(r.usage);
                        } else {
                            self.me.do_send(AddUsage(r.usage));
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
                    Err(ms) => {
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
            for (i, call) in resp.tool_calls.iter().enumerate() {
                let tool_id = derived_id(self.cause, &format!("step-{step}-tool-{i}"));
                // Tool results a previous run recorded: their calls are not executed twice.
                if self.recorded(&tool_id) {
                    if tools::BuiltinTool::YieldToParent.is_named(&call.name) {
                        result.yielded = call.arguments.get("result").cloned();
                        return Ok(result);
                    }
                    continue;
                }
                // Boxed: a tool's future (Manage's above all) would otherwise make every
                // turn's future kilobytes bigger, copied whole when it is boxed to start.
                let outcome =
                    Box::pin(tools::execute(&self.tools, &call.name, &call.arguments)).await;
                let (text, yielded) = match outcome {
                    Ok(ToolOutcome::Value(v)) => (v.to_string(), None),
                    Ok(ToolOutcome::Yielded(v)) => {
                        (json!({"status": "yielded"}).to_string(), Some(v))
                    }
                    Err(e) => (json!({ "error": e }).to_string(), None),
                };
                let mut te = ThreadEntry::text(tool_id, Role::Tool, text, self.now());
                te.tool_call_id = Some(call.id.as_str().into());
                self.append(Arc::new(te)).await?;
                if yielded.is_some() {
                    result.yielded = yielded;
                    return Ok(result);
                }
            }
            if waits {
                // The model asked for a dependency or a user answer: it waits for it.
                return Ok(result);
            }
        }
        result.step_limit = true;
        Ok(result)
    }

    /// Compaction (seed 003): the model summarises everything but the most recent entries; the
    /// thread becomes `[summary] + recent`.
    async fn compact(&mut self) -> Result<TurnResult, AgentdError> {
        let thread = self.current_thread().await?;
        let keep = self.deps.config.limits.compact_keep_recent;
        if thread.len() <= keep {
            return Ok(TurnResult::default());
        }
        let mut split = thread.len() - keep;
        // Never start the kept part with a tool result whose call was summarised away.
        while split < thread.len() && thread[split].role == Role::Tool {
            split += 1;
        }
        let (old, recent) = thread.split_at(split);
        let resp = match self
            .call_model(self.request(Arc::new(old.to_vec()), Purpose::Compact))
            .await?
        {
            Ok(r) => r,
            Err(ms) => {
                return Ok(TurnResult {
                    rate_limited: Some(ms),
                    ..TurnResult::default()
                });
            }
        };
        self.me.do_send(AddUsage(resp.usage));
        let mut summary = ThreadEntry::text(
            derived_id(self.cause, "compact-summary"),
            Role::System,
            format!("Summary of the earlier conversation: {}", resp.text.trim()),
            self.now(),
        );
        summary.usage = Some(Box::new(resp.usage));
        let mut next = vec![summary];
        next.extend(recent.iter().map(|e| ThreadEntry::clone(e)));
        self.replace_thread(next).await?;
        Ok(TurnResult::default())
    }
}
