//! Fail points: the moments at which a test may stop the process as `kill -9` would, to prove
//! that what happened before is not done twice when the work runs again. They exist only with
//! the `failpoints` feature, which the test suite turns on (a build of the service alone has
//! none), and act only when the `FAILPOINTS` environment variable names them (the `fail`
//! crate's syntax), read by [`setup`] at start:
//!
//! | fail point | where | its argument |
//! |---|---|---|
//! | `after-tool-effect` | a tool call did what it does; its result is not written yet | the tool's name: only its calls stop the process |
//! | `before-command-ack` | a command of the Redis command stream ran; its entry is not acknowledged yet | the command's `type` (`send`, `reset`, …) |
//!
//! `FAILPOINTS='after-tool-effect=1*return(spawn_agent)'` kills the process (`SIGKILL`, sent to
//! itself) right after the first `spawn_agent` call made its agent.

/// Reads `FAILPOINTS` (with the `failpoints` feature; nothing otherwise). Called once at start.
pub fn setup() {
    #[cfg(feature = "failpoints")]
    std::mem::forget(fail::FailScenario::setup());
}

/// The `after-tool-effect` fail point, for a call of tool `tool`.
pub(crate) fn after_tool_effect(tool: &str) {
    #[cfg(feature = "failpoints")]
    fail::fail_point!("after-tool-effect", |named: Option<String>| {
        if named.as_deref() == Some(tool) {
            killed();
        }
    });
    let _ = tool;
}

/// What names `command` for [`before_command_ack`]: its `type` (with the `failpoints` feature;
/// nothing otherwise, and nothing is computed).
pub fn kind_of(command: &agentd_proto::Command) -> Option<String> {
    #[cfg(feature = "failpoints")]
    return serde_json::to_value(command)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string));
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = command;
        None
    }
}

/// The `before-command-ack` fail point, for a command of type `kind` ([`kind_of`]).
pub fn before_command_ack(kind: &Option<String>) {
    #[cfg(feature = "failpoints")]
    fail::fail_point!("before-command-ack", |named: Option<String>| {
        if named.is_some() && named == *kind {
            killed();
        }
    });
    let _ = kind;
}

/// Stops the process at once, as `kill -9` does: no shutdown, nothing flushed.
#[cfg(feature = "failpoints")]
fn killed() {
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
}
