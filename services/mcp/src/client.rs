//! [`McpClient`]: every configured MCP server of a process behind the actors' [`McpTools`]
//! port. Its version moves whenever a server's listed tools change, so the tool catalogue
//! builds agents' specs again.

use crate::config::McpServerConfig;
use crate::server::{Server, ToolsChanged};
use agentd_ports::{McpCallResult, McpServerStatus, McpToolDef, McpTools};
use agentd_proto::{AgentdError, ErrorCode};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use tokio::task::JoinHandle;

/// The tools of all servers as one list, rebuilt when one server's change.
#[derive(Default)]
struct Snapshot {
    version: AtomicU64,
    tools: RwLock<Arc<Vec<Arc<McpToolDef>>>>,
    servers: RwLock<Vec<Arc<Server>>>,
}

impl ToolsChanged for Snapshot {
    fn tools_changed(&self) {
        let servers = self.servers.read().unwrap_or_else(PoisonError::into_inner);
        let tools: Vec<Arc<McpToolDef>> = servers.iter().flat_map(|s| s.listed()).collect();
        *self.tools.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(tools);
        self.version.fetch_add(1, Ordering::AcqRel);
    }
}

/// The MCP servers of one process. Servers connect in the background once [`Self::start`] ran
/// (start-up never waits for them); a stdio server's process is shared by every agent of the
/// process.
pub struct McpClient {
    snapshot: Arc<Snapshot>,
    /// Server name → server, in name order.
    servers: BTreeMap<String, Arc<Server>>,
    supervisors: Mutex<Vec<JoinHandle<()>>>,
}

impl McpClient {
    /// A client of `servers`; `expected` lists, per server, the tools agent types name on it
    /// (by their own name), to report those a server does not list.
    pub fn new(
        servers: Vec<McpServerConfig>,
        expected: &BTreeMap<String, Vec<String>>,
    ) -> Arc<Self> {
        // HTTPS servers need a process-wide rustls crypto provider: ring, as the rest of
        // agentd uses (an error only says one is installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let snapshot = Arc::new(Snapshot::default());
        let servers: BTreeMap<String, Arc<Server>> = servers
            .into_iter()
            .map(|config| {
                let name = config.name.clone();
                let expected = expected.get(&name).cloned().unwrap_or_default();
                let changed: Arc<dyn ToolsChanged> = snapshot.clone();
                (name, Server::new(config, expected, changed))
            })
            .collect();
        *snapshot
            .servers
            .write()
            .unwrap_or_else(PoisonError::into_inner) = servers.values().cloned().collect();
        Arc::new(McpClient {
            snapshot,
            servers,
            supervisors: Mutex::default(),
        })
    }

    /// Starts connecting every server, in the background of the current tokio runtime.
    pub fn start(&self) {
        let mut supervisors = self
            .supervisors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !supervisors.is_empty() {
            return;
        }
        for server in self.servers.values() {
            supervisors.push(tokio::spawn(Arc::clone(server).supervise()));
        }
    }

    /// Stops every server: connections close, stdio processes are killed.
    pub fn stop(&self) {
        let mut supervisors = self
            .supervisors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for task in supervisors.drain(..) {
            task.abort();
        }
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        self.stop();
    }
}

#[async_trait]
impl McpTools for McpClient {
    fn version(&self) -> u64 {
        self.snapshot.version.load(Ordering::Acquire)
    }

    fn servers(&self) -> Vec<String> {
        self.servers.keys().cloned().collect()
    }

    fn tools(&self) -> Arc<Vec<Arc<McpToolDef>>> {
        self.snapshot
            .tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn status(&self) -> Vec<McpServerStatus> {
        self.servers.values().map(|s| s.status()).collect()
    }

    async fn call(
        &self,
        tool: &McpToolDef,
        arguments: Value,
    ) -> Result<McpCallResult, AgentdError> {
        let Some(server) = self.servers.get(&tool.server) else {
            return Err(AgentdError::new(
                ErrorCode::UnknownTool,
                format!("no MCP server named `{}`", tool.server),
            ));
        };
        server.call(tool, arguments).await
    }
}
