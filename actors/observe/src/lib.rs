//! `agentd-observe`: what the actors and the adapters share to be observed, in a leaf crate of
//! its own (it depends on `agentd-proto` alone of the workspace), so that an adapter (the bus,
//! the model clients, the MCP client) records a metric or joins a trace without compiling
//! against the actors.
//!
//! | module | what it holds |
//! |---|---|
//! | [`telemetry`] | the W3C trace context of the work being polled (a task-local a turn, a tool call or an HTTP request sets; envelopes to other agents carry it), and the GenAI spans and metrics, made only once the service installed an exporter (`docs/telemetry.md`) |
//! | [`metrics`] | the process-wide metrics registry, rendered in the Prometheus text format (`/metrics`) |

pub mod metrics;
pub mod telemetry;
