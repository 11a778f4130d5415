//! The rules of `depends_on` that every floor above applies the same way (see
//! `supervisor/dependencies.rs` for who waits for whom, and how the news travels): whether an
//! agent still waits, whether its dependents wait for its yield, the status reason of a wait,
//! and the envelope that carries a dependency's news. Plain functions of records and ids.

use agentd_proto::{Address, AgentRecord, Channel, DependencyOutcome, Envelope, Event, Item};
use std::collections::HashSet;

/// Whether `rec` still waits for its `depends_on`: they are not settled yet, it never ran a
/// turn, and no failure, cancel or terminate ended the wait.
pub(crate) fn waits_for_dependencies(rec: &AgentRecord) -> bool {
    !rec.depends_on.is_empty()
        && !rec.dependencies_settled
        && rec.current_task.is_none()
        && DependencyOutcome::failure_of(rec.status).is_none()
}

/// Whether the dependents of `rec` wait for its yield (a sub-agent) rather than for it to
/// reach their watches (a root, a Manage worker).
pub(crate) fn met_by_yield(rec: &AgentRecord) -> bool {
    matches!(rec.channel, Channel::Spawn { .. })
}

/// The status reason of an agent that waits for `unmet`: `depends on a, b`.
pub(crate) fn waiting_reason(unmet: &HashSet<String>) -> String {
    let mut ids: Vec<&str> = unmet.iter().map(String::as_str).collect();
    ids.sort_unstable();
    format!("depends on {}", ids.join(", "))
}

/// The news that `dependency` settled with `outcome`, for `dependent`.
pub(crate) fn news(
    dependency: &str,
    dependent: &str,
    outcome: DependencyOutcome,
    now_ms: u64,
) -> Envelope {
    Envelope::new(
        Address::agent(dependency),
        Address::agent(dependent),
        Item::Event(Event::DependencySettled {
            agent_id: dependency.to_string(),
            outcome,
        }),
        now_ms,
    )
}
