//! The MCP client of agentd: the configured MCP servers (`[mcp.servers.<name>]`, stdio or
//! streamable HTTP) behind the actors' [`McpTools`](agentd_ports::McpTools) port, built on
//! the official Rust SDK (`rmcp`). The actors never name it, nor it them: it compiles against
//! `agentd-ports` (the port, the rules of a server's and an exposed tool's names),
//! `agentd-observe` (a server's metrics, the trace context a call carries) and `agentd-proto`.
//!
//! | module | what it holds |
//! |---|---|
//! | [`config`] | a server's settings as written, and resolved at start-up |
//! | [`expand`] | `${VAR}` references in `env` and `headers` values |
//! | [`content`] | tool lists to specs (names checked, schemas normalised), results to text |
//! | [`server`] | one server: its supervised connection, its listing, its calls |
//! | [`session`] | the HTTP client of a streamable-HTTP connection: rmcp's, plus a lost session and a server that cannot be reached |
//! | [`client`] | [`McpClient`]: every server of a process as one `McpTools` |

pub mod client;
pub mod config;
pub mod content;
pub mod expand;
mod server;
mod session;

pub use client::McpClient;
pub use config::{McpConfigError, McpServerConfig, McpServerSettings, McpTransport};
