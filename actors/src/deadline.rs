//! The deadline of the request being served, where its caller stops waiting: a task-local
//! that a request bounded by one sets ([`AgentSystem::execute_within`]), so that work far below
//! it knows. A delivery queued under it is dropped rather than applied once its sender has
//! stopped waiting (the request was answered `unavailable`, and may be retried), where its
//! durable push has not begun; an inspection asks the agent's owner for half the time left at
//! most, so that the stored view still answers in time.
//!
//! [`AgentSystem::execute_within`]: crate::AgentSystem::execute_within

use std::future::Future;
use std::time::{Duration, Instant};

tokio::task_local! {
    static DEADLINE: Instant;
}

/// Runs `fut` as work whose caller stops waiting at `deadline`.
pub fn within<F: Future>(deadline: Instant, fut: F) -> impl Future<Output = F::Output> {
    DEADLINE.scope(deadline, fut)
}

/// The deadline of the work being polled, if it has one.
pub fn current() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok()
}

/// What is left of the deadline of the work being polled, if it has one.
pub fn remaining() -> Option<Duration> {
    current().map(|d| d.saturating_duration_since(Instant::now()))
}
