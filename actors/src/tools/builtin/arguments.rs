//! Reading a call's arguments beyond what the schema checked: trimmed non-empty strings, lists
//! of strings and typed values, each under its snake_case name or the seed's camelCase one.

use agentd_proto::{AgentdError, ErrorCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A string argument, trimmed and non-empty, or `missing_field`.
pub(super) fn required_str<'a>(args: &'a Value, field: &str) -> Result<&'a str, AgentdError> {
    match args.get(field).and_then(Value::as_str).map(str::trim) {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(AgentdError::missing_field(field)),
    }
}

/// A string argument under either of two names (snake_case and the seed's camelCase).
pub(super) fn required_str2<'a>(
    args: &'a Value,
    field: &str,
    alias: &str,
) -> Result<&'a str, AgentdError> {
    required_str(args, field)
        .or_else(|_| required_str(args, alias).map_err(|_| AgentdError::missing_field(field)))
}

/// A string argument that is not blank, if given.
pub(super) fn optional_str<'a>(args: &'a Value, field: &str) -> Option<&'a str> {
    args.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// A list of strings under `field` or `alias`, if given (`null` = not given);
/// `invalid_argument` for anything else.
pub(super) fn string_list(
    args: &Value,
    field: &str,
    alias: &str,
) -> Result<Option<Vec<String>>, AgentdError> {
    let not_strings = || {
        AgentdError::new(
            ErrorCode::InvalidArgument,
            format!("`{field}` must be a list of strings"),
        )
    };
    match args.get(field).or_else(|| args.get(alias)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(not_strings))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(not_strings()),
    }
}

/// The value of `field` as a `T`, if given (`null` = not given); `invalid_argument` if it is
/// not one.
pub(super) fn typed<T: DeserializeOwned>(
    args: &Value,
    field: &str,
) -> Result<Option<T>, AgentdError> {
    match args.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|e| AgentdError::new(ErrorCode::InvalidArgument, format!("`{field}`: {e}"))),
    }
}
