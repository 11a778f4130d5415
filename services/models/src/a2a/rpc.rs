//! JSON-RPC calls to a remote A2A agent, its Agent Card, and the cancel a dropped call owes.

use crate::http::{HttpClient, event_json};
use agentd_ports::ModelError;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The protocol version agentd speaks to remotes (sent as `A2A-Version`).
pub(super) const VERSION: &str = "1.0";

/// The binding agentd speaks to a remote, as its card offers them (JSON-RPC preferred).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Binding {
    /// JSON-RPC 2.0: every method a `POST` to the interface's URL.
    JsonRpc,
    /// HTTP+JSON (REST): `POST /message:send`, `GET /tasks/{id}`, … under the interface's URL.
    HttpJson,
}

/// What the remote's card says.
#[derive(Debug, Clone)]
pub(super) struct Remote {
    /// The chosen interface's URL.
    pub(super) url: String,
    /// The chosen interface's binding.
    pub(super) binding: Binding,
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
    /// The headers of one request: those sent with every request, and the W3C `traceparent`
    /// of the work making it (the turn's `chat` span with telemetry on, else the turn), written
    /// into `traceparent`, so the remote agent's work joins agentd's trace.
    fn headers<'a>(&'a self, traceparent: &'a mut [u8; 55]) -> Vec<(&'a str, &'a str)> {
        let mut all: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if let Some(trace) = agentd_observe::telemetry::current() {
            all.push(("traceparent", trace.write(traceparent)));
        }
        all
    }

    /// Reads the Agent Card at `card_url`: its interface of A2A 1.x (`JSONRPC`, else
    /// `HTTP+JSON`) and whether it streams.
    pub(super) async fn card(&self, card_url: &str) -> Result<Remote, ModelError> {
        let mut traceparent = [0; 55];
        let card = self
            .http
            .get_json(card_url, &self.headers(&mut traceparent))
            .await?;
        let interfaces = card
            .get("supportedInterfaces")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let find = |binding: &str| {
            interfaces.iter().find_map(|i| {
                let version_ok = i
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .is_none_or(|v| v == VERSION || v.starts_with("1."));
                (i.get("protocolBinding").and_then(Value::as_str) == Some(binding) && version_ok)
                    .then(|| i.get("url").and_then(Value::as_str))
                    .flatten()
                    .map(str::to_string)
            })
        };
        let (url, binding) = find("JSONRPC")
            .map(|u| (u, Binding::JsonRpc))
            .or_else(|| find("HTTP+JSON").map(|u| (u, Binding::HttpJson)))
            .ok_or_else(|| {
                ModelError::Failed(format!(
                    "the Agent Card at {card_url} has no JSONRPC or HTTP+JSON interface of A2A 1.0"
                ))
            })?;
        let streams = card
            .pointer("/capabilities/streaming")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Ok(Remote {
            url,
            binding,
            streams,
        })
    }

    /// One call answered whole (`SendMessage`, `GetTask`, `ListTasks`, `CancelTask`, with
    /// `params` as JSON-RPC names them): its result, or the remote's error as a failure.
    pub(super) async fn call(
        &self,
        remote: &Remote,
        method: &str,
        params: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, ModelError> {
        let mut traceparent = [0; 55];
        let headers = self.headers(&mut traceparent);
        if remote.binding == Binding::JsonRpc {
            let reply = self
                .http
                .post_json(&remote.url, &headers, &request(method, params), cancel)
                .await?;
            return rpc_result(reply, method);
        }
        let id = params.get("id").and_then(Value::as_str).unwrap_or_default();
        let reply = match method {
            "SendMessage" => {
                let url = rest_url(&remote.url, &["message:send"], &params)?;
                self.http.post_json(&url, &headers, &params, cancel).await?
            }
            "CancelTask" => {
                let url = rest_url(&remote.url, &["tasks", &format!("{id}:cancel")], &json!({}))?;
                self.http
                    .post_json(&url, &headers, &json!({}), cancel)
                    .await?
            }
            "GetTask" => {
                let url = rest_url(&remote.url, &["tasks", id], &json!({}))?;
                self.http.get_json(&url, &headers).await?
            }
            "ListTasks" => {
                let url = rest_url(&remote.url, &["tasks"], &params)?;
                self.http.get_json(&url, &headers).await?
            }
            other => {
                return Err(ModelError::Failed(format!(
                    "{other} is not a call agentd makes over HTTP+JSON"
                )));
            }
        };
        rest_result(reply, method)
    }

    /// One call answered as a stream (`SendStreamingMessage`, `SubscribeToTask`): each
    /// event's `StreamResponse` goes to `on_result` until it answers `true` or the stream ends.
    pub(super) async fn stream(
        &self,
        remote: &Remote,
        method: &str,
        params: Value,
        cancel: &CancellationToken,
        mut on_result: impl FnMut(&Value) -> bool,
    ) -> Result<(), ModelError> {
        let (url, body) = match (remote.binding, method) {
            (Binding::JsonRpc, _) => (remote.url.clone(), request(method, params)),
            (Binding::HttpJson, "SubscribeToTask") => {
                let id = params.get("id").and_then(Value::as_str).unwrap_or_default();
                let url = rest_url(
                    &remote.url,
                    &["tasks", &format!("{id}:subscribe")],
                    &json!({}),
                )?;
                (url, json!({}))
            }
            (Binding::HttpJson, _) => (
                rest_url(&remote.url, &["message:stream"], &json!({}))?,
                params,
            ),
        };
        let binding = remote.binding;
        let mut traceparent = [0; 55];
        self.http
            .post_events(
                &url,
                &self.headers(&mut traceparent),
                &body,
                cancel,
                |event| {
                    let reply = event_json(event)?;
                    let result = match binding {
                        Binding::JsonRpc => rpc_result(reply, method)?,
                        Binding::HttpJson => rest_result(reply, method)?,
                    };
                    Ok(on_result(&result))
                },
            )
            .await
    }

    /// `CancelTask` for `task`, whatever becomes of the call that started it (logged).
    pub(super) async fn cancel_task(&self, remote: &Remote, task: &str) {
        let never = CancellationToken::new();
        match self
            .call(remote, "CancelTask", json!({"id": task}), &never)
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

/// An HTTP+JSON answer: the object itself, or (in a stream) the `google.rpc.Status` under
/// `error` as a failure (an error status fails the call before: `HttpClient`).
fn rest_result(reply: Value, method: &str) -> Result<Value, ModelError> {
    match reply.get("error") {
        Some(e) => Err(ModelError::Failed(format!(
            "the remote A2A agent refused {method}: {}",
            e.get("message").and_then(Value::as_str).unwrap_or("")
        ))),
        None => Ok(reply),
    }
}

/// `base` with path `segments` appended (each percent-encoded) and, for `GET /tasks`, the
/// scalar `query` fields as query parameters.
fn rest_url(base: &str, segments: &[&str], query: &Value) -> Result<String, ModelError> {
    let mut url = reqwest::Url::parse(base.trim_end_matches('/'))
        .map_err(|e| ModelError::Failed(format!("the interface URL {base}: {e}")))?;
    url.path_segments_mut()
        .map_err(|()| ModelError::Failed(format!("the interface URL {base} takes no path")))?
        .pop_if_empty()
        .extend(segments);
    if segments == ["tasks"] {
        for (k, v) in query.as_object().into_iter().flatten() {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Bool(_) | Value::Number(_) => v.to_string(),
                _ => continue,
            };
            url.query_pairs_mut().append_pair(k, &v);
        }
    }
    Ok(url.to_string())
}

/// Sends `CancelTask` for the remote task of a call that did not finish, when dropped armed.
pub(super) struct CancelOnDrop {
    pub(super) rpc: Arc<Rpc>,
    pub(super) remote: Remote,
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
        let (rpc, remote) = (self.rpc.clone(), self.remote.clone());
        rt.spawn(async move { rpc.cancel_task(&remote, &task).await });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rest_urls_append_segments_and_list_filters() -> Result<(), ModelError> {
        assert_eq!(
            rest_url(
                "http://h:1/a2a/t/",
                &["message:send"],
                &json!({"message": {}})
            )?,
            "http://h:1/a2a/t/message:send"
        );
        assert_eq!(
            rest_url("http://h:1/", &["tasks", "c.i:cancel"], &json!({}))?,
            "http://h:1/tasks/c.i:cancel"
        );
        assert_eq!(
            rest_url(
                "http://h:1",
                &["tasks"],
                &json!({"contextId": "c d", "historyLength": 100, "includeArtifacts": true})
            )?,
            "http://h:1/tasks?contextId=c+d&historyLength=100&includeArtifacts=true"
        );
        Ok(())
    }
}
