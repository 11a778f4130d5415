//! Protocol markers in agent output (seed 001), parsed strictly: a marker is recognised only in
//! its exact form, and an opened but unclosed block is reported, never guessed.
//!
//! - `[DEPENDENCY_REQUEST]…[/DEPENDENCY_REQUEST]`
//! - `[USER_QUESTION]…[/USER_QUESTION]`
//! - `=== PHASE N COMPLETE ===` (a line of its own)
//! - `[ERROR]…[/ERROR]`

use serde::{Deserialize, Serialize};

/// One marker found in agent output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Marker {
    /// The agent needs something before it can go on.
    DependencyRequest {
        /// What it needs.
        request: String,
    },
    /// The agent asks its user a question.
    UserQuestion {
        /// The question.
        question: String,
    },
    /// A phase of the task is complete.
    PhaseComplete {
        /// The phase number.
        phase: u32,
    },
    /// The agent reports an error.
    Error {
        /// The error text.
        message: String,
    },
}

/// Builds a marker from a block's body.
type MakeMarker = fn(String) -> Marker;

const BLOCKS: [(&str, &str, MakeMarker); 3] = [
    ("[DEPENDENCY_REQUEST]", "[/DEPENDENCY_REQUEST]", |s| {
        Marker::DependencyRequest { request: s }
    }),
    ("[USER_QUESTION]", "[/USER_QUESTION]", |s| {
        Marker::UserQuestion { question: s }
    }),
    ("[ERROR]", "[/ERROR]", |s| Marker::Error { message: s }),
];

/// The markers of `text` in order of appearance, and the problems found (unclosed or empty
/// blocks, malformed phase lines).
pub fn parse(text: &str) -> (Vec<Marker>, Vec<String>) {
    let mut found: Vec<(usize, Marker)> = Vec::new();
    let mut problems = Vec::new();
    // Most output has no marker at all: one byte scan each rules the block markers and the
    // phase lines out (searching for each marker costs a searcher set-up per pattern, per
    // message).
    let bytes = text.as_bytes();
    let may_have_blocks = bytes.contains(&b'[');
    let may_have_phases = bytes.windows(3).any(|w| w == b"===");
    if !may_have_blocks && !may_have_phases {
        return (Vec::new(), problems);
    }
    for (open, close, make) in BLOCKS.iter().filter(|_| may_have_blocks) {
        let mut from = 0;
        while let Some(at) = text[from..].find(open) {
            let start = from + at + open.len();
            match text[start..].find(close) {
                Some(len) => {
                    let body = text[start..start + len].trim();
                    if body.is_empty() {
                        problems.push(format!("empty {open} block"));
                    } else {
                        found.push((from + at, (make)(body.to_string())));
                    }
                    from = start + len + close.len();
                }
                None => {
                    problems.push(format!("{open} is not closed by {close}"));
                    break;
                }
            }
        }
    }
    let mut offset = 0;
    for line in text.split_inclusive('\n').filter(|_| may_have_phases) {
        let l = line.trim();
        if l.starts_with("=== PHASE") {
            let phase = l
                .strip_prefix("=== PHASE ")
                .and_then(|r| r.strip_suffix(" COMPLETE ==="))
                .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
                .and_then(|n| n.parse::<u32>().ok());
            match phase {
                Some(phase) => found.push((offset, Marker::PhaseComplete { phase })),
                None => problems.push(format!("malformed phase marker `{l}`")),
            }
        }
        offset += line.len();
    }
    found.sort_by_key(|(at, _)| *at);
    (found.into_iter().map(|(_, m)| m).collect(), problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_marker_in_order() {
        let text = "Working.\n=== PHASE 2 COMPLETE ===\n[USER_QUESTION] Which DB? [/USER_QUESTION]\n[DEPENDENCY_REQUEST]API key[/DEPENDENCY_REQUEST] [ERROR]disk full[/ERROR]";
        let (m, problems) = parse(text);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            m,
            vec![
                Marker::PhaseComplete { phase: 2 },
                Marker::UserQuestion {
                    question: "Which DB?".into()
                },
                Marker::DependencyRequest {
                    request: "API key".into()
                },
                Marker::Error {
                    message: "disk full".into()
                },
            ]
        );
    }

    #[test]
    fn malformed_markers_are_reported_not_guessed() {
        let (m, p) =
            parse("[USER_QUESTION] never closed\n=== PHASE two COMPLETE ===\n=== PHASE 3 COMPLETE");
        assert!(m.is_empty(), "{m:?}");
        assert_eq!(p.len(), 3, "{p:?}");
        let (m, p) = parse("[ERROR]  [/ERROR] plain text mentioning PHASE");
        assert!(m.is_empty() && p == vec!["empty [ERROR] block".to_string()]);
        assert_eq!(parse("no markers here").0, vec![]);
    }

    #[test]
    fn each_kind_is_found_without_the_other_kind_in_the_text() {
        assert_eq!(
            parse("=== PHASE 1 COMPLETE ===").0,
            vec![Marker::PhaseComplete { phase: 1 }]
        );
        assert_eq!(
            parse("[ERROR]x[/ERROR]").0,
            vec![Marker::Error {
                message: "x".into()
            }]
        );
        assert_eq!(parse(""), (vec![], vec![]));
    }
}
