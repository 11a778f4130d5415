//! What agentctl prints: the API's JSON as it came with `--json`, otherwise a few lines a
//! person reads (tables of agents, tasks and checkpoints, the tree, the thread), falling back
//! to pretty-printed JSON for answers without a table of their own.

use serde_json::Value;

/// Where answers go, and in which form.
pub struct Output {
    json: bool,
}

impl Output {
    /// `json`: print the API's JSON instead of the human form.
    pub fn new(json: bool) -> Output {
        Output { json }
    }

    /// Whether answers are printed as JSON.
    pub fn json(&self) -> bool {
        self.json
    }

    /// Prints an answer: its JSON, or what `human` makes of it.
    pub fn answer(&self, v: &Value, human: impl FnOnce(&Value) -> String) {
        if self.json {
            println!("{v}");
        } else {
            print!("{}", human(v));
        }
    }

    /// Prints one line (an event as it arrives).
    pub fn line(&self, line: &str) {
        println!("{line}");
    }

    /// Prints an error the API answered: its JSON on stdout with `--json`, else its code and
    /// message on stderr.
    pub fn api_error(&self, v: &Value) {
        if self.json {
            println!("{v}");
        } else {
            eprintln!(
                "error {}: {}",
                v["code"].as_str().unwrap_or("unknown"),
                v["message"].as_str().unwrap_or("")
            );
        }
    }
}

/// Any answer, pretty-printed.
pub fn pretty(v: &Value) -> String {
    format!("{}\n", serde_json::to_string_pretty(v).unwrap_or_default())
}

/// `{roots: [node…]}`: one line per agent, children indented under their parent.
pub fn tree(v: &Value) -> String {
    let mut out = String::new();
    for root in v["roots"].as_array().into_iter().flatten() {
        tree_node(root, 0, &mut out);
    }
    if out.is_empty() {
        out.push_str("(no agents)\n");
    }
    out
}

fn tree_node(node: &Value, indent: usize, out: &mut String) {
    let s = |k: &str| node[k].as_str().unwrap_or("-").to_string();
    out.push_str(&format!(
        "{:indent$}{} [{}] {} ({}) tokens={} cost=${:.4}\n",
        "",
        s("title"),
        s("status"),
        s("agent_id"),
        s("agent_type"),
        node["tree_tokens"].as_u64().unwrap_or(0),
        node["tree_cost_usd"].as_f64().unwrap_or(0.0),
        indent = indent * 2
    ));
    for c in node["children"].as_array().into_iter().flatten() {
        tree_node(c, indent + 1, out);
    }
}

/// `{entries: [entry…]}`: one line per entry, its role first, then the calls it made.
pub fn thread(v: &Value) -> String {
    let mut out = String::new();
    for e in v["entries"].as_array().into_iter().flatten() {
        let role = e["role"].as_str().unwrap_or("?");
        let text = e["text"].as_str().unwrap_or("");
        out.push_str(&format!("{role:>9}: {text}\n"));
        for call in e["tool_calls"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "{:>9}  -> {}({})\n",
                "",
                call["name"].as_str().unwrap_or("?"),
                call["arguments"]
            ));
        }
    }
    out
}

/// `{agents: [view…]}`: id, status, type and title of each.
pub fn agents(v: &Value) -> String {
    let mut out = String::new();
    for a in v["agents"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{}  {:<18} {:<10} {}\n",
            a["agent_id"].as_str().unwrap_or("-"),
            a["status"].as_str().unwrap_or("-"),
            a["agent_type"].as_str().unwrap_or("-"),
            a["title"].as_str().unwrap_or("-")
        ));
    }
    out
}

/// `{tasks: [task…]}`: priority, queue state, agent, pending items and what it waits for.
pub fn queue(v: &Value) -> String {
    let mut out = String::new();
    for t in v["tasks"].as_array().into_iter().flatten() {
        let deps: Vec<&str> = t["depends_on"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        out.push_str(&format!(
            "{:<8} {:<19} {}  {:<16} pending={} {}{}\n",
            t["priority"].as_str().unwrap_or("-"),
            t["queue_state"].as_str().unwrap_or("-"),
            t["agent_id"].as_str().unwrap_or("-"),
            t["title"].as_str().unwrap_or("-"),
            t["pending"].as_u64().unwrap_or(0),
            t["status_reason"].as_str().unwrap_or(""),
            if deps.is_empty() {
                String::new()
            } else {
                format!(" depends_on={}", deps.join(","))
            },
        ));
    }
    if out.is_empty() {
        out.push_str("(queue empty)\n");
    }
    out
}

/// `{checkpoints: [summary…]}`: one line per checkpoint, newest first.
pub fn checkpoints(v: &Value) -> String {
    let mut out = String::new();
    for c in v["checkpoints"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{}  {:<10} {:<20} phase={} entries={} pending={}  {}\n",
            c["checkpoint_id"].as_str().unwrap_or("-"),
            c["reason"].as_str().unwrap_or("-"),
            c["status"].as_str().unwrap_or("-"),
            c["phase"]
                .as_u64()
                .map(|p| p.to_string())
                .unwrap_or("-".into()),
            c["entries"].as_u64().unwrap_or(0),
            c["pending_actions"].as_array().map(Vec::len).unwrap_or(0),
            c["trigger"].as_str().unwrap_or(""),
        ));
    }
    if out.is_empty() {
        out.push_str("(no checkpoints)\n");
    }
    out
}

/// A new agent's view: its id, type and status.
pub fn spawned(v: &Value) -> String {
    format!(
        "spawned {} ({}, {})\n",
        v["agent_id"].as_str().unwrap_or("-"),
        v["agent_type"].as_str().unwrap_or("-"),
        v["status"].as_str().unwrap_or("-")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tree_is_printed_nested() {
        let v = json!({"roots": [{"title": "Lead", "status": "idle", "agent_id": "a", "agent_type": "lead",
            "tree_tokens": 10, "tree_cost_usd": 0.5,
            "children": [{"title": "Coder", "status": "completed", "agent_id": "b", "agent_type": "coding",
                          "tree_tokens": 4, "tree_cost_usd": 0.1, "children": []}]}]});
        let out = tree(&v);
        assert!(out.contains("Lead [idle] a (lead)"));
        assert!(out.contains("  Coder [completed] b (coding)"));
    }
}
