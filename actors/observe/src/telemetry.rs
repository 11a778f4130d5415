//! Traces of agents' work by the OpenTelemetry semantic conventions for generative AI
//! (`invoke_agent`, `chat`, `execute_tool` spans; `gen_ai.client.*` metrics), and the W3C trace
//! context that ties work across actors and processes together.
//!
//! Two things live here, at different costs:
//!
//! - **The trace context of the work at hand**, always: a task-local [`TraceContext`] that a
//!   turn (and, with export on, each of its tool calls) sets while its future runs, and that
//!   an HTTP request sets from its `traceparent`. Whatever makes an envelope for another agent
//!   (a spawn's first message, a Manage send, a post) reads it with [`current`]: the work the
//!   envelope causes joins the trace. Copying 25 bytes; nothing is allocated.
//! - **Spans**, only once the service installed an exporter ([`set_enabled`]): each span
//!   helper answers [`Span::none`] otherwise, after one relaxed atomic load, so a process with
//!   telemetry off neither builds attributes nor allocates for them. The spans use the target
//!   [`TARGET`], which the service's log lines leave out and its exporter takes alone.
//!
//! agentd chooses the ids, export on or off (`agentd_proto::trace`): the SDK's id generator
//! (in the service) takes them from [`next_ids`] while [`invoke_agent`] starts a turn's
//! span, so a stored context names the span that was exported.

use agentd_proto::TraceContext;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The target of every span this module makes: only the exporter's layer takes it.
pub const TARGET: &str = "agentd_telemetry";

static ENABLED: AtomicBool = AtomicBool::new(false);
static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Puts message contents on spans (`telemetry.capture_content`): the request's messages and
/// system instructions and the answer on `chat` spans, a tool call's arguments and result on
/// `execute_tool` spans. Off unless the service asks: they may be large or sensitive.
pub fn set_capture_content(on: bool) {
    CAPTURE_CONTENT.store(on, Ordering::Relaxed);
}

/// Whether message contents go on spans (only ever with spans on).
pub fn capture_content() -> bool {
    enabled() && CAPTURE_CONTENT.load(Ordering::Relaxed)
}

/// Sets attribute `key` of `span` to `value` (message contents, as JSON text).
pub fn set_content(span: &Span, key: &'static str, value: String) {
    if !span.is_disabled() {
        span.set_attribute(key, value);
    }
}

/// Turns span making on (the service, once its exporter's layer is installed).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether spans are made and exported.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

tokio::task_local! {
    static CURRENT: Option<TraceContext>;
}

/// The trace context of the work being polled now (a turn, a tool call, an HTTP request), if
/// any set one.
#[inline]
pub fn current() -> Option<TraceContext> {
    CURRENT.try_with(|c| *c).ok().flatten()
}

/// Runs `fut` with `ctx` as its [`current`] trace context.
pub fn scope<F: Future>(ctx: Option<TraceContext>, fut: F) -> impl Future<Output = F::Output> {
    CURRENT.scope(ctx, fut)
}

thread_local! {
    static NEXT_IDS: Cell<Option<(u128, u64)>> = const { Cell::new(None) };
}

/// The trace id and span id the span being started on this thread must take (for the
/// service's id generator, which asks for a span id for every span and for a trace id for a
/// root span); `None` when agentd did not choose them.
pub fn next_ids() -> Option<(u128, u64)> {
    NEXT_IDS.with(Cell::get)
}

/// The OpenTelemetry span context of `ctx`, as a remote parent or a link.
fn span_context(ctx: &TraceContext) -> SpanContext {
    let flags = if ctx.sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    SpanContext::new(
        TraceId::from(ctx.trace_id),
        SpanId::from(ctx.span_id),
        flags,
        true,
        TraceState::NONE,
    )
}

/// The trace context of a started `span` (`None`: disabled, or not exported).
pub fn context_of(span: &Span) -> Option<TraceContext> {
    if span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    if !sc.is_valid() {
        return None;
    }
    TraceContext::new(
        u128::from_be_bytes(sc.trace_id().to_bytes()),
        u64::from_be_bytes(sc.span_id().to_bytes()),
        sc.is_sampled(),
    )
}

/// What a turn's `invoke_agent` span names.
pub struct AgentSpan<'a> {
    pub agent_id: &'a str,
    pub agent_type: &'a str,
    pub title: &'a str,
    pub provider: &'a str,
    pub model: Option<&'a str>,
    /// The ids agentd chose for the span (a turn's first span); `None`: random ones (a turn
    /// going on after a pause or a wait).
    pub ids: Option<TraceContext>,
    /// The span it is a child of (the caller's tool call or request), if any.
    pub parent: Option<TraceContext>,
    /// Spans it follows without being their child: the run a crash lost, a forwarded answer.
    pub links: [Option<TraceContext>; 2],
}

/// A turn's `invoke_agent {agent type}` span (kind internal: the agent runs in this process),
/// started with the ids agentd chose; [`Span::none`] with telemetry off.
pub fn invoke_agent(a: &AgentSpan<'_>) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = tracing::info_span!(
        target: TARGET,
        "invoke_agent",
        otel.name = %format_args!("invoke_agent {}", a.agent_type),
        otel.kind = "internal",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.provider.name = a.provider,
        gen_ai.agent.id = a.agent_id,
        gen_ai.agent.name = a.agent_type,
        gen_ai.conversation.id = a.agent_id,
        gen_ai.request.model = a.model,
        agentd.agent.title = a.title,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    let parent = match &a.parent {
        Some(p) => opentelemetry::Context::new().with_remote_span_context(span_context(p)),
        None => opentelemetry::Context::new(),
    };
    let _ = span.set_parent(parent);
    for link in a.links.iter().flatten() {
        span.add_link(span_context(link));
    }
    NEXT_IDS.with(|n| n.set(a.ids.map(|t| (t.trace_id, t.span_id))));
    // Starts the span now, while the generator finds the ids.
    let _ = span.context();
    NEXT_IDS.with(|n| n.set(None));
    span
}

/// A model call's `chat {model}` span (kind client); [`Span::none`] with telemetry off.
pub fn chat(provider: &str, model: Option<&str>, conversation: &str) -> Span {
    if !enabled() {
        return Span::none();
    }
    tracing::info_span!(
        target: TARGET,
        "chat",
        otel.name = model.map_or_else(|| "chat".to_string(), |m| format!("chat {m}")),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.conversation.id = conversation,
        gen_ai.response.model = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.usage.cache_read.input_tokens = tracing::field::Empty,
        gen_ai.usage.cache_creation.input_tokens = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// Records what a model call answered on its `chat` span.
pub fn chat_answered(span: &Span, model: Option<&str>, usage: &agentd_proto::Usage, finish: &str) {
    if span.is_disabled() {
        return;
    }
    if let Some(model) = model {
        span.record("gen_ai.response.model", model);
    }
    // As i64: the OpenTelemetry layer records a u64 as text.
    let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    span.record("gen_ai.usage.input_tokens", int(usage.input));
    span.record("gen_ai.usage.output_tokens", int(usage.output));
    span.record(
        "gen_ai.usage.cache_read.input_tokens",
        int(usage.cache_read),
    );
    span.record(
        "gen_ai.usage.cache_creation.input_tokens",
        int(usage.cache_write),
    );
    span.set_attribute(
        "gen_ai.response.finish_reasons",
        opentelemetry::Value::Array(
            vec![opentelemetry::StringValue::from(finish.to_string())].into(),
        ),
    );
}

/// Marks `span` as ended in error, of class `kind` (`error.type`).
pub fn failed(span: &Span, kind: &str) {
    if span.is_disabled() {
        return;
    }
    span.record("error.type", kind);
    span.record("otel.status_code", "error");
}

/// A tool call's `execute_tool {tool}` span (kind internal), with the MCP server for an MCP
/// tool; [`Span::none`] with telemetry off.
pub fn execute_tool(tool: &str, call_id: &str, mcp_server: Option<&str>) -> Span {
    if !enabled() {
        return Span::none();
    }
    tracing::info_span!(
        target: TARGET,
        "execute_tool",
        otel.name = %format_args!("execute_tool {tool}"),
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        gen_ai.tool.type = if mcp_server.is_some() { "extension" } else { "function" },
        mcp.server.name = mcp_server,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// A span for a wait that matters (`queued` for a turn slot, `waiting_tool`,
/// `waiting_review`, `waiting_rate_limit`), named `wait {what}`; [`Span::none`] with telemetry
/// off. It ends when dropped.
pub fn wait(what: &'static str, agent_id: &str, trace: Option<&TraceContext>) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = tracing::info_span!(
        target: TARGET,
        "wait",
        otel.name = %format_args!("wait {what}"),
        otel.kind = "internal",
        agentd.wait = what,
        gen_ai.agent.id = agent_id,
    );
    let parent = match trace {
        Some(p) => opentelemetry::Context::new().with_remote_span_context(span_context(p)),
        None => opentelemetry::Context::new(),
    };
    let _ = span.set_parent(parent);
    span
}

/// An HTTP request's server span, `{method}` until its route is known (then `{method}
/// {route}`), a child of the caller's `traceparent` if it sent one; [`Span::none`] with
/// telemetry off.
pub fn http_server(method: &str, path: &str, parent: Option<&TraceContext>) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = tracing::info_span!(
        target: TARGET,
        "http",
        otel.name = method,
        otel.kind = "server",
        http.request.method = method,
        url.path = path,
        http.route = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    let parent = match parent {
        Some(p) => opentelemetry::Context::new().with_remote_span_context(span_context(p)),
        None => opentelemetry::Context::new(),
    };
    let _ = span.set_parent(parent);
    span
}

/// Records how an HTTP request ended on its server span.
pub fn http_answered(span: &Span, method: &str, route: Option<&str>, status: u16) {
    if span.is_disabled() {
        return;
    }
    if let Some(route) = route {
        span.record("http.route", route);
        // Started already: renamed through the OpenTelemetry span itself.
        span.context()
            .span()
            .update_name(format!("{method} {route}"));
    }
    span.record("http.response.status_code", i64::from(status));
    if status >= 500 {
        span.record("error.type", status.to_string());
        span.record("otel.status_code", "error");
    }
}

/// The GenAI client metrics (`gen_ai.client.token.usage`, `gen_ai.client.operation.duration`),
/// through the global meter provider the service installs; made on first use.
pub mod meters {
    use opentelemetry::KeyValue;
    use opentelemetry::metrics::Histogram;
    use std::sync::OnceLock;

    struct Meters {
        tokens: Histogram<u64>,
        duration: Histogram<f64>,
    }

    fn meters() -> &'static Meters {
        static M: OnceLock<Meters> = OnceLock::new();
        M.get_or_init(|| {
            let meter = opentelemetry::global::meter("agentd");
            Meters {
                tokens: meter
                    .u64_histogram("gen_ai.client.token.usage")
                    .with_unit("{token}")
                    .with_description("Number of input and output tokens used.")
                    .with_boundaries(vec![
                        1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0,
                        1048576.0, 4194304.0, 16777216.0, 67108864.0,
                    ])
                    .build(),
                duration: meter
                    .f64_histogram("gen_ai.client.operation.duration")
                    .with_unit("s")
                    .with_description("GenAI operation duration.")
                    .with_boundaries(vec![
                        0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                        40.96, 81.92,
                    ])
                    .build(),
            }
        })
    }

    /// Records one model call: its duration, and its tokens by type when it answered
    /// (`response_model`: the model that answered, when it did).
    pub fn model_call(
        provider: &str,
        model: Option<&str>,
        response_model: Option<&str>,
        seconds: f64,
        usage: Option<&agentd_proto::Usage>,
        error: Option<&str>,
    ) {
        if !super::enabled() {
            return;
        }
        let m = meters();
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", provider.to_string()),
        ];
        if let Some(model) = model {
            attrs.push(KeyValue::new("gen_ai.request.model", model.to_string()));
        }
        if let Some(model) = response_model {
            attrs.push(KeyValue::new("gen_ai.response.model", model.to_string()));
        }
        if let Some(usage) = usage {
            for (kind, n) in [("input", usage.input), ("output", usage.output)] {
                let mut a = attrs.clone();
                a.push(KeyValue::new("gen_ai.token.type", kind));
                m.tokens.record(n, &a);
            }
        }
        if let Some(e) = error {
            attrs.push(KeyValue::new("error.type", e.to_string()));
        }
        m.duration.record(seconds, &attrs);
    }
}
