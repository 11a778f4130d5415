//! Polling for a condition with a time limit: the one way the tests wait for a state (they
//! never sleep a fixed time and then assert). [`eventually`] is for async tests (it sleeps on
//! the runtime's timer, so the actors it waits for keep running on the same thread);
//! [`eventually_blocking`] is for plain `#[test]`s that drive a process or a server from the
//! test's own thread.
//!
//! The condition answers a [`Poll`]: `bool` (holds or not), `Option<T>` (`Some` is the value
//! waited for) or `Result<T, E>` (`Err` says what is wrong so far; the last one is in the panic
//! message when time runs out).

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

/// How often [`eventually`] checks: the in-process conditions are cheap reads of actor state.
const ASYNC_INTERVAL: Duration = Duration::from_millis(2);
/// How often [`eventually_blocking`] checks: its conditions are HTTP calls or process queries.
const BLOCKING_INTERVAL: Duration = Duration::from_millis(20);

/// What a polled condition answers: done (with a value) or not yet (with an optional reason).
pub trait Poll {
    /// What a satisfied condition yields.
    type Value;
    /// `Ok(value)` once the condition holds; `Err(reason)` while it does not (the reason may be
    /// empty).
    fn settle(self) -> Result<Self::Value, String>;
}

impl Poll for bool {
    type Value = ();
    fn settle(self) -> Result<(), String> {
        if self { Ok(()) } else { Err(String::new()) }
    }
}

impl<T> Poll for Option<T> {
    type Value = T;
    fn settle(self) -> Result<T, String> {
        self.ok_or_else(String::new)
    }
}

impl<T, E: Display> Poll for Result<T, E> {
    type Value = T;
    fn settle(self) -> Result<T, String> {
        self.map_err(|e| e.to_string())
    }
}

/// The panic of a condition that did not hold within `timeout`.
fn timed_out(timeout: Duration, what: &str, last: &str) -> ! {
    if last.is_empty() {
        panic!("timed out after {timeout:?} waiting for {what}");
    }
    panic!("timed out after {timeout:?} waiting for {what}: {last}");
}

/// Polls `check` until it holds, checking at once and then every few milliseconds; answers
/// what it yielded. Panics naming `what` (and the last reason `check` gave) when `timeout`
/// passes first. For async tests: the wait sleeps on the runtime's timer.
pub async fn eventually<F, Fut, P>(timeout: Duration, what: &str, mut check: F) -> P::Value
where
    F: FnMut() -> Fut,
    Fut: Future<Output = P>,
    P: Poll,
{
    let start = Instant::now();
    loop {
        let last = match check().await.settle() {
            Ok(value) => return value,
            Err(reason) => reason,
        };
        if start.elapsed() > timeout {
            timed_out(timeout, what, &last);
        }
        tokio::time::sleep(ASYNC_INTERVAL).await;
    }
}

/// [`eventually`] for code that is not async (a `#[test]` driving a process over HTTP): the
/// wait blocks the calling thread.
pub fn eventually_blocking<P: Poll>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> P,
) -> P::Value {
    let start = Instant::now();
    loop {
        let last = match check().settle() {
            Ok(value) => return value,
            Err(reason) => reason,
        };
        if start.elapsed() > timeout {
            timed_out(timeout, what, &last);
        }
        std::thread::sleep(BLOCKING_INTERVAL);
    }
}
