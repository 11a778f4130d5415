//! Commands on an agent's session: reset, compact, checkpoints and restore.

use crate::client::{Client, Failure};
use crate::output::{self, Output};
use clap::Subcommand;
use serde_json::json;

#[derive(Subcommand)]
pub enum Sessions {
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
}

impl Sessions {
    pub fn run(&self, client: &Client, out: &Output) -> Result<(), Failure> {
        let v = match self {
            Sessions::Reset { agent_id, message } => client.post(
                &format!("/agents/{agent_id}/reset"),
                json!({"message": message}),
            )?,
            Sessions::Compact { agent_id } => {
                client.post(&format!("/agents/{agent_id}/compact"), json!({}))?
            }
            Sessions::Checkpoints { agent_id } => {
                let v = client.get(&format!("/agents/{agent_id}/checkpoints"))?;
                out.answer(&v, output::checkpoints);
                return Ok(());
            }
            Sessions::Checkpoint { agent_id } => {
                client.post(&format!("/agents/{agent_id}/checkpoints"), json!({}))?
            }
            Sessions::Restore {
                agent_id,
                checkpoint,
            } => client.post(
                &format!("/agents/{agent_id}/restore"),
                json!({"checkpoint_id": checkpoint}),
            )?,
        };
        out.answer(&v, output::pretty);
        Ok(())
    }
}
