//! Parameters as the bindings hand them (JSON-RPC `params`, or HTTP+JSON's body and query
//! merged): unknown fields are ignored, as the specification asks.

use crate::a2a::error::A2aError;
use serde::Deserialize;
use serde_json::Value;

pub(super) fn params<T: for<'de> Deserialize<'de> + Default>(v: &Value) -> Result<T, A2aError> {
    if v.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(v.clone())
        .map_err(|e| A2aError::InvalidParams(format!("invalid parameters: {e}")))
}

/// The task id of a call whose only parameter is `id` (`CancelTask`, `SubscribeToTask`).
pub(super) fn task_id(p: &Value) -> Result<String, A2aError> {
    #[derive(Default, Deserialize)]
    struct P {
        id: Option<String>,
    }
    let p: P = params(p)?;
    required_id(p.id)
}

/// A call's `id`, which it must name.
pub(super) fn required_id(id: Option<String>) -> Result<String, A2aError> {
    id.ok_or_else(|| A2aError::InvalidParams("`id` is required".into()))
}

/// A `historyLength` (`None`: no limit; negative: refused).
pub(super) fn history_length(v: Option<i64>) -> Result<Option<usize>, A2aError> {
    match v {
        None => Ok(None),
        Some(n) if n < 0 => Err(A2aError::InvalidParams(format!(
            "historyLength is {n}: it must be 0 or more"
        ))),
        Some(n) => Ok(Some(n as usize)),
    }
}

/// A number that may come as a JSON number or (a query parameter) a string.
pub(super) fn number(v: &Option<Value>, name: &str) -> Result<Option<i64>, A2aError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| A2aError::InvalidParams(format!("`{name}` must be an integer"))),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| A2aError::InvalidParams(format!("`{name}` must be an integer"))),
        Some(_) => Err(A2aError::InvalidParams(format!(
            "`{name}` must be an integer"
        ))),
    }
}

pub(super) fn boolean(v: &Option<Value>, name: &str) -> Result<bool, A2aError> {
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" => Ok(true),
        Some(Value::String(s)) if s == "false" => Ok(false),
        Some(_) => Err(A2aError::InvalidParams(format!(
            "`{name}` must be true or false"
        ))),
    }
}
