//! What each agent tree has spent, as this process last summed it, and its root's budget, as
//! this process last read it. A root's budget covers its whole tree and is checked after every
//! model call of every agent in it; summing the tree takes a store read per agent and per child
//! list, so a check that summed every time cost O(tree) store round trips per model call of
//! every agent in the tree: O(tree²) for a tree whose agents are all busy. A sum is reused for
//! [`SUM_TTL_MS`], with what this process's agents spend meanwhile added to it; what agents in
//! other processes spend shows at the next sum. The root's budget is reused as long (a read of
//! the root's record per model call of every sub-agent, which most trees, having no budget,
//! would pay for nothing), except that a budget set in this process replaces it at once; one
//! set in another process shows at the next read.

use crate::hashing::FastHashMap;
use agentd_proto::{Budget, Usage};
use std::sync::Mutex;

/// How long a tree's sum, and its root's budget, are reused (ms of the agents' clock).
pub const SUM_TTL_MS: u64 = 1_000;

/// Past this many trees, values that have expired are dropped when a new one is kept.
const KEPT_TREES: usize = 1_024;

/// A tree's spending: its agents' usage and cost together.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    /// Tokens, by kind.
    pub usage: Usage,
    /// Cost in USD.
    pub cost_usd: f64,
}

/// Per tree (by root id), a value and when it was taken; one older than [`SUM_TTL_MS`] is not
/// answered.
struct Recent<T>(Mutex<FastHashMap<String, (u64, T)>>);

impl<T> Default for Recent<T> {
    fn default() -> Self {
        Recent(Mutex::default())
    }
}

impl<T> Recent<T> {
    /// Applies `f` to `root`'s value if it is younger than [`SUM_TTL_MS`] at `now_ms`.
    fn with<R>(&self, root: &str, now_ms: u64, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let mut kept = self.0.lock().ok()?;
        let (_, value) = kept
            .get_mut(root)
            .filter(|(at_ms, _)| now_ms.saturating_sub(*at_ms) < SUM_TTL_MS)?;
        Some(f(value))
    }

    /// Keeps `value` for `root`, taken at `now_ms`.
    fn put(&self, root: &str, value: T, now_ms: u64) {
        let Ok(mut kept) = self.0.lock() else {
            return;
        };
        if kept.len() >= KEPT_TREES && !kept.contains_key(root) {
            kept.retain(|_, (at_ms, _)| now_ms.saturating_sub(*at_ms) < SUM_TTL_MS);
        }
        kept.insert(root.to_string(), (now_ms, value));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().map(|k| k.len()).unwrap_or_default()
    }
}

/// The sums of the trees this process's agents check, and their roots' budgets, shared by
/// those agents.
#[derive(Default)]
pub struct TreeSpend {
    sums: Recent<Spent>,
    budgets: Recent<Option<Budget>>,
}

impl TreeSpend {
    /// Adds `spent` (just spent by an agent of `root`'s tree) to the tree's sum and answers the
    /// sum, if one younger than [`SUM_TTL_MS`] is kept; `None`: the tree must be summed again.
    pub fn add(&self, root: &str, spent: Spent, now_ms: u64) -> Option<Spent> {
        self.sums.with(root, now_ms, |sum| {
            sum.usage += spent.usage;
            sum.cost_usd += spent.cost_usd;
            *sum
        })
    }

    /// Keeps `spent`, a fresh sum of `root`'s tree (everything spent up to now).
    pub fn put(&self, root: &str, spent: Spent, now_ms: u64) {
        self.sums.put(root, spent, now_ms);
    }

    /// `root`'s budget (`Some(None)`: it has none), if read less than [`SUM_TTL_MS`] ago;
    /// `None`: it must be read again.
    pub fn budget(&self, root: &str, now_ms: u64) -> Option<Option<Budget>> {
        self.budgets.with(root, now_ms, |budget| *budget)
    }

    /// Keeps `budget`, `root`'s budget as just read (or set).
    pub fn put_budget(&self, root: &str, budget: Option<Budget>, now_ms: u64) {
        self.budgets.put(root, budget, now_ms);
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
        assert_eq!(
            trees.sums.len(),
            1,
            "the expired ones went, the new one stays"
        );
    }

    #[test]
    fn a_budget_read_is_reused_until_it_expires_or_is_set() {
        let trees = TreeSpend::default();
        let budget = Budget {
            max_tokens: Some(10),
            ..Default::default()
        };
        assert_eq!(trees.budget("r", 0), None, "nothing read yet");
        trees.put_budget("r", None, 0);
        assert_eq!(
            trees.budget("r", 999),
            Some(None),
            "read: the root has none"
        );
        assert_eq!(trees.budget("r", SUM_TTL_MS), None, "expired");
        trees.put_budget("r", Some(budget), 2_000);
        assert_eq!(trees.budget("r", 2_001), Some(Some(budget)));
        trees.put_budget("r", None, 2_002);
        assert_eq!(trees.budget("r", 2_003), Some(None), "set again");
    }
}
