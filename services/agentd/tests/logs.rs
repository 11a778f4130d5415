//! The service's log lines, as `agentd::logs::install` sets them up for a writer that is not a
//! terminal: plain `name=value` fields, the message bare, no colour escape codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::{Arc, Mutex};

/// A writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn log_lines_carry_plain_fields_and_no_colour_codes_off_a_terminal() {
    if std::env::var_os("RUST_LOG").is_some() {
        // `RUST_LOG` wins over the filter given: this test's expectations are the default's.
        eprintln!("RUST_LOG is set: skipped");
        return;
    }
    let captured = Captured::default();
    let writer = captured.clone();
    agentd::logs::install("info", false, move || writer.clone(), false).unwrap();
    let id = uuid::Uuid::from_u128(7);
    let span = tracing::info_span!("turn", agent_id = "a-1", message_id = %id);
    let _entered = span.enter();
    tracing::warn!(attempt = 2, reason = "slow", "turn failed; retrying");
    tracing::debug!("filtered out at info");
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(!text.contains('\u{1b}'), "no escape codes: {text:?}");
    assert!(
        text.contains(&format!("turn{{agent_id=\"a-1\" message_id={id}}}")),
        "the span's fields: {text:?}"
    );
    assert!(
        text.contains("turn failed; retrying attempt=2 reason=\"slow\""),
        "the message bare, then the fields: {text:?}"
    );
    assert!(text.contains("WARN"), "{text:?}");
    assert!(!text.contains("filtered out"), "{text:?}");
    assert_eq!(text.lines().count(), 1, "{text:?}");
}
