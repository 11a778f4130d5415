//! Token usage in the four kinds providers report, and the price table that turns it into cost.

use serde::{Deserialize, Serialize};
use std::ops::AddAssign;

/// Tokens of one model call (or a sum of calls).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    fn default_price_matches_the_seed() {
        let usage = Usage {
            input: 1_000_000,
            output: 1_000_000,
            cache_write: 1_000_000,
            cache_read: 1_000_000,
        };
        let cost = Price::default().cost(&usage);
        assert!((cost - (3.0 + 15.0 + 3.75 + 0.30)).abs() < 1e-9);
    }
}
