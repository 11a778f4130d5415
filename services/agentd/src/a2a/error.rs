//! The errors of the A2A bindings: one enum, mapped to the JSON-RPC codes and to the HTTP
//! statuses with their `google.rpc.ErrorInfo` reasons as the specification's table (section
//! 5.4) and the SDK map them.

use agentd_proto::{AgentdError, ErrorCode};
use serde_json::{Value, json};

/// An A2A error, with the message the client reads.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum A2aError {
    /// The body is not JSON (JSON-RPC `-32700`).
    #[error("{0}")]
    Parse(String),
    /// The body is JSON but not a JSON-RPC 2.0 request (`-32600`).
    #[error("{0}")]
    InvalidRequest(String),
    /// No such method (`-32601`), or no such REST route.
    #[error("{0}")]
    MethodNotFound(String),
    /// A parameter is missing or wrong (`-32602`); an unknown context is one too (the
    /// specification has no error of its own for it).
    #[error("{0}")]
    InvalidParams(String),
    /// agentd failed (`-32603`).
    #[error("{0}")]
    Internal(String),
    /// `-32001`.
    #[error("{0}")]
    TaskNotFound(String),
    /// `-32002`.
    #[error("{0}")]
    TaskNotCancelable(String),
    /// `-32004`.
    #[error("{0}")]
    Unsupported(String),
    /// `-32005`.
    #[error("{0}")]
    ContentType(String),
    /// `-32009`.
    #[error("{0}")]
    VersionNotSupported(String),
}

impl A2aError {
    /// A failure of the store, as the A2A layer answers it.
    pub fn store(e: impl std::fmt::Display) -> Self {
        A2aError::Internal(format!("the store failed: {e}"))
    }

    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            A2aError::Parse(_) => -32700,
            A2aError::InvalidRequest(_) => -32600,
            A2aError::MethodNotFound(_) => -32601,
            A2aError::InvalidParams(_) => -32602,
            A2aError::Internal(_) => -32603,
            A2aError::TaskNotFound(_) => -32001,
            A2aError::TaskNotCancelable(_) => -32002,
            A2aError::Unsupported(_) => -32004,
            A2aError::ContentType(_) => -32005,
            A2aError::VersionNotSupported(_) => -32009,
        }
    }

    /// The HTTP status, the `google.rpc.Status` name and the `ErrorInfo` reason.
    pub fn http(&self) -> (u16, &'static str, &'static str) {
        match self {
            A2aError::Parse(_) => (400, "INVALID_ARGUMENT", "JSON_PARSE"),
            A2aError::InvalidRequest(_) => (400, "INVALID_ARGUMENT", "INVALID_REQUEST"),
            A2aError::MethodNotFound(_) => (404, "NOT_FOUND", "METHOD_NOT_FOUND"),
            A2aError::InvalidParams(_) => (400, "INVALID_ARGUMENT", "INVALID_PARAMS"),
            A2aError::Internal(_) => (500, "INTERNAL", "INTERNAL_ERROR"),
            A2aError::TaskNotFound(_) => (404, "NOT_FOUND", "TASK_NOT_FOUND"),
            A2aError::TaskNotCancelable(_) => (400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE"),
            A2aError::Unsupported(_) => (400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION"),
            A2aError::ContentType(_) => (400, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED"),
            A2aError::VersionNotSupported(_) => {
                (400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED")
            }
        }
    }

    fn error_info(&self) -> Value {
        json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.http().2,
            "domain": "a2a-protocol.org",
        })
    }

    /// The JSON-RPC error object.
    pub fn jsonrpc(&self) -> Value {
        json!({"code": self.code(), "message": self.to_string(), "data": [self.error_info()]})
    }

    /// The HTTP+JSON body (`google.rpc.Status` under `error`).
    pub fn rest(&self) -> Value {
        let (status, name, _) = self.http();
        json!({"error": {
            "code": status,
            "status": name,
            "message": self.to_string(),
            "details": [self.error_info()],
        }})
    }

    /// The error of a request without a usable `A2A-Version`.
    pub fn version(got: Option<&str>) -> Self {
        let said = match got {
            None => "no A2A-Version header, which the specification reads as 0.3".to_string(),
            Some(v) => format!("A2A-Version `{v}`"),
        };
        A2aError::VersionNotSupported(format!(
            "{said}: this agent serves A2A 1.0 only (send `A2A-Version: 1.0`)"
        ))
    }
}

impl From<AgentdError> for A2aError {
    /// agentd's refusals by kind: bad input is `InvalidParams` with agentd's message (which
    /// names the field or the limit), a store or model failure `Internal`.
    fn from(e: AgentdError) -> Self {
        match e.code {
            ErrorCode::InvalidArgument
            | ErrorCode::MissingField
            | ErrorCode::PayloadTooLarge
            | ErrorCode::AgentNotFound
            | ErrorCode::InvalidTransition => A2aError::InvalidParams(e.to_string()),
            _ => A2aError::Internal(e.to_string()),
        }
    }
}
