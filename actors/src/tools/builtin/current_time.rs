//! `current_time`: the time of the process clock, for agents whose type lists it.

use super::super::ToolContext;
use super::BuiltinTool;
use crate::ports::ToolSpec;
use serde_json::{Value, json};

pub(super) fn spec() -> ToolSpec {
    BuiltinTool::CurrentTime.described(
        "The current time in ms since the Unix epoch.",
        json!({"type": "object", "properties": {}}),
    )
}

pub(super) fn run(ctx: &ToolContext) -> Value {
    json!({ "now_ms": ctx.deps.clock.now_ms() })
}
