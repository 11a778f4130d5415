//! The commands, grouped as the API's routes are (`services/agentd/src/http/`): each group
//! declares its subcommands' arguments, the requests they make and how their answers print.

mod agents;
mod operations;
mod sessions;
mod tools;

use crate::client::{Client, Failure};
use crate::output::Output;
use clap::Subcommand;
use serde_json::Value;

/// Every subcommand.
#[derive(Subcommand)]
pub enum Cmd {
    #[command(flatten)]
    Agents(agents::AgentCommands),
    #[command(flatten)]
    Sessions(sessions::SessionCommands),
    #[command(flatten)]
    Tools(tools::ToolCommands),
    #[command(flatten)]
    Operations(operations::OperationCommands),
}

impl Cmd {
    /// Runs the command against `client` and prints what it answers to `out`.
    pub fn run(&self, client: &Client, out: &Output) -> Result<(), Failure> {
        match self {
            Cmd::Agents(c) => c.run(client, out),
            Cmd::Sessions(c) => c.run(client, out),
            Cmd::Tools(c) => c.run(client, out),
            Cmd::Operations(c) => c.run(client, out),
        }
    }
}

/// Parses `KEY=VALUE`.
fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not KEY=VALUE")),
    }
}

/// `KEY=VALUE` pairs as the JSON map the API takes.
fn env_map(vars: &[(String, String)]) -> serde_json::Map<String, Value> {
    vars.iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect()
}
