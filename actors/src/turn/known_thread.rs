//! The thread as a turn knows it: read once from the store (or handed over by the actor), kept
//! up to date with the turn's own appends, and searched when a re-run replays recorded steps.

use super::Turn;
use crate::messages::ChildOutput;
use crate::ports::StoreWrite;
use agentd_proto::Output;
use agentd_proto::{AgentdError, Channel, ThreadEntry};
use std::sync::Arc;
use uuid::Uuid;

impl Turn {
    /// Waits until the turn's input is in the store (its agent writes it: with the flush under
    /// way or written again after a failure, or, deferred, asked for now, see
    /// [`super::InputWritten`]): whatever the turn writes to its thread comes after its input.
    async fn input_stored(&self) {
        if let Some(w) = self.input_written.as_deref()
            && !w.is_set()
        {
            if w.is_deferred() {
                self.progress.do_send(super::TurnProgress::StartNeeded);
            }
            w.wait().await;
        }
    }

    /// Appends `entry`: known new on a first run (nothing before made its id), looked up first
    /// on a re-run, which may find it written.
    pub(super) async fn append(&mut self, entry: Arc<ThreadEntry>) -> Result<(), AgentdError> {
        self.input_stored().await;
        if !self.replaying {
            self.deps.store.append_new(&self.rec.id, &entry).await?;
            self.remember_new(entry);
            return Ok(());
        }
        let appended = self.deps.store.append(&self.rec.id, &entry).await?;
        if appended {
            // New to the store, so new to the known copy too: no need to look for it.
            self.remember_new(entry);
        } else {
            self.remember(entry);
        }
        Ok(())
    }

    /// Appends `entry` and sends `outputs` made from it (a Manage worker's reply from a step
    /// that also calls tools): in the same store batch where the store carries outputs
    /// ([`crate::messages::outputs_into_batch`]), so a crash right after the entry is
    /// written cannot lose them (a re-run finds the step recorded and does not send it again).
    pub(super) async fn append_sending(
        &mut self,
        entry: Arc<ThreadEntry>,
        mut outputs: Vec<ChildOutput>,
    ) -> Result<(), AgentdError> {
        if outputs.is_empty() {
            return self.append(entry).await;
        }
        self.input_stored().await;
        let (agent_id, shared) = (self.names.agent_id.clone(), Arc::clone(&entry));
        let mut writes = vec![if self.replaying {
            StoreWrite::Append {
                agent_id,
                entry: shared,
            }
        } else {
            StoreWrite::AppendNew {
                agent_id,
                entry: shared,
            }
        }];
        crate::messages::outputs_into_batch(&self.deps, &mut writes, &mut outputs);
        self.deps.store.write_batch(&writes).await?;
        self.remember(entry);
        for out in outputs {
            self.outputs.send_output(out);
        }
        Ok(())
    }

    /// What a Manage worker's assistant message `text` sends its parent (every one goes to
    /// the thread outbox); `None` for other agents and empty text.
    pub(super) fn manage_reply(&self, step_id: Uuid, text: &str) -> Option<ChildOutput> {
        (matches!(self.rec.channel, Channel::Manage(_)) && !text.trim().is_empty()).then(|| {
            ChildOutput {
                child: self.rec.clone(),
                output: Output::Reply {
                    text: text.to_string(),
                },
                cause: step_id,
                kept: false,
            }
        })
    }

    /// Adds `entry`, known not to be in the thread, to the known thread.
    pub(super) fn remember_new(&mut self, entry: Arc<ThreadEntry>) {
        if let Some(thread) = &mut self.thread {
            Arc::make_mut(thread).push(entry);
        }
    }

    /// Adds `entry` to the known thread (once).
    pub(super) fn remember(&mut self, entry: Arc<ThreadEntry>) {
        if let Some(thread) = &mut self.thread
            && !thread.iter().rev().any(|e| e.id == entry.id)
        {
            Arc::make_mut(thread).push(entry);
        }
    }

    /// Whether the thread holds an entry `id` (scanned from the end, where a turn's own
    /// entries are).
    pub(super) fn recorded(&self, id: &Uuid) -> bool {
        self.replaying
            && self
                .thread
                .as_ref()
                .is_some_and(|t| t.iter().rev().any(|e| e.id == *id))
    }

    /// Whether the thread holds an entry `id` that is an error (a tool's failed result).
    pub(super) fn recorded_error(&self, id: &Uuid) -> bool {
        self.thread
            .as_ref()
            .and_then(|t| t.iter().rev().find(|e| e.id == *id))
            .is_some_and(|e| e.is_error)
    }

    /// The thread as stored: the known copy, or read once from the store.
    pub(super) async fn current_thread(
        &mut self,
    ) -> Result<Arc<crate::ports::ThreadEntries>, AgentdError> {
        if let Some(thread) = &self.thread {
            return Ok(thread.clone());
        }
        let stored = self.deps.store.thread(&self.rec.id).await?;
        let thread = Arc::new(stored.into_iter().map(Arc::new).collect());
        self.thread = Some(Arc::clone(&thread));
        Ok(thread)
    }

    /// Replaces the whole thread (reset, compaction) in the store and in the known copy.
    pub(super) async fn replace_thread(
        &mut self,
        entries: Vec<ThreadEntry>,
    ) -> Result<(), AgentdError> {
        self.input_stored().await;
        self.thread = None;
        self.deps
            .store
            .replace_thread(&self.rec.id, &entries)
            .await?;
        self.thread = Some(Arc::new(entries.into_iter().map(Arc::new).collect()));
        Ok(())
    }
}
