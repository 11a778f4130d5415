//! Limits on what callers may hand agentd: titles, prompts and messages. Every door (the HTTP
//! API, the Redis command stream, a model's tool call) checks with these same rules, so none
//! lets through what another refuses.

use crate::error::{AgentdError, ErrorCode};

/// The sizes agentd accepts from callers (`[limits]` of the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputLimits {
    /// Longest title, in characters (after trimming).
    pub max_title_chars: usize,
    /// Largest first message of a spawn, in bytes (context files are capped on their own).
    pub max_prompt_bytes: usize,
    /// Largest message, in bytes: a follow-up, a reset's seed, a Manage message, a dependency
    /// value or an answer.
    pub max_message_bytes: usize,
}

impl Default for InputLimits {
    fn default() -> Self {
        InputLimits {
            max_title_chars: 200,
            max_prompt_bytes: 256 * 1024,
            max_message_bytes: 128 * 1024,
        }
    }
}

impl InputLimits {
    /// A title as it is stored: trimmed, not empty, without control characters, at most
    /// `max_title_chars` characters; `invalid_argument` otherwise. Titles are shown on every
    /// list and tree, so one line of bounded length.
    pub fn title(&self, raw: &str) -> Result<String, AgentdError> {
        let title = raw.trim();
        let bad =
            |why: String| AgentdError::new(ErrorCode::InvalidArgument, format!("`title` {why}"));
        if title.is_empty() {
            return Err(bad("must not be empty".into()));
        }
        if title.chars().any(char::is_control) {
            return Err(bad("must not contain control characters".into()));
        }
        let chars = title.chars().count();
        if chars > self.max_title_chars {
            return Err(bad(format!(
                "has {chars} characters; limits.max_title_chars is {}",
                self.max_title_chars
            )));
        }
        Ok(title.to_string())
    }

    /// A spawn's first message: at most `max_prompt_bytes` (`payload_too_large`).
    pub fn prompt(&self, text: &str) -> Result<(), AgentdError> {
        within(
            text,
            "prompt",
            self.max_prompt_bytes,
            "limits.max_prompt_bytes",
        )
    }

    /// A message named `field`: at most `max_message_bytes` (`payload_too_large`).
    pub fn message(&self, field: &str, text: &str) -> Result<(), AgentdError> {
        within(
            text,
            field,
            self.max_message_bytes,
            "limits.max_message_bytes",
        )
    }
}

fn within(text: &str, field: &str, max: usize, setting: &str) -> Result<(), AgentdError> {
    if text.len() > max {
        return Err(AgentdError::new(
            ErrorCode::PayloadTooLarge,
            format!("`{field}` has {} bytes; {setting} is {max}", text.len()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<impl Sized, AgentdError>) -> Option<ErrorCode> {
        r.err().map(|e| e.code)
    }

    #[test]
    fn titles_are_trimmed_single_line_and_bounded() {
        let l = InputLimits {
            max_title_chars: 5,
            ..InputLimits::default()
        };
        assert_eq!(l.title("  Lead \t").ok().as_deref(), Some("Lead"));
        assert_eq!(
            l.title("ÄÖÜßé").ok().as_deref(),
            Some("ÄÖÜßé"),
            "chars, not bytes"
        );
        for bad in ["", "   ", "a\nb", "a\u{7}", "a\u{9b}b", "sixsix"] {
            assert_eq!(
                code(l.title(bad)),
                Some(ErrorCode::InvalidArgument),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn prompts_and_messages_are_capped_in_bytes() {
        let l = InputLimits {
            max_title_chars: 10,
            max_prompt_bytes: 4,
            max_message_bytes: 2,
        };
        assert!(l.prompt("abcd").is_ok());
        assert_eq!(code(l.prompt("abcde")), Some(ErrorCode::PayloadTooLarge));
        assert!(l.message("text", "ab").is_ok());
        assert_eq!(
            code(l.message("text", "é!")),
            Some(ErrorCode::PayloadTooLarge)
        );
    }
}
