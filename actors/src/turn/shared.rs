//! What a running turn and its agent's actor share: the actor's request to stop (a pause, a
//! budget: at the next step boundary, aborting the model call in flight), the tool calls the
//! turn has made and not answered yet, which the actor closes if it ends the turn first (see
//! `agentd_proto::conversation`), and the model call in flight, whose tokens the actor counts if
//! it aborts the turn.

use super::live_answer::LiveAnswer;
use agentd_proto::Usage;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// A tool call the turn recorded and has not answered yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpenCall {
    /// The id its result gets (derived from the turn's cause, the step and the call's index), so
    /// a closing written by the actor and a result the turn wrote after all are one entry.
    pub result_id: Uuid,
    /// The model's id of the call, which its result answers.
    pub call_id: Box<str>,
}

/// Shared by a running turn and its actor, for the turn's life.
#[derive(Debug, Default)]
pub(crate) struct TurnShared {
    stop: AtomicBool,
    /// Invariant: the calls of the turn's current step that are recorded in the thread and whose
    /// results are not, in the step's order.
    open_calls: Mutex<Vec<OpenCall>>,
    /// Invariant: the model call the turn awaits now, if any (set for the call's duration).
    in_flight: Mutex<Option<InFlightCall>>,
}

/// A model call in flight.
#[derive(Debug)]
struct InFlightCall {
    cancel: CancellationToken,
    answer: Arc<LiveAnswer>,
}

impl TurnShared {
    /// Whether a stop at the next step boundary has been asked for.
    pub(crate) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Asks for a stop at the next step boundary; it aborts the model call in flight (the
    /// turn then stops, or asks again if the stop is withdrawn meanwhile).
    pub(crate) fn request_stop(&self) {
        let call = self.in_flight();
        self.stop.store(true, Ordering::SeqCst);
        if let Some(call) = call.as_ref() {
            call.cancel.cancel();
        }
    }

    /// Withdraws a stop asked for ([`Self::request_stop`]) before it takes effect.
    pub(crate) fn withdraw_stop(&self) {
        self.stop.store(false, Ordering::SeqCst);
    }

    /// A model call starts, reporting to `answer` and aborted by `cancel` (its request's own
    /// token, not shared yet), which is cancelled now if a stop is asked for.
    pub(crate) fn call_started(&self, answer: Arc<LiveAnswer>, cancel: &CancellationToken) {
        let mut call = self.in_flight();
        if self.stop_requested() {
            cancel.cancel();
        }
        *call = Some(InFlightCall {
            cancel: cancel.clone(),
            answer,
        });
    }

    /// The model call ended (answered, failed or cancelled): the turn counts it itself.
    pub(crate) fn call_ended(&self) {
        *self.in_flight() = None;
    }

    /// The turn is being aborted with the model call it has in flight, if any: answers what the
    /// call has cost so far, which the caller counts (the turn, ended with it, never will).
    ///
    /// The call's token is left alone: dropping the turn's future aborts the request, while a
    /// cancelled token would wake that future once more (the actor's context may still poll it
    /// in the same round) and let it act on an answer nobody wants.
    pub(crate) fn abort_call(&self) -> Option<Usage> {
        self.in_flight().take()?.answer.take_cost()
    }

    /// The step's calls are recorded and none is answered yet.
    pub(crate) fn calls_opened(&self, calls: Vec<OpenCall>) {
        *self.open_calls() = calls;
    }

    /// The call whose result is `result_id` is answered.
    pub(crate) fn call_answered(&self, result_id: Uuid) {
        self.open_calls().retain(|c| c.result_id != result_id);
    }

    /// The calls still open, which the caller now answers itself.
    pub(crate) fn take_open_calls(&self) -> Vec<OpenCall> {
        std::mem::take(&mut *self.open_calls())
    }

    fn in_flight(&self) -> MutexGuard<'_, Option<InFlightCall>> {
        // Each change is one assignment: a panic cannot leave it half made.
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn open_calls(&self) -> MutexGuard<'_, Vec<OpenCall>> {
        // A panic while the list was held left it whole (each change is one statement).
        self.open_calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(n: u128) -> OpenCall {
        OpenCall {
            result_id: Uuid::from_u128(n),
            call_id: format!("call_{n}").into(),
        }
    }

    #[test]
    fn answered_calls_leave_and_the_rest_are_taken_once() {
        let shared = TurnShared::default();
        shared.calls_opened(vec![call(1), call(2), call(3)]);
        shared.call_answered(Uuid::from_u128(1));
        assert_eq!(shared.take_open_calls(), vec![call(2), call(3)]);
        assert!(shared.take_open_calls().is_empty());
    }

    #[test]
    fn a_stop_aborts_the_call_in_flight_and_an_abort_answers_its_cost_once() {
        let clock: Arc<dyn crate::ports::Clock> = Arc::new(crate::ports::ManualClock::new(1));
        let shared = TurnShared::default();
        let answer = Arc::new(LiveAnswer::new(None, clock.clone(), 10));
        let cancel = CancellationToken::new();
        shared.call_started(Arc::clone(&answer), &cancel);
        assert!(!cancel.is_cancelled());
        shared.request_stop();
        assert!(cancel.is_cancelled(), "a pause aborts the call in flight");
        shared.call_ended();
        let late = CancellationToken::new();
        shared.call_started(Arc::new(LiveAnswer::new(None, clock.clone(), 10)), &late);
        assert!(
            late.is_cancelled(),
            "a call started once a stop is asked for is aborted at once"
        );
        shared.withdraw_stop();
        shared.call_started(Arc::clone(&answer), &CancellationToken::new());
        crate::ports::AnswerObserver::text(&*answer, "abcd");
        assert_eq!(
            shared.abort_call().map(|u| (u.input, u.output)),
            Some((10, 1))
        );
        assert_eq!(shared.abort_call(), None, "counted once");
    }

    #[test]
    fn a_stop_can_be_asked_for_and_withdrawn() {
        let shared = TurnShared::default();
        shared.request_stop();
        assert!(shared.stop_requested());
        shared.withdraw_stop();
        assert!(!shared.stop_requested());
    }
}

/// Whether a turn's input entry is in the store yet. The actor writes it (with the `running`
/// record) in one of its flushes and sets this once that flush is written; the turn reads it
/// before it appends anything of its own.
///
/// Usually the flush that writes the input runs before the turn first runs. For an item its
/// agent holds in its stream entry ([`crate::ports::StreamEntry`]) the actor *defers* that flush,
/// so that a turn of one model call writes its input, its answer and its record in the flush
/// that ends it; the turn then asks for the flush ([`super::TurnProgress::StartNeeded`]) and
/// waits for it only if it is about to write something of its own first, which must come after
/// its input in the thread.
#[derive(Debug)]
pub(crate) struct InputWritten {
    written: AtomicBool,
    /// The actor writes the input with a flush it deferred (the turn must not write it itself).
    deferred: bool,
    notify: tokio::sync::Notify,
}

impl InputWritten {
    /// Not written yet; `deferred`: the actor writes it with a deferred flush.
    pub(crate) fn new(written: bool, deferred: bool) -> Arc<Self> {
        Arc::new(InputWritten {
            written: AtomicBool::new(written),
            deferred,
            notify: tokio::sync::Notify::new(),
        })
    }

    /// The flush that writes the input was written.
    pub(crate) fn set(&self) {
        self.written.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }

    /// Whether the input is in the store.
    pub(crate) fn is_set(&self) -> bool {
        self.written.load(Ordering::SeqCst)
    }

    /// Whether the actor writes the input with a deferred flush.
    pub(crate) fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// Waits until [`Self::set`] (at once if it was).
    pub(crate) async fn wait(&self) {
        while !self.is_set() {
            // `notify_one` stores a permit when nobody waits yet, so a `set` between the check
            // and this wait is not missed.
            self.notify.notified().await;
        }
    }
}
