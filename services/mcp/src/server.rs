//! One configured MCP server: its connection, kept up by a supervisor task (connect, list the
//! tools, wait for the connection to end, connect again after a backoff), and its calls.
//!
//! Invariants: the server's tools stay listed while it is down (a call waits for it to come
//! back within the call's timeout, then fails as `tool_timeout` saying why it is down), so a
//! server that restarts does not change what agents are shown; a listing older than the one
//! applied is never applied. While a call waits, connection attempts come at least every
//! [`WAITING_BACKOFF`], so the call goes on soon after the server is back.
//! A streamable-HTTP server that no longer knows the connection's session (it restarted) ends
//! the connection as a failure would: the call that found out fails at once, the server shows
//! down with the reason, and a new session is opened ([`crate::session`]). One that cannot be
//! reached any more ends it too: the server shows down (and it is logged), and a call whose
//! request could not connect — so never reached the server — waits for it as any call made
//! while it is down, and is made again once it is back.

use crate::config::{McpServerConfig, McpTransport};
use crate::content::{ListedTools, RemoteTool, call_result, listed_tools};
use crate::session::{
    Lost, SessionCheckingClient, SessionLoss, initialisation_failure, never_sent,
};
use agentd_ports::{McpCallResult, McpServerStatus, McpToolDef};
use agentd_proto::{AgentdError, ErrorCode};
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, Peer, RoleClient, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, watch};

/// First delay before a server is connected again; doubled per failed attempt.
const MIN_BACKOFF: Duration = Duration::from_millis(200);
/// Longest delay between two connection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Longest delay between two connection attempts while a call waits for the server.
const WAITING_BACKOFF: Duration = Duration::from_secs(1);
/// A connection that lasted this long restarts the backoff from [`MIN_BACKOFF`].
const STABLE_AFTER: Duration = Duration::from_secs(30);
/// How long a connection whose session was lost may take to close (rmcp ends the session with
/// a `DELETE` the server refuses).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

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
    Up {
        /// The connection's peer.
        peer: Peer<RoleClient>,
        /// Whether the server still knows the connection's session (streamable HTTP; a stdio
        /// connection never loses it).
        session: SessionLoss,
        /// Why the connection before this one failed or ended, if one did.
        last_error: Option<String>,
    },
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
    /// Calls waiting for the server to be up.
    waiting: AtomicUsize,
    /// Woken when a call starts waiting: the supervisor tries to connect at once.
    wanted: Notify,
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
            waiting: AtomicUsize::new(0),
            wanted: Notify::new(),
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
            Connection::Up { last_error, .. } => (true, last_error.clone()),
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
        agentd_observe::metrics::global().set(
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
                Connection::Up { .. } => 1,
            };
            *c = Connection::Down {
                attempts,
                last_error: Some(why),
            };
        });
        self.set_up(false);
    }

    /// Keeps the server connected until the task is aborted: connect, list, wait for the end
    /// (or for the server to refuse the session), back off, again.
    pub(crate) async fn supervise(self: Arc<Self>) {
        self.set_up(false);
        let mut backoff = MIN_BACKOFF;
        loop {
            let name = &self.config.name;
            match self.connect().await {
                Ok((running, session)) => {
                    let since = Instant::now();
                    tracing::info!(server = %name, transport = self.config.transport.kind(), "MCP server connected");
                    // What the server says of itself (its instructions can be long): DEBUG.
                    tracing::debug!(server = %name, peer_info = ?running.peer().peer_info(), "MCP server initialised");
                    let peer = running.peer().clone();
                    self.connection.send_modify(|c| {
                        let last_error = match c {
                            Connection::Down { last_error, .. }
                            | Connection::Up { last_error, .. } => last_error.take(),
                        };
                        *c = Connection::Up {
                            peer: peer.clone(),
                            session: session.clone(),
                            last_error,
                        };
                    });
                    self.set_up(true);
                    Arc::clone(&self).list(peer).await;
                    let cancel = running.cancellation_token();
                    let ended = running.waiting();
                    tokio::pin!(ended);
                    tokio::select! {
                        reason = &mut ended => {
                            let why = format!("the connection ended ({reason:?})");
                            tracing::warn!(server = %name, "MCP server disconnected: {why}");
                            self.set_down(why);
                            if since.elapsed() >= STABLE_AFTER {
                                backoff = MIN_BACKOFF;
                            }
                        }
                        lost = session.lost() => {
                            match &lost {
                                Lost::SessionRefused(why) => tracing::warn!(server = %name, "MCP server lost the session: {why}; opening a new one"),
                                Lost::Unreachable(why) => tracing::warn!(server = %name, "MCP server disconnected: {why}; connecting again"),
                            }
                            self.set_down(lost.to_string());
                            cancel.cancel();
                            let _ = tokio::time::timeout(CLOSE_TIMEOUT, &mut ended).await;
                            // It was up: the next attempt comes soon (a server that answered
                            // has a session to open; one that went away may be restarting).
                            backoff = MIN_BACKOFF;
                        }
                    }
                }
                Err(why) => {
                    tracing::warn!(server = %name, "MCP server could not be connected: {why}");
                    self.set_down(why);
                }
            }
            let delay = if self.waiting.load(Ordering::Acquire) > 0 {
                backoff.min(WAITING_BACKOFF)
            } else {
                backoff
            };
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = self.wanted.notified() => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// A new connection, and where its session's loss will be told.
    async fn connect(
        self: &Arc<Self>,
    ) -> Result<
        (
            rmcp::service::RunningService<RoleClient, Listener>,
            SessionLoss,
        ),
        String,
    > {
        let listener = Listener {
            server: Arc::downgrade(self),
        };
        let session = SessionLoss::new();
        match &self.config.transport {
            McpTransport::Stdio { command, env } => {
                let Some((program, args)) = command.split_first() else {
                    return Err("no command".into());
                };
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(args).envs(env).kill_on_drop(true);
                let transport = TokioChildProcess::new(cmd)
                    .map_err(|e| format!("cannot start `{program}`: {e}"))?;
                let running = listener
                    .serve(transport)
                    .await
                    .map_err(|e| format!("initialisation failed: {e}"))?;
                Ok((running, session))
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
                // A session the server no longer knows ends this connection (the supervisor
                // opens a new one and lists the tools again), rather than rmcp's transparent
                // re-initialisation on a 404, which neither lists again nor shows.
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom)
                    .reinit_on_expired_session(false);
                let client = SessionCheckingClient::new(session.clone())?;
                let transport = StreamableHttpClientTransport::with_client(client, config);
                let running = listener
                    .serve(transport)
                    .await
                    .map_err(|e| initialisation_failure(&e))?;
                Ok((running, session))
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
    /// not, and calling again once it is back when the request could not connect (it never
    /// reached the server).
    pub(crate) async fn call(
        &self,
        tool: &McpToolDef,
        arguments: Value,
    ) -> Result<McpCallResult, AgentdError> {
        let name = &self.config.name;
        let timeout = self.config.timeout;
        let arguments = match arguments {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let call = async {
            loop {
                let (peer, session) = self.wait_up().await;
                let mut params =
                    CallToolRequestParams::new(tool.tool.clone()).with_arguments(arguments.clone());
                // The MCP semantic conventions' propagation: W3C trace context in `params._meta`.
                if let Some(trace) = agentd_observe::telemetry::current() {
                    let mut meta = serde_json::Map::new();
                    meta.insert("traceparent".into(), Value::String(trace.to_string()));
                    params.meta = Some(rmcp::model::RequestMetaObject(rmcp::model::MetaObject(
                        meta,
                    )));
                }
                // Dropping this future (a timeout, or the turn's abort) sends
                // `notifications/cancelled` for the request.
                let e = match peer.call_tool(params).await {
                    Ok(result) => return Ok(result),
                    Err(e) => e,
                };
                if never_sent(&e) {
                    // The server went away; the supervisor shows it down and connects again.
                    tracing::debug!(server = %name, tool = %tool.tool, "MCP call not sent: the server cannot be reached; waiting for it");
                    continue;
                }
                return Err(match session.reason() {
                    Some(Lost::SessionRefused(why)) => tool_error(format!(
                        "MCP server `{name}` refused the call of `{}`: {why}; agentd opens a new session",
                        tool.tool
                    )),
                    // The request may have reached it before it went away.
                    Some(Lost::Unreachable(why)) => tool_error(format!(
                        "MCP server `{name}` went away during the call of `{}` ({why}); it may have run it",
                        tool.tool
                    )),
                    None => tool_error(format!(
                        "MCP server `{name}` failed the call of `{}`: {e}",
                        tool.tool
                    )),
                });
            }
        };
        let result = tokio::time::timeout(timeout, call).await.map_err(|_| {
            let down = match &*self.connection.borrow() {
                Connection::Down { last_error, .. } => Some(
                    last_error
                        .clone()
                        .unwrap_or_else(|| "not connected yet".to_string()),
                ),
                Connection::Up { .. } => None,
            };
            let message = match down {
                Some(why) => format!(
                    "MCP server `{name}` is down ({why}) and did not come back within {} ms to run `{}`",
                    timeout.as_millis(),
                    tool.tool
                ),
                None => format!(
                    "MCP server `{name}` did not answer `{}` within {} ms",
                    tool.tool,
                    timeout.as_millis()
                ),
            };
            AgentdError::new(ErrorCode::ToolTimeout, message)
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

    /// The connection once it is up (its peer, and whether its session is lost). A connection
    /// that is recorded up but closed or lost is waited through, as a server that is down: the
    /// wait ends only when a connection is up again (the caller bounds it with its timeout).
    /// While it waits, the supervisor connects at once and then at least every
    /// [`WAITING_BACKOFF`].
    async fn wait_up(&self) -> (Peer<RoleClient>, SessionLoss) {
        let mut rx = self.connection.subscribe();
        let mut waiting: Option<Waiting<'_>> = None;
        loop {
            if let Connection::Up { peer, session, .. } = &*rx.borrow_and_update()
                && !peer.is_transport_closed()
                && session.reason().is_none()
            {
                return (peer.clone(), session.clone());
            }
            if waiting.is_none() {
                waiting = Some(Waiting::start(self));
            }
            if rx.changed().await.is_err() {
                // The sender lives in `self`: never closed while this waits.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// A call waiting for its server: counted while it waits (also when its future is dropped on
/// a timeout), so the supervisor knows to try often.
struct Waiting<'a>(&'a Server);

impl<'a> Waiting<'a> {
    fn start(server: &'a Server) -> Self {
        server.waiting.fetch_add(1, Ordering::AcqRel);
        server.wanted.notify_one();
        Waiting(server)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

fn tool_error(message: String) -> AgentdError {
    AgentdError::new(ErrorCode::ToolFailed, message)
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
