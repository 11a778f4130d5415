//! Usage in the four kinds the CLI reports, and a turn's cost as it reports it.

use agentd_proto::Usage;
use serde_json::Value;

/// Usage in the four kinds the CLI reports (any other field of [`Usage`] at its default).
pub fn four_kinds(input: u64, output: u64, cache_write: u64, cache_read: u64) -> Usage {
    let mut usage = Usage::default();
    (
        usage.input,
        usage.output,
        usage.cache_write,
        usage.cache_read,
    ) = (input, output, cache_write, cache_read);
    usage
}

/// A `usage` object of the Messages API, in four kinds.
pub(super) fn usage_in(u: Option<&Value>) -> Usage {
    let count = |key: &str| {
        u.and_then(|u| u.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    four_kinds(
        count("input_tokens"),
        count("output_tokens"),
        count("cache_creation_input_tokens"),
        count("cache_read_input_tokens"),
    )
}

/// The turn's usage: the result line's `usage`; when that is empty (a `/compact`, whose call
/// the CLI reports only per model), the sum of `model_usage_since_last_result`.
pub(super) fn usage_of(v: &Value) -> Usage {
    let usage = usage_in(v.get("usage"));
    if usage.total() > 0 {
        return usage;
    }
    let mut sum = Usage::default();
    for m in v
        .get("model_usage_since_last_result")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|models| models.values())
    {
        let count = |key: &str| m.get(key).and_then(Value::as_u64).unwrap_or(0);
        sum += four_kinds(
            count("inputTokens"),
            count("outputTokens"),
            count("cacheCreationInputTokens"),
            count("cacheReadInputTokens"),
        );
    }
    sum
}

/// The turn's cost as the CLI reports it: the `costUSD`s of `model_usage_since_last_result`,
/// else the growth of its running `total_cost_usd`.
pub(super) fn reported_cost(v: &Value, prior_cost_usd: f64) -> Option<f64> {
    if let Some(models) = v
        .get("model_usage_since_last_result")
        .and_then(Value::as_object)
    {
        return Some(
            models
                .values()
                .filter_map(|m| m.get("costUSD").and_then(Value::as_f64))
                .sum(),
        );
    }
    v.get("total_cost_usd")
        .and_then(Value::as_f64)
        .map(|total| (total - prior_cost_usd).max(0.0))
}
