//! What a running turn and its agent's actor share: the actor's request to stop at the next step
//! boundary (a pause, a budget), and the tool calls the turn has made and not answered yet, which
//! the actor closes if it ends the turn first (see `agentd_proto::conversation`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
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
}

impl TurnShared {
    /// Whether a stop at the next step boundary has been asked for.
    pub(crate) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Asks for (or, `false`, withdraws) a stop at the next step boundary.
    pub(crate) fn request_stop(&self, stop: bool) {
        self.stop.store(stop, Ordering::SeqCst);
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
    fn a_stop_can_be_asked_for_and_withdrawn() {
        let shared = TurnShared::default();
        shared.request_stop(true);
        assert!(shared.stop_requested());
        shared.request_stop(false);
        assert!(!shared.stop_requested());
    }
}
