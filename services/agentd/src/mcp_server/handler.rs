//! The MCP server's handler (rmcp's [`ServerHandler`]): the tools it lists and their calls.
//! A call's work runs on the actix arbiter the service started on (the actors' messages and
//! spawns need one), handed over and answered through a channel.

use super::McpServer;
use super::ask::{Asked, ask, cancel, list_threads, send, show, structured};
use super::error::McpServerError;
use super::tools::{
    ASK_PREFIX, CANCEL, GET_THREAD, LIST_THREADS, SEND_MESSAGE, ask_args, ask_tool, cancel_tool,
    get_thread_tool, list_args, list_threads_tool, send_message_tool, thread_args,
};
use agentd_actors::RunState;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use std::sync::Arc;

/// The handler of one request (rmcp makes one per request when it serves statelessly).
#[derive(Clone)]
pub struct Handler {
    /// What every request shares.
    pub server: Arc<McpServer>,
}

impl Handler {
    /// Refuses a message over `limits.max_message_bytes`, as every other door does.
    fn check_message(&self, message: &str) -> Result<(), McpServerError> {
        self.server
            .system
            .deps()
            .config
            .limits
            .input()
            .message("message", message)
            .map_err(|e| McpServerError::TooLarge(e.message))
    }

    /// The tools: `ask_<type>` per exposed type, in the order the settings list them, then
    /// `send_message`, `get_thread`, `cancel` and `list_threads`.
    fn tools(&self) -> Vec<Tool> {
        let types = &self.server.system.deps().config.types;
        self.server
            .exposed
            .iter()
            .map(|t| {
                let description = types.get(t).map(|ty| ty.description.clone());
                ask_tool(t, description.as_deref().unwrap_or(""))
            })
            .chain([
                send_message_tool(&self.server.exposed),
                get_thread_tool(&self.server.exposed),
                cancel_tool(&self.server.exposed),
                list_threads_tool(&self.server.exposed),
            ])
            .collect()
    }

    /// `f`'s future run on the service's arbiter (where the actors may be sent to), its
    /// output answered here.
    async fn on_arbiter<T, F, Fut>(&self, f: F) -> Result<T, McpServerError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<McpServer>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T, McpServerError>> + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let server = self.server.clone();
        let handed = self.server.arbiter.spawn_fn(move || {
            actix_rt::spawn(async move {
                let _ = tx.send(f(server).await);
            });
        });
        if !handed {
            return Err(McpServerError::Internal("agentd is stopping".into()));
        }
        rx.await
            .map_err(|_| McpServerError::Internal("the call was dropped".into()))?
    }

    /// A `list_threads` call.
    async fn list_call(
        &self,
        params: &CallToolRequestParams,
    ) -> Result<CallToolResult, McpServerError> {
        let only = list_args(params.arguments.as_ref())?;
        if let Some(t) = &only
            && !self.server.serves(t)
        {
            return Err(McpServerError::UnknownType(t.to_string()));
        }
        let threads = self
            .on_arbiter(move |server| async move {
                list_threads(&server.system, &server.exposed, only.as_deref()).await
            })
            .await?;
        let text = threads
            .iter()
            .map(|t| {
                format!(
                    "{}/{}: {} ({})",
                    t["type"].as_str().unwrap_or_default(),
                    t["thread"].as_str().unwrap_or_default(),
                    t["status"].as_str().unwrap_or_default(),
                    t["agent_id"].as_str().unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
        r.structured_content = Some(serde_json::json!({ "threads": threads }));
        Ok(r)
    }

    /// A `send_message` (`message`), `get_thread` or `cancel` call.
    async fn thread_call(
        &self,
        name: &str,
        params: &CallToolRequestParams,
        message: bool,
    ) -> Result<CallToolResult, McpServerError> {
        let args = thread_args(name, params.arguments.as_ref(), message)?;
        let is_cancel = name == CANCEL;
        if !self.server.serves(&args.agent_type) {
            return Err(McpServerError::UnknownType(args.agent_type));
        }
        if let Some(m) = &args.message {
            self.check_message(m)?;
        }
        let (text, structured) = self
            .on_arbiter(move |server| async move {
                match &args.message {
                    Some(m) => {
                        let sent = send(&server.system, &args.agent_type, &args.thread, m).await?;
                        Ok((
                            format!(
                                "sent: run {} of thread `{}`; get_thread shows the answer",
                                sent["run_id"].as_str().unwrap_or_default(),
                                args.thread
                            ),
                            sent,
                        ))
                    }
                    None if is_cancel => {
                        let done = cancel(&server.system, &args.agent_type, &args.thread).await?;
                        Ok((
                            format!(
                                "run {} of thread `{}`: {}",
                                done["run_id"].as_str().unwrap_or_default(),
                                args.thread,
                                done["status"].as_str().unwrap_or_default()
                            ),
                            done,
                        ))
                    }
                    None => show(&server.system, &args.agent_type, &args.thread).await,
                }
            })
            .await?;
        let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
        r.structured_content = Some(structured);
        Ok(r)
    }

    /// The call of tool `name` with `arguments`, up to its result.
    async fn call(&self, params: CallToolRequestParams) -> Result<CallToolResult, McpServerError> {
        let name = params.name.to_string();
        match name.as_str() {
            SEND_MESSAGE => return self.thread_call(&name, &params, true).await,
            GET_THREAD | CANCEL => return self.thread_call(&name, &params, false).await,
            LIST_THREADS => return self.list_call(&params).await,
            _ => {}
        }
        let agent_type = name
            .strip_prefix(ASK_PREFIX)
            .filter(|t| self.server.serves(t))
            .ok_or_else(|| McpServerError::UnknownTool(name.clone()))?
            .to_string();
        let args = ask_args(&name, params.arguments.as_ref())?;
        self.check_message(&args.message)?;
        let asked = self
            .on_arbiter(move |server| async move {
                ask(
                    &server.system,
                    &server.events,
                    &server.shutdown,
                    &agent_type,
                    &args,
                )
                .await
            })
            .await?;
        Ok(result(&asked))
    }
}

/// The result of a call that ran: the answer as text (or why there is none), and the
/// structured content; an error result unless it completed or asks for input.
fn result(asked: &Asked) -> CallToolResult {
    let o = &asked.outcome;
    let text = match (&o.answer, &o.status_text) {
        (Some(a), _) if o.state == RunState::Completed => a.clone(),
        (_, Some(why)) => why.clone(),
        (Some(a), None) => a.clone(),
        (None, None) => String::new(),
    };
    let content = vec![ContentBlock::text(text)];
    let mut r = match o.state {
        RunState::Completed | RunState::InputRequired => CallToolResult::success(content),
        _ => CallToolResult::error(content),
    };
    r.structured_content = Some(structured(asked));
    r
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agentd", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Each tool asks one agentd agent type and waits for its answer. Pass `thread` \
                 to continue a conversation.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match self.call(request).await {
            Ok(r) => Ok(r.into()),
            Err(e) => {
                tracing::debug!(code = e.code(), error = %e, "an MCP tool call refused");
                Err(e.into())
            }
        }
    }
}
