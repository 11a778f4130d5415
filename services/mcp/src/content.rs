//! What crosses between MCP and agentd's tools: a server's tool list becomes the specs agents
//! are shown (names checked, schemas normalised), and a call's result becomes what the model
//! reads (text kept, other content kinds described rather than dropped).

use agentd_ports::{McpCallResult, McpToolDef, is_valid_exposed_name};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// A server's tools as agents may be shown them, and the names that could not be exposed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListedTools {
    /// Tools whose exposed name fits, in the server's order.
    pub tools: Vec<Arc<McpToolDef>>,
    /// The server's names of tools whose exposed name does not fit.
    pub skipped: Vec<String>,
}

/// One tool of `tools/list` as agentd takes it: its name, description and input schema.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTool {
    /// Its name on the server.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its input schema as the server sent it.
    pub input_schema: Map<String, Value>,
}

/// The tools of server `server` that agents may be shown; `approval` names those that wait
/// for approval.
pub fn listed_tools(server: &str, remote: Vec<RemoteTool>, approval: &[String]) -> ListedTools {
    let mut listed = ListedTools::default();
    for tool in remote {
        let exposed = format!("mcp__{server}__{}", tool.name);
        if !is_valid_exposed_name(&exposed) {
            listed.skipped.push(tool.name);
            continue;
        }
        listed.tools.push(Arc::new(McpToolDef {
            server: server.to_string(),
            needs_approval: approval.contains(&tool.name),
            tool: tool.name,
            exposed,
            description: tool.description,
            parameters: normalised_schema(tool.input_schema),
        }));
    }
    listed
}

/// The schema as every provider takes it: an object schema at the top (`type: "object"`,
/// with `properties`, even when empty).
pub fn normalised_schema(mut schema: Map<String, Value>) -> Value {
    schema.insert("type".into(), json!("object"));
    if !schema.get("properties").is_some_and(Value::is_object) {
        schema.insert("properties".into(), json!({}));
    }
    Value::Object(schema)
}

/// A `tools/call` result (as JSON: `content`, `structuredContent`, `isError`) as the model
/// reads it.
pub fn call_result(content: &[Value], structured: Option<Value>, is_error: bool) -> McpCallResult {
    McpCallResult {
        content: content.iter().map(described).collect(),
        structured,
        is_error,
    }
}

/// One content block as text: text as it is, anything else described.
fn described(block: &Value) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
    let data_bytes = |data: &str| data.len() / 4 * 3;
    match field("type") {
        "text" => field("text").to_string(),
        kind @ ("image" | "audio") => format!(
            "[{kind} content: {}, about {} bytes, not shown]",
            field("mimeType"),
            data_bytes(field("data"))
        ),
        "resource_link" => format!(
            "[resource link: {}{}]",
            field("uri"),
            match field("name") {
                "" => String::new(),
                name => format!(" ({name})"),
            }
        ),
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            let get = |name: &str| resource.get(name).and_then(Value::as_str).unwrap_or("");
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {}]\n{text}", get("uri")),
                None => format!(
                    "[resource {}: {}, about {} bytes, not shown]",
                    get("uri"),
                    get("mimeType"),
                    data_bytes(get("blob"))
                ),
            }
        }
        other => format!(
            "[{} content, not shown]",
            if other.is_empty() { "unknown" } else { other }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(name: &str, schema: Value) -> RemoteTool {
        RemoteTool {
            name: name.into(),
            description: format!("does {name}"),
            input_schema: schema.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn tools_are_exposed_under_their_server_or_skipped() {
        let long = "x".repeat(60);
        let listed = listed_tools(
            "files",
            vec![
                remote(
                    "read_text_file",
                    json!({"type": "object", "properties": {"path": {"type": "string"}}}),
                ),
                remote("write_file", json!({})),
                remote("bad.name", json!({})),
                remote(&long, json!({})),
            ],
            &["write_file".to_string()],
        );
        let names: Vec<(&str, bool)> = listed
            .tools
            .iter()
            .map(|t| (t.exposed.as_str(), t.needs_approval))
            .collect();
        assert_eq!(
            names,
            vec![
                ("mcp__files__read_text_file", false),
                ("mcp__files__write_file", true)
            ]
        );
        assert_eq!(listed.skipped, vec!["bad.name".to_string(), long]);
        assert_eq!(
            listed.tools[1].parameters,
            json!({"type": "object", "properties": {}})
        );
    }

    #[test]
    fn content_kinds_are_kept_or_described() {
        let result = call_result(
            &[
                json!({"type": "text", "text": "hello"}),
                json!({"type": "image", "mimeType": "image/png", "data": "AAAA"}),
                json!({"type": "resource_link", "uri": "file:///a", "name": "a"}),
                json!({"type": "resource", "resource": {"uri": "file:///b", "text": "bee"}}),
                json!({"type": "resource", "resource": {"uri": "file:///c", "mimeType": "x/y", "blob": "AAAAAAAA"}}),
            ],
            Some(json!({"n": 1})),
            false,
        );
        assert_eq!(
            result.content,
            vec![
                "hello".to_string(),
                "[image content: image/png, about 3 bytes, not shown]".into(),
                "[resource link: file:///a (a)]".into(),
                "[resource file:///b]\nbee".into(),
                "[resource file:///c: x/y, about 6 bytes, not shown]".into(),
            ]
        );
        assert_eq!(result.structured, Some(json!({"n": 1})));
    }
}
