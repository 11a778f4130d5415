//! agentd as an MCP server: each agent type named in `[mcp_server] expose` is a tool
//! `ask_<type>` at `/mcp` (streamable HTTP, served by rmcp, on the API's port behind its
//! token). A call asks the agent and waits for its answer; `thread` names a persistent
//! conversation. Each call is a run of door `mcp` (the store's `Runs` concern), its state read
//! through [`crate::runs`] as A2A's tasks are. docs/mcp-server.md has the details and what is
//! not built yet.
//!
//! | module | what it holds |
//! |---|---|
//! | [`error`] | the errors, with their stable codes and the JSON-RPC errors they are answered as |
//! | [`tools`] | the tools listed and their arguments read |
//! | [`thread`] | a thread alias mapped to its root through the store's outside ids |
//! | [`ask`] | one call: the run, the item in the inbox, the wait for what became of it |
//! | [`handler`] | rmcp's `ServerHandler`: list and call |
//! | [`bridge`] | the route: actix-web's request handed to rmcp's tower service and back |

pub mod ask;
pub mod bridge;
pub mod error;
pub mod handler;
pub mod thread;
pub mod tools;

pub use error::McpServerError;

use crate::settings::Settings;
use crate::sse::{EventFeed, Shutdown};
use crate::start_error::StartError;
use actix_web::web;
use agentd_actors::AgentSystem;
use std::sync::Arc;

/// The path the MCP server answers at.
pub const PATH: &str = "/mcp";

/// What every request of the MCP server shares.
pub struct McpServer {
    /// The actors.
    pub system: AgentSystem,
    /// The events (a call's wait follows its agent through them).
    pub events: EventFeed,
    /// The exposed agent types, in the order the settings list them.
    pub exposed: Vec<String>,
    /// Turns `true` when the service stops: waits end then.
    pub shutdown: Shutdown,
    /// The arbiter the service started on, where a call's work runs.
    pub arbiter: actix_rt::ArbiterHandle,
}

impl McpServer {
    /// Whether `agent_type` is served.
    pub fn serves(&self, agent_type: &str) -> bool {
        self.exposed.iter().any(|t| t == agent_type)
    }
}

/// The route's state when `[mcp_server] expose` names agent types (each must exist), made on
/// the arbiter the service runs on.
pub fn state(
    settings: &Settings,
    system: &AgentSystem,
    events: &EventFeed,
    shutdown: &Shutdown,
    token_required: bool,
) -> Result<Option<web::Data<bridge::McpHttp>>, StartError> {
    let exposed = settings.mcp_server.expose.clone();
    if exposed.is_empty() {
        return Ok(None);
    }
    for t in &exposed {
        if system.deps().config.types.get(t).is_none() {
            return Err(StartError::invalid(format!(
                "[mcp_server] expose names `{t}`, which is not an agent type"
            )));
        }
    }
    let allowed_hosts = match (&settings.mcp_server.allowed_hosts, token_required) {
        (hosts, _) if !hosts.is_empty() => hosts.clone(),
        // The token guards the endpoint: any host.
        (_, true) => Vec::new(),
        // Open on loopback: loopback names only (no DNS rebinding onto it).
        (_, false) => ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec(),
    };
    let handler = handler::Handler {
        server: Arc::new(McpServer {
            system: system.clone(),
            events: events.clone(),
            exposed,
            shutdown: shutdown.clone(),
            arbiter: actix_rt::Arbiter::current(),
        }),
    };
    Ok(Some(web::Data::new(bridge::service(
        handler,
        allowed_hosts,
        settings.server.max_body_bytes,
    ))))
}

/// Mounts `/mcp` (every method: rmcp answers those it does not serve).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route(PATH, web::route().to(bridge::handle));
}
