//! Waiting for the answers of service calls (`waiting_tool`).
//!
//! A turn whose last step made calls of service tools ends there with the calls open
//! ([`crate::turn::WaitingCall`]); the agent keeps the turn's cause and item in
//! [`Activity::WaitingTool`], gives its turn slot back and queues whatever arrives. Each call is
//! closed once, in the store: by its answer ([`AnswerToolCall`]), by its deadline (a timer
//! here, or the turn itself when it runs again after a restart), or by an interruption. When
//! the last open call is closed, the turn runs again under the same cause: its step replays
//! from the thread and writes each call's result before the model is asked again.

use super::AgentActor;
use super::activity::{Activity, Slot, ToolWait, TurnStart};
use super::control::{Interruption, ItsItem};
use super::messages::{AnswerToolCall, DecideToolCall};
use crate::ports::ToolCallClosing;
use crate::tools::service;
use crate::turn::{OpenCall, TurnInput, WaitingCall};
use actix::prelude::*;
use agentd_proto::{
    AgentStatus, AgentdError, ApprovalDecision, Envelope, Event, ToolCallClose, ToolCallStatus,
};
use uuid::Uuid;

impl AgentActor {
    /// The turn caused by `cause` (handling `input`) waits for the service calls `open`;
    /// `unanswered` are all the calls of its step without a result.
    pub(super) fn wait_for_tools(
        &mut self,
        cause: Uuid,
        input: Option<Envelope>,
        open: Vec<WaitingCall>,
        unanswered: Vec<OpenCall>,
        ctx: &mut Context<Self>,
    ) {
        let ids: Vec<(Uuid, bool)> = open.iter().map(|c| (c.call_id, c.review)).collect();
        let wait = ToolWait {
            cause,
            input,
            open,
            unanswered,
            deadline: None,
        };
        self.wait_for_calls(wait, ctx);
        self.schedule_tool_deadline(ctx);
        // An answer that came while the turn was still making its calls (a re-run after a
        // restart) found no wait to end: the store says.
        let store = self.deps().store.clone();
        ctx.spawn(
            async move {
                let mut closed = Vec::new();
                for (id, review) in ids {
                    // A call at the gate waits for its decision, any other for its answer.
                    if let Ok(Some(call)) = store.tool_call_get(id).await
                        && (if review {
                            call.status != ToolCallStatus::AwaitingApproval
                        } else {
                            !call.status.is_open()
                        })
                    {
                        closed.push(id);
                    }
                }
                closed
            }
            .into_actor(self)
            .map(|closed, act, ctx| {
                for id in closed {
                    act.tool_call_closed(id, ctx);
                }
                act.check_activity();
            }),
        );
    }

    /// Sets the timer of the earliest deadline among the open calls.
    fn schedule_tool_deadline(&mut self, ctx: &mut Context<Self>) {
        let now = self.deps().clock.now_ms();
        let sleep = match &self.activity {
            Activity::WaitingTool(w) => w
                .open
                .iter()
                .filter_map(|c| c.deadline_ms)
                .min()
                .map(|d| self.deps().clock.sleep(d.saturating_sub(now))),
            _ => None,
        };
        let Some(sleep) = sleep else { return };
        let timer = ctx.spawn(sleep.into_actor(self).map(|_, act, ctx| {
            act.tool_deadlines_passed(ctx);
        }));
        if let Activity::WaitingTool(w) = &mut self.activity
            && let Some(old) = w.deadline.replace(timer)
        {
            ctx.cancel_future(old);
        }
    }

    /// Closes the open calls whose deadline passed (the model gets `tool_timeout`).
    fn tool_deadlines_passed(&mut self, ctx: &mut Context<Self>) {
        let now = self.deps().clock.now_ms();
        let Activity::WaitingTool(w) = &mut self.activity else {
            return;
        };
        w.deadline = None;
        let due: Vec<Uuid> = w
            .open
            .iter()
            .filter(|c| c.deadline_ms.is_some_and(|d| d <= now))
            .map(|c| c.call_id)
            .collect();
        let deps = self.system.deps.clone();
        ctx.spawn(
            async move {
                let mut closed = Vec::new();
                for id in due {
                    let closing = ToolCallClosing {
                        status: ToolCallStatus::TimedOut,
                        answer: None,
                        reason: None,
                        at_ms: now,
                    };
                    match service::close(&deps, id, closing).await {
                        Ok(ToolCallClose::Closed(_) | ToolCallClose::AlreadyClosed(_)) => {
                            closed.push(id);
                        }
                        Ok(ToolCallClose::NotFound) => closed.push(id),
                        Err(e) => {
                            tracing::warn!(call_id = %id, error = %e, "timing a tool call out failed")
                        }
                    }
                }
                closed
            }
            .into_actor(self)
            .map(|closed, act, ctx| {
                for id in closed {
                    act.tool_call_closed(id, ctx);
                }
                act.schedule_tool_deadline(ctx);
                act.check_activity();
            }),
        );
    }

    /// Call `call_id` is closed in the store: once no call is open, the turn goes on (unless
    /// the agent was paused meanwhile: resume goes on then).
    pub(super) fn tool_call_closed(&mut self, call_id: Uuid, ctx: &mut Context<Self>) {
        let Activity::WaitingTool(w) = &mut self.activity else {
            return;
        };
        w.open.retain(|c| c.call_id != call_id);
        let reviewing = w.open.iter().any(|c| c.review);
        let waiting = matches!(
            self.rec.status,
            AgentStatus::WaitingTool | AgentStatus::WaitingReview
        );
        if w.open.is_empty() && waiting {
            self.continue_after_tools(ctx);
        } else if !reviewing && self.rec.status == AgentStatus::WaitingReview {
            // Decided: what is left waits for answers (the review's wait span ends).
            self.waits("waiting_tool", self.rec.trace);
            if let Err(e) = self.set_status(AgentStatus::WaitingTool, Some("approved".into()), ctx)
            {
                tracing::warn!(agent_id = %self.rec.id, error = %e, "cannot wait for tools");
            }
        }
    }

    /// The status a wait for calls shows: `waiting_review` while a call waits for approval.
    pub(super) fn tool_wait_status(&self) -> AgentStatus {
        match &self.activity {
            Activity::WaitingTool(w) if w.open.iter().any(|c| c.review) => {
                AgentStatus::WaitingReview
            }
            _ => AgentStatus::WaitingTool,
        }
    }

    /// Whether the agent waits for service calls that are all closed (a pause held it).
    pub(super) fn tools_answered(&self) -> bool {
        matches!(&self.activity, Activity::WaitingTool(w) if w.open.is_empty())
    }

    /// Every call the turn waited for is closed: it runs again under its cause.
    pub(super) fn continue_after_tools(&mut self, ctx: &mut Context<Self>) {
        if let Err(e) = self.check_can_run() {
            tracing::warn!(agent_id = %self.rec.id, error = %e, "cannot go on after the tool calls");
            return;
        }
        let Some(w) = self.take_tool_wait() else {
            return;
        };
        if let Some(timer) = w.deadline {
            ctx.cancel_future(timer);
        }
        let start = TurnStart {
            cause: w.cause,
            env: w.input,
            input: TurnInput::Continue,
            input_written: None,
            slot: Slot::NotHeld,
        };
        if let Err(e) = self.run(start, Some("tool calls answered".into()), ctx) {
            tracing::warn!(agent_id = %self.rec.id, error = %e, "cannot go on after the tool calls");
        }
    }

    /// Ends a wait for service calls early (interrupt, cancel, terminate, close): the open
    /// calls are closed as cancelled, each call of the step gets its `interrupted` result, and
    /// the item is left as `item` says. `None` if the agent was not waiting.
    pub(super) fn end_tool_wait(
        &mut self,
        item: ItsItem,
        ctx: &mut Context<Self>,
    ) -> Option<Interruption> {
        let w = self.take_tool_wait()?;
        if let Some(timer) = w.deadline {
            ctx.cancel_future(timer);
        }
        if item == ItsItem::Done {
            self.done(w.input.map(|e| e.id), ctx);
        }
        let at_ms = self.deps().clock.now_ms();
        let deps = self.system.deps.clone();
        let open: Vec<Uuid> = w.open.iter().map(|c| c.call_id).collect();
        ctx.spawn(
            async move {
                for id in open {
                    let closing = ToolCallClosing {
                        status: ToolCallStatus::Cancelled,
                        answer: None,
                        reason: Some("the turn was interrupted".into()),
                        at_ms,
                    };
                    if let Err(e) = service::close(&deps, id, closing).await {
                        tracing::warn!(call_id = %id, error = %e, "cancelling a tool call failed");
                    }
                }
            }
            .into_actor(self),
        );
        Some(Interruption::of(&w.unanswered, w.cause, at_ms))
    }
}

impl Handler<AnswerToolCall> for AgentActor {
    // Atomic: the answer is recorded before the agent handles anything else.
    type Result = AtomicResponse<Self, Result<agentd_proto::ToolCallRecord, AgentdError>>;

    fn handle(&mut self, msg: AnswerToolCall, _: &mut Self::Context) -> Self::Result {
        let deps = self.system.deps.clone();
        let agent_id = self.rec.id.clone();
        let AnswerToolCall { call_id, answer } = msg;
        let at_ms = deps.clock.now_ms();
        AtomicResponse::new(Box::pin(
            async move {
                match deps.store.tool_call_get(call_id).await? {
                    // A worker never answers past the gate.
                    Some(call) if call.status == ToolCallStatus::AwaitingApproval => {
                        return Err(service::closed_error(&call));
                    }
                    Some(call) if call.agent_id == agent_id => {}
                    _ => return Err(service::not_found(call_id)),
                }
                let closing = ToolCallClosing {
                    status: ToolCallStatus::Answered,
                    answer: Some(answer),
                    reason: None,
                    at_ms,
                };
                match service::close(&deps, call_id, closing).await? {
                    ToolCallClose::Closed(call) => Ok(call),
                    ToolCallClose::AlreadyClosed(call) => Err(service::closed_error(&call)),
                    ToolCallClose::NotFound => Err(service::not_found(call_id)),
                }
            }
            .into_actor(self)
            .map(move |res, act, ctx| {
                if res.is_ok() {
                    act.tool_call_closed(call_id, ctx);
                }
                act.check_activity();
                res
            }),
        ))
    }
}

impl Handler<DecideToolCall> for AgentActor {
    // Atomic: the decision is recorded before the agent handles anything else.
    type Result = AtomicResponse<Self, Result<agentd_proto::ToolCallRecord, AgentdError>>;

    fn handle(&mut self, msg: DecideToolCall, _: &mut Self::Context) -> Self::Result {
        let deps = self.system.deps.clone();
        let agent_id = self.rec.id.clone();
        let DecideToolCall {
            call_id,
            approve,
            reason,
        } = msg;
        let at_ms = deps.clock.now_ms();
        AtomicResponse::new(Box::pin(
            async move {
                match deps.store.tool_call_get(call_id).await? {
                    Some(call) if call.agent_id == agent_id => {
                        if call.status != ToolCallStatus::AwaitingApproval {
                            return Err(service::closed_error(&call));
                        }
                    }
                    _ => return Err(service::not_found(call_id)),
                }
                let closing = ToolCallClosing {
                    status: if approve {
                        ToolCallStatus::Pending
                    } else {
                        ToolCallStatus::Rejected
                    },
                    answer: None,
                    reason,
                    at_ms,
                };
                // One store write: it applies only to a call still awaiting approval.
                match service::close(&deps, call_id, closing).await? {
                    ToolCallClose::Closed(call) => Ok(call),
                    ToolCallClose::AlreadyClosed(call) => Err(service::closed_error(&call)),
                    ToolCallClose::NotFound => Err(service::not_found(call_id)),
                }
            }
            .into_actor(self)
            .map(move |res, act, ctx| {
                if let Ok(call) = &res {
                    act.deps().events.publish(&Event::ToolCallDecided {
                        agent_id: call.agent_id.clone(),
                        call_id,
                        tool: call.tool.clone(),
                        decision: if approve {
                            ApprovalDecision::Approved
                        } else {
                            ApprovalDecision::Rejected
                        },
                    });
                    // Decided either way: the gate no longer holds the turn.
                    act.tool_call_closed(call_id, ctx);
                }
                act.check_activity();
                res
            }),
        ))
    }
}
