//! What a turn asks the model: the names a request carries, the layered system prompt, and the
//! call itself, timed and counted per provider.

use super::Turn;
use super::live_answer::{DeltaTarget, LiveAnswer};
use crate::deps::Deps;
use crate::ports::{AnswerObserver, CliTools, ModelError, ModelRequest, ModelResponse, Purpose};
use crate::turn::TurnProgress;
use agentd_proto::{AgentRecord, AgentdError, ErrorCode};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// How a model call ended, when not with an error.
pub(super) enum CallOutcome {
    /// The model answered.
    Answer(ModelResponse),
    /// Rate-limited: retry after this many ms (the provider's limit, its gate's while another
    /// agent's rate limit has not run out, or its pace's — in those two cases no call is made).
    RateLimited(u64),
    /// A stop (a pause) aborted the call; what it cost so far was sent to the agent.
    Stopped,
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
    /// What an agent CLI may run by itself for it.
    pub cli_tools: Arc<CliTools>,
}

/// The model-call meters of one provider, resolved once per agent: looking a series up by
/// its labels on every call cost more than the count itself.
pub(crate) struct ModelCallMeters {
    provider: Option<String>,
    seconds: agentd_observe::metrics::Timer,
    errors: agentd_observe::metrics::Counter,
}

impl ModelCallMeters {
    pub(super) fn of(provider: Option<String>, deps: &Deps) -> Self {
        let backend = deps.model.backend_of(provider.as_deref());
        let labels = [
            ("provider", provider.as_deref().unwrap_or("default")),
            ("backend", backend),
        ];
        let m = agentd_observe::metrics::global();
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
            agent_type: Arc::clone(&rec.agent_type),
            title: Arc::clone(&rec.title),
            type_model: deps
                .config
                .types
                .get(&rec.agent_type)
                .and_then(|t| t.model.clone()),
            cli_tools: Arc::new(cli_tools(rec, deps)),
        }
    }
}

/// The tools an agent CLI may run for `rec`: its type's `cli_tools`, narrowed by the agent's
/// allowed tools when it has a list (one list narrows every tool an agent has, agentd's and its
/// CLI's), and its type's permission mode.
fn cli_tools(rec: &AgentRecord, deps: &Deps) -> CliTools {
    let Some(ty) = deps.config.types.get(&rec.agent_type) else {
        return CliTools::default();
    };
    let allowed = ty
        .cli_tools
        .iter()
        .filter(|t| {
            rec.allowed_tools
                .as_ref()
                .is_none_or(|list| list.iter().any(|a| a == *t))
        })
        .cloned()
        .collect();
    CliTools {
        allowed,
        permission_mode: ty.cli_permission_mode.clone(),
    }
}

/// The request's system instructions and messages on its `chat` span (`capture_content`), in
/// the conventions' shape: `[{role, parts: [{type, content}]}]`.
#[cold]
fn request_contents(span: &tracing::Span, req: &ModelRequest) {
    let system = serde_json::json!([{"type": "text", "content": &*req.system_prompt}]);
    agentd_observe::telemetry::set_content(span, "gen_ai.system_instructions", system.to_string());
    let messages: Vec<serde_json::Value> = req
        .thread
        .iter()
        .map(|e| {
            let mut parts = vec![serde_json::json!({"type": "text", "content": e.text})];
            parts.extend(e.tool_calls.iter().map(|c| {
                serde_json::json!({"type": "tool_call", "id": c.id, "name": c.name,
                                   "arguments": c.arguments})
            }));
            if let Some(id) = &e.tool_call_id {
                parts = vec![serde_json::json!({"type": "tool_call_response", "id": id,
                                                "response": e.text})];
            }
            serde_json::json!({"role": e.role, "parts": parts})
        })
        .collect();
    agentd_observe::telemetry::set_content(
        span,
        "gen_ai.input.messages",
        serde_json::Value::Array(messages).to_string(),
    );
}

/// A failed model call as the turn's error, keeping the [`ModelError`] as its source: its
/// agent retries a turn whose call may succeed later ([`ModelError::is_transient`]).
fn model_error(e: ModelError) -> AgentdError {
    AgentdError::with_source(ErrorCode::ModelError, e.to_string(), e)
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
    /// One model call, timed and counted per backend. `step_id` names the step whose entry the
    /// answer becomes: its text goes out as `text_delta` events while it arrives (`None`: a
    /// compaction's summary, which nobody watches). A call that ends without an answer
    /// (aborted by a stop, or failed mid-way) sends what it cost so far to the agent.
    pub(super) async fn call_model(
        &self,
        mut req: ModelRequest,
        step_id: Option<uuid::Uuid>,
    ) -> Result<CallOutcome, AgentdError> {
        let gates = &self.rate_gates;
        // The agent's provider (its requests name the same one).
        let provider = self.rec.provider.as_deref().unwrap_or("default");
        // What the backend says of itself: whether its rate limits hold every caller of the
        // provider, whether an aborted call's input is billed, whether text streams in.
        let can = self
            .deps
            .model
            .capabilities_of(self.rec.provider.as_deref());
        if can.shared_rate_limit && gates.ever_closed() {
            let now = self.now();
            if let Some(until) = gates.closed_until(provider, now) {
                return Ok(CallOutcome::RateLimited(until - now));
            }
        }
        // It may have rate-limited another process of the deployment.
        let shared = self
            .deps
            .transport
            .as_ref()
            .filter(|_| can.shared_rate_limit);
        if let Some(transport) = shared
            && let Some(until) = transport.provider_gate(provider).await
        {
            gates.close(provider, until);
            return Ok(CallOutcome::RateLimited(
                until.saturating_sub(self.now()).max(1),
            ));
        }
        // The input's estimate: what a call aborted mid-answer counts as its input until the
        // provider reports it, and what a tokens-per-minute pace counts.
        let rates = self.deps.config.provider_rates.get(provider);
        let input_estimate =
            if can.bills_aborted_input || rates.is_some_and(|r| r.tokens_per_minute > 0) {
                self.estimated_input_tokens(&req.thread)
            } else {
                0
            };
        if let Some(rates) = rates {
            let tokens = if rates.tokens_per_minute > 0 {
                input_estimate
            } else {
                0
            };
            if let Some(wait) = gates.pace(provider, rates, tokens) {
                let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                return Ok(CallOutcome::RateLimited(ms.max(1)));
            }
        }
        let answer = Arc::new(LiveAnswer::new(
            step_id.filter(|_| can.streams).map(|step_id| DeltaTarget {
                agent_id: self.names.agent_id.clone(),
                step_id,
                events: self.deps.events.clone(),
            }),
            self.deps.clock.clone(),
            input_estimate,
        ));
        self.shared.call_started(Arc::clone(&answer), &req.cancel);
        req.observer = Some(Arc::clone(&answer) as Arc<dyn AnswerObserver>);
        // Another provider than the one the agent's meters were made for (changed since):
        // its meters are looked up for this call.
        let other = (req.provider != self.names.calls.provider)
            .then(|| ModelCallMeters::of(req.provider.clone(), &self.deps));
        let started = std::time::Instant::now();
        let chat = if agentd_observe::telemetry::enabled() {
            let provider = req.provider.as_deref();
            agentd_observe::telemetry::chat(
                self.deps.model.backend_of(provider),
                // The model asked for: the agent's, else its provider's configured one.
                req.model
                    .as_deref()
                    .or_else(|| self.deps.model.default_model_of(provider)),
                &self.names.agent_id,
            )
        } else {
            tracing::Span::none()
        };
        let res = if chat.is_disabled() {
            self.deps.model.complete(req).await
        } else {
            if agentd_observe::telemetry::capture_content() {
                request_contents(&chat, &req);
            }
            // What the backend sends (an A2A remote's `traceparent`) names the `chat` span.
            let ctx = agentd_observe::telemetry::context_of(&chat)
                .or_else(agentd_observe::telemetry::current);
            let call = tracing::Instrument::instrument(self.deps.model.complete(req), chat.clone());
            agentd_observe::telemetry::scope(ctx, call).await
        };
        self.shared.call_ended();
        answer.finish();
        let meters = other.as_ref().unwrap_or(&self.names.calls);
        let seconds = started.elapsed().as_secs_f64();
        meters.seconds.observe(seconds);
        if !chat.is_disabled() {
            self.chat_ended(&chat, &res, seconds);
        }
        if matches!(res, Err(ModelError::Failed(_) | ModelError::Unavailable(_))) {
            meters.errors.add(1.0);
        }
        if res.is_err()
            && let Some(usage) = answer.take_cost()
        {
            // The provider bills what it streamed before the abort or the failure.
            self.progress
                .do_send(TurnProgress::Usage { usage, step: None });
        }
        match res {
            // The actor aborted the turn (and counted the call) as the answer came in: this
            // future is being dropped, and its answer with it.
            Ok(_) if !answer.claim() => Ok(CallOutcome::Stopped),
            Ok(r) => Ok(CallOutcome::Answer(r)),
            Err(ModelError::Cancelled) => Ok(CallOutcome::Stopped),
            Err(ModelError::RateLimited { retry_after_ms }) => {
                if can.shared_rate_limit {
                    let until = self.now().saturating_add(retry_after_ms);
                    gates.close(provider, until);
                    if let Some(transport) = shared {
                        transport.close_provider_gate(provider, until).await;
                    }
                }
                Ok(CallOutcome::RateLimited(retry_after_ms))
            }
            Err(e) => Err(model_error(e)),
        }
    }

    /// What a model call came to, on its `chat` span and in the GenAI metrics (telemetry on).
    #[cold]
    fn chat_ended(
        &self,
        span: &tracing::Span,
        res: &Result<ModelResponse, ModelError>,
        seconds: f64,
    ) {
        let backend = self.deps.model.backend_of(self.rec.provider.as_deref());
        let model = self
            .rec
            .model
            .as_deref()
            .or(self.names.type_model.as_deref())
            .or_else(|| {
                self.deps
                    .model
                    .default_model_of(self.rec.provider.as_deref())
            });
        match res {
            Ok(r) => {
                let finish = if r.cut_off {
                    "length"
                } else if r.tool_calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                };
                // The model that answered, as the provider names it; else the one asked for.
                let answered = r.model.as_deref().or(model);
                agentd_observe::telemetry::chat_answered(span, answered, &r.usage, finish);
                if agentd_observe::telemetry::capture_content() {
                    let mut parts = vec![serde_json::json!({"type": "text", "content": r.text})];
                    parts.extend(r.tool_calls.iter().map(|c| {
                        serde_json::json!({"type": "tool_call", "id": c.id, "name": c.name,
                                           "arguments": c.arguments})
                    }));
                    let out = serde_json::json!([{"role": "assistant", "parts": parts,
                                                  "finish_reason": finish}]);
                    agentd_observe::telemetry::set_content(
                        span,
                        "gen_ai.output.messages",
                        out.to_string(),
                    );
                }
                agentd_observe::telemetry::meters::model_call(
                    backend,
                    model,
                    answered,
                    seconds,
                    Some(&r.usage),
                    None,
                );
            }
            Err(e) => {
                let kind = match e {
                    ModelError::RateLimited { .. } => "rate_limited",
                    ModelError::Cancelled => "cancelled",
                    ModelError::Failed(_) => "model_error",
                    ModelError::Unavailable(_) => "model_unavailable",
                };
                agentd_observe::telemetry::failed(span, kind);
                agentd_observe::telemetry::meters::model_call(
                    backend,
                    model,
                    None,
                    seconds,
                    None,
                    Some(kind),
                );
            }
        }
    }

    pub(super) fn request(
        &self,
        thread: Arc<crate::ports::ThreadEntries>,
        purpose: Purpose,
    ) -> ModelRequest {
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
            cli_session_id: self
                .rec
                .agent_cli
                .as_ref()
                .and_then(|c| c.session_id.clone()),
            cli_tools: self.names.cli_tools.clone(),
            // `call_model` sets the observer and shares the token with the actor.
            observer: None,
            cancel: CancellationToken::new(),
        }
    }
}
