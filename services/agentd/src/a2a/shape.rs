//! The request messages of `a2a.proto` (1.0) as the JSON their ProtoJSON form takes, and a
//! JSON-RPC request's `params` checked against its method's message.
//!
//! The JSON-RPC binding checks a request as the SDK's server does, in this order: the body
//! is JSON (`-32700`), a JSON-RPC 2.0 request object (`-32600`), its method one of A2A's
//! (`-32601`), its params a ProtoJSON encoding of that method's request message (`-32602`:
//! a field of the wrong JSON type, an integer out of range, two fields of one `oneof`); only
//! then its `A2A-Version`, and then what the operation itself asks of the values (a missing
//! `messageId`, an unknown task, …). This module is the method table and that third and
//! fourth step. Unknown fields are ignored and `null` is a field's default, as ProtoJSON
//! says.

use super::error::A2aError;
use serde_json::{Map, Value};

/// The JSON type a field takes.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// `string`, and `bytes` (base64 in a string).
    Text,
    /// `int32` (a JSON number without a fraction, or a string holding one).
    Int32,
    /// `bool`.
    Bool,
    /// An enum: its value's name, or its number.
    Enum,
    /// `google.protobuf.Struct`: an object.
    Struct,
    /// `google.protobuf.Value`: any JSON.
    Any,
    /// `google.protobuf.Timestamp`: an RFC 3339 string.
    Timestamp,
    /// A message of these fields.
    Message(&'static [Field]),
}

/// A field of a request message.
#[derive(Debug, Clone, Copy)]
struct Field {
    /// The proto name (`message_id`), which ProtoJSON accepts as well as the JSON name.
    proto: &'static str,
    /// The JSON name (`messageId`).
    json: &'static str,
    kind: Kind,
    repeated: bool,
    /// The `oneof` it belongs to: at most one of its fields may be set.
    oneof: Option<&'static str>,
}

const fn field(proto: &'static str, json: &'static str, kind: Kind) -> Field {
    Field {
        proto,
        json,
        kind,
        repeated: false,
        oneof: None,
    }
}

impl Field {
    const fn repeated(self) -> Field {
        Field {
            repeated: true,
            ..self
        }
    }

    const fn of(self, oneof: &'static str) -> Field {
        Field {
            oneof: Some(oneof),
            ..self
        }
    }
}

const TENANT: Field = field("tenant", "tenant", Kind::Text);

const PART: &[Field] = &[
    field("text", "text", Kind::Text).of("content"),
    field("raw", "raw", Kind::Text).of("content"),
    field("url", "url", Kind::Text).of("content"),
    field("data", "data", Kind::Any).of("content"),
    field("metadata", "metadata", Kind::Struct),
    field("filename", "filename", Kind::Text),
    field("media_type", "mediaType", Kind::Text),
];

const MESSAGE: &[Field] = &[
    field("message_id", "messageId", Kind::Text),
    field("context_id", "contextId", Kind::Text),
    field("task_id", "taskId", Kind::Text),
    field("role", "role", Kind::Enum),
    field("parts", "parts", Kind::Message(PART)).repeated(),
    field("metadata", "metadata", Kind::Struct),
    field("extensions", "extensions", Kind::Text).repeated(),
    field("reference_task_ids", "referenceTaskIds", Kind::Text).repeated(),
];

const AUTHENTICATION_INFO: &[Field] = &[
    field("scheme", "scheme", Kind::Text),
    field("credentials", "credentials", Kind::Text),
];

const TASK_PUSH_NOTIFICATION_CONFIG: &[Field] = &[
    TENANT,
    field("id", "id", Kind::Text),
    field("task_id", "taskId", Kind::Text),
    field("url", "url", Kind::Text),
    field("token", "token", Kind::Text),
    field(
        "authentication",
        "authentication",
        Kind::Message(AUTHENTICATION_INFO),
    ),
];

const SEND_MESSAGE_CONFIGURATION: &[Field] = &[
    field("accepted_output_modes", "acceptedOutputModes", Kind::Text).repeated(),
    field(
        "task_push_notification_config",
        "taskPushNotificationConfig",
        Kind::Message(TASK_PUSH_NOTIFICATION_CONFIG),
    ),
    field("history_length", "historyLength", Kind::Int32),
    field("return_immediately", "returnImmediately", Kind::Bool),
];

const SEND_MESSAGE_REQUEST: &[Field] = &[
    TENANT,
    field("message", "message", Kind::Message(MESSAGE)),
    field(
        "configuration",
        "configuration",
        Kind::Message(SEND_MESSAGE_CONFIGURATION),
    ),
    field("metadata", "metadata", Kind::Struct),
];

const GET_TASK_REQUEST: &[Field] = &[
    TENANT,
    field("id", "id", Kind::Text),
    field("history_length", "historyLength", Kind::Int32),
];

const LIST_TASKS_REQUEST: &[Field] = &[
    TENANT,
    field("context_id", "contextId", Kind::Text),
    field("status", "status", Kind::Enum),
    field("page_size", "pageSize", Kind::Int32),
    field("page_token", "pageToken", Kind::Text),
    field("history_length", "historyLength", Kind::Int32),
    field(
        "status_timestamp_after",
        "statusTimestampAfter",
        Kind::Timestamp,
    ),
    field("include_artifacts", "includeArtifacts", Kind::Bool),
];

const CANCEL_TASK_REQUEST: &[Field] = &[
    TENANT,
    field("id", "id", Kind::Text),
    field("metadata", "metadata", Kind::Struct),
];

const SUBSCRIBE_TO_TASK_REQUEST: &[Field] = &[TENANT, field("id", "id", Kind::Text)];

/// `Get…` and `DeleteTaskPushNotificationConfigRequest`.
const TASK_PUSH_NOTIFICATION_CONFIG_REF: &[Field] = &[
    TENANT,
    field("task_id", "taskId", Kind::Text),
    field("id", "id", Kind::Text),
];

const LIST_TASK_PUSH_NOTIFICATION_CONFIGS_REQUEST: &[Field] = &[
    TENANT,
    field("task_id", "taskId", Kind::Text),
    field("page_size", "pageSize", Kind::Int32),
    field("page_token", "pageToken", Kind::Text),
];

const GET_EXTENDED_AGENT_CARD_REQUEST: &[Field] = &[TENANT];

/// The request message of JSON-RPC method `method`; `None`: not a method of A2A 1.0.
fn request_of(method: &str) -> Option<&'static [Field]> {
    Some(match method {
        "SendMessage" | "SendStreamingMessage" => SEND_MESSAGE_REQUEST,
        "GetTask" => GET_TASK_REQUEST,
        "ListTasks" => LIST_TASKS_REQUEST,
        "CancelTask" => CANCEL_TASK_REQUEST,
        "SubscribeToTask" => SUBSCRIBE_TO_TASK_REQUEST,
        "CreateTaskPushNotificationConfig" => TASK_PUSH_NOTIFICATION_CONFIG,
        "GetTaskPushNotificationConfig" | "DeleteTaskPushNotificationConfig" => {
            TASK_PUSH_NOTIFICATION_CONFIG_REF
        }
        "ListTaskPushNotificationConfigs" => LIST_TASK_PUSH_NOTIFICATION_CONFIGS_REQUEST,
        "GetExtendedAgentCard" => GET_EXTENDED_AGENT_CARD_REQUEST,
        _ => return None,
    })
}

/// Checks a JSON-RPC request's method and params: `MethodNotFound` for a method A2A 1.0 does
/// not have, `InvalidParams` for params that are not its request message's ProtoJSON.
pub fn check(method: &str, params: &Value) -> Result<(), A2aError> {
    let fields = request_of(method).ok_or_else(|| {
        A2aError::MethodNotFound(format!("`{method}` is not a method of A2A 1.0"))
    })?;
    match params {
        Value::Null => Ok(()),
        Value::Object(obj) => message(fields, obj, "")
            .map_err(|e| A2aError::InvalidParams(format!("invalid parameters of {method}: {e}"))),
        _ => Err(A2aError::InvalidParams(format!(
            "`params` of {method} must be an object"
        ))),
    }
}

/// `path` followed by `name`, as an error names a field (`message.parts[0].text`).
fn joined(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn message(fields: &[Field], obj: &Map<String, Value>, path: &str) -> Result<(), String> {
    let mut oneofs: Vec<(&str, &str)> = Vec::new();
    for (key, v) in obj {
        let Some(f) = fields.iter().find(|f| f.json == key || f.proto == key) else {
            continue; // unknown fields are ignored
        };
        if v.is_null() {
            continue;
        }
        let at = joined(path, key);
        if let Some(group) = f.oneof {
            if let Some((_, first)) = oneofs.iter().find(|(g, _)| *g == group) {
                return Err(format!(
                    "`{at}` and `{}` are both set: at most one of `{group}` may be",
                    joined(path, first)
                ));
            }
            oneofs.push((group, key));
        }
        if f.repeated {
            let Value::Array(items) = v else {
                return Err(format!("`{at}` must be an array"));
            };
            for (i, item) in items.iter().enumerate() {
                let at = format!("{at}[{i}]");
                if item.is_null() {
                    return Err(format!("`{at}` is null"));
                }
                value(f.kind, item, &at)?;
            }
        } else {
            value(f.kind, v, &at)?;
        }
    }
    Ok(())
}

fn value(kind: Kind, v: &Value, at: &str) -> Result<(), String> {
    let ok = match kind {
        Kind::Text => v.is_string(),
        Kind::Bool => v.is_boolean(),
        Kind::Int32 => int32(v),
        Kind::Enum => v.is_string() || v.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        Kind::Struct => v.is_object(),
        Kind::Any => true,
        Kind::Timestamp => v
            .as_str()
            .is_some_and(|s| super::task::parse_timestamp(s).is_some()),
        Kind::Message(fields) => {
            let Value::Object(obj) = v else {
                return Err(format!("`{at}` must be an object"));
            };
            return message(fields, obj, at);
        }
    };
    if ok {
        return Ok(());
    }
    let what = match kind {
        Kind::Text => "a string",
        Kind::Bool => "true or false",
        Kind::Int32 => "a 32-bit integer",
        Kind::Enum => "an enum value's name or number",
        Kind::Struct => "an object",
        Kind::Timestamp => "an RFC 3339 timestamp",
        Kind::Any | Kind::Message(_) => "valid",
    };
    Err(format!("`{at}` must be {what}"))
}

/// An `int32` as ProtoJSON takes it: a number without a fraction, or a string holding one.
fn int32(v: &Value) -> bool {
    let n = match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 1e10)
                .map(|f| f as i64)
        }),
        Value::String(s) => s.parse::<i64>().ok().or_else(|| {
            s.parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && f.fract() == 0.0 && f.abs() < 1e10)
                .map(|f| f as i64)
        }),
        _ => None,
    };
    n.is_some_and(|n| i32::try_from(n).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(method: &str, params: Value) -> Option<i64> {
        check(method, &params).err().map(|e| e.code())
    }

    #[test]
    fn an_unknown_method_is_method_not_found_whatever_its_params() {
        assert_eq!(code("SendMessageXXX", json!({})), Some(-32601));
        assert_eq!(code("nonexistent/method", json!([1])), Some(-32601));
        assert_eq!(code("message/send", json!({})), Some(-32601));
    }

    #[test]
    fn params_of_the_right_json_types_pass_whatever_they_lack() {
        for (method, params) in [
            ("SendMessage", json!({})),
            ("SendMessage", Value::Null),
            ("SendMessage", json!({"": "not_a_dict", "future": [1]})),
            ("SendMessage", json!({"message": {"kind": "message"}})),
            (
                "SendMessage",
                json!({"message": {"message_id": "m", "role": "ROLE_USER", "parts": [
                    {"text": "hi", "metadata": {"k": 1}}, {"data": {"a": [1]}}, {"raw": "aGk=", "mediaType": "image/png"}
                ]}, "configuration": {"historyLength": "3", "returnImmediately": true,
                  "taskPushNotificationConfig": {"url": "http://x", "authentication": {"scheme": "Bearer"}}}}),
            ),
            (
                "SendMessage",
                json!({"message": {"role": 1, "parts": null}}),
            ),
            ("GetTask", json!({"id": "x", "historyLength": 1.0})),
            (
                "ListTasks",
                json!({"status": "working", "pageSize": -3, "statusTimestampAfter": "2025-01-01T00:00:00Z", "includeArtifacts": false}),
            ),
            ("CancelTask", json!({"id": "x", "metadata": {}})),
            ("GetExtendedAgentCard", json!({})),
        ] {
            assert_eq!(code(method, params.clone()), None, "{method} {params}");
        }
    }

    #[test]
    fn params_of_the_wrong_json_types_are_invalid_params() {
        for (method, params) in [
            ("SendMessage", json!([1])),
            ("SendMessage", json!("x")),
            ("SendMessage", json!({"message": {"parts": "invalid"}})),
            ("SendMessage", json!({"message": "x"})),
            ("SendMessage", json!({"message": {"messageId": 5}})),
            ("SendMessage", json!({"message": {"parts": [{"text": 1}]}})),
            ("SendMessage", json!({"message": {"parts": [null]}})),
            (
                "SendMessage",
                json!({"message": {"parts": [{"text": "a", "url": "b"}]}}),
            ),
            ("SendMessage", json!({"message": {"role": {}}})),
            ("SendMessage", json!({"message": {"extensions": [1]}})),
            (
                "SendMessage",
                json!({"configuration": {"historyLength": "x"}}),
            ),
            (
                "SendMessage",
                json!({"configuration": {"historyLength": 1.5}}),
            ),
            (
                "SendMessage",
                json!({"configuration": {"historyLength": true}}),
            ),
            (
                "SendMessage",
                json!({"configuration": {"returnImmediately": "true"}}),
            ),
            ("SendMessage", json!({"metadata": 3})),
            ("GetTask", json!({"id": 12345})),
            ("ListTasks", json!({"pageSize": 3_000_000_000_u64})),
            ("ListTasks", json!({"statusTimestampAfter": "nope"})),
            ("ListTasks", json!({"includeArtifacts": "yes"})),
            ("CancelTask", json!({"id": ["x"]})),
            ("CreateTaskPushNotificationConfig", json!({"url": 1})),
        ] {
            assert_eq!(
                code(method, params.clone()),
                Some(-32602),
                "{method} {params}"
            );
        }
    }
}
