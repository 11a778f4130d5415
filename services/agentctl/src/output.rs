//! What agentctl prints: the API's JSON as it came with `--json`, otherwise a few lines a
//! person reads (tables of agents, tasks and checkpoints, the tree, the thread), falling back
//! to pretty-printed JSON for answers without a table of their own.

use crate::client::Failure;
use anyhow::anyhow;
use serde_json::Value;
use std::io::Write;

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
    pub fn answer(&self, v: &Value, human: impl FnOnce(&Value) -> String) -> Result<(), Failure> {
        if self.json {
            self.text(&format!("{v}\n"))
        } else {
            self.text(&human(v))
        }
    }

    /// Prints one line (an event as it arrives).
    pub fn line(&self, line: &str) -> Result<(), Failure> {
        self.text(&format!("{line}\n"))
    }

    /// Writes `text` to stdout and flushes it (events are read as they come). A reader that
    /// went away (`agentctl … | head`) is [`Failure::OutputClosed`], not a panic.
    pub fn text(&self, text: &str) -> Result<(), Failure> {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::BrokenPipe => Failure::OutputClosed,
                _ => Failure::Other(anyhow!("writing the answer: {e}")),
            })
    }

    /// Prints an error the API answered: its JSON on stdout with `--json`, else its code and
    /// message on stderr.
    pub fn api_error(&self, v: &Value) {
        if self.json {
            // A closed stdout leaves nothing to tell: the exit code says it.
            let _ = self.line(&v.to_string());
        } else {
            error(&format!(
                "error {}: {}",
                v["code"].as_str().unwrap_or("unknown"),
                v["message"].as_str().unwrap_or("")
            ));
        }
    }
}

/// Writes a line to stderr; a closed stderr is ignored (the exit code still tells).
pub fn error(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
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
    if out.is_empty() {
        out.push_str("(no agents)\n");
    }
    out
}

/// An agent's view (`inspect`): what it is, where it stands in its tree, what it does and
/// what it cost, one labelled line each; lines without a value are left out.
pub fn inspection(v: &Value) -> String {
    let s = |k: &str| v[k].as_str().unwrap_or("-");
    let mut out = format!("{} {} ({})\n", s("title"), s("agent_id"), s("agent_type"));
    let mut field = |label: &str, value: String| {
        out.push_str(&format!("  {label:<11} {value}\n"));
    };
    field(
        "status",
        match v["status_reason"].as_str() {
            Some(reason) => format!("{} ({reason})", s("status")),
            None => s("status").to_string(),
        },
    );
    if let Some(step) = v["current_step"].as_str() {
        field("step", step.to_string());
    }
    let mut progress = format!("{:.0}%", v["progress"].as_f64().unwrap_or(0.0) * 100.0);
    if let Some(phase) = v["phase"].as_u64() {
        progress.push_str(&format!(", phase {phase}"));
    }
    field("progress", progress);
    field(
        "tree",
        format!(
            "root {}, parent {}, depth {}, {} children{}",
            s("root_id"),
            s("parent_id"),
            v["depth"].as_u64().unwrap_or(0),
            v["children"].as_u64().unwrap_or(0),
            if v["foreground"].as_bool() == Some(true) {
                ", foreground"
            } else {
                ""
            }
        ),
    );
    let live = match v["live"].as_bool() {
        Some(true) => format!(
            "live, inbox {}, {}",
            v["inbox"].as_u64().unwrap_or(0),
            if v["turn_running"].as_bool() == Some(true) {
                "a turn running"
            } else {
                "no turn running"
            }
        ),
        Some(false) => "not live (no actor)".to_string(),
        None => "unknown (its process did not answer)".to_string(),
    };
    field("actor", live);
    field(
        "priority",
        match names(&v["depends_on"]) {
            deps if deps.is_empty() => s("priority").to_string(),
            deps => format!("{}, depends on {}", s("priority"), deps.join(", ")),
        },
    );
    field(
        "model",
        format!(
            "{} / {}",
            v["provider"].as_str().unwrap_or("(default provider)"),
            v["model"].as_str().unwrap_or("(default model)")
        ),
    );
    let usage = &v["usage"];
    field(
        "usage",
        format!(
            "{} tokens (input {}, output {}, cache write {}, cache read {}), ${:.4}; turns {}, attempts {}",
            v["tokens_used"].as_u64().unwrap_or(0),
            usage["input"].as_u64().unwrap_or(0),
            usage["output"].as_u64().unwrap_or(0),
            usage["cache_write"].as_u64().unwrap_or(0),
            usage["cache_read"].as_u64().unwrap_or(0),
            v["cost_usd"].as_f64().unwrap_or(0.0),
            v["turns"].as_u64().unwrap_or(0),
            v["attempts"].as_u64().unwrap_or(0),
        ),
    );
    if let Some(budget) = v["budget"].as_object() {
        let limits: Vec<String> = budget
            .iter()
            .filter(|(_, limit)| !limit.is_null())
            .map(|(name, limit)| format!("{name} {limit}"))
            .collect();
        field("budget", limits.join(", "));
    }
    if let Some(at) = v["resume_at_ms"].as_u64() {
        field("resume at", format!("{at} ms"));
    }
    let env = names(&v["env"]);
    if !env.is_empty() {
        field("env", env.join(", "));
    }
    if !v["result"].is_null() {
        field("result", text_or_json(&v["result"]));
    }
    if let Some(error) = v["last_error"].as_str() {
        field("last error", error.to_string());
    }
    if let Some(trace) = v["trace_id"].as_str() {
        field("trace", trace.to_string());
    }
    field("updated", s("last_update").to_string());
    out
}

/// The strings of a JSON array.
fn names(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// A string as it is, anything else as JSON.
fn text_or_json(v: &Value) -> String {
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

/// `{tool_calls: [call…]}`: the open calls, oldest first.
pub fn tool_calls(v: &Value) -> String {
    let mut out = String::new();
    for c in v["tool_calls"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{}  {:<17} {}  {} ({}) {}\n",
            c["call_id"].as_str().unwrap_or("-"),
            c["status"].as_str().unwrap_or("-"),
            c["agent_id"].as_str().unwrap_or("-"),
            c["tool"].as_str().unwrap_or("-"),
            c["kind"].as_str().unwrap_or("-"),
            c["arguments"],
        ));
    }
    if out.is_empty() {
        out.push_str("(no open tool calls)\n");
    }
    out
}

/// `{tools: [{name, description, parameters}…]}`: each tool's name and the first line of its
/// description.
pub fn tools(v: &Value) -> String {
    let mut out = String::new();
    for t in v["tools"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{:<24} {}\n",
            t["name"].as_str().unwrap_or("-"),
            t["description"]
                .as_str()
                .and_then(|d| d.lines().next())
                .unwrap_or("")
        ));
    }
    if out.is_empty() {
        out.push_str("(no tools)\n");
    }
    out
}

/// `{status, …}` of the health and readiness probes.
pub fn probe(v: &Value) -> String {
    let list = |key: &str| {
        v[key].as_array().map(|ks| {
            ks.iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    let status = v["status"].as_str().unwrap_or("-");
    match (list("partitions_owned"), list("partitions_degraded")) {
        (Some(owned), Some(degraded)) if !degraded.is_empty() => {
            format!("{status} (partitions owned: {owned}; degraded, not served now: {degraded})\n")
        }
        (Some(owned), _) => format!("{status} (partitions owned: {owned})\n"),
        (None, _) => format!("{status}\n"),
    }
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
        out.push_str(&checkpoint_row(c));
    }
    if out.is_empty() {
        out.push_str("(no checkpoints)\n");
    }
    out
}

fn checkpoint_row(c: &Value) -> String {
    format!(
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
    )
}

/// One checkpoint in full: its summary line, the conversation it holds (as `thread` prints
/// it), what was pending and its environment's names.
pub fn checkpoint(c: &Value) -> String {
    let mut out = checkpoint_row(c);
    out.push_str(&thread(&serde_json::json!({"entries": c["conversation"]})));
    for action in names(&c["pending_actions"]) {
        out.push_str(&format!("  pending: {action}\n"));
    }
    let env: Vec<&str> = c["environment"]
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if !env.is_empty() {
        out.push_str(&format!("  env: {}\n", env.join(", ")));
    }
    out
}

/// A new agent's view (as `inspect` shows it right after the spawn): its id, type and status.
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
