//! A remote A2A 1.0 agent as a model backend (`backend = "a2a"`, docs/a2a.md "Remote agents"):
//! an agent whose provider is one has its turns answered by that remote agent. Each turn's new
//! input goes to the remote as one message (JSON-RPC, or HTTP+JSON when the card offers only
//! that) in the remote context the agent's
//! record keeps ([`Session`]), streamed (`SendStreamingMessage`, its artifact chunks reported
//! as text) when the remote's Agent Card says it streams, whole (`SendMessage`) otherwise.
//!
//! Invariants:
//! - the message id sent is derived from the turn's input entry id: a resend of the same input
//!   (a retry, a re-run after a crash) is the same message;
//! - a remote `TASK_STATE_INPUT_REQUIRED` is answered as `[USER_QUESTION]…[/USER_QUESTION]`, so
//!   the agent is `waiting_question` with the remote's question, and the next input (the answer)
//!   goes to that same remote task;
//! - a call dropped or cancelled while its remote task runs sends `CancelTask` for it, as does a
//!   cancel or terminate of an agent whose remote task waits for input;
//! - the first call for an agent in this process looks for a remote task already carrying its
//!   message (`ListTasks`) before sending: a process that died after sending follows that task
//!   (`SubscribeToTask` when the remote streams, else — or when that fails — `GetTask` until
//!   it settles) instead of asking twice;
//! - every request carries the W3C `traceparent` of the call that makes it (docs/telemetry.md):
//!   a remote that traces joins the caller's trace.
//!
//! | module | what it holds |
//! |---|---|
//! | `rpc` | calls over the card's binding (JSON-RPC or HTTP+JSON), the Agent Card, the cancel a dropped call owes |
//! | `seen` | a remote task as a call follows it: state, answer, usage, parts as text |
//! | `input` | what a turn sends, the response that keeps the conversation |

mod input;
mod rpc;
mod seen;

/// The remote conversation kept on the agent's record (a proto type: `inspect` reads it).
pub use agentd_proto::RemoteA2aSession as Session;
pub use seen::USAGE_KEY;

use crate::http::HttpSettings;
use agentd_ports::{
    ModelCapabilities, ModelClient, ModelError, ModelRequest, ModelResponse, Purpose,
};
use agentd_proto::Control;
use async_trait::async_trait;
use input::{answer, new_input};
use rpc::{CancelOnDrop, Remote, Rpc, VERSION};
use seen::Seen;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a task still running is read again when it cannot be followed by a stream.
const POLL: Duration = Duration::from_millis(250);

/// The A2A backend: one remote agent, found through its Agent Card.
pub struct A2aModel {
    rpc: Arc<Rpc>,
    card_url: String,
    card: tokio::sync::OnceCell<Remote>,
    /// Agents this process has called: the first call of each looks for its message at the
    /// remote first (it may have been sent before a restart).
    called: Mutex<HashSet<String>>,
    /// The remote task each agent's last answer left waiting for input (a cancel or terminate
    /// of the agent cancels it), with the remote it runs at.
    waiting: Mutex<BTreeMap<String, (Remote, String)>>,
}

impl A2aModel {
    /// A backend for the agent whose card is at `card_url`, sending `headers` with every
    /// request; `http`'s timeouts and retries apply (its `base_url` is not used). Fails only if
    /// its HTTP client cannot be set up (TLS).
    pub fn new(
        card_url: String,
        headers: Vec<(String, String)>,
        http: HttpSettings,
    ) -> Result<Self, ModelError> {
        let mut all = vec![("A2A-Version".to_string(), VERSION.to_string())];
        all.extend(headers);
        Ok(A2aModel {
            rpc: Arc::new(Rpc {
                http: crate::http::HttpClient::new(HttpSettings {
                    base_url: String::new(),
                    ..http
                })?,
                headers: all,
            }),
            card_url,
            card: tokio::sync::OnceCell::new(),
            called: Mutex::new(HashSet::new()),
            waiting: Mutex::new(BTreeMap::new()),
        })
    }

    /// The remote's card, read once (a failure is tried again on the next call).
    async fn remote(&self) -> Result<&Remote, ModelError> {
        self.card
            .get_or_try_init(|| self.rpc.card(&self.card_url))
            .await
    }

    /// Sends `message` and follows its task until it settles (whole or streamed).
    async fn send(
        &self,
        remote: &Remote,
        message: Value,
        req: &ModelRequest,
        guard: &mut CancelOnDrop,
    ) -> Result<Seen, ModelError> {
        let params = json!({"message": message});
        let mut seen = Seen::default();
        if !remote.streams {
            let result = self
                .rpc
                .call(remote, "SendMessage", params, &req.cancel)
                .await?;
            seen.take(&result, None);
            guard.task_id.clone_from(&seen.task_id);
            return Ok(seen);
        }
        let observer = req.observer.as_deref();
        self.rpc
            .stream(
                remote,
                "SendStreamingMessage",
                params,
                &req.cancel,
                |result| {
                    seen.take(result, observer);
                    if guard.task_id.is_none() {
                        guard.task_id.clone_from(&seen.task_id);
                    }
                    seen.settled()
                },
            )
            .await?;
        Ok(seen)
    }

    /// A task of this agent's context (any context when none is known yet) that carries
    /// `message_id`: the message reached the remote before (a process that died after sending
    /// it), so its task is followed instead of sending again.
    async fn already_sent(
        &self,
        remote: &Remote,
        session: Option<&Session>,
        message_id: &str,
        req: &ModelRequest,
    ) -> Result<Option<Value>, ModelError> {
        let mut params = json!({"historyLength": 100, "includeArtifacts": true});
        if let Some(s) = session {
            params["contextId"] = json!(s.context_id);
        }
        let listed = self
            .rpc
            .call(remote, "ListTasks", params, &req.cancel)
            .await?;
        let found = listed
            .get("tasks")
            .and_then(Value::as_array)
            .and_then(|tasks| {
                tasks.iter().find(|t| {
                    t.get("history").and_then(Value::as_array).is_some_and(|h| {
                        h.iter()
                            .any(|m| m.get("messageId").and_then(Value::as_str) == Some(message_id))
                    })
                })
            })
            .cloned();
        Ok(found)
    }

    /// Follows a task found again (`task`, as listed) until it settles: through
    /// `SubscribeToTask` when the remote streams (the stream starts with the task's snapshot
    /// and goes on with its updates), else — or when the subscription fails or ends early —
    /// by reading it (`GetTask`).
    async fn follow(
        &self,
        remote: &Remote,
        task: &Value,
        req: &ModelRequest,
        guard: &mut CancelOnDrop,
    ) -> Result<Seen, ModelError> {
        let mut seen = Seen::default();
        seen.take_task(task);
        guard.task_id.clone_from(&seen.task_id);
        if let (false, true, Some(id)) = (seen.settled(), remote.streams, seen.task_id.clone()) {
            let observer = req.observer.as_deref();
            let subscribed = self
                .rpc
                .stream(
                    remote,
                    "SubscribeToTask",
                    json!({"id": id}),
                    &req.cancel,
                    |result| {
                        seen.take(result, observer);
                        seen.settled()
                    },
                )
                .await;
            match subscribed {
                Ok(()) => {}
                Err(ModelError::Cancelled) => return Err(ModelError::Cancelled),
                // A task that settled meanwhile is refused a subscription: read it instead.
                Err(e) => {
                    tracing::info!(task = id, error = %e, "SubscribeToTask failed; reading the remote task instead");
                }
            }
        }
        self.settle(remote, seen, req).await
    }

    /// Reads `seen`'s task (`GetTask`) until it settles: a recovered task, or one whose
    /// stream ended before it did.
    async fn settle(
        &self,
        remote: &Remote,
        mut seen: Seen,
        req: &ModelRequest,
    ) -> Result<Seen, ModelError> {
        while !seen.settled() && seen.task_id.is_some() {
            tokio::select! {
                biased;
                () = req.cancel.cancelled() => return Err(ModelError::Cancelled),
                () = tokio::time::sleep(POLL) => {}
            }
            let id = seen.task_id.clone().unwrap_or_default();
            let task = self
                .rpc
                .call(remote, "GetTask", json!({"id": id}), &req.cancel)
                .await?;
            seen.take_task(&task);
        }
        Ok(seen)
    }

    /// The task this agent's message already started at the remote, if this is the agent's
    /// first call in this process and the remote lists one.
    async fn earlier_send(
        &self,
        remote: &Remote,
        session: Option<&Session>,
        message_id: &str,
        req: &ModelRequest,
    ) -> Result<Option<Value>, ModelError> {
        if !lock(&self.called).insert(req.agent_id.to_string()) {
            return Ok(None);
        }
        // A remote that cannot list its tasks is sent the message (it may then get it twice
        // after a crash: docs/a2a.md).
        match self.already_sent(remote, session, message_id, req).await {
            Ok(found) => Ok(found),
            Err(ModelError::Cancelled) => Err(ModelError::Cancelled),
            Err(e) => {
                tracing::warn!(agent_id = %req.agent_id, error = %e, "could not look for an earlier send at the remote A2A agent");
                Ok(None)
            }
        }
    }

    async fn turn(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let session = Session::parse(req.cli_session_id.as_deref());
        if req.purpose == Purpose::Compact {
            // The remote keeps its own context; agentd's copy is only shortened.
            return Ok(answer(
                "(earlier turns were answered by a remote A2A agent, which keeps them)".into(),
                session,
                None,
            ));
        }
        let (text, input_id) = new_input(&req.thread);
        let message_id = format!("agentd-{input_id}");
        let remote = self.remote().await?.clone();
        let mut guard = CancelOnDrop {
            rpc: self.rpc.clone(),
            remote: remote.clone(),
            task_id: None,
            armed: true,
        };
        let earlier = self
            .earlier_send(&remote, session.as_ref(), &message_id, req)
            .await?;
        let seen = match earlier {
            Some(task) => {
                tracing::info!(agent_id = %req.agent_id, message_id, "found the message at the remote A2A agent; following its task");
                self.follow(&remote, &task, req, &mut guard).await?
            }
            None => {
                let mut message = json!({
                    "messageId": message_id,
                    "role": "ROLE_USER",
                    "parts": [{"text": text}],
                });
                if let Some(s) = &session {
                    message["contextId"] = json!(s.context_id);
                    if let Some(t) = &s.task_id {
                        message["taskId"] = json!(t);
                    }
                }
                let seen = self.send(&remote, message, req, &mut guard).await?;
                self.settle(&remote, seen, req).await?
            }
        };
        guard.armed = !seen.settled();
        self.settled(req, &remote, seen, session)
    }

    /// The turn's response to a task that settled (or its failure).
    fn settled(
        &self,
        req: &ModelRequest,
        remote: &Remote,
        seen: Seen,
        session: Option<Session>,
    ) -> Result<ModelResponse, ModelError> {
        let context_id = seen
            .context_id
            .clone()
            .or_else(|| session.map(|s| s.context_id))
            .unwrap_or_default();
        let mut next = Session {
            context_id,
            task_id: None,
        };
        lock(&self.waiting).remove(&*req.agent_id);
        match seen.state.as_str() {
            _ if seen.message.is_some() => Ok(answer(seen.answer_text(), Some(next), seen.usage)),
            "TASK_STATE_COMPLETED" => Ok(answer(seen.answer_text(), Some(next), seen.usage)),
            "TASK_STATE_INPUT_REQUIRED" => {
                next.task_id.clone_from(&seen.task_id);
                if let Some(t) = &seen.task_id {
                    lock(&self.waiting)
                        .insert(req.agent_id.to_string(), (remote.clone(), t.clone()));
                }
                let question = match seen.status_text.trim() {
                    "" => "The remote agent asks for more input.".to_string(),
                    q => q.to_string(),
                };
                Ok(answer(
                    format!("[USER_QUESTION]{question}[/USER_QUESTION]"),
                    Some(next),
                    seen.usage,
                ))
            }
            "" => Err(ModelError::Failed(
                "the remote A2A agent's answer ended before its task settled".into(),
            )),
            state => Err(ModelError::Failed(format!(
                "the remote A2A agent's task {} ended {state}: {}",
                seen.task_id.as_deref().unwrap_or("?"),
                seen.answer_text()
            ))),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[async_trait]
impl ModelClient for A2aModel {
    fn backend(&self) -> &'static str {
        "a2a"
    }

    /// A remote agent answers for itself: its limits are its own business, and its text
    /// streams in when its card says it streams.
    fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities {
            streams: true,
            ..ModelCapabilities::default()
        }
    }

    async fn complete(&self, req: ModelRequest) -> Result<ModelResponse, ModelError> {
        self.turn(&req).await
    }

    fn control(&self, agent_id: &str, control: Control) {
        if !matches!(control, Control::Cancel | Control::Terminate) {
            return;
        }
        let Some((remote, task)) = lock(&self.waiting).remove(agent_id) else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let rpc = self.rpc.clone();
        rt.spawn(async move { rpc.cancel_task(&remote, &task).await });
    }

    fn conversation_replaced(&self, agent_id: &str) {
        lock(&self.waiting).remove(agent_id);
    }
}
