//! A turn's end, one function per outcome: the store was unreachable (retry after a backoff),
//! the turn failed (retry while attempts are left, else `failed`), the provider rate-limited it
//! (`waiting_rate_limit`, resumed by itself), or it completed (markers, a pause at a step
//! boundary, a yield, or an answer).
//!
//! What a turn's end sends out (its reply, a yield, a failure) waits for the batch that records
//! that end (the final entry, the done mark, the status) and leaves with it
//! ([`crate::messages::outputs_into_batch`]): sent before, an output could be lost with the
//! process while the item it answers was already done.

use super::AgentActor;
use super::activity::Timer;
use crate::messages::{ChildOutput, OutputPort};
use crate::ports::StoreWrite;
use crate::turn::TurnResult;
use actix::prelude::*;
use agentd_proto::Output;
use agentd_proto::ids::derived_id;
use agentd_proto::{
    AgentStatus, AgentdError, Channel, CheckpointReason, Control, DependencyOutcome, Envelope,
    ErrorCode, Event, Marker,
};
use uuid::Uuid;

/// What a turn's future ends with: its result, or the panic that ended it.
pub(super) type TurnEnd = Result<Result<TurnResult, AgentdError>, Box<dyn std::any::Any + Send>>;

/// How a turn ended, as the actor acts on it.
#[derive(Debug)]
enum Outcome {
    /// The store (e.g. Redis) was unreachable, or refused a write this process no longer owns
    /// (fenced): nothing is lost, the turn runs again.
    StoreUnavailable(AgentdError),
    /// The store cannot do what the turn asked (a value it cannot decode or encode, a request
    /// it does not support): the same call fails the same way again, so the agent fails at
    /// once, whatever attempts are left.
    StoreBroken(AgentdError),
    /// The turn failed for now: its model could not answer (a provider's 5xx, a timeout, a
    /// connection error, [`crate::ports::ModelError::is_transient`]). The same turn may succeed
    /// later, so it is retried while `limits.max_attempts` allows.
    Passing(AgentdError),
    /// The turn failed in a way no retry fixes (an invalid argument, a spent budget, a request
    /// the provider refused, a panic).
    Failed(AgentdError),
    /// The provider rate-limited it; it may run again after this many ms.
    RateLimited(u64),
    /// Calls of service tools wait for their answers.
    WaitingTools(Vec<crate::turn::WaitingCall>),
    /// It ran to its end.
    Completed(TurnResult),
}

impl Outcome {
    fn of(end: TurnEnd) -> Self {
        match end {
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                Outcome::Failed(AgentdError::new(
                    ErrorCode::Internal,
                    format!("turn panicked: {msg}"),
                ))
            }
            // By the store error's kind where it rides along (`transient`, `fenced`: retried;
            // `corrupt`, `unsupported`: not); `unavailable`, and a `store_error` without its
            // kind, are kept (keeping work is the safe side).
            Ok(Err(e)) if crate::ports::is_transient(&e) => Outcome::StoreUnavailable(e),
            Ok(Err(e)) if e.code == ErrorCode::StoreError => Outcome::StoreBroken(e),
            Ok(Err(e))
                if e.source_as::<crate::ports::ModelError>()
                    .is_some_and(crate::ports::ModelError::is_transient) =>
            {
                Outcome::Passing(e)
            }
            Ok(Err(e)) => Outcome::Failed(e),
            Ok(Ok(r)) if !r.waiting.is_empty() => Outcome::WaitingTools(r.waiting),
            Ok(Ok(r)) => match r.rate_limited {
                Some(ms) => Outcome::RateLimited(ms),
                None => Outcome::Completed(r),
            },
        }
    }
}

/// What the actor does once a turn's end is handled.
#[derive(PartialEq, Eq)]
enum Next {
    /// The item is done; the next one may start.
    TakeNext,
    /// The queue waits (a retry, a rate limit, a pause mid-turn).
    Hold,
}

impl AgentActor {
    /// A turn's future ended.
    pub(super) fn turn_done(&mut self, cause: Uuid, end: TurnEnd, ctx: &mut Context<Self>) {
        if self.activity.running().map(|t| t.cause) != Some(cause) {
            // An aborted turn's late completion: nothing of it applies, but the tokens of its
            // last model call were spent all the same.
            if let Ok(Ok(r)) = &end
                && let Some(usage) = r.final_usage
            {
                self.count_usage(usage, ctx);
            }
            return;
        }
        self.writes.hold_outputs();
        let next = self.end_turn(cause, end, ctx);
        self.writes.release_outputs();
        if self.writes.has_outputs() {
            self.schedule_flush(ctx);
        }
        if next == Next::TakeNext {
            self.pump(ctx);
        }
        self.check_activity();
    }

    /// [`Self::turn_done`] while outputs are held for the batch that records the end.
    fn end_turn(&mut self, cause: Uuid, mut end: TurnEnd, ctx: &mut Context<Self>) -> Next {
        self.release_permit();
        let Some(turn) = self.take_running() else {
            return Next::Hold;
        };
        self.turn_setup()
            .usage
            .turns
            .observe(turn.started.elapsed().as_secs_f64());
        if let Ok(Ok(r)) = &mut end {
            self.keep_what_the_turn_made(r, ctx);
        }
        if turn.restart_backend_after {
            self.deps().model.control(&self.rec.id, Control::Terminate);
        }
        let input = turn.input;
        match Outcome::of(end) {
            Outcome::StoreUnavailable(e) => self.retry_when_the_store_is_back(e, input, ctx),
            Outcome::Passing(e)
                if self.rec.attempts < self.deps().config.limits.max_attempts
                    && input.is_some() =>
            {
                self.retry_failed_turn(e, input, ctx)
            }
            Outcome::Passing(e) | Outcome::Failed(e) | Outcome::StoreBroken(e) => {
                self.fail(e, cause, ctx);
                self.done(input.map(|e| e.id), ctx);
                Next::TakeNext
            }
            Outcome::RateLimited(ms) => {
                self.rate_limited(ms, input, ctx);
                Next::Hold
            }
            Outcome::WaitingTools(open) => {
                let unanswered = turn.shared.take_open_calls();
                self.wait_for_tools(cause, input, open, unanswered, ctx);
                Next::Hold
            }
            Outcome::Completed(r) => self.completed(r, cause, input, turn.pause_reason, ctx),
        }
    }

    /// Counts the last step's usage (the tree's budget now; the agent's own with the status
    /// the end decides), keeps the thread the turn knew, and queues its last entry with the
    /// outputs made from it.
    fn keep_what_the_turn_made(&mut self, r: &mut TurnResult, ctx: &mut Context<Self>) {
        if let Some(usage) = r.final_usage.take() {
            self.count_usage(usage, ctx);
        }
        if let Some(run) = r.cli_run.take() {
            let cli = self.rec.agent_cli.get_or_insert_with(Box::default);
            if run.session_id.is_some() {
                cli.session_id = run.session_id;
            }
            cli.reported_cost_usd += run.reported_cost_usd.unwrap_or(0.0);
        }
        self.thread = r.thread.take();
        if let Some(entry) = r.final_entry.take() {
            let agent_id = self.shared_id();
            let write = if r.final_entry_new {
                StoreWrite::AppendNew { agent_id, entry }
            } else {
                StoreWrite::Append { agent_id, entry }
            };
            self.write_later(write, ctx);
            self.writes.after_next_batch(&mut r.after_write);
        }
    }

    /// The store is unreachable: the item goes back to the front of the queue and the turn
    /// runs again after a backoff; outputs already written de-duplicate by their derived ids.
    fn retry_when_the_store_is_back(
        &mut self,
        e: AgentdError,
        input: Option<Envelope>,
        ctx: &mut Context<Self>,
    ) -> Next {
        self.store_retry_ms = (self.store_retry_ms.saturating_mul(2)).clamp(100, 2_000);
        tracing::warn!(agent_id = %self.rec.id, error = %e, retry_ms = self.store_retry_ms, "turn hit an unavailable store; retrying");
        if let Some(env) = input {
            self.queue.retry_first(env);
        }
        let delay = std::time::Duration::from_millis(self.store_retry_ms.into());
        let timer = ctx.run_later(delay, |act, ctx| act.retry_now(ctx));
        self.hold_for_retry(timer, None, ctx);
        Next::Hold
    }

    /// An automatic retry with capped exponential backoff: the agent shows `queued` with the
    /// retry in its reason, and the attempt in `inspect`.
    fn retry_failed_turn(
        &mut self,
        e: AgentdError,
        input: Option<Envelope>,
        ctx: &mut Context<Self>,
    ) -> Next {
        let limits = &self.deps().config.limits;
        let shift = self.rec.attempts.saturating_sub(1).min(20);
        let delay = limits
            .retry_backoff_ms
            .saturating_mul(1u64 << shift)
            .min(limits.retry_backoff_max_ms);
        let max_attempts = limits.max_attempts;
        tracing::warn!(agent_id = %self.rec.id, error = %e, attempt = self.rec.attempts, retry_ms = delay, "turn failed; retrying");
        self.rec.last_error = Some(e.to_string());
        self.deps().events.publish(&Event::TurnFailed {
            agent_id: self.rec.id.clone(),
            message: format!(
                "{e} (attempt {}, retrying in {delay} ms)",
                self.rec.attempts
            ),
        });
        if let Some(env) = input {
            self.queue.retry_first(env);
        }
        let sleep = self.deps().clock.sleep(delay);
        let timer = ctx.spawn(sleep.into_actor(self).map(|_, act, ctx| act.retry_now(ctx)));
        let reason = format!(
            "retry {} of {max_attempts} in {delay} ms",
            self.rec.attempts + 1
        );
        self.hold_for_retry(timer, Some(reason), ctx);
        self.checkpoint(CheckpointReason::Error, &e.to_string(), ctx);
        Next::Hold
    }

    /// A held retry's time has come: the queue runs again.
    fn retry_now(&mut self, ctx: &mut Context<Self>) {
        if self.end_hold(Timer::Fired, ctx) {
            self.pump(ctx);
        }
        self.check_activity();
    }

    /// A provider rate limit: the item goes back to the front of the queue, the agent waits in
    /// `waiting_rate_limit`, and resumes by itself after `ms` (on the injected clock); the turn
    /// re-runs once, its recorded outputs and tool results de-duplicated.
    fn rate_limited(&mut self, ms: u64, input: Option<Envelope>, ctx: &mut Context<Self>) {
        let resume_at = self.deps().clock.now_ms() + ms;
        if let Some(env) = input {
            self.queue.retry_first(env);
        }
        self.rec.resume_at_ms = Some(resume_at);
        let _ = self.set_status(
            AgentStatus::WaitingRateLimit,
            Some(format!("provider rate limit; resumes at {resume_at}")),
            ctx,
        );
        self.deps().events.publish(&Event::RateLimited {
            agent_id: self.rec.id.clone(),
            resume_at_ms: resume_at,
        });
        self.waits("waiting_rate_limit", self.rec.trace);
        self.schedule_rate_limit_resume(ms, ctx);
    }

    /// Resumes a rate-limited agent by itself after `ms` (on the injected clock).
    pub(super) fn schedule_rate_limit_resume(&mut self, ms: u64, ctx: &mut Context<Self>) {
        let sleep = self.deps().clock.sleep(ms);
        ctx.spawn(sleep.into_actor(self).map(|_, act, ctx| {
            if act.rec.status == AgentStatus::WaitingRateLimit {
                act.rec.resume_at_ms = None;
                let _ = act.set_status(AgentStatus::Running, Some("rate limit over".into()), ctx);
                act.pump(ctx);
            }
            act.check_activity();
        }));
    }

    /// The turn ran to its end: its markers apply, then it failed by marker, paused at a step
    /// boundary, yielded, or answered.
    fn completed(
        &mut self,
        r: TurnResult,
        cause: Uuid,
        input: Option<Envelope>,
        pause_reason: Option<Box<str>>,
        ctx: &mut Context<Self>,
    ) -> Next {
        self.store_retry_ms = 0;
        self.rec.turns += 1;
        let wait = self.apply_markers(&r.markers, &r.malformed);
        for m in &r.markers {
            if let Marker::PhaseComplete { phase } = m {
                self.persist(ctx);
                self.checkpoint(
                    CheckpointReason::Auto,
                    &format!("phase {phase} complete"),
                    ctx,
                );
            }
        }
        let error_marker = r.markers.iter().find_map(|m| match m {
            Marker::Error { message } => Some(message.clone()),
            _ => None,
        });
        if let Some(message) =
            error_marker.filter(|_| self.deps().config.limits.fail_on_error_marker)
        {
            // `[ERROR]…[/ERROR]` fails the agent when the config says so.
            let e = AgentdError::new(ErrorCode::ModelError, format!("agent reported: {message}"));
            self.fail(e, cause, ctx);
        } else if r.paused {
            let reason = pause_reason.map_or_else(|| "paused by control".into(), String::from);
            self.pause_mid_turn(input, reason, ctx);
            // The item stays undone: the continued turn handles it.
            return Next::TakeNext;
        } else if let Some(result) = r.yielded {
            self.yielded(result, cause, ctx);
        } else {
            self.answered(r, cause, wait, ctx);
        }
        self.done(input.map(|e| e.id), ctx);
        Next::TakeNext
    }

    /// `yield_to_parent`: the agent is completed, its dependents may go on (a sub-agent's; a
    /// worker's wait for their watches), its parent gets the result, and once that is written
    /// its actor stops ([`super::passivate`]).
    fn yielded(&mut self, result: serde_json::Value, cause: Uuid, ctx: &mut Context<Self>) {
        self.rec.result = Some(Box::new(result.clone()));
        let _ = self.set_status(AgentStatus::Completed, Some("yielded".into()), ctx);
        if crate::depends_on::met_by_yield(&self.rec) {
            self.tell_dependents(DependencyOutcome::Met);
        }
        if let Some(parent_id) = self.rec.channel.parent_id() {
            self.deps().events.publish(&Event::Yielded {
                agent_id: self.rec.id.clone(),
                parent_id: parent_id.to_string(),
                result: result.clone(),
            });
        }
        self.output(Output::Yield { result }, cause);
        // Handled after the flush that writes the yield (flushes run before anything else).
        ctx.notify(super::messages::PassivateIfDone);
    }

    /// The model answered: a sub-agent reports its final text (seed 004), and the agent waits
    /// where a marker asked it to, or pauses over its budget, or is done.
    fn answered(
        &mut self,
        r: TurnResult,
        cause: Uuid,
        wait: Option<(AgentStatus, String)>,
        ctx: &mut Context<Self>,
    ) {
        if r.step_limit {
            tracing::warn!(agent_id = %self.rec.id, "turn ended at the step limit");
        }
        if matches!(self.rec.channel, Channel::Spawn { .. }) && !r.final_text.trim().is_empty() {
            self.output(
                Output::Reply { text: r.final_text },
                derived_id(cause, "final"),
            );
        }
        match wait {
            Some((status, reason)) => {
                let _ = self.set_status(status, Some(reason), ctx);
            }
            None => {
                if !self.pause_if_over_budget(ctx) {
                    self.persist(ctx);
                }
            }
        }
    }

    /// Publishes marker events and updates phase and last error; answers the waiting status a
    /// dependency request or a user question puts the agent in.
    fn apply_markers(
        &mut self,
        markers: &[Marker],
        malformed: &[String],
    ) -> Option<(AgentStatus, String)> {
        let mut wait = None;
        for problem in malformed {
            tracing::warn!(agent_id = %self.rec.id, problem, "malformed protocol marker");
            self.deps().events.publish(&Event::MarkerMalformed {
                agent_id: self.rec.id.clone(),
                problem: problem.clone(),
            });
        }
        for m in markers {
            match m {
                Marker::PhaseComplete { phase } => {
                    self.rec.phase = Some(*phase);
                    self.rec.current_step = Some(format!("phase {phase} complete"));
                    let phases = self
                        .deps()
                        .config
                        .types
                        .get(&self.rec.agent_type)
                        .and_then(|t| t.phases)
                        .filter(|n| *n > 0);
                    self.rec.progress = phases.map(|n| (f64::from(*phase) / f64::from(n)).min(1.0));
                }
                Marker::Error { message } => self.rec.last_error = Some(message.clone()),
                Marker::DependencyRequest { request } => {
                    wait = Some((AgentStatus::WaitingDependency, request.clone()));
                }
                Marker::UserQuestion { question } => {
                    wait = Some((AgentStatus::WaitingQuestion, question.clone()))
                }
            }
            self.deps().events.publish(&Event::Marker {
                agent_id: self.rec.id.clone(),
                marker: m.clone(),
            });
        }
        wait
    }

    /// A turn failed the agent: `failed` with the error code as its reason, a `turn_failed`
    /// event, its dependents told, and its parent told.
    pub(super) fn fail(&mut self, e: AgentdError, cause: Uuid, ctx: &mut Context<Self>) {
        tracing::warn!(agent_id = %self.rec.id, error = %e, "turn failed");
        self.deps().events.publish(&Event::TurnFailed {
            agent_id: self.rec.id.clone(),
            message: e.to_string(),
        });
        let reason = e.code.as_str().to_string();
        self.mark_failed(e, reason, cause, ctx);
    }

    /// The agent is `failed` with `reason` (`last_error`: `e`); its dependents and its parent
    /// are told.
    pub(super) fn mark_failed(
        &mut self,
        e: AgentdError,
        reason: String,
        cause: Uuid,
        ctx: &mut Context<Self>,
    ) {
        self.rec.last_error = Some(e.to_string());
        let _ = self.set_status(AgentStatus::Failed, Some(reason), ctx);
        self.tell_dependents(DependencyOutcome::Failed);
        self.output(
            Output::Failed {
                error: e.to_string(),
            },
            derived_id(cause, "failed"),
        );
    }

    /// Sends `output` to the agent's parent, if it has one: with the next batch while a turn's
    /// end is handled, else at once.
    fn output(&mut self, output: Output, cause: Uuid) {
        if self.rec.channel.parent_id().is_none() {
            return;
        }
        let out = ChildOutput {
            child: self.rec.share(),
            output,
            cause,
            kept: false,
        };
        if let Some(out) = self.writes.send_or_hold(out) {
            self.system.send_output(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Outcome, TurnEnd};
    use crate::ports::{StoreError, StoreErrorKind};
    use agentd_proto::{AgentdError, ErrorCode};

    fn of(e: AgentdError) -> Outcome {
        let end: TurnEnd = Ok(Err(e));
        Outcome::of(end)
    }

    fn store_failure(kind: StoreErrorKind) -> Outcome {
        of(StoreError::new(kind, "reading the thread").into())
    }

    #[test]
    fn a_passing_store_failure_is_retried_and_a_lasting_one_fails_the_agent() {
        for kind in [
            StoreErrorKind::Transient,
            StoreErrorKind::Rejected,
            StoreErrorKind::Fenced,
        ] {
            let outcome = store_failure(kind);
            assert!(
                matches!(outcome, Outcome::StoreUnavailable(_)),
                "{kind:?}: {outcome:?}"
            );
        }
        for kind in [StoreErrorKind::Corrupt, StoreErrorKind::Unsupported] {
            let outcome = store_failure(kind);
            assert!(
                matches!(outcome, Outcome::StoreBroken(_)),
                "{kind:?}: {outcome:?}"
            );
        }
    }

    #[test]
    fn a_store_error_without_its_kind_and_an_unavailable_one_are_retried() {
        for code in [ErrorCode::StoreError, ErrorCode::Unavailable] {
            let outcome = of(AgentdError::new(code, "from afar"));
            assert!(
                matches!(outcome, Outcome::StoreUnavailable(_)),
                "{code:?}: {outcome:?}"
            );
        }
        assert!(matches!(
            of(AgentdError::new(ErrorCode::ModelError, "bad answer")),
            Outcome::Failed(_)
        ));
    }
}
