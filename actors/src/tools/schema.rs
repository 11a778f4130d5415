//! Validation of tool arguments against the JSON schema the model is shown, one validator for
//! every tool (built-in or an MCP server's): the `jsonschema` crate, with the schema's own
//! draft. A call whose arguments do not fit is refused before the tool runs: `missing_field` for
//! a required field that is absent (or `null`), `invalid_argument` for anything else, naming
//! where.
//!
//! Before the check, the arguments are read as models send them: a property may be named in
//! snake_case or camelCase whichever the schema uses (the seeds use both), and is renamed to
//! the schema's spelling; one property named in both spellings is `invalid_argument`; a
//! property given as `null` is taken as not given. Unknown fields pass, as models add them,
//! unless the schema says `additionalProperties: false` (seed 003's tools).

use crate::catalogue::CheckedSpec;
use agentd_proto::{AgentdError, ErrorCode};
use jsonschema::error::ValidationErrorKind;
use serde_json::{Map, Value};
use std::borrow::Cow;

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

/// `path.name`, or `name` at the top.
fn joined(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// `args` as the schema names them: properties in their other spelling renamed, `null`
/// properties dropped, nested objects and list items read the same way.
fn normalised(schema: &Value, args: &Value, path: &str) -> Result<Value, AgentdError> {
    match args {
        Value::Object(fields) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let mut out = Map::with_capacity(fields.len());
            for (key, value) in fields {
                let name = props
                    .and_then(|props| {
                        [key.clone(), snake(key), camel(key)]
                            .into_iter()
                            .find(|n| props.contains_key(n))
                    })
                    .unwrap_or_else(|| key.clone());
                if value.is_null() && props.is_some_and(|p| p.contains_key(&name)) {
                    continue;
                }
                if out.contains_key(&name) {
                    return Err(AgentdError::new(
                        ErrorCode::InvalidArgument,
                        format!(
                            "`{}` is given twice (in both spellings)",
                            joined(path, &name)
                        ),
                    ));
                }
                let value = match props.and_then(|p| p.get(&name)) {
                    Some(prop) => normalised(prop, value, &joined(path, &name))?,
                    None => value.clone(),
                };
                out.insert(name, value);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => match schema.get("items") {
            Some(item) if item.is_object() => items
                .iter()
                .enumerate()
                .map(|(i, v)| normalised(item, v, &format!("{path}[{i}]")))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            _ => Ok(args.clone()),
        },
        other => Ok(other.clone()),
    }
}

/// Whether [`normalised`] would change `args`: a property named in its other spelling, or a
/// `null` property the schema names, anywhere. Most calls need no change, and then the
/// arguments are checked and used as they came, without a copy.
fn needs_normalising(schema: &Value, args: &Value) -> bool {
    match args {
        Value::Object(fields) => {
            let Some(props) = schema.get("properties").and_then(Value::as_object) else {
                return false;
            };
            fields.iter().any(|(key, value)| match props.get(key) {
                Some(prop) => value.is_null() || needs_normalising(prop, value),
                None => props.contains_key(&snake(key)) || props.contains_key(&camel(key)),
            })
        }
        Value::Array(items) => match schema.get("items") {
            Some(item) if item.is_object() => items.iter().any(|v| needs_normalising(item, v)),
            _ => false,
        },
        _ => false,
    }
}

/// `schema` compiled: the validator a tool's calls are checked by (built once per catalogue
/// version, [`crate::catalogue::CheckedSpec`]).
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, AgentdError> {
    jsonschema::validator_for(schema).map_err(|e| {
        AgentdError::new(
            ErrorCode::ToolFailed,
            format!("the tool's argument schema cannot be used: {e}"),
        )
    })
}

/// Checks `args` against `schema` and answers them as the tool takes them (see the module
/// doc). Compiles the schema: for tests and one-off checks; calls use [`check`].
#[cfg(test)]
pub fn validate(schema: &Value, args: &Value) -> Result<Value, AgentdError> {
    let checked = CheckedSpec::new(
        crate::ports::ToolSpec {
            name: String::new(),
            description: String::new(),
            parameters: schema.clone(),
        },
        compile(schema)?,
    );
    check(&checked, args).map(Cow::into_owned)
}

/// Checks `args` against `checked`'s schema and answers them as the tool takes them (see the
/// module doc): borrowed when nothing needed renaming.
pub fn check<'a>(checked: &CheckedSpec, args: &'a Value) -> Result<Cow<'a, Value>, AgentdError> {
    let schema = &checked.spec.parameters;
    let needs = match (checked.flat_names(), args) {
        (Some(names), Value::Object(fields)) => fields.iter().any(|(key, value)| {
            if names.contains(key) {
                value.is_null()
            } else {
                names.contains(&snake(key)) || names.contains(&camel(key))
            }
        }),
        _ => needs_normalising(schema, args),
    };
    let args = if needs {
        Cow::Owned(normalised(schema, args, "")?)
    } else {
        Cow::Borrowed(args)
    };
    if let Err(e) = checked.validator.validate(&args) {
        if let ValidationErrorKind::Required { property } = e.kind() {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_string);
            let at = e.instance_path().to_string();
            let field = pointer_path(&at);
            return Err(AgentdError::missing_field(&joined(&field, &name)));
        }
        let at = pointer_path(&e.instance_path().to_string());
        let at = if at.is_empty() {
            "arguments".to_string()
        } else {
            at
        };
        return Err(AgentdError::new(
            ErrorCode::InvalidArgument,
            format!("`{at}`: {e}"),
        ));
    }
    Ok(args)
}

/// A JSON pointer (`/a/0/b`) as people read a path (`a[0].b`).
fn pointer_path(pointer: &str) -> String {
    let mut out = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&segment);
        }
    }
    out
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

    #[test]
    fn arguments_spelled_as_the_schema_says_are_used_as_they_came() {
        let checked = CheckedSpec::new(
            crate::ports::ToolSpec {
                name: "t".into(),
                description: String::new(),
                parameters: schema(),
            },
            compile(&schema()).unwrap_or_else(|e| panic!("{e}")),
        );
        let as_named = json!({"agent_type": "a", "syncTimeoutMs": 5, "extra": null});
        let checked_args = check(&checked, &as_named).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(checked_args, Cow::Borrowed(_)), "no copy");
        let renamed = json!({"agentType": "a", "mode": null});
        let checked_args = check(&checked, &renamed).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(checked_args, Cow::Owned(_)));
        assert_eq!(*checked_args, json!({"agent_type": "a"}));
    }

    fn code(args: Value) -> Option<ErrorCode> {
        validate(&schema(), &args).err().map(|e| e.code)
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
        validate(&closed(), &args).err().map(|e| e.code)
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

#[cfg(test)]
mod more_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_come_back_in_the_schemas_spelling_without_nulls() {
        let schema = json!({"type": "object", "properties": {
            "agent_type": {"type": "string"},
            "budget": {"type": "object", "properties": {"max_tokens": {"type": "integer"}}}
        }});
        let args = json!({"agentType": "x", "budget": {"maxTokens": 5}, "title": null});
        assert_eq!(
            validate(&schema, &args).ok(),
            Some(json!({"agent_type": "x", "budget": {"max_tokens": 5}, "title": null}))
        );
        assert_eq!(
            validate(&schema, &json!({"agent_type": null})).ok(),
            Some(json!({}))
        );
    }

    #[test]
    fn errors_name_where_the_arguments_do_not_fit() {
        let schema = json!({"$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "object",
                "properties": {"n": {"type": "number"}}, "required": ["n"]}}},
            "required": ["items"]});
        let err = validate(&schema, &json!({"items": [{"n": 1}, {"n": "two"}]})).err();
        let (code, message) = err.map(|e| (Some(e.code), e.message)).unwrap_or_default();
        assert_eq!(code, Some(ErrorCode::InvalidArgument));
        assert!(message.starts_with("`items[1].n`"), "{message}");
        let missing = validate(&schema, &json!({"items": [{}]})).err();
        assert_eq!(
            missing.map(|e| (e.code, e.message)),
            Some((
                ErrorCode::MissingField,
                AgentdError::missing_field("items[0].n").message
            ))
        );
    }
}
