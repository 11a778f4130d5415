//! The management surface through real actors: every tool's success path, every rule's error
//! code, interrupts, close/re-open, delete, cascades, limits, lifecycle controls and scoping.
//!
//! | module | what it tests |
//! |---|---|
//! | `tools` | Every management tool on its success path, every rule with its error code, argument schemas, reset and compact arguments, who may call the tools and on which agents. |
//! | `lifecycle` | Interrupts, cascading cancels, pause, resume and terminate, delete, the fan-out and live-agent limits. |
//! | `spawns` | What a spawn gives its sub-agent: its allowed tools, context files from allowed directories only, the stacked system prompt. |

mod lifecycle;
mod spawns;
mod tools;

use agentd_actors::AgentType;
use agentd_proto::{
    AgentStatus, AgentdError, Command, Control, ErrorCode, Event, Role, SpawnRequest,
};
use agentd_store::RedbStore;
use agentd_tests::*;
use serde_json::{Value, json};
use std::sync::Arc;

const SCRIPT: &str = r#"
[[rule]]
agent = "coding"
role = "user"
contains = "long task"
delay_ms = 1000
text = "long task done"

[[rule]]
agent = "coding"
role = "user"
contains = "urgent"
text = "handled urgent"

[[rule]]
agent = "coding"
role = "user"
contains = "use the clock"
[[rule.tool_calls]]
name = "current_time"

[[rule]]
agent = "coding"
role = "user"
contains = "add tests"
text = """coder: add tests
=== PHASE 2 COMPLETE ===
[ERROR]lint failed[/ERROR]"""

[[rule]]
agent = "coding"
role = "user"
text = "coder: {{input}}"

[[rule]]
agent = "coding"
role = "tool"
text = "clock answer: {{input}}"

[[rule]]
agent = "mgr"
role = "user"
contains = "spawn grandchild"
[[rule.tool_calls]]
name = "spawn_agent"
arguments = { agent_type = "coding", prompt = "leaf work: long task" }

[[rule]]
agent = "mgr"
role = "tool"
text = "grandchild spawned"

[[rule]]
purpose = "compact"
text = "SUMMARY of earlier work"

[[rule]]
agent = "lead"
text = "lead: {{input}}"
"#;

/// [`cast`] with `coding` allowed `current_time`, and a root type `mgr` ("Manager") that
/// grants management.
fn managing_cast() -> Vec<AgentType> {
    let mut mgr = agent_type("mgr", "Manager", &[]);
    mgr.grants_management = true;
    cast().with_tools("coding", &["current_time"]).and(mgr)
}

async fn tool(
    sys: &TestSystem,
    caller: &str,
    name: &str,
    args: Value,
) -> Result<Value, AgentdError> {
    sys.system.invoke_tool(Some(caller), name, args).await
}

async fn spawn_coder(sys: &TestSystem, parent: &str, prompt: &str) -> String {
    let r = tool(
        sys,
        parent,
        "spawn_agent",
        json!({"agent_type": "coding", "prompt": prompt}),
    )
    .await
    .unwrap();
    r["agent_id"].as_str().unwrap().to_string()
}

fn code(r: Result<Value, AgentdError>) -> Option<ErrorCode> {
    r.err().map(|e| e.code)
}
