//! `agentctl`: the command-line client of the agentd HTTP API. Human output by default,
//! `--json` for scripts; exit code 0 on success, 1 on an API error, 2 on a usage or connection
//! error.

use anyhow::anyhow;
use clap::{Parser, Subcommand};
use serde_json::{Value, json};
use std::process::ExitCode;

/// Drive a running agentd.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Base URL of the agentd API.
    #[arg(
        long,
        global = true,
        env = "AGENTD_URL",
        default_value = "http://127.0.0.1:7878"
    )]
    url: String,
    /// Print raw JSON.
    #[arg(long, global = true)]
    json: bool,
    /// Bearer token (required when agentd has auth on).
    #[arg(long, global = true, env = "AGENTD_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Spawn a root agent (or a child with --parent) and give it a first message.
    Spawn {
        /// First message.
        prompt: Option<String>,
        /// Agent type (lead, subagent, research, coding, debug, ...).
        #[arg(long = "type", default_value = "lead")]
        agent_type: String,
        /// Title.
        #[arg(long)]
        title: Option<String>,
        /// Parent agent id.
        #[arg(long)]
        parent: Option<String>,
        /// Model provider (a `[providers.<name>]` of agentd's config).
        #[arg(long)]
        provider: Option<String>,
        /// Model name.
        #[arg(long)]
        model: Option<String>,
        /// Priority: critical, high, normal or low.
        #[arg(long)]
        priority: Option<String>,
        /// Agents that must complete first (repeatable).
        #[arg(long = "depends-on")]
        depends_on: Vec<String>,
        /// Environment variable KEY=VALUE (repeatable).
        #[arg(long = "env", value_parser = parse_env)]
        env: Vec<(String, String)>,
        /// A background agent: a root without management tools (a job), or a child whose
        /// output waits its turn in its parent's inbox.
        #[arg(long)]
        background: bool,
    },
    /// Send a message (follow-up) to an agent.
    Send {
        /// Agent id.
        agent_id: String,
        /// The text.
        text: String,
        /// Abort the agent's running turn first.
        #[arg(long)]
        interrupt: bool,
    },
    /// Show one agent.
    Inspect {
        /// Agent id.
        agent_id: String,
    },
    /// List the roots, or the children of --parent.
    List {
        /// Parent agent id.
        #[arg(long)]
        parent: Option<String>,
    },
    /// Show every tree with statuses and costs.
    Tree,
    /// Show an agent's thread.
    Thread {
        /// Agent id.
        agent_id: String,
    },
    /// pause | resume | cancel | terminate | close | delete an agent.
    Control {
        /// Agent id.
        agent_id: String,
        /// The control.
        action: String,
    },
    /// Reset an agent's session.
    Reset {
        /// Agent id.
        agent_id: String,
        /// Seed message of the fresh session.
        #[arg(long)]
        message: Option<String>,
    },
    /// Compact an agent's session.
    Compact {
        /// Agent id.
        agent_id: String,
    },
    /// Show the service's model backend, store and agent types.
    Info,
    /// Send a follow-up to an agent (same as `send`).
    Followup {
        /// Agent id.
        agent_id: String,
        /// The text.
        text: String,
        /// Abort the agent's running turn first.
        #[arg(long)]
        interrupt: bool,
    },
    /// Pause an agent.
    Pause {
        /// Agent id.
        agent_id: String,
    },
    /// Resume a paused agent.
    Resume {
        /// Agent id.
        agent_id: String,
    },
    /// Cancel an agent and its descendants.
    Cancel {
        /// Agent id.
        agent_id: String,
    },
    /// Terminate an agent at once.
    Terminate {
        /// Agent id.
        agent_id: String,
    },
    /// Close an agent (history kept) and its descendants.
    Close {
        /// Agent id.
        agent_id: String,
    },
    /// Delete an agent and its descendants with their history.
    Delete {
        /// Agent id.
        agent_id: String,
    },
    /// Provide what a `waiting_dependency` agent asked for.
    Provide {
        /// Agent id.
        agent_id: String,
        /// The dependency.
        value: String,
    },
    /// Answer a `waiting_question` agent.
    Answer {
        /// Agent id.
        agent_id: String,
        /// The answer.
        answer: String,
    },
    /// Answer a pending call of a service tool (`waiting_tool`): `--result JSON` or
    /// `--error MESSAGE [--code CODE]`.
    ToolResult {
        /// Agent id.
        agent_id: String,
        /// agentd's id of the call (`GET /v1/tool_calls`).
        call_id: String,
        /// The result, as JSON.
        #[arg(long, conflicts_with = "error")]
        result: Option<String>,
        /// The tool's failure, for the model.
        #[arg(long, required_unless_present = "result")]
        error: Option<String>,
        /// The worker's own error code (free text).
        #[arg(long, requires = "error")]
        code: Option<String>,
    },
    /// Approve a tool call that waits for approval (`waiting_review`): it runs.
    Approve {
        /// Agent id.
        agent_id: String,
        /// agentd's id of the call (`GET /v1/tool_calls?status=awaiting_approval`).
        call_id: String,
        /// Why (kept with the call).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Reject a tool call that waits for approval: the model gets the reason as a tool error.
    Reject {
        /// Agent id.
        agent_id: String,
        /// agentd's id of the call (`GET /v1/tool_calls?status=awaiting_approval`).
        call_id: String,
        /// Why, for the model.
        #[arg(long)]
        reason: String,
    },
    /// Replace an agent's budget (then `resume` it if it was paused for its budget).
    Budget {
        /// Agent id.
        agent_id: String,
        /// Most tokens.
        #[arg(long)]
        max_tokens: Option<u64>,
        /// Most USD.
        #[arg(long)]
        max_cost_usd: Option<f64>,
        /// Deadline, ms since the epoch.
        #[arg(long)]
        deadline_ms: Option<u64>,
    },
    /// The work queue: agents with work pending or running, by priority then age.
    Queue,
    /// List an agent's checkpoints, newest first.
    Checkpoints {
        /// Agent id.
        agent_id: String,
    },
    /// Take a checkpoint of an agent now.
    Checkpoint {
        /// Agent id.
        agent_id: String,
    },
    /// Restore an agent to a checkpoint (default: its newest).
    Restore {
        /// Agent id.
        agent_id: String,
        /// Checkpoint id.
        #[arg(long)]
        checkpoint: Option<String>,
    },
    /// Replace an agent's environment variables.
    Env {
        /// Agent id.
        agent_id: String,
        /// KEY=VALUE pairs (none clears the environment).
        #[arg(value_parser = parse_env)]
        vars: Vec<(String, String)>,
    },
    /// Follow live events (all, or one agent's subtree).
    Events {
        /// Only this agent and its descendants.
        #[arg(long)]
        agent: Option<String>,
        /// Stop after this many events.
        #[arg(long)]
        count: Option<usize>,
        /// Keep following (the default; kept for readability in scripts).
        #[arg(long)]
        follow: bool,
    },
}

enum Failure {
    Api(Value),
    Other(anyhow::Error),
}

fn call(
    token: Option<&str>,
    method: &str,
    url: &str,
    body: Option<Value>,
) -> Result<Value, Failure> {
    let mut req = ureq::request(method, url);
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    let res = match body {
        Some(b) => req.send_json(b),
        None => req.call(),
    };
    match res {
        Ok(r) => r
            .into_json::<Value>()
            .map_err(|e| Failure::Other(anyhow!("reading the answer: {e}"))),
        Err(ureq::Error::Status(_, r)) => {
            Err(Failure::Api(r.into_json::<Value>().unwrap_or(Value::Null)))
        }
        Err(e) => Err(Failure::Other(anyhow!("cannot reach agentd at {url}: {e}"))),
    }
}

fn follow_events(cli: &Cli, agent: Option<&str>, count: Option<usize>) -> Result<Value, Failure> {
    use std::io::BufRead;
    let base = cli.url.trim_end_matches('/');
    let url = match agent {
        Some(a) => format!("{base}/v1/events?agent_id={a}"),
        None => format!("{base}/v1/events"),
    };
    let mut req = ureq::get(&url);
    if let Some(t) = &cli.token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    let resp = match req.call() {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => {
            return Err(Failure::Api(r.into_json::<Value>().unwrap_or(Value::Null)));
        }
        Err(e) => return Err(Failure::Other(anyhow!("cannot reach agentd at {url}: {e}"))),
    };
    let mut seen = 0;
    for line in std::io::BufReader::new(resp.into_reader()).lines() {
        let line = line.map_err(|e| Failure::Other(anyhow!("reading events: {e}")))?;
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if cli.json {
            println!("{data}");
        } else {
            let v: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            let agent = v["agent_id"]
                .as_str()
                .or(v["parent_id"].as_str())
                .unwrap_or("-");
            println!(
                "{:<16} {agent}  {data}",
                v["type"].as_str().unwrap_or("event")
            );
        }
        seen += 1;
        if count.is_some_and(|c| seen >= c) {
            break;
        }
    }
    Ok(Value::Null)
}

fn run(cli: &Cli) -> Result<Value, Failure> {
    let base = cli.url.trim_end_matches('/');
    let v1 = |p: &str| format!("{base}/v1{p}");
    let token = cli.token.as_deref();
    let call = |method: &str, url: &str, body: Option<Value>| call(token, method, url, body);
    let control = |agent_id: &str, action: &str| {
        call(
            "POST",
            &v1(&format!("/agents/{agent_id}/control")),
            Some(json!({"control": action})),
        )
    };
    match &cli.command {
        Cmd::Spawn {
            prompt,
            agent_type,
            title,
            parent,
            provider,
            model,
            priority,
            depends_on,
            env,
            background,
        } => call(
            "POST",
            &v1("/agents"),
            Some(json!({
                "agent_type": agent_type, "title": title, "prompt": prompt, "parent_id": parent,
                "provider": provider, "model": model, "priority": priority,
                "depends_on": depends_on, "env": env_map(env), "background": background,
            })),
        ),
        Cmd::Queue => call("GET", &v1("/queue"), None),
        Cmd::Checkpoints { agent_id } => {
            call("GET", &v1(&format!("/agents/{agent_id}/checkpoints")), None)
        }
        Cmd::Checkpoint { agent_id } => call(
            "POST",
            &v1(&format!("/agents/{agent_id}/checkpoints")),
            Some(json!({})),
        ),
        Cmd::Restore {
            agent_id,
            checkpoint,
        } => call(
            "POST",
            &v1(&format!("/agents/{agent_id}/restore")),
            Some(json!({"checkpoint_id": checkpoint})),
        ),
        Cmd::Env { agent_id, vars } => call(
            "POST",
            &v1(&format!("/agents/{agent_id}/env")),
            Some(json!({"env": env_map(vars)})),
        ),
        Cmd::Send {
            agent_id,
            text,
            interrupt,
        } => call(
            "POST",
            &v1(&format!("/agents/{agent_id}/messages")),
            Some(json!({"text": text, "interrupt": interrupt})),
        ),
        Cmd::Inspect { agent_id } => call("GET", &v1(&format!("/agents/{agent_id}")), None),
        Cmd::List { parent } => match parent {
            Some(p) => call("GET", &v1(&format!("/agents?parent_id={p}")), None),
            None => call("GET", &v1("/agents"), None),
        },
        Cmd::Tree => call("GET", &v1("/tree"), None),
        Cmd::Thread { agent_id } => call("GET", &v1(&format!("/agents/{agent_id}/thread")), None),
        Cmd::Control { agent_id, action } => call(
            "POST",
            &v1(&format!("/agents/{agent_id}/control")),
            Some(json!({"control": action})),
        ),
        Cmd::Reset { agent_id, message } => call(
            "POST",
            &v1(&format!("/agents/{agent_id}/reset")),
            Some(json!({"message": message})),
        ),
        Cmd::Compact { agent_id } => call(
            "POST",
            &v1(&format!("/agents/{agent_id}/compact")),
            Some(json!({})),
        ),
        Cmd::Info => call("GET", &v1("/info"), None),
        Cmd::Followup {
            agent_id,
            text,
            interrupt,
        } => call(
            "POST",
            &v1(&format!("/agents/{agent_id}/messages")),
            Some(json!({"text": text, "interrupt": interrupt})),
        ),
        Cmd::Pause { agent_id } => control(agent_id, "pause"),
        Cmd::Resume { agent_id } => control(agent_id, "resume"),
        Cmd::Cancel { agent_id } => control(agent_id, "cancel"),
        Cmd::Terminate { agent_id } => control(agent_id, "terminate"),
        Cmd::Close { agent_id } => control(agent_id, "close"),
        Cmd::Delete { agent_id } => control(agent_id, "delete"),
        Cmd::Provide { agent_id, value } => call(
            "POST",
            &v1(&format!("/agents/{agent_id}/dependency")),
            Some(json!({"value": value})),
        ),
        Cmd::Answer { agent_id, answer } => call(
            "POST",
            &v1(&format!("/agents/{agent_id}/answer")),
            Some(json!({"answer": answer})),
        ),
        Cmd::ToolResult {
            agent_id,
            call_id,
            result,
            error,
            code,
        } => {
            let body = match (result, error) {
                (Some(text), _) => {
                    let value: Value = serde_json::from_str(text).map_err(|e| {
                        Failure::Other(anyhow::anyhow!("--result is not JSON: {e}"))
                    })?;
                    json!({ "result": value })
                }
                (None, Some(message)) => json!({"error": {"message": message, "code": code}}),
                (None, None) => {
                    return Err(Failure::Other(anyhow::anyhow!("give --result or --error")));
                }
            };
            call(
                "POST",
                &v1(&format!("/agents/{agent_id}/tool_results/{call_id}")),
                Some(body),
            )
        }
        Cmd::Approve {
            agent_id,
            call_id,
            reason,
        } => call(
            "POST",
            &v1(&format!("/agents/{agent_id}/approvals/{call_id}")),
            Some(json!({"approve": true, "reason": reason})),
        ),
        Cmd::Reject {
            agent_id,
            call_id,
            reason,
        } => call(
            "POST",
            &v1(&format!("/agents/{agent_id}/approvals/{call_id}")),
            Some(json!({"approve": false, "reason": reason})),
        ),
        Cmd::Budget {
            agent_id,
            max_tokens,
            max_cost_usd,
            deadline_ms,
        } => call(
            "POST",
            &v1(&format!("/agents/{agent_id}/budget")),
            Some(
                json!({"max_tokens": max_tokens, "max_cost_usd": max_cost_usd, "deadline_ms": deadline_ms}),
            ),
        ),
        Cmd::Events { agent, count, .. } => follow_events(cli, agent.as_deref(), *count),
    }
}

/// Parses `KEY=VALUE`.
fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not KEY=VALUE")),
    }
}

fn env_map(vars: &[(String, String)]) -> serde_json::Map<String, Value> {
    vars.iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect()
}

fn print_tree(node: &Value, indent: usize, out: &mut String) {
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
        print_tree(c, indent + 1, out);
    }
}

fn human(cmd: &Cmd, v: &Value) -> String {
    match cmd {
        Cmd::Tree => {
            let mut out = String::new();
            for root in v["roots"].as_array().into_iter().flatten() {
                print_tree(root, 0, &mut out);
            }
            if out.is_empty() {
                out.push_str("(no agents)\n");
            }
            out
        }
        Cmd::Thread { .. } => {
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
        Cmd::List { .. } => {
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
        Cmd::Queue => {
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
        Cmd::Checkpoints { .. } => {
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
        Cmd::Spawn { .. } => format!(
            "spawned {} ({}, {})\n",
            v["agent_id"].as_str().unwrap_or("-"),
            v["agent_type"].as_str().unwrap_or("-"),
            v["status"].as_str().unwrap_or("-")
        ),
        _ => format!("{}\n", serde_json::to_string_pretty(v).unwrap_or_default()),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(_) if matches!(cli.command, Cmd::Events { .. }) => ExitCode::SUCCESS,
        Ok(v) => {
            if cli.json {
                println!("{v}");
            } else {
                print!("{}", human(&cli.command, &v));
            }
            ExitCode::SUCCESS
        }
        Err(Failure::Api(v)) => {
            if cli.json {
                println!("{v}");
            } else {
                eprintln!(
                    "error {}: {}",
                    v["code"].as_str().unwrap_or("unknown"),
                    v["message"].as_str().unwrap_or("")
                );
            }
            ExitCode::from(1)
        }
        Err(Failure::Other(e)) => {
            let e: anyhow::Error = e.context("agentctl");
            eprintln!("{e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_is_printed_nested() {
        let v = json!({"roots": [{"title": "Lead", "status": "idle", "agent_id": "a", "agent_type": "lead",
            "tree_tokens": 10, "tree_cost_usd": 0.5,
            "children": [{"title": "Coder", "status": "completed", "agent_id": "b", "agent_type": "coding",
                          "tree_tokens": 4, "tree_cost_usd": 0.1, "children": []}]}]});
        let out = human(&Cmd::Tree, &v);
        assert!(out.contains("Lead [idle] a (lead)"));
        assert!(out.contains("  Coder [completed] b (coding)"));
    }
}
