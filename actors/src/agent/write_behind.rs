//! The agent's write-behind buffer: what the agent has decided about its own state and not
//! written yet.
//!
//! An agent does not write each change of its own state (thread entries, inbox items done, its
//! record) when it makes it. It queues the write here and asks for a *flush*; the flush runs
//! before the actor handles its next message and writes everything queued until then as one
//! store batch (one transaction or pipeline). The buffer is plain data: the actor decides when a
//! flush runs (`persist.rs`); this type keeps the rules of what goes into a batch.
//!
//! Invariants:
//! - **Order.** Writes leave in the order they were queued; the record, when it changed, goes
//!   last in its batch (one copy, as it is when the flush starts).
//! - **Nothing is dropped.** A batch that fails goes back in front of what was queued since and
//!   is written again after a capped backoff (or with the next flush, if sooner).
//! - **One flush at a time is queued.** Asking again while one is queued adds to it: what is
//!   written is read when the flush starts, not when it was asked for.
//! - **A flush waits for the agent's own push.** While an inbox item's durable push is under way,
//!   a flush asked for is held until the push is answered, so a turn's end and the next item's
//!   turn start leave in one batch.
//! - **A deferred flush waits for the next request.** The start of a turn on an item the agent
//!   holds in its stream entry (see [`crate::ports::StreamEntry`]) is queued without asking for a
//!   flush of its own: the next request (the turn's end, the turn about to write, the hold's
//!   time running out, anything else) takes it with its own writes.
//! - **Outputs leave after what they answer.** A child output made from queued writes (a reply,
//!   a yield) waits for the batch that records them; sent before, it could outlive a crash that
//!   loses what it answers.

use crate::messages::ChildOutput;
use crate::ports::StoreWrite;
use crate::turn::InputWritten;
use agentd_proto::AgentRecord;
use std::sync::Arc;

/// Whether a flush has been asked for and how it waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum FlushRequest {
    /// None asked for since the last one started.
    #[default]
    None,
    /// Queued on the actor: it starts before the next message is handled.
    Queued,
    /// Asked for while the agent's own push is under way: queued once the push is answered.
    HeldForPush,
    /// Asked for while flushes were deferred: queued at the next request.
    Deferred,
}

/// What the agent has decided about its own state and not written yet.
#[derive(Default)]
pub(super) struct WriteBehind {
    writes: Vec<StoreWrite>,
    /// The record changed since the last batch.
    record_dirty: bool,
    /// Outputs to send once the next batch is written (they were made from what it writes).
    outputs: Vec<ChildOutput>,
    /// Set once the batch that makes the current turn's input durable is written (the turn
    /// appends the input itself if it finds the flag unset).
    input_written: Option<Arc<InputWritten>>,
    flush: FlushRequest,
    /// Requests made now are deferred (a held item's turn is starting).
    deferring: bool,
    /// An inbox item's durable push is under way.
    push_in_flight: bool,
    /// Outputs wait for the next batch instead of leaving at once (while a turn's end, whose
    /// last entry is still to be written, is being handled).
    hold_outputs: bool,
    /// Delay before writing a failed batch again (0 after a success).
    backoff_ms: u16,
}

/// One flush's worth of writes.
pub(super) struct Batch {
    /// The writes, in order, the record last.
    pub(super) writes: Vec<StoreWrite>,
    /// Outputs that leave once `writes` are written.
    pub(super) outputs: Vec<ChildOutput>,
    /// Set once `writes` are written.
    pub(super) input_written: Option<Arc<InputWritten>>,
}

/// The shortest and longest delay before a failed batch is written again.
const BACKOFF_MS: (u16, u16) = (50, 2_000);

impl WriteBehind {
    /// Queues `write`; answers whether the caller must queue a flush now.
    #[must_use]
    pub(super) fn write(&mut self, write: StoreWrite) -> bool {
        self.writes.push(write);
        self.request_flush()
    }

    /// Notes that the record changed; answers whether the caller must queue a flush now.
    #[must_use]
    pub(super) fn record_changed(&mut self) -> bool {
        self.record_dirty = true;
        self.request_flush()
    }

    /// Forgets that the record changed: its current version was written another way (with an
    /// inbox push).
    pub(super) fn record_written(&mut self) {
        self.record_dirty = false;
    }

    /// Asks for a flush; answers whether the caller must queue one now (`false`: one is queued
    /// already, or it waits for the push under way).
    #[must_use]
    pub(super) fn request_flush(&mut self) -> bool {
        match self.flush {
            FlushRequest::Queued | FlushRequest::HeldForPush => false,
            FlushRequest::Deferred if self.deferring => false,
            FlushRequest::Deferred => {
                self.flush = FlushRequest::None;
                self.request_flush()
            }
            FlushRequest::None if self.push_in_flight => {
                self.flush = FlushRequest::HeldForPush;
                false
            }
            FlushRequest::None if self.deferring => {
                self.flush = FlushRequest::Deferred;
                false
            }
            FlushRequest::None => {
                self.flush = FlushRequest::Queued;
                true
            }
        }
    }

    /// From now on (until [`Self::stop_deferring`]) requests defer the flush.
    pub(super) fn defer_flushes(&mut self) {
        self.deferring = true;
    }

    /// Requests no longer defer the flush; one deferred stays so until the next request.
    pub(super) fn stop_deferring(&mut self) {
        self.deferring = false;
    }

    /// Whether requests defer the flush now.
    pub(super) fn is_deferring(&self) -> bool {
        self.deferring
    }

    /// A deferred flush is wanted now; answers whether the caller must queue it.
    #[must_use]
    pub(super) fn release_deferred(&mut self) -> bool {
        self.flush == FlushRequest::Deferred && self.request_flush()
    }

    /// The queued flush starts: later requests queue another one.
    pub(super) fn flush_starting(&mut self) {
        if self.flush == FlushRequest::Queued {
            self.flush = FlushRequest::None;
        }
    }

    /// An inbox item's durable push starts.
    pub(super) fn push_started(&mut self) {
        self.push_in_flight = true;
    }

    /// The push was answered; answers whether a flush held for it must be queued now.
    #[must_use]
    pub(super) fn push_answered(&mut self) -> bool {
        self.push_in_flight = false;
        if self.flush == FlushRequest::HeldForPush {
            self.flush = FlushRequest::None;
            return true;
        }
        false
    }

    /// The turn about to start finds its input written once this flag is set.
    pub(super) fn watch_input(&mut self, written: Arc<InputWritten>) {
        self.input_written = Some(written);
    }

    /// From now on outputs wait for the next batch.
    pub(super) fn hold_outputs(&mut self) {
        self.hold_outputs = true;
    }

    /// From now on outputs leave at once (what was held waits for its batch still).
    pub(super) fn release_outputs(&mut self) {
        self.hold_outputs = false;
    }

    /// `out` back to send now, or `None` if it waits for the next batch.
    #[must_use]
    pub(super) fn send_or_hold(&mut self, out: ChildOutput) -> Option<ChildOutput> {
        if self.hold_outputs {
            self.outputs.push(out);
            None
        } else {
            Some(out)
        }
    }

    /// Outputs made from writes already queued: they leave with the next batch.
    pub(super) fn after_next_batch(&mut self, outputs: &mut Vec<ChildOutput>) {
        self.outputs.append(outputs);
    }

    /// Whether outputs wait for the next batch.
    pub(super) fn has_outputs(&self) -> bool {
        !self.outputs.is_empty()
    }

    /// Whether everything decided is written: nothing queued or waiting to be written again,
    /// the record unchanged since, no flush asked for and no push under way. (A flush that is
    /// writing is not seen here: it runs before the actor handles anything else.)
    pub(super) fn is_settled(&self) -> bool {
        self.writes.is_empty()
            && !self.record_dirty
            && self.outputs.is_empty()
            && self.flush == FlushRequest::None
            && !self.push_in_flight
    }

    /// Takes everything waiting as one batch; `record` is the record as it is now.
    pub(super) fn take_batch(&mut self, record: impl FnOnce() -> Arc<AgentRecord>) -> Batch {
        let mut writes = std::mem::take(&mut self.writes);
        if std::mem::take(&mut self.record_dirty) {
            writes.push(StoreWrite::PutAgent(record()));
        }
        Batch {
            writes,
            outputs: std::mem::take(&mut self.outputs),
            input_written: self.input_written.take(),
        }
    }

    /// A batch was written: its input flag is set, the backoff starts over.
    pub(super) fn batch_written(&mut self, input_written: Option<Arc<InputWritten>>) {
        self.backoff_ms = 0;
        if let Some(flag) = input_written {
            flag.set();
        }
    }

    /// A batch could not be written: it goes back in front of what was queued since. Answers
    /// the delay before it is written again (doubling, capped). It may have landed all the
    /// same (an answer lost with a connection), so its entries known new are looked up when it
    /// is written again.
    pub(super) fn batch_failed(&mut self, mut batch: Batch) -> std::time::Duration {
        self.backoff_ms = (self.backoff_ms.saturating_mul(2)).clamp(BACKOFF_MS.0, BACKOFF_MS.1);
        for w in &mut batch.writes {
            if let StoreWrite::AppendNew { agent_id, entry } = w {
                *w = StoreWrite::Append {
                    agent_id: agent_id.clone(),
                    entry: entry.clone(),
                };
            }
        }
        let later = std::mem::replace(&mut self.writes, batch.writes);
        self.writes.extend(later);
        let later = std::mem::replace(&mut self.outputs, batch.outputs);
        self.outputs.extend(later);
        if self.input_written.is_none() {
            self.input_written = batch.input_written;
        }
        std::time::Duration::from_millis(self.backoff_ms.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_proto::{Output, Role, ThreadEntry};
    use std::time::Duration;

    fn entry(n: u128) -> StoreWrite {
        StoreWrite::Append {
            agent_id: "a".into(),
            entry: Arc::new(ThreadEntry::text(
                uuid::Uuid::from_u128(n),
                Role::User,
                "x",
                0,
            )),
        }
    }

    fn ids(writes: &[StoreWrite]) -> Vec<String> {
        writes
            .iter()
            .map(|w| match w {
                StoreWrite::Append { entry, .. } => entry.id.as_u128().to_string(),
                StoreWrite::PutAgent(_) => "record".into(),
                _ => "other".into(),
            })
            .collect()
    }

    fn record() -> Arc<AgentRecord> {
        Arc::new(crate::testing::record("a"))
    }

    fn output() -> ChildOutput {
        ChildOutput {
            child: record(),
            output: Output::Reply { text: "hi".into() },
            cause: uuid::Uuid::nil(),
            kept: false,
        }
    }

    #[test]
    fn one_flush_is_queued_until_it_starts() {
        let mut b = WriteBehind::default();
        assert!(b.write(entry(1)), "the first write queues a flush");
        assert!(!b.write(entry(2)), "later writes join it");
        assert!(!b.record_changed());
        b.flush_starting();
        let batch = b.take_batch(record);
        assert_eq!(ids(&batch.writes), ["1", "2", "record"]);
        assert!(
            b.write(entry(3)),
            "a write after the start queues the next flush"
        );
    }

    #[test]
    fn the_record_goes_last_and_only_when_it_changed() {
        let mut b = WriteBehind::default();
        let _ = b.record_changed();
        let _ = b.write(entry(1));
        assert_eq!(ids(&b.take_batch(record).writes), ["1", "record"]);
        let _ = b.write(entry(2));
        assert_eq!(ids(&b.take_batch(record).writes), ["2"]);
        let _ = b.record_changed();
        b.record_written();
        assert!(b.take_batch(record).writes.is_empty());
    }

    #[test]
    fn a_flush_asked_for_during_a_push_waits_for_its_answer() {
        let mut b = WriteBehind::default();
        b.push_started();
        assert!(!b.write(entry(1)), "held while the push is under way");
        assert!(!b.write(entry(2)));
        assert!(b.push_answered(), "asked for once the push is answered");
        assert!(b.request_flush(), "the caller queues it then");
        assert!(!b.write(entry(3)), "and what comes meanwhile joins it");
        b.flush_starting();
        assert_eq!(ids(&b.take_batch(record).writes), ["1", "2", "3"]);
        b.push_started();
        assert!(
            !b.push_answered(),
            "a push with no flush held asks for none"
        );
    }

    #[test]
    fn a_deferred_flush_waits_for_the_next_request() {
        let mut b = WriteBehind::default();
        b.defer_flushes();
        assert!(!b.write(entry(1)), "deferred, not queued");
        assert!(!b.record_changed());
        b.stop_deferring();
        assert!(!b.is_settled(), "a deferred flush is still to come");
        assert!(b.write(entry(2)), "the next request queues it");
        b.flush_starting();
        assert_eq!(ids(&b.take_batch(record).writes), ["1", "2", "record"]);
        b.defer_flushes();
        let _ = b.write(entry(3));
        b.stop_deferring();
        assert!(b.release_deferred(), "released on its own");
        assert!(!b.release_deferred(), "once");
        b.defer_flushes();
        b.flush_starting();
        let _ = b.take_batch(record);
        let _ = b.write(entry(4));
        b.stop_deferring();
        b.push_started();
        assert!(!b.write(entry(5)), "a push under way holds it still");
        assert!(b.push_answered(), "asked for once the push is answered");
    }

    #[test]
    fn a_failed_batch_goes_back_before_later_writes_and_backs_off() {
        let mut b = WriteBehind::default();
        let flag = InputWritten::new(false, false);
        b.watch_input(flag.clone());
        let _ = b.write(entry(1));
        let _ = b.record_changed();
        let batch = b.take_batch(record);
        let _ = b.write(entry(2));
        assert_eq!(b.batch_failed(batch), Duration::from_millis(50));
        let batch = b.take_batch(record);
        assert_eq!(ids(&batch.writes), ["1", "record", "2"]);
        assert_eq!(b.batch_failed(batch), Duration::from_millis(100));
        for _ in 0..10 {
            let batch = b.take_batch(record);
            assert!(b.batch_failed(batch) <= Duration::from_millis(2_000));
        }
        let batch = b.take_batch(record);
        assert!(!flag.is_set());
        b.batch_written(batch.input_written);
        assert!(flag.is_set(), "the input flag survives failed batches");
        let _ = b.write(entry(3));
        let batch = b.take_batch(record);
        assert_eq!(
            b.batch_failed(batch),
            Duration::from_millis(50),
            "backoff starts over"
        );
    }

    #[test]
    fn held_outputs_leave_with_the_next_batch() {
        let mut b = WriteBehind::default();
        assert!(b.send_or_hold(output()).is_some(), "not held: sent at once");
        b.hold_outputs();
        assert!(b.send_or_hold(output()).is_none());
        b.release_outputs();
        assert!(b.has_outputs());
        let batch = b.take_batch(record);
        assert_eq!(batch.outputs.len(), 1);
        let _ = b.write(entry(1));
        let mut more = vec![output()];
        b.after_next_batch(&mut more);
        let batch = b.take_batch(record);
        let retried = batch.outputs.len();
        b.batch_failed(batch);
        assert_eq!(
            b.take_batch(record).outputs.len(),
            retried,
            "kept when the batch fails"
        );
    }

    #[test]
    fn settled_once_everything_is_written() {
        let mut b = WriteBehind::default();
        assert!(b.is_settled());
        let _ = b.record_changed();
        assert!(!b.is_settled(), "a flush is asked for");
        b.flush_starting();
        let batch = b.take_batch(record);
        assert!(b.is_settled(), "the batch is being written");
        b.batch_failed(batch);
        assert!(!b.is_settled(), "a failed batch waits to be written again");
        let batch = b.take_batch(record);
        b.batch_written(batch.input_written);
        assert!(b.is_settled());
        b.push_started();
        assert!(!b.is_settled(), "a push is under way");
        let _ = b.push_answered();
        b.hold_outputs();
        let _ = b.send_or_hold(output());
        assert!(!b.is_settled(), "an output waits for the next batch");
    }
}
