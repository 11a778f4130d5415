//! What each agent tree has spent, as this process last summed it. A root's budget covers its
//! whole tree and is checked after every model call of every agent in it; summing the tree
//! takes a store read per agent and per child list, so a check that summed every time cost
//! O(tree) store round trips per model call (thousands per second in a tree of a hundred busy
//! agents on Redis). A sum is reused for [`SUM_TTL_MS`], with what this process's agents spend
//! meanwhile added to it; what agents in other processes spend shows at the next sum.

use crate::hashing::FastHashMap;
use agentd_proto::Usage;
use std::sync::Mutex;

/// How long a tree's sum is reused (ms of the agents' clock).
pub const SUM_TTL_MS: u64 = 1_000;

/// Past this many trees, sums that have expired are dropped when a new one is kept.
const KEPT_TREES: usize = 1_024;

/// A tree's spending: its agents' usage and cost together.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    /// Tokens, by kind.
    pub usage: Usage,
    /// Cost in USD.
    pub cost_usd: f64,
}

struct Sum {
    at_ms: u64,
    spent: Spent,
}

/// The sums of the trees this process's agents check, shared by those agents.
#[derive(Default)]
pub struct TreeSpend {
    sums: Mutex<FastHashMap<String, Sum>>,
}

impl TreeSpend {
    /// Adds `spent` (just spent by an agent of `root`'s tree) to the tree's sum and answers the
    /// sum, if one younger than [`SUM_TTL_MS`] is kept; `None`: the tree must be summed again.
    pub fn add(&self, root: &str, spent: Spent, now_ms: u64) -> Option<Spent> {
        let mut sums = self.sums.lock().ok()?;
        let sum = sums
            .get_mut(root)
            .filter(|s| now_ms.saturating_sub(s.at_ms) < SUM_TTL_MS)?;
        sum.spent.usage += spent.usage;
        sum.spent.cost_usd += spent.cost_usd;
        Some(sum.spent)
    }

    /// Keeps `spent`, a fresh sum of `root`'s tree (everything spent up to now).
    pub fn put(&self, root: &str, spent: Spent, now_ms: u64) {
        let Ok(mut sums) = self.sums.lock() else {
            return;
        };
        if sums.len() >= KEPT_TREES && !sums.contains_key(root) {
            sums.retain(|_, s| now_ms.saturating_sub(s.at_ms) < SUM_TTL_MS);
        }
        sums.insert(
            root.to_string(),
            Sum {
                at_ms: now_ms,
                spent,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spent(tokens: u64, cost_usd: f64) -> Spent {
        Spent {
            usage: Usage {
                input: tokens,
                ..Default::default()
            },
            cost_usd,
        }
    }

    #[test]
    fn a_sum_takes_what_is_spent_after_it_until_it_expires() {
        let trees = TreeSpend::default();
        assert_eq!(trees.add("r", spent(5, 0.5), 0), None, "nothing summed yet");
        trees.put("r", spent(100, 1.0), 10);
        assert_eq!(trees.add("r", spent(5, 0.5), 500), Some(spent(105, 1.5)));
        assert_eq!(trees.add("r", spent(1, 0.0), 1_009), Some(spent(106, 1.5)));
        assert_eq!(trees.add("r", spent(1, 0.0), 1_010), None, "expired");
        assert_eq!(trees.add("other", spent(1, 0.0), 20), None);
    }

    #[test]
    fn expired_sums_go_once_many_trees_are_kept() {
        let trees = TreeSpend::default();
        for n in 0..KEPT_TREES {
            trees.put(&format!("t{n}"), spent(1, 0.0), 0);
        }
        trees.put("late", spent(1, 0.0), SUM_TTL_MS);
        let kept = trees.sums.lock().map(|s| s.len()).unwrap_or_default();
        assert_eq!(kept, 1, "the expired ones went, the new one stays");
    }
}
