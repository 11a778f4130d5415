//! Fail points: the moments at which a test may stop the process as `kill -9` would, to prove
//! that what happened before is not done twice when the work runs again. They exist only with
//! the `failpoints` feature, which the test suite turns on (a build of the service alone has
//! none), and act only when the `FAILPOINTS` environment variable names them (the `fail`
//! crate's syntax), read by [`setup`] at start — for these and for the bus's own
//! (`before-command-ack`, in `agentd-bus`'s `failpoints` module: the `fail` crate keeps one
//! registry per process):
//!
//! | fail point | where | its argument |
//! |---|---|---|
//! | `after-tool-effect` | a tool call did what it does; its result is not written yet | the tool's name: only its calls stop the process |
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

/// Stops the process at once, as `kill -9` does: no shutdown, nothing flushed.
#[cfg(feature = "failpoints")]
fn killed() {
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
}
