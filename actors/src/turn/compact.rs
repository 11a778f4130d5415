//! Compaction (seed 003): the model summarises everything but the most recent entries, and the
//! thread becomes `[summary] + recent`. A compaction that was asked for first saves a checkpoint
//! of the whole thread (reason `compact`), so the history it drops can be read and restored;
//! every compaction is logged as a `context_compacted` event with the sizes before and after.

use super::request::CallOutcome;
use super::{Turn, TurnResult};
use crate::ports::Purpose;
use crate::turn::TurnProgress;
use agentd_proto::ids::derived_id;
use agentd_proto::{AgentdError, CompactionTrigger, Event, Role, ThreadEntry};
use std::sync::Arc;

impl Turn {
    /// Compacts the thread: it becomes `[summary] + recent`. `trigger` says who asked; a
    /// requested compaction checkpoints the whole thread before it replaces it.
    pub(super) async fn compact(
        &mut self,
        trigger: CompactionTrigger,
    ) -> Result<TurnResult, AgentdError> {
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
        // Taken once the summary exists (a rate-limited or paused summary call drops nothing
        // and checkpoints nothing); written before the thread is replaced, or the compaction
        // fails with the thread as it was.
        let checkpoint_id = match trigger {
            CompactionTrigger::Requested => Some(
                crate::checkpoints::capture_before_compaction(
                    &self.deps,
                    &self.rec,
                    thread.iter().map(|e| ThreadEntry::clone(e)).collect(),
                    self.cause,
                )
                .await?
                .id,
            ),
            CompactionTrigger::ContextWindow => None,
        };
        let (entries_before, estimated_tokens) =
            (thread.len() as u64, self.estimated_input_tokens(&thread));
        drop(thread);
        self.replace_thread(next).await?;
        let after = self.current_thread().await?;
        self.deps.events.publish(&Event::ContextCompacted {
            agent_id: self.rec.id.clone(),
            estimated_tokens,
            context_tokens: self.context_window().map_or(0, |w| w.context_tokens),
            trigger,
            entries_before,
            entries_after: after.len() as u64,
            estimated_tokens_after: self.estimated_input_tokens(&after),
            checkpoint_id,
        });
        Ok(TurnResult::default())
    }
}
