//! The agentd service: settings, wiring and the HTTP API around the actors.
//!
//! | module | what it holds |
//! |---|---|
//! | [`settings`] | layered, typed configuration |
//! | [`builtin`] | agent types and the demo script shipped in the binary |
//! | [`wiring`] | settings → store, model, types, event bus |
//! | [`http`] | the `/v1` HTTP API |
//! | [`a2a`] | the A2A protocol 1.0 at `/a2a/<agent type>` (JSON-RPC and HTTP+JSON bindings) |
//! | [`mcp_server`] | agentd as an MCP server: tools `ask_<type>` at `/mcp` (streamable HTTP) |
//! | [`named_roots`] | roots a caller names from outside (an A2A `contextId`, an MCP thread), found or opened once |
//! | [`runs`] | what became of a door's run, read from its agent's durable state (A2A's tasks, MCP's calls) |
//! | [`openapi`] | its OpenAPI document, generated from the handlers and the wire types |
//! | [`errors`] | every API error as `{code, message}`: handlers, extractors, no route, the framework |
//! | [`body_deadline`] | the deadline of a request's body (`408 request_timeout`) |
//! | [`sse`] | `/v1/events` as Server-Sent Events |
//! | [`auth`] | bearer-token authentication |
//! | [`dashboard`] | the web dashboard at `/`, embedded in the binary |
//! | [`app`] | [`Builder`]: the one way to make the service, from settings, a clock and the ports a caller supplies (`main`, the bench and the tests' `TestSystem::builder` all build through it); serving it over HTTP, stopping it |
//! | [`start_error`] | [`StartError`]: why the service did not start, by cause, with its source |
//! | [`logs`] | the log subscriber (used by `main` and by the benchmark) |
//! | [`telemetry`] | `[telemetry]`: OpenTelemetry export of GenAI spans and metrics over OTLP/HTTP |

pub mod a2a;
pub mod app;
pub mod auth;
pub mod body_deadline;
pub mod builtin;
pub mod dashboard;
pub mod errors;
pub mod http;
pub mod logs;
pub mod mcp_server;
pub mod named_roots;
pub mod openapi;
pub mod runs;
pub mod settings;
pub mod sse;
pub mod start_error;
pub mod telemetry;
pub mod wiring;

pub use app::{Builder, Running, Service};
pub use settings::Settings;
pub use start_error::StartError;
