//! What the calls of configured tools leave behind for operators: the
//! `agentd_tool_calls_total{tool,kind,outcome}` counter, the `agentd_tool_call_seconds`
//! histogram (its buckets reach minutes: a service may take that long), and the
//! `tool_call_requested` / `tool_call_finished` events. Arguments never appear in any of them.

use super::ToolContext;
use crate::catalogue::ConfiguredTool;
use crate::deps::Deps;
use agentd_proto::{Event, ToolKind};
use std::time::Duration;
use uuid::Uuid;

const CALLS: (&str, &str) = (
    "agentd_tool_calls_total",
    "Calls of configured tools, by tool, kind and outcome.",
);
const SECONDS: (&str, &str) = (
    "agentd_tool_call_seconds",
    "From request to result of calls of configured tools, by tool and kind.",
);

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A result.
    Ok,
    /// A tool error (the tool's, or its transport's).
    Error,
    /// Its deadline passed.
    TimedOut,
    /// Its turn ended first.
    Cancelled,
    /// A person rejected it.
    Rejected,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::TimedOut => "timed_out",
            Outcome::Cancelled => "cancelled",
            Outcome::Rejected => "rejected",
        }
    }
}

/// One call of a configured tool, from its request to its result.
pub(crate) struct CallMeter<'a> {
    deps: &'a Deps,
    agent_id: &'a str,
    tool: &'a str,
    kind: ToolKind,
    call_id: Uuid,
}

impl<'a> CallMeter<'a> {
    /// The call is requested: `tool_call_requested` is published.
    pub(crate) fn requested(ctx: &'a ToolContext, tool: &'a ConfiguredTool, call_id: Uuid) -> Self {
        let meter = CallMeter::of(&ctx.deps, &ctx.caller.id, &tool.name, tool.kind(), call_id);
        meter.announce();
        meter
    }

    /// A call of `tool` (`kind`) by `agent_id`, without announcing it.
    pub(crate) fn of(
        deps: &'a Deps,
        agent_id: &'a str,
        tool: &'a str,
        kind: ToolKind,
        call_id: Uuid,
    ) -> Self {
        CallMeter {
            deps,
            agent_id,
            tool,
            kind,
            call_id,
        }
    }

    /// Publishes `tool_call_requested`.
    pub(crate) fn announce(&self) {
        self.deps.events.publish(&Event::ToolCallRequested {
            agent_id: self.agent_id.to_string(),
            call_id: self.call_id,
            tool: self.tool.to_string(),
            kind: self.kind,
        });
    }

    /// The call has its result, `took` after it was requested: counted, timed, published.
    pub(crate) fn finished(&self, outcome: Outcome, took: Duration) {
        let m = agentd_observe::metrics::global();
        let kind = self.kind.as_str();
        m.inc(
            CALLS.0,
            CALLS.1,
            &[
                ("tool", self.tool),
                ("kind", kind),
                ("outcome", outcome.as_str()),
            ],
            1.0,
        );
        m.observe(
            SECONDS.0,
            SECONDS.1,
            &[("tool", self.tool), ("kind", kind)],
            took.as_secs_f64(),
        );
        self.deps.events.publish(&Event::ToolCallFinished {
            agent_id: self.agent_id.to_string(),
            call_id: self.call_id,
            tool: self.tool.to_string(),
            kind: self.kind,
            duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            ok: outcome == Outcome::Ok,
            outcome: outcome.as_str().to_string(),
        });
    }
}
