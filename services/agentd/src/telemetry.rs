//! OpenTelemetry export (`[telemetry]`, docs/telemetry.md): traces and the GenAI client metrics
//! over OTLP/HTTP (protobuf) to a collector.
//!
//! - **Off by default**: nothing is installed while neither `telemetry.otlp_endpoint` nor
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, and the
//!   actors then make no spans ([`agentd_observe::telemetry::enabled`]).
//! - **Bounded**: at most `max_queue_spans` spans wait for export. A span past that, and every
//!   span of a batch the collector did not take (down, refusing, timing out), is dropped and
//!   counted in `agentd_telemetry_spans_dropped_total`; the first drop is logged once, and so is
//!   the first export that works again. agentd's work never waits for the collector.
//! - **No loop**: the SDK is built without its internal logs, and the exporter's layer takes
//!   the spans of [`agentd_observe::telemetry::TARGET`] alone, so nothing the exporter (or its
//!   HTTP client) logs becomes a span it exports.
//! - **agentd's ids**: the SDK's id generator takes the ids the actors chose for a turn's span
//!   ([`agentd_observe::telemetry::next_ids`]), so a turn's stored trace context names the span
//!   the collector receives.

pub use crate::settings::TelemetrySettings;
use agentd_observe::metrics::Counter;
use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, IdGenerator, RandomIdGenerator, Sampler,
    SdkTracerProvider, SpanData, SpanExporter, SpanProcessor,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// The installed export: flushed and shut down when dropped (at the end of `main`).
pub struct Telemetry {
    /// `telemetry.capture_content`.
    pub capture_content: bool,
    tracer: opentelemetry_sdk::trace::SdkTracer,
    traces: SdkTracerProvider,
    metrics: opentelemetry_sdk::metrics::SdkMeterProvider,
}

impl Telemetry {
    /// Builds the exporters for `settings` (`None` when telemetry is off). Must run outside
    /// an async runtime: the OTLP/HTTP client blocks on threads of its own.
    pub fn start(
        settings: &TelemetrySettings,
    ) -> Result<Option<Telemetry>, crate::start_error::StartError> {
        use crate::start_error::StartError;
        if !settings.enabled() {
            return Ok(None);
        }
        settings
            .validate()
            .map_err(|e| StartError::Settings(crate::settings::SettingsError::Invalid(e)))?;
        // The exporter's HTTP client (reqwest 0.13, as rmcp's) takes the process-wide rustls
        // crypto provider: ring, as the rest of agentd uses (an error only says one is
        // installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let timeout = Duration::from_millis(settings.export_timeout_ms.max(1));
        let headers: std::collections::HashMap<String, String> = settings
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(settings.service_name())
            .build();

        let mut spans = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_timeout(timeout);
        if let Some(url) = settings.signal_url("/v1/traces") {
            spans = spans.with_endpoint(url);
        }
        if !headers.is_empty() {
            spans = spans.with_headers(headers.clone());
        }
        let spans = spans
            .build()
            .map_err(|e| StartError::telemetry("telemetry: the OTLP span exporter", e))?;
        let gate = Arc::new(Gate::new(settings.max_queue_spans));
        let batch = BatchSpanProcessor::builder(Counted {
            inner: spans,
            gate: Arc::clone(&gate),
        })
        .with_batch_config(
            BatchConfigBuilder::default()
                // The gate bounds the queue; the processor's own bound is never reached.
                .with_max_queue_size(settings.max_queue_spans + 1)
                .build(),
        )
        .build();
        let traces = SdkTracerProvider::builder()
            .with_span_processor(Gated { inner: batch, gate })
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                settings.sample_ratio,
            ))))
            .with_id_generator(AgentdIds::default())
            .with_resource(resource.clone())
            .build();
        let tracer = traces.tracer("agentd");

        let mut metrics = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_timeout(timeout);
        if let Some(url) = settings.signal_url("/v1/metrics") {
            metrics = metrics.with_endpoint(url);
        }
        if !headers.is_empty() {
            metrics = metrics.with_headers(headers);
        }
        let metrics = metrics
            .build()
            .map_err(|e| StartError::telemetry("telemetry: the OTLP metric exporter", e))?;
        let reader = opentelemetry_sdk::metrics::PeriodicReader::builder(metrics)
            .with_interval(Duration::from_millis(settings.metric_interval_ms.max(100)))
            .build();
        let metrics = opentelemetry_sdk::metrics::SdkMeterProvider::builder()
            .with_reader(reader)
            .with_resource(resource)
            .build();
        opentelemetry::global::set_meter_provider(metrics.clone());
        Ok(Some(Telemetry {
            capture_content: settings.capture_content,
            tracer,
            traces,
            metrics,
        }))
    }

    /// The layer that turns the actors' GenAI spans into OpenTelemetry spans, filtered to
    /// them alone.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + 'static
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        use tracing_subscriber::Layer as _;
        tracing_opentelemetry::layer()
            .with_tracer(self.tracer.clone())
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target(agentd_observe::telemetry::TARGET, tracing::Level::TRACE),
            )
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        agentd_observe::telemetry::set_enabled(false);
        // What is queued goes out now, if the collector takes it.
        let _ = self.traces.shutdown();
        let _ = self.metrics.shutdown();
    }
}

/// Ids for spans: those agentd chose for the span being started on this thread (a turn's),
/// random ones otherwise.
#[derive(Debug, Default)]
struct AgentdIds(RandomIdGenerator);

impl IdGenerator for AgentdIds {
    fn new_trace_id(&self) -> TraceId {
        match agentd_observe::telemetry::next_ids() {
            Some((trace, _)) => TraceId::from(trace),
            None => self.0.new_trace_id(),
        }
    }

    fn new_span_id(&self) -> SpanId {
        match agentd_observe::telemetry::next_ids() {
            Some((_, span)) => SpanId::from(span),
            None => self.0.new_span_id(),
        }
    }
}

const DROPPED: (&str, &str) = (
    "agentd_telemetry_spans_dropped_total",
    "Spans not exported: the export queue was full, or the collector did not take their batch.",
);

/// The bound on spans waiting for export, and the count of those dropped.
struct Gate {
    max: usize,
    /// Spans handed to the batch processor and not yet through an export.
    waiting: AtomicUsize,
    dropped: Counter,
    /// Whether spans are being dropped now (logged when it starts and when it ends).
    dropping: AtomicBool,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("max", &self.max)
            .field("waiting", &self.waiting)
            .finish_non_exhaustive()
    }
}

impl Gate {
    fn new(max: usize) -> Self {
        Gate {
            max,
            waiting: AtomicUsize::new(0),
            dropped: agentd_observe::metrics::global().counter(DROPPED.0, DROPPED.1, &[]),
            dropping: AtomicBool::new(false),
        }
    }

    fn dropped(&self, n: usize, why: &dyn std::fmt::Display) {
        self.dropped.add(n as f64);
        if !self.dropping.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                target: "agentd::telemetry",
                spans = n,
                reason = %why,
                "telemetry: dropping spans until the collector takes them again (counted in agentd_telemetry_spans_dropped_total); agentd's work goes on"
            );
        }
    }

    fn exported(&self) {
        if self.dropping.swap(false, Ordering::Relaxed) {
            tracing::info!(target: "agentd::telemetry", "telemetry: the collector takes spans again");
        }
    }
}

/// The batch processor behind the [`Gate`]: a span past the bound is dropped (and counted)
/// instead of queued.
#[derive(Debug)]
struct Gated {
    inner: BatchSpanProcessor,
    gate: Arc<Gate>,
}

impl SpanProcessor for Gated {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        let before = self.gate.waiting.fetch_add(1, Ordering::AcqRel);
        if before >= self.gate.max {
            self.gate.waiting.fetch_sub(1, Ordering::AcqRel);
            self.gate.dropped(1, &"the export queue is full");
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, counting what it could not export (the batch processor does not retry a
/// batch: a failed one is lost).
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    gate: Arc<Gate>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let res = self.inner.export(batch).await;
        self.gate.waiting.fetch_sub(n, Ordering::AcqRel);
        match &res {
            Ok(()) => self.gate.exported(),
            Err(e) => self.gate.dropped(n, e),
        }
        res
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// Middleware: the request joins the trace of its `traceparent` header (W3C trace context), if
/// it has one, else starts one; whatever it causes (a spawn, a message, a command) carries that
/// context, and a `POST`/`PUT`/`DELETE` gets a server span with telemetry on. Reads (`GET`)
/// only join a caller's trace: a dashboard polling would otherwise start a trace a second.
pub async fn trace_context(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>, actix_web::Error> {
    use agentd_observe::telemetry;
    use agentd_proto::TraceContext;
    let incoming = req
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(TraceContext::parse);
    if matches!(req.method().as_str(), "GET" | "HEAD" | "OPTIONS") {
        return telemetry::scope(incoming, next.call(req)).await;
    }
    let method = req.method().as_str().to_string();
    let span = telemetry::http_server(&method, req.path(), incoming.as_ref());
    let ctx = telemetry::context_of(&span).unwrap_or_else(|| match &incoming {
        Some(parent) => parent.new_child(),
        None => TraceContext::new_root(),
    });
    let res = telemetry::scope(
        Some(ctx),
        tracing::Instrument::instrument(next.call(req), span.clone()),
    )
    .await;
    if let Ok(r) = &res {
        telemetry::http_answered(
            &span,
            &method,
            r.request().match_pattern().as_deref(),
            r.status().as_u16(),
        );
    }
    res
}
