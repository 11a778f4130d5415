//! The reader's window of routed batches whose acknowledgements are still under way: reading
//! on while they finish lets an agent take its next message while another agent of the batch
//! is still busy.

use agentd_proto::{AgentdError, ErrorCode};
use std::collections::VecDeque;
use tokio::task::JoinHandle;

/// Most entries whose deliveries may be under way (routed, not yet acknowledged) while the
/// reader reads on: well under the router's mailbox (16 Ki), so routing never waits for room
/// (which would not keep the order).
const MAX_IN_FLIGHT: usize = 2_048;

/// A routed batch: its number of entries, and the task that acknowledges them once delivered.
pub(super) type Batch = (usize, JoinHandle<Result<(), AgentdError>>);

/// Batches the reader has routed whose acknowledgements are still under way, oldest first.
#[derive(Default)]
pub(super) struct InFlight {
    tasks: VecDeque<Batch>,
    entries: usize,
}

impl InFlight {
    pub(super) fn push(&mut self, batch: Batch) {
        self.entries += batch.0;
        self.tasks.push_back(batch);
    }

    /// Waits for the oldest batch; its error, if any, is answered.
    async fn pop(&mut self) -> Result<(), AgentdError> {
        let Some((n, task)) = self.tasks.pop_front() else {
            return Ok(());
        };
        self.entries -= n;
        task.await.map_err(|e| {
            AgentdError::new(ErrorCode::Unavailable, format!("delivery task failed: {e}"))
        })?
    }

    /// Waits until a read of up to `next` entries more fits under [`MAX_IN_FLIGHT`].
    pub(super) async fn make_room(&mut self, next: usize) -> Result<(), AgentdError> {
        while self.entries > 0 && self.entries + next > MAX_IN_FLIGHT {
            self.pop().await?;
        }
        // Finished batches are collected as they go, so an error surfaces soon.
        while self.tasks.front().is_some_and(|(_, t)| t.is_finished()) {
            self.pop().await?;
        }
        Ok(())
    }

    /// Waits for every batch; the first error is answered (after all have finished).
    pub(super) async fn finish(&mut self) -> Result<(), AgentdError> {
        let mut first = Ok(());
        while !self.tasks.is_empty() {
            let r = self.pop().await;
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}
