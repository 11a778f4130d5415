//! A remote A2A 1.0 agent as a model backend (`backend = "a2a"`, docs/a2a.md "Remote agents"):
//! an agent whose provider is one has its turns answered by that remote agent. Each turn's new
//! input goes to the remote as one message (JSON-RPC binding) in the remote context the agent's
//! record keeps, streamed (`SendStreamingMessage`, its artifact chunks reported as text) when
//! the remote's Agent Card says it streams, whole (`SendMessage`) otherwise.
//!
//! The record keeps the remote conversation where it keeps an agent CLI's session
//! (`agent_cli.session_id`, handed back as [`ModelRequest::cli_session_id`]): a JSON
//! [`Session`] naming the remote context and, while the remote waits for input, its task. A
//! reset drops it, so the next message starts a new remote context.
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
//!   message (`ListTasks`, then `GetTask` until it settles) before sending: a process that died
//!   after sending finds the remote's answer instead of asking twice;
//! - every request carries the W3C `traceparent` of the call that makes it (docs/telemetry.md):
//!   a remote that traces joins the caller's trace.

use crate::http::{HttpClient, HttpSettings, event_json};
use agentd_actors::{
    AnswerObserver, CliRun, ModelClient, ModelError, ModelRequest, ModelResponse, Purpose,
};
use agentd_proto::conversation::heard_role;
use agentd_proto::{Control, Role, ThreadEntry};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The protocol version agentd speaks to remotes (sent as `A2A-Version`).
const VERSION: &str = "1.0";

/// How often a recovered task still running is read again.
const POLL: Duration = Duration::from_millis(250);

/// The remote conversation an agent's record keeps (as its `cli_session_id`, JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// The remote context (`contextId`); every message of the agent goes to it.
    pub context_id: String,
    /// The remote task waiting for input (`TASK_STATE_INPUT_REQUIRED`): the next message
    /// answers it. `None` when no task waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

impl Session {
    fn parse(s: Option<&str>) -> Option<Session> {
        serde_json::from_str(s?).ok()
    }
}

/// What the remote's card says.
#[derive(Debug, Clone)]
struct Remote {
    /// The JSON-RPC interface's URL.
    url: String,
    /// `capabilities.streaming`.
    streams: bool,
}

/// Where a remote task ended up, as far as a call follows it.
#[derive(Debug, Default)]
struct Seen {
    task_id: Option<String>,
    context_id: Option<String>,
    state: String,
    /// The status message's text (a question, an error).
    status_text: String,
    /// The artifacts' text, by artifact id, in order of arrival.
    artifacts: Vec<(String, String)>,
    /// A direct `Message` answer's text (no task).
    message: Option<String>,
}

impl Seen {
    fn settled(&self) -> bool {
        self.message.is_some()
            || matches!(
                self.state.as_str(),
                "TASK_STATE_COMPLETED"
                    | "TASK_STATE_FAILED"
                    | "TASK_STATE_CANCELED"
                    | "TASK_STATE_REJECTED"
                    | "TASK_STATE_INPUT_REQUIRED"
                    | "TASK_STATE_AUTH_REQUIRED"
            )
    }

    fn take_task(&mut self, task: &Value) {
        self.ids(task.get("id"), task.get("contextId"));
        if let Some(status) = task.get("status") {
            self.take_status(status);
        }
        if let Some(artifacts) = task.get("artifacts").and_then(Value::as_array) {
            self.artifacts.clear();
            for a in artifacts {
                self.take_artifact(a, false, None);
            }
        }
    }

    fn ids(&mut self, task: Option<&Value>, context: Option<&Value>) {
        if let Some(t) = task.and_then(Value::as_str) {
            self.task_id = Some(t.to_string());
        }
        if let Some(c) = context.and_then(Value::as_str) {
            self.context_id = Some(c.to_string());
        }
    }

    fn take_status(&mut self, status: &Value) {
        if let Some(s) = status.get("state").and_then(Value::as_str) {
            self.state = s.to_string();
        }
        self.status_text = status.get("message").map(text_of).unwrap_or_default();
    }

    /// Adds an artifact (or a chunk of one, `append`), telling `observer` its new text.
    fn take_artifact(
        &mut self,
        artifact: &Value,
        append: bool,
        observer: Option<&dyn AnswerObserver>,
    ) {
        let id = artifact
            .get("artifactId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let text = parts_text(artifact.get("parts"), "");
        if let Some(o) = observer {
            o.text(&text);
        }
        match self.artifacts.iter_mut().find(|(a, _)| *a == id) {
            Some((_, t)) if append => t.push_str(&text),
            Some((_, t)) => *t = text,
            None => self.artifacts.push((id, text)),
        }
    }

    /// One `StreamResponse` (or `SendMessageResponse`): `task`, `message`, `statusUpdate` or
    /// `artifactUpdate`.
    fn take(&mut self, result: &Value, observer: Option<&dyn AnswerObserver>) {
        if let Some(task) = result.get("task") {
            self.take_task(task);
        } else if let Some(m) = result.get("message") {
            self.ids(m.get("taskId"), m.get("contextId"));
            let text = text_of(m);
            if let Some(o) = observer {
                o.text(&text);
            }
            self.message = Some(text);
        } else if let Some(u) = result.get("statusUpdate") {
            self.ids(u.get("taskId"), u.get("contextId"));
            if let Some(status) = u.get("status") {
                self.take_status(status);
            }
        } else if let Some(u) = result.get("artifactUpdate") {
            self.ids(u.get("taskId"), u.get("contextId"));
            let append = u.get("append").and_then(Value::as_bool).unwrap_or(false);
            if let Some(a) = u.get("artifact") {
                self.take_artifact(a, append, observer);
            }
        }
    }

    fn answer_text(&self) -> String {
        if let Some(m) = &self.message {
            return m.clone();
        }
        let artifacts: Vec<&str> = self
            .artifacts
            .iter()
            .map(|(_, t)| t.as_str())
            .filter(|t| !t.is_empty())
            .collect();
        if artifacts.is_empty() {
            self.status_text.clone()
        } else {
            artifacts.join("\n\n")
        }
    }
}

/// A message's (or an artifact's) text parts.
fn text_of(message: &Value) -> String {
    parts_text(message.get("parts"), "\n")
}

fn parts_text(parts: Option<&Value>, sep: &str) -> String {
    parts
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(sep)
        })
        .unwrap_or_default()
}

/// Sends `CancelTask` for the remote task of a call that did not finish, when dropped armed.
struct CancelOnDrop {
    model: Arc<Inner>,
    url: String,
    task_id: Option<String>,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Some(task) = self.task_id.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (model, url) = (self.model.clone(), std::mem::take(&mut self.url));
        rt.spawn(async move { model.cancel_task(&url, &task).await });
    }
}

/// What the backend shares with its cancel guards and spawned cancels.
struct Inner {
    http: HttpClient,
    /// Header name and value pairs sent with every request (`A2A-Version` first).
    headers: Vec<(String, String)>,
}

impl Inner {
    /// The headers of one request: those sent with every request, and the W3C `traceparent`
    /// of the work making it (the turn's `chat` span with telemetry on, else the turn), written
    /// into `traceparent`, so the remote agent's work joins agentd's trace.
    fn headers<'a>(&'a self, traceparent: &'a mut [u8; 55]) -> Vec<(&'a str, &'a str)> {
        let mut all: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if let Some(trace) = agentd_actors::telemetry::current() {
            all.push(("traceparent", trace.write(traceparent)));
        }
        all
    }

    /// One JSON-RPC call answered whole: its `result`, or its `error` as a failure.
    async fn rpc(
        &self,
        url: &str,
        method: &str,
        params: Value,
        cancel: &agentd_actors::CancellationToken,
    ) -> Result<Value, ModelError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut traceparent = [0; 55];
        let reply = self
            .http
            .post_json(url, &self.headers(&mut traceparent), &body, cancel)
            .await?;
        rpc_result(reply, method)
    }

    async fn cancel_task(&self, url: &str, task: &str) {
        let never = agentd_actors::CancellationToken::new();
        match self
            .rpc(url, "CancelTask", json!({"id": task}), &never)
            .await
        {
            Ok(_) => tracing::info!(task, "cancelled the remote A2A task"),
            Err(e) => tracing::warn!(task, error = %e, "CancelTask of a remote A2A task failed"),
        }
    }
}

fn rpc_result(reply: Value, method: &str) -> Result<Value, ModelError> {
    if let Some(e) = reply.get("error") {
        return Err(ModelError::Failed(format!(
            "the remote A2A agent refused {method}: {} ({})",
            e.get("message").and_then(Value::as_str).unwrap_or(""),
            e.get("code").map(Value::to_string).unwrap_or_default()
        )));
    }
    reply
        .get("result")
        .cloned()
        .ok_or_else(|| ModelError::Failed(format!("{method}: a JSON-RPC reply without result")))
}

/// The A2A backend: one remote agent, found through its Agent Card.
pub struct A2aModel {
    inner: Arc<Inner>,
    card_url: String,
    card: tokio::sync::OnceCell<Remote>,
    /// Agents this process has called: the first call of each looks for its message at the
    /// remote first (it may have been sent before a restart).
    called: Mutex<HashSet<String>>,
    /// The remote task each agent's last answer left waiting for input (a cancel or terminate
    /// of the agent cancels it), with the interface URL it runs at.
    waiting: Mutex<BTreeMap<String, (String, String)>>,
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
            inner: Arc::new(Inner {
                http: HttpClient::new(HttpSettings {
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
            .get_or_try_init(|| async {
                let mut traceparent = [0; 55];
                let card = self
                    .inner
                    .http
                    .get_json(&self.card_url, &self.inner.headers(&mut traceparent))
                    .await?;
                let url = card
                    .get("supportedInterfaces")
                    .and_then(Value::as_array)
                    .and_then(|is| {
                        is.iter().find(|i| {
                            i.get("protocolBinding").and_then(Value::as_str) == Some("JSONRPC")
                                && i.get("protocolVersion")
                                    .and_then(Value::as_str)
                                    .is_none_or(|v| v == VERSION || v.starts_with("1."))
                        })
                    })
                    .and_then(|i| i.get("url").and_then(Value::as_str))
                    .ok_or_else(|| {
                        ModelError::Failed(format!(
                            "the Agent Card at {} has no JSONRPC interface of A2A 1.0",
                            self.card_url
                        ))
                    })?
                    .to_string();
                let streams = card
                    .pointer("/capabilities/streaming")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                Ok(Remote { url, streams })
            })
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
                .inner
                .rpc(&remote.url, "SendMessage", params, &req.cancel)
                .await?;
            seen.take(&result, None);
            guard.task_id.clone_from(&seen.task_id);
            return Ok(seen);
        }
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params
        });
        let observer = req.observer.as_deref();
        let mut traceparent = [0; 55];
        self.inner
            .http
            .post_events(
                &remote.url,
                &self.inner.headers(&mut traceparent),
                &body,
                &req.cancel,
                |event| {
                    let reply = event_json(event)?;
                    let result = rpc_result(reply, "SendStreamingMessage")?;
                    seen.take(&result, observer);
                    if guard.task_id.is_none() {
                        guard.task_id.clone_from(&seen.task_id);
                    }
                    Ok(seen.settled())
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
            .inner
            .rpc(&remote.url, "ListTasks", params, &req.cancel)
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

    /// Reads `task` (`GetTask`) until it settles.
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
                .inner
                .rpc(&remote.url, "GetTask", json!({"id": id}), &req.cancel)
                .await?;
            seen.take_task(&task);
        }
        Ok(seen)
    }

    async fn turn(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let session = Session::parse(req.cli_session_id.as_deref());
        if req.purpose == Purpose::Compact {
            // The remote keeps its own context; agentd's copy is only shortened.
            return Ok(answer(
                "(earlier turns were answered by a remote A2A agent, which keeps them)".into(),
                session,
            ));
        }
        let (text, input_id) = new_input(&req.thread);
        let message_id = format!("agentd-{input_id}");
        let remote = self.remote().await?.clone();
        let mut guard = CancelOnDrop {
            model: self.inner.clone(),
            url: remote.url.clone(),
            task_id: None,
            armed: true,
        };
        let first_here = lock(&self.called).insert(req.agent_id.to_string());
        let earlier = if first_here {
            // A remote that cannot list its tasks is sent the message (it may then get it
            // twice after a crash: docs/a2a.md).
            match self
                .already_sent(&remote, session.as_ref(), &message_id, req)
                .await
            {
                Ok(found) => found,
                Err(ModelError::Cancelled) => return Err(ModelError::Cancelled),
                Err(e) => {
                    tracing::warn!(agent_id = %req.agent_id, error = %e, "could not look for an earlier send at the remote A2A agent");
                    None
                }
            }
        } else {
            None
        };
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
        let context_id = seen
            .context_id
            .clone()
            .or_else(|| session.as_ref().map(|s| s.context_id.clone()))
            .unwrap_or_default();
        let mut next = Session {
            context_id,
            task_id: None,
        };
        lock(&self.waiting).remove(&*req.agent_id);
        match seen.state.as_str() {
            _ if seen.message.is_some() => Ok(answer(seen.answer_text(), Some(next))),
            "TASK_STATE_COMPLETED" => Ok(answer(seen.answer_text(), Some(next))),
            "TASK_STATE_INPUT_REQUIRED" => {
                next.task_id.clone_from(&seen.task_id);
                if let Some(t) = &seen.task_id {
                    lock(&self.waiting)
                        .insert(req.agent_id.to_string(), (remote.url.clone(), t.clone()));
                }
                let question = match seen.status_text.trim() {
                    "" => "The remote agent asks for more input.".to_string(),
                    q => q.to_string(),
                };
                Ok(answer(
                    format!("[USER_QUESTION]{question}[/USER_QUESTION]"),
                    Some(next),
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

/// The response that answers `text`, keeping `session` on the agent's record.
fn answer(text: String, session: Option<Session>) -> ModelResponse {
    ModelResponse {
        text,
        cli_run: Some(Box::new(CliRun {
            steps: Vec::new(),
            session_id: session.and_then(|s| serde_json::to_string(&s).ok()),
            reported_cost_usd: None,
        })),
        ..Default::default()
    }
}

/// The input the remote has not heard (the entries after the last answer), as one text, and
/// the id of its last entry (the message id derives from it).
fn new_input(thread: &[Arc<ThreadEntry>]) -> (String, uuid::Uuid) {
    let start = thread
        .iter()
        .rposition(|e| matches!(heard_role(e), Role::Assistant | Role::Tool))
        .map_or(0, |i| i + 1);
    let new = &thread[start.min(thread.len())..];
    let text = new
        .iter()
        .filter(|e| heard_role(e) == Role::User)
        .map(|e| match &e.from_agent {
            Some(from) => format!("[from agent {from}] {}", e.text),
            None => e.text.clone(),
        })
        .filter(|t| !t.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    let id = new
        .last()
        .or_else(|| thread.last())
        .map(|e| e.id)
        .unwrap_or_default();
    (text, id)
}

#[async_trait]
impl ModelClient for A2aModel {
    fn backend(&self) -> &'static str {
        "a2a"
    }

    async fn complete(&self, req: ModelRequest) -> Result<ModelResponse, ModelError> {
        self.turn(&req).await
    }

    fn control(&self, agent_id: &str, control: Control) {
        if !matches!(control, Control::Cancel | Control::Terminate) {
            return;
        }
        let Some((url, task)) = lock(&self.waiting).remove(agent_id) else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let inner = self.inner.clone();
        rt.spawn(async move { inner.cancel_task(&url, &task).await });
    }

    fn conversation_replaced(&self, agent_id: &str) {
        lock(&self.waiting).remove(agent_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_chunks_and_statuses_make_the_answer() {
        let mut seen = Seen::default();
        seen.take(
            &json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}}),
            None,
        );
        assert!(!seen.settled());
        for (i, chunk) in ["one", " two"].iter().enumerate() {
            seen.take(
                &json!({"artifactUpdate": {"taskId": "t", "append": i > 0,
                    "artifact": {"artifactId": "a", "parts": [{"text": chunk}]}}}),
                None,
            );
        }
        seen.take(
            &json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"}}}),
            None,
        );
        assert!(seen.settled());
        assert_eq!(seen.answer_text(), "one two");
        assert_eq!(seen.task_id.as_deref(), Some("t"));
        assert_eq!(seen.context_id.as_deref(), Some("c"));
    }

    #[test]
    fn a_session_survives_its_json_and_a_garbled_one_is_none() {
        let s = Session {
            context_id: "c".into(),
            task_id: Some("t".into()),
        };
        let text = serde_json::to_string(&s).unwrap_or_default();
        assert_eq!(Session::parse(Some(&text)), Some(s));
        assert_eq!(Session::parse(Some("not json")), None);
        assert_eq!(Session::parse(None), None);
    }
}
