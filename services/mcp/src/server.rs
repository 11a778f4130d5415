//! One configured MCP server: its connection, kept up by a supervisor task (connect, list the
//! tools, wait for the connection to end, connect again after a backoff), and its calls.
//!
//! Invariants: the server's tools stay listed while it is down (a call waits for it to come
//! back within the call's timeout, or fails as a tool error), so a server that restarts does
//! not change what agents are shown; a listing older than the one applied is never applied.

use crate::config::{McpServerConfig, McpTransport};
use crate::content::{ListedTools, RemoteTool, call_result, listed_tools};
use agentd_actors::{McpCallResult, McpServerStatus, McpToolDef};
use agentd_proto::{AgentdError, ErrorCode};
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, Peer, RoleClient, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// First delay before a server is connected again; doubled per failed attempt.
const MIN_BACKOFF: Duration = Duration::from_millis(200);
/// Longest delay between two connection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A connection that lasted this long restarts the backoff from [`MIN_BACKOFF`].
const STABLE_AFTER: Duration = Duration::from_secs(30);

/// Where a server's connection is.
#[derive(Clone)]
pub(crate) enum Connection {
    /// Not connected; `attempts` counts the failed connections and ended ones so far, so a
    /// call can tell an attempt made while it waited.
    Down {
        /// Failed or ended connections so far.
        attempts: u64,
        /// Why the last one failed or ended.
        last_error: Option<String>,
    },
    /// Connected and initialised.
    Up(Peer<RoleClient>),
}

/// What the supervisor tells the rest of the client.
pub(crate) trait ToolsChanged: Send + Sync {
    /// The server's listed tools changed.
    fn tools_changed(&self);
}

/// One server: its config, connection and listed tools.
pub(crate) struct Server {
    pub config: McpServerConfig,
    /// The MCP tools agent types name on this server (by their own name), to report those it
    /// does not list.
    pub expected: Vec<String>,
    connection: watch::Sender<Connection>,
    tools: Mutex<ListedTools>,
    /// The listings started (the last one to finish wins only if it started last).
    listings: AtomicU64,
    applied: AtomicU64,
    changed: Arc<dyn ToolsChanged>,
}

impl Server {
    pub(crate) fn new(
        config: McpServerConfig,
        expected: Vec<String>,
        changed: Arc<dyn ToolsChanged>,
    ) -> Arc<Self> {
        let (connection, _) = watch::channel(Connection::Down {
            attempts: 0,
            last_error: None,
        });
        Arc::new(Server {
            config,
            expected,
            connection,
            tools: Mutex::default(),
            listings: AtomicU64::new(0),
            applied: AtomicU64::new(0),
            changed,
        })
    }

    fn tools(&self) -> MutexGuard<'_, ListedTools> {
        self.tools.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tools listed now.
    pub(crate) fn listed(&self) -> Vec<Arc<McpToolDef>> {
        self.tools().tools.clone()
    }

    /// The server's state for `/v1/info`.
    pub(crate) fn status(&self) -> McpServerStatus {
        let (up, last_error) = match &*self.connection.borrow() {
            Connection::Up(_) => (true, None),
            Connection::Down { last_error, .. } => (false, last_error.clone()),
        };
        let tools = self.tools();
        McpServerStatus {
            name: self.config.name.clone(),
            transport: self.config.transport.kind(),
            up,
            tools: tools.tools.iter().map(|t| t.exposed.clone()).collect(),
            skipped: tools.skipped.clone(),
            missing: self.missing(&tools),
            last_error,
        }
    }

    /// The tools types name that the server does not list (none before its first listing).
    fn missing(&self, tools: &ListedTools) -> Vec<String> {
        if self.applied.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        self.expected
            .iter()
            .filter(|name| !tools.tools.iter().any(|t| t.tool == **name))
            .cloned()
            .collect()
    }

    fn set_up(&self, up: bool) {
        agentd_actors::metrics::global().set(
            "agentd_mcp_server_up",
            "Whether the MCP server is connected (1) or not (0).",
            &[("server", &self.config.name)],
            if up { 1.0 } else { 0.0 },
        );
    }

    fn set_down(&self, why: String) {
        self.connection.send_modify(|c| {
            let attempts = match c {
                Connection::Down { attempts, .. } => *attempts + 1,
                Connection::Up(_) => 1,
            };
            *c = Connection::Down {
                attempts,
                last_error: Some(why),
            };
        });
        self.set_up(false);
    }

    /// Keeps the server connected until the task is aborted: connect, list, wait for the end,
    /// back off, again.
    pub(crate) async fn supervise(self: Arc<Self>) {
        self.set_up(false);
        let mut backoff = MIN_BACKOFF;
        loop {
            let name = &self.config.name;
            match self.connect().await {
                Ok(running) => {
                    let since = Instant::now();
                    tracing::info!(server = %name, transport = self.config.transport.kind(), "MCP server connected");
                    self.connection
                        .send_replace(Connection::Up(running.peer().clone()));
                    self.set_up(true);
                    Arc::clone(&self).list(running.peer().clone()).await;
                    let reason = running.waiting().await;
                    let why = format!("the connection ended ({reason:?})");
                    tracing::warn!(server = %name, "MCP server disconnected: {why}");
                    self.set_down(why);
                    if since.elapsed() >= STABLE_AFTER {
                        backoff = MIN_BACKOFF;
                    }
                }
                Err(why) => {
                    tracing::warn!(server = %name, "MCP server could not be connected: {why}");
                    self.set_down(why);
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    async fn connect(
        self: &Arc<Self>,
    ) -> Result<rmcp::service::RunningService<RoleClient, Listener>, String> {
        let listener = Listener {
            server: Arc::downgrade(self),
        };
        match &self.config.transport {
            McpTransport::Stdio { command, env } => {
                let Some((program, args)) = command.split_first() else {
                    return Err("no command".into());
                };
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(args).envs(env).kill_on_drop(true);
                let transport = TokioChildProcess::new(cmd)
                    .map_err(|e| format!("cannot start `{program}`: {e}"))?;
                listener
                    .serve(transport)
                    .await
                    .map_err(|e| format!("initialisation failed: {e}"))
            }
            McpTransport::StreamableHttp { url, headers } => {
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    let name = http::HeaderName::try_from(name.as_str())
                        .map_err(|_| format!("header `{name}` is not a valid header name"))?;
                    let value = http::HeaderValue::try_from(value.as_str())
                        .map_err(|_| format!("the value of header `{name}` is not valid"))?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                let transport = StreamableHttpClientTransport::from_config(config);
                listener
                    .serve(transport)
                    .await
                    .map_err(|e| format!("initialisation failed: {e}"))
            }
        }
    }

    /// Lists the tools on `peer` and applies the list unless a later listing was applied.
    pub(crate) async fn list(self: Arc<Self>, peer: Peer<RoleClient>) {
        let ticket = self.listings.fetch_add(1, Ordering::AcqRel) + 1;
        let listed = match peer.list_all_tools().await {
            Ok(tools) => tools,
            Err(e) => {
                tracing::warn!(server = %self.config.name, "MCP tools/list failed: {e}");
                return;
            }
        };
        let remote = listed
            .into_iter()
            .map(|t| RemoteTool {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: (*t.input_schema).clone(),
            })
            .collect();
        let tools = listed_tools(&self.config.name, remote, &self.config.approval);
        {
            let mut current = self.tools();
            if self.applied.load(Ordering::Acquire) > ticket {
                return;
            }
            self.applied.store(ticket, Ordering::Release);
            for name in &tools.skipped {
                tracing::warn!(server = %self.config.name, tool = %name, "MCP tool skipped: mcp__<server>__<tool> does not fit ^[A-Za-z0-9_-]{{1,64}}$");
            }
            for name in self.missing(&tools) {
                tracing::warn!(server = %self.config.name, tool = %name, "an agent type names this MCP tool, which the server does not list");
            }
            if *current == tools {
                return;
            }
            *current = tools;
        }
        tracing::info!(server = %self.config.name, tools = self.tools().tools.len(), "MCP tools listed");
        self.changed.tools_changed();
    }

    /// Calls `tool` within the server's timeout, waiting for the server to be up if it is
    /// not (a connection attempt that fails meanwhile ends the wait).
    pub(crate) async fn call(
        &self,
        tool: &McpToolDef,
        arguments: Value,
    ) -> Result<McpCallResult, AgentdError> {
        let name = &self.config.name;
        let timeout = self.config.timeout;
        let call = async {
            let peer = self.wait_up().await?;
            let arguments = match arguments {
                Value::Object(map) => map,
                _ => serde_json::Map::new(),
            };
            let params = CallToolRequestParams::new(tool.tool.clone()).with_arguments(arguments);
            // Dropping this future (a timeout, or the turn's abort) sends
            // `notifications/cancelled` for the request.
            peer.call_tool(params).await.map_err(|e| {
                tool_error(format!(
                    "MCP server `{name}` failed the call of `{}`: {e}",
                    tool.tool
                ))
            })
        };
        let result = tokio::time::timeout(timeout, call).await.map_err(|_| {
            tool_error(format!(
                "MCP server `{name}` did not answer `{}` within {} ms",
                tool.tool,
                timeout.as_millis()
            ))
        })??;
        let content: Vec<Value> = result
            .content
            .iter()
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect();
        Ok(call_result(
            &content,
            result.structured_content,
            result.is_error.unwrap_or(false),
        ))
    }

    /// The connection once it is up. A connection that is recorded up but closed is waited
    /// through: first its end, then the next attempt, whose failure ends the wait.
    async fn wait_up(&self) -> Result<Peer<RoleClient>, AgentdError> {
        let mut rx = self.connection.subscribe();
        let mut failures_before: Option<u64> = None;
        loop {
            let failed = match &*rx.borrow_and_update() {
                Connection::Up(peer) if !peer.is_transport_closed() => return Ok(peer.clone()),
                Connection::Up(_) => None,
                Connection::Down {
                    attempts,
                    last_error,
                } => match failures_before {
                    None => {
                        failures_before = Some(*attempts);
                        None
                    }
                    Some(before) if *attempts > before => Some(last_error.clone()),
                    Some(_) => None,
                },
            };
            if let Some(last_error) = failed {
                return Err(tool_error(format!(
                    "MCP server `{}` is down: {}",
                    self.config.name,
                    last_error.as_deref().unwrap_or("not connected")
                )));
            }
            rx.changed()
                .await
                .map_err(|_| tool_error(format!("MCP server `{}` is stopped", self.config.name)))?;
        }
    }
}

fn tool_error(message: String) -> AgentdError {
    AgentdError::new(ErrorCode::ToolError, message)
}

/// The client side of one connection: it says who agentd is, and lists the tools again when
/// the server says they changed.
pub(crate) struct Listener {
    server: std::sync::Weak<Server>,
}

impl rmcp::ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agentd", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        // Listed on a task of its own: the connection's loop runs this handler and must go
        // on reading while the listing waits for its answer.
        tokio::spawn(server.list(context.peer));
    }
}
