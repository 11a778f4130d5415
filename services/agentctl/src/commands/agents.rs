//! Commands on agents: spawn, messages, reads, controls, what a waiting agent asked for,
//! budget and environment.

use super::{env_map, parse_env};
use crate::client::{Client, Failure};
use crate::output::{self, Output};
use clap::Subcommand;
use serde_json::{Value, json};

#[derive(Subcommand)]
pub enum AgentCommands {
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
        /// Id of an agent this one waits for before it starts (repeatable): a sub-agent until
        /// it yields, a root or a worker until it has handled what was queued for it.
        #[arg(long = "depends-on", value_name = "AGENT_ID")]
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
        /// Send it at most once: the same command run again with the same key (after a
        /// failure, say) is queued once (kept 24 h).
        #[arg(long, value_name = "KEY")]
        idempotency_key: Option<String>,
    },
    /// Show one agent: a summary, or its whole view with --json.
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
    /// List an agent's children, live and closed.
    Children {
        /// Agent id.
        agent_id: String,
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
    /// Delete an agent and its descendants with their history (`DELETE /v1/agents/{id}`).
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

impl AgentCommands {
    pub fn run(&self, client: &Client, out: &Output) -> Result<(), Failure> {
        let control = |agent_id: &str, action: &str| {
            client.post(
                &format!("/v1/agents/{agent_id}/control"),
                json!({"control": action}),
            )
        };
        let (v, human): (_, fn(&Value) -> String) = match self {
            AgentCommands::Spawn {
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
                let spawned = client.post(
                    "/v1/agents",
                    json!({
                        "agent_type": agent_type, "title": title, "prompt": prompt,
                        "parent_id": parent, "provider": provider, "model": model,
                        "priority": priority, "depends_on": depends_on, "env": env_map(env),
                        "background": background,
                    }),
                )?;
                (now(client, spawned), output::spawned)
            }
            AgentCommands::Send {
                agent_id,
                text,
                interrupt,
                idempotency_key,
            } => (
                client.post_keyed(
                    &format!("/v1/agents/{agent_id}/messages"),
                    json!({"text": text, "interrupt": interrupt}),
                    idempotency_key.as_deref(),
                )?,
                output::pretty,
            ),
            AgentCommands::Followup {
                agent_id,
                text,
                interrupt,
            } => (
                client.post(
                    &format!("/v1/agents/{agent_id}/messages"),
                    json!({"text": text, "interrupt": interrupt}),
                )?,
                output::pretty,
            ),
            AgentCommands::Inspect { agent_id } => (
                client.get(&format!("/v1/agents/{agent_id}"))?,
                output::inspection,
            ),
            AgentCommands::List { parent } => (
                client.get_with("/v1/agents", &[("parent_id", parent.as_deref())])?,
                output::agents,
            ),
            AgentCommands::Children { agent_id } => (
                client.get(&format!("/v1/agents/{agent_id}/children"))?,
                output::agents,
            ),
            AgentCommands::Thread { agent_id } => (
                client.get(&format!("/v1/agents/{agent_id}/thread"))?,
                output::thread,
            ),
            AgentCommands::Control { agent_id, action } => (control(agent_id, action)?, output::pretty),
            AgentCommands::Pause { agent_id } => (control(agent_id, "pause")?, output::pretty),
            AgentCommands::Resume { agent_id } => (control(agent_id, "resume")?, output::pretty),
            AgentCommands::Cancel { agent_id } => (control(agent_id, "cancel")?, output::pretty),
            AgentCommands::Terminate { agent_id } => (control(agent_id, "terminate")?, output::pretty),
            AgentCommands::Close { agent_id } => (control(agent_id, "close")?, output::pretty),
            AgentCommands::Delete { agent_id } => (
                client.delete(&format!("/v1/agents/{agent_id}"))?,
                output::pretty,
            ),
            AgentCommands::Provide { agent_id, value } => (
                client.post(
                    &format!("/v1/agents/{agent_id}/dependency"),
                    json!({"value": value}),
                )?,
                output::pretty,
            ),
            AgentCommands::Answer { agent_id, answer } => (
                client.post(
                    &format!("/v1/agents/{agent_id}/answer"),
                    json!({"answer": answer}),
                )?,
                output::pretty,
            ),
            AgentCommands::Budget {
                agent_id,
                max_tokens,
                max_cost_usd,
                deadline_ms,
            } => (
                client.post(
                    &format!("/v1/agents/{agent_id}/budget"),
                    json!({"max_tokens": max_tokens, "max_cost_usd": max_cost_usd, "deadline_ms": deadline_ms}),
                )?,
                output::pretty,
            ),
            AgentCommands::Env { agent_id, vars } => (
                client.post(
                    &format!("/v1/agents/{agent_id}/env"),
                    json!({"env": env_map(vars)}),
                )?,
                output::pretty,
            ),
        };
        out.answer(&v, human)
    }
}

/// The agent `spawned` as it is now. The spawn answers the record as it was created (`idle`,
/// before its first message arrives), so agentctl asks again; if that fails (the agent was
/// deleted meanwhile, its process did not answer), the spawn's answer is all there is.
fn now(client: &Client, spawned: Value) -> Value {
    match spawned["agent_id"].as_str() {
        Some(id) => client.get(&format!("/v1/agents/{id}")).unwrap_or(spawned),
        None => spawned,
    }
}
