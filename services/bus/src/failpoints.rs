//! The bus's fail point: the moment at which a test may stop the process as `kill -9` would,
//! to prove that a command read again from the command stream is not done twice. It exists only
//! with this crate's `failpoints` feature, which the test suite turns on (a build of the
//! service alone has none), and acts only when the `FAILPOINTS` environment variable names it
//! (the `fail` crate's syntax). The `fail` crate keeps one registry per process: the service
//! reads `FAILPOINTS` into it once at start (`crate::failpoints::setup`), for the
//! actors' fail points and this one alike.
//!
//! | fail point | where | its argument |
//! |---|---|---|
//! | `before-command-ack` | a command of the Redis command stream ran; its entry is not acknowledged yet | the command's `type` (`send`, `reset`, …) |
//!
//! `FAILPOINTS='before-command-ack=1*return(send)'` kills the process (`SIGKILL`, sent to
//! itself) right after the first `send` command ran, before its entry is acknowledged.

/// What names `command` for [`before_command_ack`]: its `type` (with the `failpoints` feature;
/// nothing otherwise, and nothing is computed).
pub(crate) fn kind_of(command: &agentd_proto::Command) -> Option<String> {
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
pub(crate) fn before_command_ack(kind: &Option<String>) {
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
