//! Token usage in the four kinds providers report, and the price table that turns it into cost.

use serde::{Deserialize, Serialize};
use std::ops::AddAssign;

/// Tokens of one model call (or a sum of calls).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct Usage {
    /// Input tokens consumed.
    pub input: u64,
    /// Output tokens generated.
    pub output: u64,
    /// Tokens written to the prompt cache (Anthropic `cache_creation_input_tokens`).
    pub cache_write: u64,
    /// Tokens read from the prompt cache.
    pub cache_read: u64,
    /// Some of these tokens are an estimate, not the provider's count: a call aborted (an
    /// interrupt, a pause, a shutdown) before the provider reported its usage counts its input
    /// and the text it streamed so far at four characters a token, so budgets still hold.
    /// Absent on the wire when `false`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl Usage {
    /// All four kinds added up.
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_write + self.cache_read
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.input += rhs.input;
        self.output += rhs.output;
        self.cache_write += rhs.cache_write;
        self.cache_read += rhs.cache_read;
        self.estimated |= rhs.estimated;
    }
}

/// USD per million tokens of each kind for one model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Input, per million tokens.
    pub input: f64,
    /// Output, per million tokens.
    pub output: f64,
    /// Cache write, per million tokens.
    pub cache_write: f64,
    /// Cache read, per million tokens.
    pub cache_read: f64,
}

impl Default for Price {
    /// Claude-class pricing from seed 001: $3 in, $15 out, $3.75 cache write, $0.30 cache read.
    fn default() -> Self {
        Price {
            input: 3.0,
            output: 15.0,
            cache_write: 3.75,
            cache_read: 0.30,
        }
    }
}

impl Price {
    /// Cost in USD of `usage` at this price.
    pub fn cost(&self, usage: &Usage) -> f64 {
        (usage.input as f64 * self.input
            + usage.output as f64 * self.output
            + usage.cache_write as f64 * self.cache_write
            + usage.cache_read as f64 * self.cache_read)
            / 1_000_000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_cap_and_detect() {
        let parent = Budget {
            max_tokens: Some(100),
            max_cost_usd: None,
            deadline_ms: Some(50),
        };
        let child = Budget {
            max_tokens: Some(500),
            max_cost_usd: Some(1.0),
            deadline_ms: None,
        }
        .capped_by(&parent);
        assert_eq!(
            child,
            Budget {
                max_tokens: Some(100),
                max_cost_usd: Some(1.0),
                deadline_ms: Some(50)
            }
        );
        let u = Usage {
            input: 60,
            output: 41,
            ..Usage::default()
        };
        assert_eq!(child.exceeded(&u, 0.0, 10), Some("tokens"));
        assert_eq!(child.exceeded(&Usage::default(), 2.0, 10), Some("cost"));
        assert_eq!(child.exceeded(&Usage::default(), 0.0, 51), Some("deadline"));
        assert_eq!(child.exceeded(&Usage::default(), 0.0, 50), None);
    }

    #[test]
    fn each_default_price_is_the_seed_s() {
        let price = Price::default();
        let million = 1_000_000;
        for (usage, usd) in [
            (
                Usage {
                    input: million,
                    ..Usage::default()
                },
                3.0,
            ),
            (
                Usage {
                    output: million,
                    ..Usage::default()
                },
                15.0,
            ),
            (
                Usage {
                    cache_write: million,
                    ..Usage::default()
                },
                3.75,
            ),
            (
                Usage {
                    cache_read: million,
                    ..Usage::default()
                },
                0.30,
            ),
        ] {
            let cost = price.cost(&usage);
            assert!(
                (cost - usd).abs() < 1e-9,
                "{usage:?} cost {cost}, not {usd}"
            );
        }
    }

    #[test]
    fn budgets_are_positive() {
        assert!(Budget::default().check().is_ok());
        let ok = Budget {
            max_tokens: Some(1),
            max_cost_usd: Some(0.01),
            deadline_ms: Some(1),
        };
        assert!(ok.check().is_ok());
        for bad in [
            Budget {
                max_tokens: Some(0),
                ..Budget::default()
            },
            Budget {
                max_cost_usd: Some(-1.0),
                ..Budget::default()
            },
            Budget {
                max_cost_usd: Some(0.0),
                ..Budget::default()
            },
            Budget {
                max_cost_usd: Some(f64::NAN),
                ..Budget::default()
            },
            Budget {
                deadline_ms: Some(0),
                ..Budget::default()
            },
        ] {
            assert_eq!(
                bad.check().err().map(|e| e.code),
                Some(crate::error::ErrorCode::InvalidArgument),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn default_price_matches_the_seed() {
        let usage = Usage {
            input: 1_000_000,
            output: 1_000_000,
            cache_write: 1_000_000,
            cache_read: 1_000_000,
            ..Usage::default()
        };
        let cost = Price::default().cost(&usage);
        assert!((cost - (3.0 + 15.0 + 3.75 + 0.30)).abs() < 1e-9);
    }
}

/// Limits on what an agent may spend (per spawn; a child's budget is capped by its parent's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    /// Most tokens (all four kinds) its model calls may use.
    pub max_tokens: Option<u64>,
    /// Most USD its model calls may cost.
    pub max_cost_usd: Option<f64>,
    /// Wall-clock deadline, ms since the epoch.
    pub deadline_ms: Option<u64>,
}

impl Budget {
    /// Refuses a limit that could never be met (`invalid_argument`): a budget that allows
    /// nothing is a mistake, not a way to stop an agent (pause or cancel it). Tokens, cost and
    /// deadline, when given, are positive (the cost a finite number).
    pub fn check(&self) -> Result<(), crate::error::AgentdError> {
        let bad = |field: &str| {
            crate::error::AgentdError::new(
                crate::error::ErrorCode::InvalidArgument,
                format!("`budget.{field}` must be positive"),
            )
        };
        if self.max_tokens == Some(0) {
            return Err(bad("max_tokens"));
        }
        if self
            .max_cost_usd
            .is_some_and(|c| !(c.is_finite() && c > 0.0))
        {
            return Err(bad("max_cost_usd"));
        }
        if self.deadline_ms == Some(0) {
            return Err(bad("deadline_ms"));
        }
        Ok(())
    }

    /// Each limit the tighter of `self`'s and `cap`'s.
    pub fn capped_by(&self, cap: &Budget) -> Budget {
        fn min<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(x), Some(y)) => Some(if x < y { x } else { y }),
                (x, None) => x,
                (None, y) => y,
            }
        }
        Budget {
            max_tokens: min(self.max_tokens, cap.max_tokens),
            max_cost_usd: min(self.max_cost_usd, cap.max_cost_usd),
            deadline_ms: min(self.deadline_ms, cap.deadline_ms),
        }
    }

    /// Which limit `usage`/`cost` at `now_ms` exceeds, if any (`tokens`, `cost`, `deadline`).
    pub fn exceeded(&self, usage: &Usage, cost: f64, now_ms: u64) -> Option<&'static str> {
        if self.max_tokens.is_some_and(|m| usage.total() > m) {
            return Some("tokens");
        }
        if self.max_cost_usd.is_some_and(|m| cost > m) {
            return Some("cost");
        }
        if self.deadline_ms.is_some_and(|d| now_ms > d) {
            return Some("deadline");
        }
        None
    }
}

/// Which agent's turn starts first when the concurrency limit is full (seed 001): critical >
/// high > normal > low, first come first served within a level.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// User-blocked work.
    Critical,
    /// Time-sensitive work.
    High,
    /// Regular work (the default).
    #[default]
    Normal,
    /// Background work.
    Low,
}
