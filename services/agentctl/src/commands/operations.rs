//! Commands on the service as a whole: its description, every tree, the work queue and the
//! live events.

use crate::client::{Client, Failure};
use crate::output::{self, Output};
use anyhow::anyhow;
use clap::Subcommand;
use serde_json::Value;
use std::io::BufRead;

#[derive(Subcommand)]
pub enum Operations {
    /// Show every tree with statuses and costs.
    Tree,
    /// Show the service's model backend, store and agent types.
    Info,
    /// The work queue: agents with work pending or running, by priority then age.
    Queue,
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

impl Operations {
    pub fn run(&self, client: &Client, out: &Output) -> Result<(), Failure> {
        match self {
            Operations::Tree => out.answer(&client.get("/tree")?, output::tree),
            Operations::Info => out.answer(&client.get("/info")?, output::pretty),
            Operations::Queue => out.answer(&client.get("/queue")?, output::queue),
            Operations::Events { agent, count, .. } => {
                follow_events(client, out, agent.as_deref(), *count)?;
            }
        }
        Ok(())
    }
}

/// Prints the events of the stream as they come, until `count` of them or the stream's end.
fn follow_events(
    client: &Client,
    out: &Output,
    agent: Option<&str>,
    count: Option<usize>,
) -> Result<(), Failure> {
    let mut seen = 0;
    for line in client.events(agent)?.lines() {
        let line = line.map_err(|e| Failure::Other(anyhow!("reading events: {e}")))?;
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if out.json() {
            out.line(data);
        } else {
            let v: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            let agent = v["agent_id"]
                .as_str()
                .or(v["parent_id"].as_str())
                .unwrap_or("-");
            out.line(&format!(
                "{:<16} {agent}  {data}",
                v["type"].as_str().unwrap_or("event")
            ));
        }
        seen += 1;
        if count.is_some_and(|c| seen >= c) {
            break;
        }
    }
    Ok(())
}
