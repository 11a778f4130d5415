//! JSON-RPC calls to a remote A2A agent, its Agent Card, and the cancel a dropped call owes.

use crate::http::{HttpClient, event_json};
use agentd_actors::{CancellationToken, ModelError};
use serde_json::{Value, json};
use std::sync::Arc;

/// The protocol version agentd speaks to remotes (sent as `A2A-Version`).
pub(super) const VERSION: &str = "1.0";

/// What the remote's card says.
#[derive(Debug, Clone)]
pub(super) struct Remote {
    /// The JSON-RPC interface's URL.
    pub(super) url: String,
    /// `capabilities.streaming`.
    pub(super) streams: bool,
}

/// The HTTP client and headers every call to one remote uses (shared with cancel guards and
/// spawned cancels).
pub(super) struct Rpc {
    pub(super) http: HttpClient,
    /// Header name and value pairs sent with every request (`A2A-Version` first).
    pub(super) headers: Vec<(String, String)>,
}

impl Rpc {
    fn headers(&self) -> Vec<(&str, &str)> {
        self.headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// Reads the Agent Card at `card_url`: its `JSONRPC` interface of A2A 1.x and whether it
    /// streams.
    pub(super) async fn card(&self, card_url: &str) -> Result<Remote, ModelError> {
        let card = self.http.get_json(card_url, &self.headers()).await?;
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
                    "the Agent Card at {card_url} has no JSONRPC interface of A2A 1.0"
                ))
            })?
            .to_string();
        let streams = card
            .pointer("/capabilities/streaming")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Ok(Remote { url, streams })
    }

    /// One JSON-RPC call answered whole: its `result`, or its `error` as a failure.
    pub(super) async fn call(
        &self,
        url: &str,
        method: &str,
        params: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, ModelError> {
        let reply = self
            .http
            .post_json(url, &self.headers(), &request(method, params), cancel)
            .await?;
        rpc_result(reply, method)
    }

    /// One JSON-RPC call answered as a stream (`SendStreamingMessage`, `SubscribeToTask`):
    /// each event's `result` goes to `on_result` until it answers `true` or the stream ends.
    pub(super) async fn stream(
        &self,
        url: &str,
        method: &str,
        params: Value,
        cancel: &CancellationToken,
        mut on_result: impl FnMut(&Value) -> bool,
    ) -> Result<(), ModelError> {
        self.http
            .post_events(
                url,
                &self.headers(),
                &request(method, params),
                cancel,
                |event| Ok(on_result(&rpc_result(event_json(event)?, method)?)),
            )
            .await
    }

    /// `CancelTask` for `task`, whatever becomes of the call that started it (logged).
    pub(super) async fn cancel_task(&self, url: &str, task: &str) {
        let never = CancellationToken::new();
        match self
            .call(url, "CancelTask", json!({"id": task}), &never)
            .await
        {
            Ok(_) => tracing::info!(task, "cancelled the remote A2A task"),
            Err(e) => tracing::warn!(task, error = %e, "CancelTask of a remote A2A task failed"),
        }
    }
}

fn request(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
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

/// Sends `CancelTask` for the remote task of a call that did not finish, when dropped armed.
pub(super) struct CancelOnDrop {
    pub(super) rpc: Arc<Rpc>,
    pub(super) url: String,
    pub(super) task_id: Option<String>,
    pub(super) armed: bool,
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
        let (rpc, url) = (self.rpc.clone(), std::mem::take(&mut self.url));
        rt.spawn(async move { rpc.cancel_task(&url, &task).await });
    }
}
