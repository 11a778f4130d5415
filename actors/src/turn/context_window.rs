//! The provider's context window: before a model call whose input would not leave the provider
//! its `max_tokens` for the answer, the runtime compacts the agent's thread (the compaction the
//! `agent_compact` tool asks for, run by the runtime itself, so the no-self-compact rule is not
//! touched) instead of sending a request the provider refuses. Input is estimated at four
//! characters a token: the system prompt, the tools the model is shown, and every entry.

use super::Turn;
use crate::config::ContextWindow;
use crate::ports::ThreadEntries;
use agentd_proto::{AgentdError, CompactionTrigger};
use std::sync::Arc;

/// Characters per token of the estimate (an English-text average of the common tokenizers).
const CHARS_PER_TOKEN: u64 = 4;

/// What a call is made from once its thread fits (or could not be made to).
pub(super) enum Fitted {
    /// The thread to send (compacted if it had to be).
    Thread(Arc<ThreadEntries>),
    /// The compaction's own call was rate-limited: the turn waits this many ms.
    RateLimited(u64),
}

impl Turn {
    /// The provider's window, if it has one.
    pub(super) fn context_window(&self) -> Option<ContextWindow> {
        let provider = self.rec.provider.as_deref().unwrap_or("default");
        self.deps.config.context_windows.get(provider).copied()
    }

    /// Whether a call made from `thread` would overflow the provider's window (and so the
    /// thread is to be compacted first, [`Self::compact_to_fit`]). Asked apart from the
    /// compaction, which most calls never need: its future, boxed for every call, cost an
    /// allocation and a copy of a kilobyte per model call.
    pub(super) fn overflows(&self, thread: &ThreadEntries) -> bool {
        let Some(window) = self.context_window() else {
            return false;
        };
        let estimated = self.estimated_input_tokens(thread);
        estimated.saturating_add(window.max_tokens) > window.context_tokens
    }

    /// Compacts the thread of a call that would overflow the provider's window
    /// ([`Self::overflows`]): the thread to send then.
    pub(super) async fn compact_to_fit(&mut self) -> Result<Fitted, AgentdError> {
        let compacted = self.compact(CompactionTrigger::ContextWindow).await?;
        if let Some(ms) = compacted.rate_limited {
            return Ok(Fitted::RateLimited(ms));
        }
        Ok(Fitted::Thread(self.current_thread().await?))
    }

    /// The input tokens of a call made from `thread`, estimated from its characters.
    pub(super) fn estimated_input_tokens(&self, thread: &ThreadEntries) -> u64 {
        let tools: usize = self
            .tool_specs
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum();
        let entries: usize = thread
            .iter()
            .map(|e| {
                e.text.len()
                    + e.tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.to_string().len())
                        .sum::<usize>()
            })
            .sum();
        let chars = self.system_prompt.len() + tools + entries;
        (chars as u64).div_ceil(CHARS_PER_TOKEN)
    }
}
