//! Agents this process saw exist lately, so that a message for one is appended to its
//! partition with a plain `XADD` instead of the script that checks the agent's record first.
//!
//! A forward to an agent of another process is answered `agent_not_found` when the agent does
//! not exist. Checking that costs a script call and a look-up of the record for every message;
//! an agent that existed a moment ago almost always still does. So the check is made once per
//! agent and [`KNOWN_FOR`]: a forward that found the agent notes it, and the forwards to it
//! within that time append at once. A delete made through this process forgets the agent at
//! once ([`Transport::deleted`]); one made through another process is seen here within
//! [`KNOWN_FOR`]. Meanwhile a message to it is answered `202` and then dead-lettered by the
//! partition's owner (`agent_not_found`), as one that reached the stream just before the delete.
//!
//! [`Transport::deleted`]: agentd_ports::Transport::deleted

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long an agent seen to exist is taken to exist without a check.
pub(super) const KNOWN_FOR: Duration = Duration::from_secs(1);

/// Past this many agents noted, the ones noted longer ago than [`KNOWN_FOR`] are dropped.
const PRUNE_AT: usize = 4_096;

/// When each agent was last seen to exist.
#[derive(Default)]
pub(super) struct KnownAgents(Mutex<HashMap<String, Instant>>);

impl KnownAgents {
    /// Whether agent `id` was seen to exist within [`KNOWN_FOR`].
    pub(super) fn exists(&self, id: &str) -> bool {
        self.0
            .lock()
            .ok()
            .and_then(|m| m.get(id).copied())
            .is_some_and(|seen| seen.elapsed() < KNOWN_FOR)
    }

    /// Agent `id` exists now.
    pub(super) fn saw(&self, id: &str) {
        let Ok(mut m) = self.0.lock() else { return };
        if m.len() >= PRUNE_AT {
            m.retain(|_, seen| seen.elapsed() < KNOWN_FOR);
        }
        m.insert(id.to_string(), Instant::now());
    }

    /// Agent `id` was deleted (or found missing).
    pub(super) fn forget(&self, id: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::KnownAgents;

    #[test]
    fn an_agent_is_known_once_seen_until_forgotten() {
        let known = KnownAgents::default();
        assert!(!known.exists("a"));
        known.saw("a");
        assert!(known.exists("a"));
        assert!(!known.exists("b"));
        known.forget("a");
        assert!(!known.exists("a"));
    }
}
