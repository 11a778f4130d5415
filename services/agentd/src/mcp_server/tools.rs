//! The tools the server lists: one `ask_<type>` per exposed agent type, with its input and
//! output schemas, and the arguments of a call read against them.

use super::error::McpServerError;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// What the name of an `ask_<type>` tool starts with.
pub const ASK_PREFIX: &str = "ask_";

/// The longest thread alias taken, in bytes.
pub const MAX_THREAD_BYTES: usize = 256;

/// The name of the tool that posts a message to a thread without waiting.
pub const SEND_MESSAGE: &str = "send_message";

/// The name of the tool that lists the threads.
pub const LIST_THREADS: &str = "list_threads";

/// The name of the tool that cancels a thread's last run.
pub const CANCEL: &str = "cancel";

/// The name of the tool that shows a thread.
pub const GET_THREAD: &str = "get_thread";

/// The arguments of a `send_message` or `get_thread` call: a thread of an exposed type.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadArgs {
    /// The agent type.
    pub agent_type: String,
    /// The thread's alias.
    pub thread: String,
    /// The message (`send_message` only).
    pub message: Option<String>,
}

/// The arguments of an `ask_<type>` call.
#[derive(Debug, Clone, PartialEq)]
pub struct AskArgs {
    /// The message for the agent.
    pub message: String,
    /// The caller's name for a persistent conversation (`None`: a fresh one).
    pub thread: Option<String>,
}

fn object(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

/// The input schema of every `ask_<type>` tool.
fn input_schema() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "message": {
                "type": "string",
                "minLength": 1,
                "description": "What to ask the agent."
            },
            "thread": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_THREAD_BYTES,
                "description": "A name for a persistent conversation: calls with the same \
                    thread talk to the same agent, which sees the earlier turns. Without it \
                    each call is a fresh conversation."
            }
        },
        "required": ["message"],
        "additionalProperties": false
    }))
}

/// The output schema of every `ask_<type>` tool (its structured content).
fn output_schema() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "agent_id": {"type": "string"},
            "status": {
                "type": "string",
                "enum": ["pending", "running", "input_required", "completed", "failed",
                         "cancelled", "rejected"]
            },
            "usage": {"type": "object"}
        },
        "required": ["agent_id", "status", "usage"]
    }))
}

/// The tool of agent type `agent_type`, described by `description` (the type's own, if any).
pub fn ask_tool(agent_type: &str, description: &str) -> Tool {
    let mut about = format!(
        "Ask the agentd agent `{agent_type}` and wait for its answer. Pass `thread` to keep a \
         conversation across calls."
    );
    if !description.trim().is_empty() {
        about = format!("{} {about}", description.trim());
    }
    // Not read-only (it runs an agent), not destructive, not idempotent, open world.
    let annotations =
        ToolAnnotations::from_raw(None, Some(false), Some(false), Some(false), Some(true));
    Tool::new(format!("{ASK_PREFIX}{agent_type}"), about, input_schema())
        .with_raw_output_schema(output_schema())
        .with_annotations(annotations)
}

/// The schema of a thread of one of `types`, with a message if `message`.
fn thread_schema(types: &[String], message: bool) -> Arc<JsonObject> {
    let mut properties = json!({
        "type": {
            "type": "string",
            "enum": types,
            "description": "The agent type the thread is with."
        },
        "thread": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_THREAD_BYTES,
            "description": "The thread's name, as the `ask_<type>` calls gave it."
        }
    });
    let mut required = vec!["type", "thread"];
    if message {
        properties["message"] = json!({
            "type": "string",
            "minLength": 1,
            "description": "The message for the agent."
        });
        required.push("message");
    }
    object(json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    }))
}

/// `send_message`: a message to a thread (opened if new), answered at once with the run it
/// started; `get_thread` shows the answer once it is there.
pub fn send_message_tool(types: &[String]) -> Tool {
    let annotations =
        ToolAnnotations::from_raw(None, Some(false), Some(false), Some(false), Some(true));
    Tool::new(
        SEND_MESSAGE,
        "Send a message to an agentd agent's thread without waiting for its answer (the \
         thread is opened if new). Returns the run it started; read the answer with get_thread.",
        thread_schema(types, true),
    )
    .with_annotations(annotations)
}

/// `get_thread`: a thread's conversation as text, and the state of its last run.
pub fn get_thread_tool(types: &[String]) -> Tool {
    let annotations =
        ToolAnnotations::from_raw(None, Some(true), Some(false), Some(true), Some(false));
    Tool::new(
        GET_THREAD,
        "Show an agentd thread: its conversation as text, and the state of its last run.",
        thread_schema(types, false),
    )
    .with_annotations(annotations)
}

/// `list_threads`: the threads, of one type if `type` is given.
pub fn list_threads_tool(types: &[String]) -> Tool {
    let annotations =
        ToolAnnotations::from_raw(None, Some(true), Some(false), Some(true), Some(false));
    Tool::new(
        LIST_THREADS,
        "List the agentd threads opened through this server (of one agent type if `type` is \
         given), each with its agent's state.",
        object(json!({
            "type": "object",
            "properties": {
                "type": {
                    "type": "string",
                    "enum": types,
                    "description": "Only the threads with this agent type."
                }
            },
            "additionalProperties": false
        })),
    )
    .with_annotations(annotations)
}

/// `arguments` of a `list_threads` call: the agent type it is limited to, if any.
pub fn list_args(arguments: Option<&JsonObject>) -> Result<Option<String>, McpServerError> {
    let invalid = |why: String| McpServerError::InvalidArguments {
        tool: LIST_THREADS.to_string(),
        why,
    };
    let empty = Map::new();
    let args = arguments.unwrap_or(&empty);
    if let Some(other) = args.keys().find(|k| *k != "type") {
        return Err(invalid(format!("unknown argument `{other}`")));
    }
    match args.get("type") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(invalid(format!(
            "`type` must be a string, not {}",
            kind(other)
        ))),
    }
}

/// `cancel`: the thread's last run cancelled, the thread kept.
pub fn cancel_tool(types: &[String]) -> Tool {
    let annotations =
        ToolAnnotations::from_raw(None, Some(false), Some(true), Some(true), Some(false));
    Tool::new(
        CANCEL,
        "Cancel the last run of an agentd thread (queued: dropped; running: its turn \
         interrupted and the sub-agents it started cancelled). The thread is kept.",
        thread_schema(types, false),
    )
    .with_annotations(annotations)
}

/// `arguments` of a call to `tool` (`send_message` if `message`, else `get_thread` or
/// `cancel`) read as
/// [`ThreadArgs`].
pub fn thread_args(
    tool: &str,
    arguments: Option<&JsonObject>,
    message: bool,
) -> Result<ThreadArgs, McpServerError> {
    let invalid = |why: String| McpServerError::InvalidArguments {
        tool: tool.to_string(),
        why,
    };
    let empty = Map::new();
    let args = arguments.unwrap_or(&empty);
    let known: &[&str] = if message {
        &["type", "thread", "message"]
    } else {
        &["type", "thread"]
    };
    if let Some(other) = args.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(invalid(format!("unknown argument `{other}`")));
    }
    let string = |name: &str| match args.get(name) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(invalid(format!("`{name}` is empty"))),
        Some(other) => Err(invalid(format!(
            "`{name}` must be a string, not {}",
            kind(other)
        ))),
        None => Err(invalid(format!("`{name}` is required"))),
    };
    let agent_type = string("type")?;
    let thread = string("thread")?;
    if thread.len() > MAX_THREAD_BYTES {
        return Err(invalid(format!(
            "`thread` is {} bytes, over {MAX_THREAD_BYTES}",
            thread.len()
        )));
    }
    let message = if message {
        Some(string("message")?)
    } else {
        None
    };
    Ok(ThreadArgs {
        agent_type,
        thread,
        message,
    })
}

/// `arguments` of a call to `tool` read as [`AskArgs`].
pub fn ask_args(tool: &str, arguments: Option<&JsonObject>) -> Result<AskArgs, McpServerError> {
    let invalid = |why: String| McpServerError::InvalidArguments {
        tool: tool.to_string(),
        why,
    };
    let empty = Map::new();
    let args = arguments.unwrap_or(&empty);
    if let Some(other) = args.keys().find(|k| *k != "message" && *k != "thread") {
        return Err(invalid(format!(
            "unknown argument `{other}` (it takes `message` and `thread`)"
        )));
    }
    let message = match args.get("message") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::String(_)) => return Err(invalid("`message` is empty".into())),
        Some(other) => {
            return Err(invalid(format!(
                "`message` must be a string, not {}",
                kind(other)
            )));
        }
        None => return Err(invalid("`message` is required".into())),
    };
    let thread = match args.get("thread") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => {
            return Err(invalid(
                "`thread` is empty (leave it out for a fresh conversation)".into(),
            ));
        }
        Some(Value::String(s)) if s.len() > MAX_THREAD_BYTES => {
            return Err(invalid(format!(
                "`thread` is {} bytes, over {MAX_THREAD_BYTES}",
                s.len()
            )));
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(invalid(format!(
                "`thread` must be a string, not {}",
                kind(other)
            )));
        }
    };
    Ok(AskArgs { message, thread })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Result<AskArgs, McpServerError> {
        let Value::Object(m) = v else {
            unreachable!("an object")
        };
        ask_args("ask_research", Some(&m))
    }

    #[test]
    fn a_message_and_an_optional_thread_are_taken() {
        assert_eq!(
            args(json!({"message": "hi", "thread": "t1"})).ok(),
            Some(AskArgs {
                message: "hi".into(),
                thread: Some("t1".into())
            })
        );
        assert_eq!(
            args(json!({"message": "hi"})).ok().and_then(|a| a.thread),
            None
        );
    }

    #[test]
    fn wrong_arguments_are_refused_saying_what_is_wrong() {
        for (v, says) in [
            (json!({}), "`message` is required"),
            (json!({"message": ""}), "`message` is empty"),
            (
                json!({"message": 3}),
                "`message` must be a string, not a number",
            ),
            (
                json!({"message": "hi", "thread": 1}),
                "`thread` must be a string",
            ),
            (json!({"message": "hi", "thread": ""}), "`thread` is empty"),
            (
                json!({"message": "hi", "other": 1}),
                "unknown argument `other`",
            ),
            (
                json!({"message": "hi", "thread": "x".repeat(MAX_THREAD_BYTES + 1)}),
                "over 256",
            ),
        ] {
            let e = args(v.clone()).err().map(|e| (e.code(), e.to_string()));
            assert!(
                e.as_ref()
                    .is_some_and(|(code, m)| *code == "invalid_arguments" && m.contains(says)),
                "{v}: {e:?}"
            );
        }
    }

    #[test]
    fn thread_tools_take_a_type_and_a_thread_and_list_threads_an_optional_type() {
        let obj = |v: Value| match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let send = thread_args(
            SEND_MESSAGE,
            Some(&obj(
                json!({"type": "research", "thread": "t", "message": "hi"}),
            )),
            true,
        );
        assert_eq!(
            send.ok(),
            Some(ThreadArgs {
                agent_type: "research".into(),
                thread: "t".into(),
                message: Some("hi".into())
            })
        );
        for (v, message, says) in [
            (json!({"type": "research"}), false, "`thread` is required"),
            (json!({"thread": "t"}), false, "`type` is required"),
            (
                json!({"type": "research", "thread": "t"}),
                true,
                "`message` is required",
            ),
            (
                json!({"type": "research", "thread": "t", "message": "hi"}),
                false,
                "unknown argument `message`",
            ),
        ] {
            let e = thread_args(GET_THREAD, Some(&obj(v.clone())), message)
                .err()
                .map(|e| e.to_string());
            assert!(e.as_ref().is_some_and(|m| m.contains(says)), "{v}: {e:?}");
        }
        assert_eq!(list_args(None).ok(), Some(None));
        assert_eq!(
            list_args(Some(&obj(json!({"type": "lead"})))).ok(),
            Some(Some("lead".into()))
        );
        assert!(list_args(Some(&obj(json!({"type": 1})))).is_err());
    }

    #[test]
    fn the_tool_names_its_type_and_requires_a_message() {
        let t = ask_tool("research", "Finds things.");
        assert_eq!(t.name, "ask_research");
        assert!(
            t.description
                .as_deref()
                .is_some_and(|d| d.starts_with("Finds things."))
        );
        assert_eq!(t.input_schema["required"], json!(["message"]));
        assert_eq!(
            t.input_schema["properties"]["message"]["minLength"],
            json!(1)
        );
    }
}
