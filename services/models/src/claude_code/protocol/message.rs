//! The `user` line an agentd message becomes: the thread's entries the CLI has not seen, with
//! the history first for a new session.

use agentd_proto::conversation::heard_role;
use agentd_proto::{Role, ThreadEntry};
use serde_json::json;
use std::sync::Arc;

/// The entries at the end of `thread` the CLI has not seen: those after `sent_through` (the
/// last entry written to this process), or, when that names nothing later, those after the last
/// of the CLI's own answers (its assistant and tool entries; a retry sends its message again).
/// A forward from another agent is never one of the CLI's answers, whatever role the thread
/// keeps it in (a relayed forward is an assistant entry): it is input the CLI is sent.
fn unseen(thread: &[Arc<ThreadEntry>], sent_through: Option<uuid::Uuid>) -> &[Arc<ThreadEntry>] {
    let after_answers = thread
        .iter()
        .rposition(|e| matches!(heard_role(e), Role::Assistant | Role::Tool))
        .map_or(0, |i| i + 1);
    let after_sent = sent_through
        .and_then(|id| thread.iter().rposition(|e| e.id == id))
        .map_or(0, |i| i + 1);
    let start = after_answers.max(after_sent);
    if start < thread.len() {
        &thread[start..]
    } else {
        &thread[after_answers..]
    }
}

/// One entry as the CLI reads it.
fn render(entry: &ThreadEntry) -> String {
    match &entry.from_agent {
        Some(from) => format!("[from agent {from}] {}", entry.text),
        None => entry.text.clone(),
    }
}

/// The text of the `user` line for `thread`: the entries the CLI has not seen (`sent_through`:
/// the last entry written to its process, if it still runs). A new session (no process and no
/// session to resume) on a thread that has history gets that history first, as a transcript, so
/// the CLI knows what came before it.
pub fn message_text(
    thread: &[Arc<ThreadEntry>],
    new_session: bool,
    sent_through: Option<uuid::Uuid>,
) -> String {
    let new = unseen(thread, sent_through.filter(|_| !new_session));
    let mut text = new
        .iter()
        .map(|e| render(e))
        .filter(|t| !t.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    let history = &thread[..thread.len() - new.len()];
    if new_session && !history.is_empty() {
        let transcript = history
            .iter()
            .map(|e| {
                let calls = e
                    .tool_calls
                    .iter()
                    .map(|c| format!(" [called {} {}]", c.name, c.arguments))
                    .collect::<String>();
                format!("{}: {}{calls}", role_name(heard_role(e)), render(e))
            })
            .collect::<Vec<_>>()
            .join("\n");
        text = format!(
            "The conversation so far (from before this session):\n{transcript}\n\n---\n\n{text}"
        );
    }
    text
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
        Role::System => "system",
    }
}

/// The message that makes the CLI compact its session (its `/compact` command).
pub const COMPACT: &str = "/compact";

/// The stream-json `user` line (without its newline) that sends `text`.
pub fn user_line(text: &str) -> String {
    json!({
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
        "parent_tool_use_id": null,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_what_the_cli_has_not_seen_with_history_for_a_new_session() {
        let e = |role, text: &str| {
            Arc::new(ThreadEntry::text(
                agentd_proto::ids::new_id(),
                role,
                text,
                0,
            ))
        };
        let thread = vec![
            e(Role::User, "first"),
            e(Role::Assistant, "answer"),
            e(Role::System, "(interrupted)"),
            e(Role::User, "second"),
        ];
        assert_eq!(
            message_text(&thread, false, None),
            "(interrupted)\n\nsecond"
        );
        let fresh = message_text(&thread, true, None);
        assert!(fresh.contains("user: first\nassistant: answer"), "{fresh}");
        assert!(fresh.ends_with("(interrupted)\n\nsecond"), "{fresh}");
        assert_eq!(message_text(&thread[..1], true, None), "first");
        // What was written to the process already is not written again (an interrupted
        // call's message), unless nothing came after it (a retry).
        assert_eq!(message_text(&thread, false, Some(thread[2].id)), "second");
        assert_eq!(
            message_text(&thread, false, Some(thread[3].id)),
            "(interrupted)\n\nsecond"
        );
    }

    #[test]
    fn a_forward_is_sent_as_input_even_where_the_thread_keeps_it_as_an_answer() {
        let e = |role, text: &str, from: Option<&str>| {
            let mut entry = ThreadEntry::text(agentd_proto::ids::new_id(), role, text, 0);
            entry.from_agent = from.map(Into::into);
            Arc::new(entry)
        };
        let thread = vec![
            e(Role::User, "hello", None),
            e(Role::Assistant, "hi", None),
            e(Role::Assistant, "From Ops: done", Some("w1")),
            e(Role::User, "what did Ops say", None),
        ];
        // Relayed (kept as an assistant entry), then the next message: both are sent.
        assert_eq!(
            message_text(&thread, false, Some(thread[1].id)),
            "[from agent w1] From Ops: done\n\nwhat did Ops say"
        );
        // A forward that starts a turn is the message.
        assert_eq!(
            message_text(&thread[..3], false, Some(thread[1].id)),
            "[from agent w1] From Ops: done"
        );
        // In a new session's transcript, it is the user's too.
        let history = vec![
            thread[0].clone(),
            thread[2].clone(),
            e(Role::Assistant, "noted", None),
            e(Role::User, "next", None),
        ];
        let fresh = message_text(&history, true, None);
        assert!(
            fresh.contains("user: hello\nuser: [from agent w1] From Ops: done\nassistant: noted"),
            "{fresh}"
        );
        assert!(fresh.ends_with("next"), "{fresh}");
    }
}
