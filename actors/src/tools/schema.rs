//! Validation of tool arguments against the JSON schema the model is shown (the subset agentd's
//! tool specs use: `type`, `properties`, `required`, `enum`, `items`, `minimum`, `minLength`,
//! `additionalProperties: false`). A call whose arguments do not fit is refused before the tool
//! runs: `missing_field` for a required field that is absent, `invalid_argument` for a wrong
//! type or value. Fields may be named in snake_case or camelCase whichever the schema uses (the
//! seeds use both). Unknown fields are ignored, as models add them, unless the schema says
//! `additionalProperties: false` (seed 003's tools): then each field must name a property in
//! one of its two spellings, once — the aliases are rewritten first, then the rule applies.

use agentd_proto::{AgentdError, ErrorCode};
use serde_json::Value;

/// `snake_case` → `camelCase`.
fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `camelCase` → `snake_case`.
fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_uppercase() {
            out.push('_');
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The value of property `name` in `args`, under its own name or its other spelling.
fn field<'a>(args: &'a serde_json::Map<String, Value>, name: &str) -> Option<&'a Value> {
    args.get(name)
        .or_else(|| args.get(&camel(name)))
        .or_else(|| args.get(&snake(name)))
}

/// Checks `args` against `schema`; `path` names the value in errors.
pub fn validate(schema: &Value, args: &Value, path: &str) -> Result<(), AgentdError> {
    let invalid = |what: String| AgentdError::new(ErrorCode::InvalidArgument, what);
    if let Some(ty) = schema.get("type").and_then(Value::as_str) {
        let ok = match ty {
            "object" => args.is_object(),
            "array" => args.is_array(),
            "string" => args.is_string(),
            "boolean" => args.is_boolean(),
            "integer" => args.is_i64() || args.is_u64(),
            "number" => args.is_number(),
            "null" => args.is_null(),
            _ => true,
        };
        if !ok {
            return Err(invalid(format!("`{path}` must be of type {ty}")));
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(args)
    {
        return Err(invalid(format!(
            "`{path}` must be one of {}",
            options
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_f64), args.as_f64())
        && n < min
    {
        return Err(invalid(format!("`{path}` must be at least {min}")));
    }
    if let (Some(min), Some(text)) = (
        schema.get("minLength").and_then(Value::as_u64),
        args.as_str(),
    ) && (text.chars().count() as u64) < min
    {
        return Err(invalid(format!(
            "`{path}` must have at least {min} character{}",
            if min == 1 { "" } else { "s" }
        )));
    }
    if let (Some(items), Some(list)) = (schema.get("items"), args.as_array()) {
        for (i, item) in list.iter().enumerate() {
            validate(items, item, &format!("{path}[{i}]"))?;
        }
    }
    if let Some(obj) = args.as_object() {
        for name in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if field(obj, name).is_none_or(Value::is_null) {
                return Err(AgentdError::missing_field(name));
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
            only_known_properties(props, obj, path)?;
        }
        if let Some(props) = props {
            for (name, prop) in props {
                if let Some(v) = field(obj, name).filter(|v| !v.is_null()) {
                    let at = if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}.{name}")
                    };
                    validate(prop, v, &at)?;
                }
            }
        }
    }
    Ok(())
}

/// `invalid_argument` unless every field of `args` names one of `props` (in either spelling),
/// and no property is named twice (once in each spelling).
fn only_known_properties(
    props: Option<&serde_json::Map<String, Value>>,
    args: &serde_json::Map<String, Value>,
    path: &str,
) -> Result<(), AgentdError> {
    let at = |name: &str| {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    };
    let mut seen: Vec<&str> = Vec::with_capacity(args.len());
    for key in args.keys() {
        let property = props.and_then(|props| {
            [key.clone(), snake(key), camel(key)]
                .into_iter()
                .find_map(|name| props.get_key_value(&name).map(|(k, _)| k.as_str()))
        });
        let Some(property) = property else {
            return Err(AgentdError::new(
                ErrorCode::InvalidArgument,
                format!("`{}` is not an argument of this tool", at(key)),
            ));
        };
        if seen.contains(&property) {
            return Err(AgentdError::new(
                ErrorCode::InvalidArgument,
                format!("`{}` is given twice (in both spellings)", at(property)),
            ));
        }
        seen.push(property);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "agent_type": {"type": "string"},
            "allowed_tools": {"type": "array", "items": {"type": "string"}},
            "mode": {"type": "string", "enum": ["sync", "async"]},
            "syncTimeoutMs": {"type": "integer", "minimum": 0}
        }, "required": ["agent_type"]})
    }

    fn code(args: Value) -> Option<ErrorCode> {
        validate(&schema(), &args, "").err().map(|e| e.code)
    }

    #[test]
    fn fitting_arguments_pass_in_either_spelling() {
        assert_eq!(code(json!({"agent_type": "x", "mode": "sync"})), None);
        assert_eq!(code(json!({"agentType": "x", "sync_timeout_ms": 5})), None);
        assert_eq!(code(json!({"agent_type": "x", "extra": [1, 2]})), None);
    }

    #[test]
    fn misfits_get_the_seed_codes() {
        assert_eq!(code(json!({})), Some(ErrorCode::MissingField));
        assert_eq!(
            code(json!({"agent_type": null})),
            Some(ErrorCode::MissingField)
        );
        assert_eq!(
            code(json!({"agent_type": 3})),
            Some(ErrorCode::InvalidArgument)
        );
        assert_eq!(
            code(json!({"agent_type": "x", "allowed_tools": "all"})),
            Some(ErrorCode::InvalidArgument)
        );
        assert_eq!(
            code(json!({"agent_type": "x", "allowed_tools": ["a", 1]})),
            Some(ErrorCode::InvalidArgument)
        );
        assert_eq!(
            code(json!({"agent_type": "x", "mode": "later"})),
            Some(ErrorCode::InvalidArgument)
        );
        assert_eq!(
            code(json!({"agent_type": "x", "syncTimeoutMs": -1})),
            Some(ErrorCode::InvalidArgument)
        );
        assert_eq!(
            code(json!({"agent_type": "x", "syncTimeoutMs": 1.5})),
            Some(ErrorCode::InvalidArgument)
        );
        assert_eq!(code(json!("text")), Some(ErrorCode::InvalidArgument));
    }

    fn closed() -> Value {
        json!({"type": "object", "properties": {
            "agent_id": {"type": "string", "minLength": 1},
            "message": {"type": "string", "minLength": 1}
        }, "required": ["agent_id"], "additionalProperties": false})
    }

    fn closed_code(args: Value) -> Option<ErrorCode> {
        validate(&closed(), &args, "").err().map(|e| e.code)
    }

    #[test]
    fn a_closed_schema_takes_its_properties_in_either_spelling_and_nothing_else() {
        assert_eq!(closed_code(json!({"agent_id": "a"})), None);
        assert_eq!(closed_code(json!({"agentId": "a", "message": "m"})), None);
        assert_eq!(
            closed_code(json!({"agent_id": "a", "force": true})),
            Some(ErrorCode::InvalidArgument)
        );
        assert_eq!(
            closed_code(json!({"agentId": "a", "agent_id": "b"})),
            Some(ErrorCode::InvalidArgument),
            "one property named twice"
        );
        // An open schema ignores what it does not name.
        assert_eq!(code(json!({"agent_type": "x", "force": true})), None);
    }

    #[test]
    fn min_length_counts_characters() {
        assert_eq!(
            closed_code(json!({"agent_id": "a", "message": ""})),
            Some(ErrorCode::InvalidArgument)
        );
        assert_eq!(
            closed_code(json!({"agent_id": ""})),
            Some(ErrorCode::InvalidArgument)
        );
        assert_eq!(closed_code(json!({"agent_id": "a", "message": "é"})), None);
    }
}
