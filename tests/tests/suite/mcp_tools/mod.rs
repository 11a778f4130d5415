//! Tools from MCP servers, through the real `agentd` binary and real servers: the npm reference
//! servers (server-everything over stdio and over streamable HTTP, server-filesystem confined
//! to a temp dir) and a Python SDK server that exits in the middle of a call or waits to be
//! cancelled. The scripted model calls the tools, so each call takes the real path (visibility,
//! schema check, MCP call, result in the thread). With `approval = ["write_file"]`, the
//! filesystem server's `write_file` waits for approval (the file is not written before) while
//! its `read_text_file` does not. A streamable-HTTP server that restarts on the same port
//! refuses the old session (server-everything with 400, the Python SDK with 404): the call that
//! finds out fails at once, and agentd opens a new session. One that goes away shows down (and
//! is logged), and calls wait for it to come back within their timeout.
//!
//! | module | what it tests |
//! |---|---|
//! | `calls` | Calls of the reference servers' tools over stdio and streamable HTTP: files, restarts, cancels, visibility, and approval gating one tool but not another. |
//! | `sessions` | A streamable-HTTP server that restarts (a new session) or goes away (shown down, calls wait for it). |
//! | `config` | MCP configuration errors stop start-up with a clear message; secrets stay hidden. |

mod calls;
mod config;
mod sessions;

use agentd_tests::mcp::{
    free_port, mcp_dir, node_server, python, start_everything_http, start_everything_http_on,
    start_python_http_on,
};
use agentd_tests::scripted_files::scripted_deployment;
use agentd_tests::{AgentdProcess, eventually_blocking};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The scripted model: a user message that names a tool calls it (echo and sum arguments);
/// the rest are written for the files, exiting and helper cases.
fn script(root: &Path, outside: &Path) -> String {
    let root = root.display();
    let outside = outside.display();
    format!(
        r#"
[defaults]
text = "OK"

[[rule]]
agent = "helper"
role = "user"
text = "tools: {{{{tools}}}}"
[[rule.tool_calls]]
name = "mcp__everything__echo"
arguments = {{ message = "from a helper" }}

[[rule]]
role = "user"
contains = "__echo"
[[rule.tool_calls]]
name = "{{{{input}}}}"
arguments = {{ message = "hello from agentd" }}

[[rule]]
role = "user"
contains = "sum"
[[rule.tool_calls]]
name = "{{{{input}}}}"
arguments = {{ a = 2, b = 3 }}

[[rule]]
role = "user"
contains = "call-missing"
[[rule.tool_calls]]
name = "mcp__everything__no_such_tool"
arguments = {{}}

[[rule]]
role = "user"
contains = "bad-arguments"
[[rule.tool_calls]]
name = "mcp__everything__echo"
arguments = {{ message = 42 }}

[[rule]]
role = "user"
contains = "write-note"
[[rule.tool_calls]]
name = "mcp__files__write_file"
arguments = {{ path = "{root}/note.txt", content = "hello from agentd" }}

[[rule]]
role = "tool"
contains = "Successfully wrote"
[[rule.tool_calls]]
name = "mcp__files__read_text_file"
arguments = {{ path = "{root}/note.txt" }}

[[rule]]
role = "user"
contains = "read-outside"
[[rule.tool_calls]]
name = "mcp__files__read_text_file"
arguments = {{ path = "{outside}/secret.txt" }}

[[rule]]
role = "user"
contains = "work-exit"
[[rule.tool_calls]]
name = "mcp__exiting__work"
arguments = {{ mode = "exit" }}

[[rule]]
role = "user"
contains = "work-ok"
[[rule.tool_calls]]
name = "mcp__exiting__work"
arguments = {{ mode = "ok" }}

[[rule]]
role = "user"
contains = "slow:"
[[rule.tool_calls]]
name = "mcp__exiting__slow"
arguments = {{ marker = "{root}/slow-marker" }}

[[rule]]
role = "tool"
text = "result: {{{{input}}}}"
"#
    )
}

fn toml_str(s: impl std::fmt::Display) -> String {
    serde_json::to_string(&s.to_string()).unwrap()
}

fn server<'a>(info: &'a Value, name: &str) -> &'a Value {
    info["mcp_servers"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or(&Value::Null)
}

/// The exposed name among `server`'s tools that ends with `suffix` (the reference servers
/// rename tools between versions: the tests read the names from `tools/list`).
fn tool_named(info: &Value, server_name: &str, suffix: &str) -> String {
    server(info, server_name)["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|t| t.ends_with(suffix))
        .unwrap_or_else(|| panic!("{server_name} lists no tool ending with {suffix}: {info}"))
        .to_string()
}

/// The agent's tool results: `(text, is_error)`, in order.
fn tool_results(agentd: &AgentdProcess, id: &str) -> Vec<(String, bool)> {
    agentd.get(&format!("/v1/agents/{id}/thread"))["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["role"] == "tool")
        .map(|e| {
            (
                e["text"].as_str().unwrap_or("").to_string(),
                e["is_error"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

fn wait_for_results(agentd: &AgentdProcess, id: &str, n: usize) -> Vec<(String, bool)> {
    agentd.wait_for(&format!("{n} tool results of {id}"), |a| {
        tool_results(a, id).len() >= n
    });
    tool_results(agentd, id)
}

fn send(agentd: &AgentdProcess, id: &str, text: &str) {
    agentd
        .post(
            &format!("/v1/agents/{id}/messages"),
            json!({ "message": text }),
        )
        .unwrap();
}
