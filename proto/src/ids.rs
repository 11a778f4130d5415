//! Id generation. New things get time-ordered v7 ids; outputs derived from an input get v5 ids
//! computed from the input id and the step, so a re-run after a crash yields the same ids and
//! de-duplicates instead of doubling.

use uuid::Uuid;

/// A fresh time-ordered id (uuid v7).
pub fn new_id() -> Uuid {
    Uuid::now_v7()
}

/// An id derived from `input` and `step`: equal inputs always give equal ids.
pub fn derived_id(input: Uuid, step: &str) -> Uuid {
    Uuid::new_v5(&input, step.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_stable_and_distinct() {
        let input = new_id();
        assert_eq!(derived_id(input, "1"), derived_id(input, "1"));
        assert_ne!(derived_id(input, "1"), derived_id(input, "2"));
    }
}
