//! A model call's answer while it arrives: its text goes out as `text_delta` events (coalesced,
//! so a fast stream costs observers about ten events a second per agent), and what it has cost
//! so far is known, so a call aborted before its end still counts its tokens.

use crate::ports::Clock;
use crate::ports::{AnswerObserver, EventSink};
use agentd_proto::{Event, Usage};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use uuid::Uuid;

/// Least time between two `text_delta` events of one call (about ten a second).
pub(crate) const DELTA_INTERVAL_MS: u64 = 100;

/// Characters per token of an aborted call's estimate (as the context-window estimate).
const CHARS_PER_TOKEN: u64 = 4;

/// Where a call's text deltas go: the step whose entry the answer becomes.
pub(crate) struct DeltaTarget {
    pub agent_id: Arc<str>,
    pub step_id: Uuid,
    pub events: Arc<dyn EventSink>,
}

/// One model call's answer so far. Shared by the call (which reports to it) and the turn's
/// [`super::TurnShared`] (whose owner reads its cost if it aborts the call).
pub(crate) struct LiveAnswer {
    /// `None` for calls whose text nobody watches (a compaction's summary).
    deltas: Option<DeltaTarget>,
    clock: Arc<dyn Clock>,
    /// The call's input, estimated before it was sent: counted when the call is aborted after
    /// its answer began and before the provider said what the input was.
    input_estimate: u64,
    state: Mutex<SoFar>,
}

impl std::fmt::Debug for LiveAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveAnswer")
            .field("deltas", &self.deltas.as_ref().map(|d| d.step_id))
            .field("input_estimate", &self.input_estimate)
            .finish_non_exhaustive()
    }
}

/// What has arrived.
#[derive(Debug, Default)]
struct SoFar {
    /// The provider's latest report of the call's usage.
    reported: Option<Usage>,
    /// Characters of output streamed (text and tool calls).
    output_chars: u64,
    /// Text not published yet.
    pending: String,
    /// Next `seq` of the step's deltas.
    seq: u64,
    /// When the last delta was published (0 = none yet: the first piece goes out at once).
    published_ms: u64,
    /// What the call cost so far was taken to be counted (by the turn, or by the actor that
    /// aborted it, whichever came first): never twice.
    counted: bool,
}

impl LiveAnswer {
    pub(crate) fn new(
        deltas: Option<DeltaTarget>,
        clock: Arc<dyn Clock>,
        input_estimate: u64,
    ) -> Self {
        LiveAnswer {
            deltas,
            clock,
            input_estimate,
            state: Mutex::new(SoFar::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, SoFar> {
        // Each change is a few plain assignments: a panic cannot leave it half made.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes the text not published yet (the call ended: nothing would flush it later).
    pub(crate) fn finish(&self) {
        let mut state = self.state();
        self.publish(&mut state);
    }

    fn publish(&self, state: &mut SoFar) {
        let Some(target) = &self.deltas else { return };
        if state.pending.is_empty() {
            return;
        }
        let text = std::mem::take(&mut state.pending);
        state.published_ms = self.clock.now_ms().max(1);
        let seq = state.seq;
        state.seq += 1;
        target.events.publish(&Event::TextDelta {
            agent_id: target.agent_id.to_string(),
            step_id: target.step_id,
            seq,
            text,
        });
    }

    /// Takes the call's cost to be counted by the caller from the whole answer: `false` if it
    /// was taken already (the actor aborted the call and counted what it had cost).
    pub(crate) fn claim(&self) -> bool {
        !std::mem::replace(&mut self.state().counted, true)
    }

    /// What the call has cost so far, if its answer began, for the caller to count — once: a
    /// second take answers `None`. The provider's report, with the output it has not reported
    /// yet estimated from what was streamed; without a report, the estimated input and the
    /// streamed output. Estimates are flagged [`Usage::estimated`]. `None` if nothing arrived
    /// (the provider may not have started).
    pub(crate) fn take_cost(&self) -> Option<Usage> {
        let mut state = self.state();
        if std::mem::replace(&mut state.counted, true) {
            return None;
        }
        let streamed = state.output_chars.div_ceil(CHARS_PER_TOKEN);
        match state.reported {
            Some(mut usage) => {
                if usage.output < streamed {
                    usage.output = streamed;
                    usage.estimated = true;
                }
                Some(usage)
            }
            None if state.output_chars > 0 => Some(Usage {
                input: self.input_estimate,
                output: streamed,
                estimated: true,
                ..Usage::default()
            }),
            None => None,
        }
    }
}

impl AnswerObserver for LiveAnswer {
    fn text(&self, delta: &str) {
        let mut state = self.state();
        state.output_chars += delta.len() as u64;
        let Some(target) = &self.deltas else { return };
        if !target.events.is_listened() {
            return;
        }
        state.pending.push_str(delta);
        let now = self.clock.now_ms();
        if state.published_ms == 0 || now >= state.published_ms + DELTA_INTERVAL_MS {
            self.publish(&mut state);
        }
    }

    fn other_output(&self, chars: usize) {
        self.state().output_chars += chars as u64;
    }

    fn usage(&self, usage: Usage) {
        self.state().reported = Some(usage);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::ManualClock;

    #[derive(Default)]
    struct Seen(Mutex<Vec<Event>>);

    impl EventSink for Seen {
        fn publish(&self, event: &Event) {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(event.clone());
        }
    }

    fn texts(seen: &Seen) -> Vec<(u64, String)> {
        seen.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(|e| match e {
                Event::TextDelta { seq, text, .. } => Some((*seq, text.clone())),
                _ => None,
            })
            .collect()
    }

    fn live(clock: &Arc<ManualClock>, seen: &Arc<Seen>) -> LiveAnswer {
        LiveAnswer::new(
            Some(DeltaTarget {
                agent_id: "a".into(),
                step_id: Uuid::nil(),
                events: Arc::clone(seen) as Arc<dyn EventSink>,
            }),
            Arc::clone(clock) as Arc<dyn Clock>,
            100,
        )
    }

    #[test]
    fn deltas_are_coalesced_to_one_per_interval_and_flushed_at_the_end() {
        let clock = Arc::new(ManualClock::new(1_000));
        let seen = Arc::new(Seen::default());
        let answer = live(&clock, &seen);
        answer.text("He");
        answer.text("ll");
        answer.text("o");
        clock.advance(DELTA_INTERVAL_MS);
        answer.text(", ");
        answer.text("world");
        answer.finish();
        answer.finish();
        assert_eq!(
            texts(&seen),
            vec![
                (0, "He".to_string()),
                (1, "llo, ".to_string()),
                (2, "world".to_string())
            ]
        );
    }

    #[test]
    fn an_aborted_call_counts_what_was_reported_or_estimates_what_was_streamed() {
        let clock = Arc::new(ManualClock::new(1_000));
        let seen = Arc::new(Seen::default());
        let answer = live(&clock, &seen);
        assert_eq!(answer.take_cost(), None, "nothing arrived");
        let answer = live(&clock, &seen);
        answer.text("12345678");
        answer.other_output(1);
        assert_eq!(
            answer.take_cost(),
            Some(Usage {
                input: 100,
                output: 3,
                estimated: true,
                ..Usage::default()
            })
        );
        answer.usage(Usage {
            input: 42,
            cache_read: 7,
            ..Usage::default()
        });
        assert_eq!(answer.take_cost(), None, "taken once");
        let answer = live(&clock, &seen);
        answer.text("12345678");
        answer.other_output(1);
        answer.usage(Usage {
            input: 42,
            cache_read: 7,
            ..Usage::default()
        });
        assert_eq!(
            answer.take_cost(),
            Some(Usage {
                input: 42,
                output: 3,
                cache_read: 7,
                estimated: true,
                ..Usage::default()
            }),
            "the reported input, the streamed output estimated"
        );
        let answer = live(&clock, &seen);
        answer.text("12345678");
        answer.usage(Usage {
            input: 42,
            output: 9,
            cache_read: 7,
            ..Usage::default()
        });
        assert_eq!(
            answer.take_cost(),
            Some(Usage {
                input: 42,
                output: 9,
                cache_read: 7,
                ..Usage::default()
            }),
            "all reported: no estimate"
        );
    }
}
