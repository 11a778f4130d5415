//! Commands on agents: spawn, messages, reads, controls, what a waiting agent asked for,
//! budget and environment.

use super::{env_map, parse_env};
use crate::client::{Client, Failure};
use crate::output::{self, Output};
use clap::Subcommand;
use serde_json::json;

#[derive(Subcommand)]
pub enum Agents {
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
    /// Replace an agent's environment variables.
    Env {
        /// Agent id.
        agent_id: String,
        /// KEY=VALUE pairs (none clears the environment).
        #[arg(value_parser = parse_env)]
        vars: Vec<(String, String)>,
    },
}

impl Agents {
    pub fn run(&self, client: &Client, out: &Output) -> Result<(), Failure> {
        let control = |agent_id: &str, action: &str| {
            client.post(
                &format!("/agents/{agent_id}/control"),
                json!({"control": action}),
            )
        };
        let v = match self {
            Agents::Spawn {
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
            } => {
                let v = client.post(
                    "/agents",
                    json!({
                        "agent_type": agent_type, "title": title, "prompt": prompt,
                        "parent_id": parent, "provider": provider, "model": model,
                        "priority": priority, "depends_on": depends_on, "env": env_map(env),
                        "background": background,
                    }),
                )?;
                out.answer(&v, output::spawned);
                return Ok(());
            }
            Agents::Send {
                agent_id,
                text,
                interrupt,
            }
            | Agents::Followup {
                agent_id,
                text,
                interrupt,
            } => client.post(
                &format!("/agents/{agent_id}/messages"),
                json!({"text": text, "interrupt": interrupt}),
            )?,
            Agents::Inspect { agent_id } => client.get(&format!("/agents/{agent_id}"))?,
            Agents::List { parent } => {
                let v = match parent {
                    Some(p) => client.get(&format!("/agents?parent_id={p}"))?,
                    None => client.get("/agents")?,
                };
                out.answer(&v, output::agents);
                return Ok(());
            }
            Agents::Thread { agent_id } => {
                let v = client.get(&format!("/agents/{agent_id}/thread"))?;
                out.answer(&v, output::thread);
                return Ok(());
            }
            Agents::Control { agent_id, action } => control(agent_id, action)?,
            Agents::Pause { agent_id } => control(agent_id, "pause")?,
            Agents::Resume { agent_id } => control(agent_id, "resume")?,
            Agents::Cancel { agent_id } => control(agent_id, "cancel")?,
            Agents::Terminate { agent_id } => control(agent_id, "terminate")?,
            Agents::Close { agent_id } => control(agent_id, "close")?,
            Agents::Delete { agent_id } => control(agent_id, "delete")?,
            Agents::Provide { agent_id, value } => client.post(
                &format!("/agents/{agent_id}/dependency"),
                json!({"value": value}),
            )?,
            Agents::Answer { agent_id, answer } => client.post(
                &format!("/agents/{agent_id}/answer"),
                json!({"answer": answer}),
            )?,
            Agents::Budget {
                agent_id,
                max_tokens,
                max_cost_usd,
                deadline_ms,
            } => client.post(
                &format!("/agents/{agent_id}/budget"),
                json!({"max_tokens": max_tokens, "max_cost_usd": max_cost_usd, "deadline_ms": deadline_ms}),
            )?,
            Agents::Env { agent_id, vars } => client.post(
                &format!("/agents/{agent_id}/env"),
                json!({"env": env_map(vars)}),
            )?,
        };
        out.answer(&v, output::pretty);
        Ok(())
    }
}
