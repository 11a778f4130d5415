//! Commands on the service as a whole: its probes and metrics, its description and API
//! document, every tree, the work queue, any command, and the live events.

use crate::client::{Client, Failure};
use crate::output::{self, Output};
use anyhow::anyhow;
use clap::Subcommand;
use serde_json::Value;
use std::io::{BufRead, Read};

#[derive(Subcommand)]
pub enum OperationCommands {
    /// Show every tree with statuses and costs.
    Tree,
    /// Show the service's model backend, store and agent types.
    Info,
    /// The work queue: agents with work pending or running, by priority then age.
    Queue,
    /// Send any command (`POST /v1/commands`), e.g. `{"type": "inspect", "agent_id": "…"}`.
    Command {
        /// The command as JSON, or `-` to read it from stdin.
        command: String,
    },
    /// Whether the process runs (`/healthz`).
    Health,
    /// Whether the process takes work (`/readyz`); exit code 1 when it does not.
    Ready,
    /// The Prometheus metrics (`/metrics`), as text (`--json` is refused: the text format is
    /// what metrics tools read).
    Metrics,
    /// The OpenAPI document of the API (`/v1/openapi.json`).
    Openapi,
    /// Follow live events (all, or one agent's subtree). With --json, one event per line,
    /// with its id as `event_id`.
    Events {
        /// Only this agent and its descendants.
        #[arg(long)]
        agent: Option<String>,
        /// Stop after this many events.
        #[arg(long)]
        count: Option<usize>,
        /// Resume after this event id: the events since come first (or a `lagged` event when
        /// they are no longer kept), then the live ones.
        #[arg(long)]
        last_event_id: Option<String>,
        /// Keep following (the default; kept for readability in scripts).
        #[arg(long)]
        follow: bool,
    },
}

impl OperationCommands {
    pub fn run(&self, client: &Client, out: &Output) -> Result<(), Failure> {
        match self {
            OperationCommands::Tree => out.answer(&client.get("/v1/tree")?, output::tree),
            OperationCommands::Info => out.answer(&client.get("/v1/info")?, output::pretty),
            OperationCommands::Queue => out.answer(&client.get("/v1/queue")?, output::queue),
            OperationCommands::Command { command } => {
                let command = if command == "-" {
                    let mut text = String::new();
                    std::io::stdin()
                        .read_to_string(&mut text)
                        .map_err(|e| Failure::Other(anyhow!("reading the command: {e}")))?;
                    text
                } else {
                    command.clone()
                };
                let command: Value = serde_json::from_str(&command)
                    .map_err(|e| Failure::Other(anyhow!("the command is not JSON: {e}")))?;
                out.answer(&client.post("/v1/commands", command)?, output::pretty)
            }
            OperationCommands::Health => out.answer(&client.get("/healthz")?, output::probe),
            OperationCommands::Ready => out.answer(&client.get("/readyz")?, output::probe),
            OperationCommands::Metrics if out.json() => Err(Failure::Other(anyhow!(
                "`metrics` prints Prometheus text, which metrics tools read; --json does not apply to it"
            ))),
            OperationCommands::Metrics => out.text(&client.get_text("/metrics")?),
            OperationCommands::Openapi => {
                out.answer(&client.get("/v1/openapi.json")?, output::pretty)
            }
            OperationCommands::Events {
                agent,
                count,
                last_event_id,
                ..
            } => follow_events(
                client,
                out,
                agent.as_deref(),
                last_event_id.as_deref(),
                *count,
            ),
        }
    }
}

/// One event of the stream: its `id:`, its `event:` type and its `data:` line.
#[derive(Default)]
struct Frame {
    id: Option<String>,
    kind: Option<String>,
    data: Option<String>,
}

impl Frame {
    /// The event's JSON with its id as `event_id` (`null` for an event without one, such as
    /// `lagged`) and its `type` (from the `event:` line when the data has none).
    fn json(&self) -> Value {
        let mut v: Value = self
            .data
            .as_deref()
            .and_then(|d| serde_json::from_str(d).ok())
            .unwrap_or(Value::Null);
        if let Value::Object(map) = &mut v {
            if !map.contains_key("type")
                && let Some(kind) = &self.kind
            {
                map.insert("type".into(), Value::String(kind.clone()));
            }
            map.insert(
                "event_id".into(),
                self.id.clone().map(Value::String).unwrap_or(Value::Null),
            );
        }
        v
    }

    /// One line for a person: the id (to resume after it), the type, the agent, the data.
    fn human(&self) -> String {
        let v = self.json();
        let agent = v["agent_id"]
            .as_str()
            .or(v["parent_id"].as_str())
            .unwrap_or("-");
        format!(
            "{} {:<16} {agent}  {}",
            self.id.as_deref().unwrap_or("-"),
            v["type"].as_str().unwrap_or("event"),
            self.data.as_deref().unwrap_or("")
        )
    }
}

/// Prints the events of the stream as they come, until `count` of them, the stream's end, or
/// a reader that went away.
fn follow_events(
    client: &Client,
    out: &Output,
    agent: Option<&str>,
    last_event_id: Option<&str>,
    count: Option<usize>,
) -> Result<(), Failure> {
    let stream = client.events("/v1/events", &[("agent_id", agent)], last_event_id)?;
    let mut seen = 0;
    let mut frame = Frame::default();
    for line in stream.lines() {
        let line = line.map_err(|e| Failure::Other(anyhow!("reading events: {e}")))?;
        if line.is_empty() {
            // A blank line ends an event (or a comment such as `: keep-alive`).
            let done = std::mem::take(&mut frame);
            if done.data.is_none() {
                continue;
            }
            if out.json() {
                out.line(&done.json().to_string())?;
            } else {
                out.line(&done.human())?;
            }
            seen += 1;
            if count.is_some_and(|c| seen >= c) {
                break;
            }
        } else if let Some(id) = line.strip_prefix("id: ") {
            frame.id = Some(id.to_string());
        } else if let Some(kind) = line.strip_prefix("event: ") {
            frame.kind = Some(kind.to_string());
        } else if let Some(data) = line.strip_prefix("data: ") {
            frame.data = Some(data.to_string());
        }
    }
    Ok(())
}
