//! Compaction (seed 003): the model summarises everything but the most recent entries, and the
//! thread becomes `[summary] + recent`.

use super::request::CallOutcome;
use super::{Turn, TurnResult};
use crate::agent::messages::TurnProgress;
use crate::ports::Purpose;
use agentd_proto::ids::derived_id;
use agentd_proto::{AgentdError, Role, ThreadEntry};
use std::sync::Arc;

impl Turn {
    /// thread becomes `[summary] + recent`.
    pub(super) async fn compact(&mut self) -> Result<TurnResult, AgentdError> {
        let thread = self.current_thread().await?;
        let keep = self.deps.config.limits.compact_keep_recent;
        if thread.len() <= keep {
            return Ok(TurnResult::default());
        }
        let mut split = thread.len() - keep;
        // Never start the kept part with a tool result whose call was summarised away.
        while split < thread.len() && thread[split].role == Role::Tool {
            split += 1;
        }
        let (old, recent) = thread.split_at(split);
        let resp = match self
            .call_model(self.request(Arc::new(old.to_vec()), Purpose::Compact), None)
            .await?
        {
            CallOutcome::Answer(r) => r,
            CallOutcome::RateLimited(ms) => {
                return Ok(TurnResult {
                    rate_limited: Some(ms),
                    ..TurnResult::default()
                });
            }
            CallOutcome::Stopped => {
                // A pause aborted the summary: the thread stays as it was, and the compaction
                // (or the step it made room for) runs again after the resume.
                return Ok(TurnResult {
                    paused: true,
                    ..TurnResult::default()
                });
            }
        };
        self.progress.do_send(TurnProgress::Usage {
            usage: resp.usage,
            step: None,
        });
        let mut summary = ThreadEntry::text(
            derived_id(self.cause, "compact-summary"),
            Role::System,
            format!("Summary of the earlier conversation: {}", resp.text.trim()),
            self.now(),
        );
        summary.usage = Some(Box::new(resp.usage));
        let mut next = vec![summary];
        next.extend(recent.iter().map(|e| ThreadEntry::clone(e)));
        self.replace_thread(next).await?;
        Ok(TurnResult::default())
    }
}
