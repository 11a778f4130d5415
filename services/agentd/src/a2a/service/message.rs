//! A client's message, checked: its id, its context and task, and its parts as the text the
//! agent is given.

use super::params::params;
use crate::a2a::error::A2aError;
use serde::Deserialize;
use serde_json::Value;

/// A part of a message (unknown fields are ignored, as the specification asks).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    text: Option<String>,
    raw: Option<Value>,
    url: Option<Value>,
    data: Option<Value>,
    #[serde(alias = "media_type")]
    media_type: Option<String>,
}

/// A client's message.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Message {
    #[serde(alias = "message_id")]
    message_id: Option<String>,
    #[serde(alias = "context_id")]
    context_id: Option<String>,
    #[serde(alias = "task_id")]
    task_id: Option<String>,
    role: Option<Value>,
    parts: Option<Vec<Part>>,
}

/// What a message says to the agent: its text parts, and its data parts as JSON text. File
/// parts (raw bytes or a URL) are refused.
fn text_of(parts: &[Part]) -> Result<String, A2aError> {
    let mut pieces = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        if p.raw.is_some() || p.url.is_some() {
            let kind = p.media_type.as_deref().unwrap_or("a file");
            return Err(A2aError::ContentType(format!(
                "message.parts[{i}] is {kind} (raw bytes or a URL): this agent takes text and \
                 data parts only"
            )));
        }
        if let Some(t) = &p.text {
            pieces.push(t.clone());
        } else if let Some(d) = &p.data {
            pieces.push(d.to_string());
        } else {
            return Err(A2aError::InvalidParams(format!(
                "message.parts[{i}] has no content (text, data, raw or url)"
            )));
        }
    }
    Ok(pieces.join("\n"))
}

/// A checked message: its id, its text, the JSON kept in the task's history.
pub(super) struct Incoming {
    pub(super) message_id: String,
    pub(super) context_id: Option<String>,
    pub(super) task_id: Option<String>,
    pub(super) text: String,
    pub(super) json: Value,
}

pub(super) fn incoming(v: Option<&Value>) -> Result<Incoming, A2aError> {
    let v = v.ok_or_else(|| A2aError::InvalidParams("`message` is required".into()))?;
    let m: Message = params(v)?;
    let message_id = m
        .message_id
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| A2aError::InvalidParams("`message.messageId` is required".into()))?;
    match m.role.as_ref().and_then(Value::as_str) {
        Some("ROLE_USER" | "user") => {}
        Some(other) => {
            return Err(A2aError::InvalidParams(format!(
                "`message.role` is `{other}`: a client sends ROLE_USER"
            )));
        }
        None => {
            return Err(A2aError::InvalidParams(
                "`message.role` is required (ROLE_USER)".into(),
            ));
        }
    }
    let parts = m.parts.unwrap_or_default();
    if parts.is_empty() {
        return Err(A2aError::InvalidParams(
            "`message.parts` needs at least one part".into(),
        ));
    }
    let text = text_of(&parts)?;
    if text.trim().is_empty() {
        return Err(A2aError::InvalidParams("the message has no text".into()));
    }
    Ok(Incoming {
        message_id,
        context_id: m.context_id.filter(|s| !s.is_empty()),
        task_id: m.task_id.filter(|s| !s.is_empty()),
        text,
        json: v.clone(),
    })
}
