//! Commands on an agent's session: reset, compact, checkpoints, restore and fork.

use crate::client::{Client, Failure};
use crate::output::{self, Output};
use clap::Subcommand;
use serde_json::{Value, json};

#[derive(Subcommand)]
pub enum SessionCommands {
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
    /// List an agent's checkpoints, newest first, or show one in full.
    Checkpoints {
        /// Agent id.
        agent_id: String,
        /// Show this checkpoint: its conversation, what was pending, its environment.
        checkpoint_id: Option<String>,
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
    /// Fork an agent: a new root whose thread is a copy of its thread up to a point.
    Fork {
        /// Agent id.
        agent_id: String,
        /// Where the copy ends: a checkpoint id or a thread entry id (default: now).
        #[arg(long)]
        at: Option<String>,
    },
}

impl SessionCommands {
    pub fn run(&self, client: &Client, out: &Output) -> Result<(), Failure> {
        let (v, human): (_, fn(&Value) -> String) = match self {
            SessionCommands::Reset { agent_id, message } => (
                client.post(
                    &format!("/v1/agents/{agent_id}/reset"),
                    json!({"message": message}),
                )?,
                output::pretty,
            ),
            SessionCommands::Compact { agent_id } => (
                client.post(&format!("/v1/agents/{agent_id}/compact"), json!({}))?,
                output::pretty,
            ),
            SessionCommands::Checkpoints {
                agent_id,
                checkpoint_id: None,
            } => (
                client.get(&format!("/v1/agents/{agent_id}/checkpoints"))?,
                output::checkpoints,
            ),
            SessionCommands::Checkpoints {
                agent_id,
                checkpoint_id: Some(cp),
            } => (
                client.get(&format!("/v1/agents/{agent_id}/checkpoints/{cp}"))?,
                output::checkpoint,
            ),
            SessionCommands::Checkpoint { agent_id } => (
                client.post(&format!("/v1/agents/{agent_id}/checkpoints"), json!({}))?,
                output::pretty,
            ),
            SessionCommands::Restore {
                agent_id,
                checkpoint,
            } => (
                client.post(
                    &format!("/v1/agents/{agent_id}/restore"),
                    json!({"checkpoint_id": checkpoint}),
                )?,
                output::pretty,
            ),
            SessionCommands::Fork { agent_id, at } => (
                client.post(&format!("/v1/agents/{agent_id}/fork"), json!({"at": at}))?,
                output::pretty,
            ),
        };
        out.answer(&v, human)
    }
}
