//! `[telemetry]`: where OpenTelemetry export goes and what it carries (the export itself is
//! `telemetry.rs`, beside the service).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `[telemetry]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySettings {
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`); the signals' paths
    /// (`/v1/traces`, `/v1/metrics`) are added. Empty: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` when set, else telemetry is off.
    pub otlp_endpoint: String,
    /// `http/protobuf`, the one protocol this build exports (empty: the same).
    pub protocol: String,
    /// Headers every export request carries (an API key), over `OTEL_EXPORTER_OTLP_HEADERS`.
    pub headers: BTreeMap<String, String>,
    /// The fraction of new traces recorded, 0 to 1; a trace joined from a caller follows the
    /// caller's sampled flag.
    pub sample_ratio: f64,
    /// `service.name`. Empty: `OTEL_SERVICE_NAME`, else `agentd`.
    pub service_name: String,
    /// Put message contents on spans (prompts, answers, tool arguments and results): they may
    /// be large or sensitive, so off unless asked.
    pub capture_content: bool,
    /// A link to a trace for the views, `{trace_id}` replaced (a Jaeger URL, say); empty: none.
    pub trace_url: String,
    /// Spans waiting for export at most; past that, spans are dropped and counted.
    pub max_queue_spans: usize,
    /// How long one export request may take.
    pub export_timeout_ms: u64,
    /// How often the metrics are exported.
    pub metric_interval_ms: u64,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        TelemetrySettings {
            otlp_endpoint: String::new(),
            protocol: String::new(),
            headers: BTreeMap::new(),
            sample_ratio: 1.0,
            service_name: String::new(),
            capture_content: false,
            trace_url: String::new(),
            max_queue_spans: 2048,
            export_timeout_ms: 10_000,
            metric_interval_ms: 60_000,
        }
    }
}

impl TelemetrySettings {
    /// Checks the values that would make export misbehave.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return Err(format!(
                "telemetry.sample_ratio {} is not between 0 and 1",
                self.sample_ratio
            ));
        }
        let protocol = if self.protocol.is_empty() {
            std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL").unwrap_or_default()
        } else {
            self.protocol.clone()
        };
        if !matches!(protocol.as_str(), "" | "http/protobuf") {
            return Err(format!(
                "telemetry.protocol `{protocol}` is not supported; this build exports `http/protobuf`"
            ));
        }
        if self.max_queue_spans == 0 {
            return Err("telemetry.max_queue_spans must be at least 1".into());
        }
        if !self.trace_url.is_empty() && !self.trace_url.contains("{trace_id}") {
            return Err("telemetry.trace_url must contain `{trace_id}`".into());
        }
        Ok(())
    }

    /// Whether export is configured (here or by the standard variables).
    pub fn enabled(&self) -> bool {
        !self.otlp_endpoint.trim().is_empty()
            || [
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            ]
            .iter()
            .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()))
    }

    pub(crate) fn service_name(&self) -> String {
        if !self.service_name.is_empty() {
            return self.service_name.clone();
        }
        std::env::var("OTEL_SERVICE_NAME")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "agentd".into())
    }

    /// The URL of signal `path` (`/v1/traces`) under `otlp_endpoint`; `None` leaves it to the
    /// standard variables.
    pub(crate) fn signal_url(&self, path: &str) -> Option<String> {
        let base = self.otlp_endpoint.trim();
        (!base.is_empty()).then(|| format!("{}{path}", base.trim_end_matches('/')))
    }
}
