//! The files of a real `agentd` on the scripted model, written in a test's directory: agent
//! types, the script, and an `agentd.toml`; and the clerk the tool tests share, whose turn
//! calls the service tool `lookup_order`.

use std::path::Path;

/// Writes the agent types (`(name, TOML)`, to `<dir>/types/<name>.toml`), the scripted model's
/// `script` (`<dir>/script.toml`) and `settings` (`<dir>/agentd.toml`), and answers the
/// environment that points `agentd` at them. The store is the caller's to add
/// ([`embedded_store`], or Redis).
pub fn scripted_deployment(
    dir: &Path,
    types: &[(&str, &str)],
    script: &str,
    settings: &str,
) -> Vec<(&'static str, String)> {
    let types_dir = dir.join("types");
    std::fs::create_dir_all(&types_dir).expect("the types directory");
    for (name, toml) in types {
        std::fs::write(types_dir.join(format!("{name}.toml")), toml).expect("an agent type");
    }
    let script_file = dir.join("script.toml");
    std::fs::write(&script_file, script).expect("the script");
    let settings_file = dir.join("agentd.toml");
    std::fs::write(&settings_file, settings).expect("agentd.toml");
    vec![
        ("AGENTD_CONFIG", settings_file.display().to_string()),
        ("AGENTD__AGENTS__DIR", types_dir.display().to_string()),
        ("AGENTD__MODEL__SCRIPT", script_file.display().to_string()),
    ]
}

/// The embedded store in `<dir>/data`.
pub fn embedded_store(dir: &Path) -> (&'static str, String) {
    (
        "AGENTD__STORE__DATA_DIR",
        dir.join("data").display().to_string(),
    )
}

/// The clerk's type: `lookup_order` and `current_time`.
pub const CLERK: &str =
    "name = \"clerk\"\ntitle = \"Clerk\"\ntools = [\"lookup_order\", \"current_time\"]\n";

/// The clerk's script: a message about an order calls `lookup_order` for order `A-1` and
/// `current_time` in one step; the results come back as `Result: …`; any other message is
/// answered `got: …`.
pub const CLERK_SCRIPT: &str = r#"
[[rule]]
agent = "clerk"
role = "user"
contains = "order"
text = "looking it up"
[[rule.tool_calls]]
name = "lookup_order"
arguments = { order_id = "A-1" }
[[rule.tool_calls]]
name = "current_time"

[[rule]]
agent = "clerk"
role = "tool"
text = "Result: {{input}}"

[[rule]]
agent = "clerk"
role = "user"
text = "got: {{input}}"
"#;

/// `[tools.lookup_order]`: a service tool answered by another service within `timeout_ms`,
/// with `approval` (`"always"` or `"never"`).
pub fn lookup_order(timeout_ms: u64, approval: &str) -> String {
    format!(
        r#"
[tools.lookup_order]
kind = "service"
description = "Look an order up by id."
parameters = {{ type = "object", properties = {{ order_id = {{ type = "string" }} }}, required = ["order_id"] }}
timeout_ms = {timeout_ms}
approval = "{approval}"
"#
    )
}
