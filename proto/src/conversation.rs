//! The rule every model provider enforces on a conversation: **each tool call an assistant entry
//! makes is followed by exactly one result, right after it** — the assistant entry, then one
//! tool entry per call, before any other entry. OpenAI refuses an assistant message whose
//! `tool_calls` are not all answered by the tool messages after it; Anthropic refuses a
//! `tool_use` without a `tool_result` in the next message, and a result of no call.
//!
//! A turn keeps the rule as long as it runs to its end: it appends each call's result before it
//! asks the model again. A turn cut off while a call runs (interrupt, cancel, terminate, close,
//! restore, a `yield_to_parent` among several calls) leaves calls without results; whoever ends
//! the turn closes them with [`interrupted_result`], under the id the turn would have written
//! the real result with (so a result that was written after all wins the store's de-duplication).
//! A turn re-run after a crash is not closed: it runs the unanswered calls again.
//!
//! [`paired`] is the safety net the HTTP model backends apply to every request, for threads
//! written before the rule was kept and for the races no closing can see (an append cut off in
//! flight): it moves each call's first result right after it, answers a call without one with
//! [`interrupted_result`], and drops results of no call.
//!
//! A second rule is about voice: **what another agent said reaches the model as input, never as
//! its own words.** A forward (an entry with `from_agent`) is a user entry when the parent runs a
//! turn on it; a relaying parent keeps it as seed 000's assistant entry, and [`as_sent`] sends it
//! in the role it is heard in ([`heard_role`]) all the same. Sent as the model's own words, a
//! forward is continued as a prefill (Anthropic merges it into the answer before it) or taken as
//! something the model said itself (OpenAI: two assistant messages in a row). A request that
//! still ends with the model's own answer ([`ends_with_answer`]) has nothing for it to answer.

use crate::error::ErrorCode;
use crate::ids::derived_id;
use crate::thread::{Role, ThreadEntry};
use std::borrow::{Borrow, Cow};
use uuid::Uuid;

/// The result of a call whose turn ended before it returned: a tool entry answering `call_id`
/// with `{"error": {"code": "interrupted", "message": …}}`.
pub fn interrupted_result(id: Uuid, call_id: &str, why: &str, at_ms: u64) -> ThreadEntry {
    let text = serde_json::json!({
        "error": {"code": ErrorCode::Interrupted.as_str(), "message": why}
    })
    .to_string();
    let mut entry = ThreadEntry::text(id, Role::Tool, text, at_ms);
    entry.tool_call_id = Some(call_id.into());
    entry.is_error = true;
    entry
}

/// Why a call has no result of its own, as [`paired`] and restores say it.
const UNANSWERED: &str = "the turn ended before this tool call returned";

/// Whether `entries` keep the rule: every assistant entry's calls are answered, in their order,
/// by the tool entries right after it, and no tool entry answers anything else.
pub fn is_paired<E: Borrow<ThreadEntry>>(entries: &[E]) -> bool {
    let mut i = 0;
    while i < entries.len() {
        let entry = entries[i].borrow();
        match entry.role {
            Role::Tool => return false,
            Role::Assistant if !entry.tool_calls.is_empty() => {
                for (k, call) in entry.tool_calls.iter().enumerate() {
                    let answers = entries.get(i + 1 + k).map(Borrow::borrow).is_some_and(|r| {
                        r.role == Role::Tool && r.tool_call_id.as_deref() == Some(call.id.as_str())
                    });
                    if !answers {
                        return false;
                    }
                }
                i += 1 + entry.tool_calls.len();
            }
            _ => i += 1,
        }
    }
    true
}

/// `entries` made to keep the rule (borrowed as they are when they keep it already): each
/// call's first later result moves right after its call, in the calls' order; a call without
/// one is answered by an [`interrupted_result`] whose id derives from the assistant entry's (so
/// the same thread gives the same entries); results of no call, and second results, are
/// dropped. Nothing else moves.
pub fn paired<E>(entries: &[E]) -> Cow<'_, [E]>
where
    E: Borrow<ThreadEntry> + Clone + From<ThreadEntry>,
{
    if is_paired(entries) {
        return Cow::Borrowed(entries);
    }
    let mut taken = vec![false; entries.len()];
    let mut out = Vec::with_capacity(entries.len());
    for (i, item) in entries.iter().enumerate() {
        let entry = item.borrow();
        match entry.role {
            // Placed by the call it answers, or dropped.
            Role::Tool => {}
            Role::Assistant if !entry.tool_calls.is_empty() => {
                out.push(item.clone());
                for (k, call) in entry.tool_calls.iter().enumerate() {
                    let result = (i + 1..entries.len()).find(|&j| {
                        let r = entries[j].borrow();
                        !taken[j]
                            && r.role == Role::Tool
                            && r.tool_call_id.as_deref() == Some(call.id.as_str())
                    });
                    match result {
                        Some(j) => {
                            taken[j] = true;
                            out.push(entries[j].clone());
                        }
                        None => out.push(E::from(interrupted_result(
                            derived_id(entry.id, &format!("unanswered-{k}")),
                            &call.id,
                            UNANSWERED,
                            entry.at_ms,
                        ))),
                    }
                }
            }
            _ => out.push(item.clone()),
        }
    }
    Cow::Owned(out)
}

/// The role the model hears `entry` in: its own, except that a text forwarded from another
/// agent (`from_agent`) is always input to answer — a user entry — even where the thread keeps
/// it as an assistant entry (a relayed forward).
pub fn heard_role(entry: &ThreadEntry) -> Role {
    match entry.role {
        Role::Assistant if entry.from_agent.is_some() && entry.tool_calls.is_empty() => Role::User,
        role => role,
    }
}

/// `entries` as a model request sends them: [`paired`], and each entry in the role the model
/// hears it in ([`heard_role`]). Borrowed as they are when nothing changes.
pub fn as_sent<E>(entries: &[E]) -> Cow<'_, [E]>
where
    E: Borrow<ThreadEntry> + Clone + From<ThreadEntry>,
{
    let paired = paired(entries);
    let voiced = |e: &E| heard_role(e.borrow()) != e.borrow().role;
    if !paired.iter().any(voiced) {
        return paired;
    }
    let mut out = paired.into_owned();
    for item in &mut out {
        let entry: &ThreadEntry = (*item).borrow();
        let role = heard_role(entry);
        if role != entry.role {
            let heard = ThreadEntry {
                role,
                ..entry.clone()
            };
            *item = E::from(heard);
        }
    }
    Cow::Owned(out)
}

/// Whether a request sending `entries` would end with the model's own answer: its last entry
/// that is not a system entry (which providers move to, or read as, instructions) is heard as
/// the assistant's. Such a request gives the model nothing to answer: Anthropic takes the
/// answer as a prefill to continue (models without prefill refuse it), OpenAI answers after it
/// as if it had said more.
pub fn ends_with_answer<E: Borrow<ThreadEntry>>(entries: &[E]) -> bool {
    entries
        .iter()
        .rev()
        .map(Borrow::borrow)
        .find(|e| e.role != Role::System)
        .is_some_and(|e| heard_role(e) == Role::Assistant)
}

/// `entries` made to keep the rule, owned (a restored checkpoint's conversation).
pub fn into_paired(entries: Vec<ThreadEntry>) -> Vec<ThreadEntry> {
    match paired(&entries) {
        Cow::Borrowed(_) => entries,
        Cow::Owned(fixed) => fixed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::ToolCall;
    use std::sync::Arc;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn user(n: u128) -> ThreadEntry {
        ThreadEntry::text(id(n), Role::User, format!("u{n}"), 0)
    }

    fn calls(n: u128, ids: &[&str]) -> ThreadEntry {
        let mut e = ThreadEntry::text(id(n), Role::Assistant, "", 0);
        e.tool_calls = ids
            .iter()
            .map(|c| ToolCall {
                id: (*c).to_string(),
                name: "current_time".into(),
                arguments: serde_json::json!({}),
            })
            .collect();
        e
    }

    fn result(n: u128, call: &str) -> ThreadEntry {
        let mut e = ThreadEntry::text(id(n), Role::Tool, "{}", 0);
        e.tool_call_id = Some(call.into());
        e
    }

    fn shape(entries: &[ThreadEntry]) -> Vec<String> {
        entries
            .iter()
            .map(|e| match e.role {
                Role::Tool if e.text.contains("interrupted") => {
                    format!("closed:{}", e.tool_call_id.as_deref().unwrap_or(""))
                }
                Role::Tool => format!("result:{}", e.tool_call_id.as_deref().unwrap_or("")),
                Role::Assistant => format!("calls:{}", e.tool_calls.len()),
                Role::User => "user".into(),
                Role::System => "system".into(),
            })
            .collect()
    }

    #[test]
    fn a_kept_conversation_is_borrowed_unchanged() {
        let t = vec![
            user(1),
            calls(2, &["a", "b"]),
            result(3, "a"),
            result(4, "b"),
            user(5),
        ];
        assert!(is_paired(&t));
        assert!(matches!(paired(&t), Cow::Borrowed(_)));
    }

    #[test]
    fn an_unanswered_call_is_closed_right_after_it_before_the_marker() {
        let marker = ThreadEntry::text(id(9), Role::System, "(interrupted)", 0);
        let t = vec![
            user(1),
            calls(2, &["a", "b"]),
            result(3, "a"),
            marker,
            user(5),
        ];
        assert!(!is_paired(&t));
        let fixed = paired(&t).into_owned();
        assert_eq!(
            shape(&fixed),
            ["user", "calls:2", "result:a", "closed:b", "system", "user"]
        );
        assert!(is_paired(&fixed));
        // The same thread gives the same closing entry.
        assert_eq!(paired(&t).into_owned(), fixed);
    }

    #[test]
    fn results_move_to_their_call_and_strays_are_dropped() {
        let t = vec![
            result(1, "nobody"),
            calls(2, &["a", "b"]),
            user(3),
            result(4, "b"),
            result(5, "a"),
            result(6, "a"),
        ];
        let fixed = paired(&t).into_owned();
        assert_eq!(shape(&fixed), ["calls:2", "result:a", "result:b", "user"]);
        assert_eq!(fixed[1].id, id(5), "the first result of `a` is kept");
    }

    #[test]
    fn shared_entries_are_paired_without_copying_the_kept_ones() {
        let t: Vec<Arc<ThreadEntry>> = vec![Arc::new(calls(1, &["a"])), Arc::new(user(2))];
        let fixed = paired(&t);
        assert_eq!(fixed.len(), 3);
        assert!(Arc::ptr_eq(&fixed[0], &t[0]));
        assert!(Arc::ptr_eq(&fixed[2], &t[1]));
    }

    fn forward(n: u128, role: Role) -> ThreadEntry {
        let mut e = ThreadEntry::text(id(n), role, format!("From Ops: f{n}"), 0);
        e.from_agent = Some("worker".into());
        e
    }

    fn answer(n: u128) -> ThreadEntry {
        ThreadEntry::text(id(n), Role::Assistant, format!("a{n}"), 0)
    }

    #[test]
    fn a_forward_is_sent_as_input_whatever_role_the_thread_keeps() {
        let t = vec![user(1), answer(2), forward(3, Role::Assistant), user(4)];
        let sent = as_sent(&t);
        assert_eq!(shape(&sent), ["user", "calls:0", "user", "user"]);
        assert_eq!(sent[2].text, "From Ops: f3");
        assert_eq!(sent[2].from_agent.as_deref(), Some("worker"));
        assert_eq!(
            t[2].role,
            Role::Assistant,
            "the thread itself is not changed"
        );
        // Nothing to change: borrowed as it is.
        let plain = vec![user(1), answer(2), forward(3, Role::User)];
        assert!(matches!(as_sent(&plain), Cow::Borrowed(_)));
    }

    #[test]
    fn sending_pairs_calls_and_voices_forwards_together() {
        let t = vec![
            calls(1, &["a"]),
            forward(2, Role::Assistant),
            result(3, "a"),
        ];
        assert_eq!(shape(&as_sent(&t)), ["calls:1", "result:a", "user"]);
    }

    #[test]
    fn a_conversation_ending_with_the_models_own_answer_is_told_apart() {
        assert!(ends_with_answer(&[user(1), answer(2)]));
        let marker = ThreadEntry::text(id(3), Role::System, "(interrupted)", 0);
        assert!(ends_with_answer(&[user(1), answer(2), marker.clone()]));
        assert!(!ends_with_answer(&[user(1), answer(2), user(4)]));
        assert!(!ends_with_answer(&[answer(2), forward(3, Role::Assistant)]));
        assert!(!ends_with_answer(&[calls(1, &["a"]), result(2, "a")]));
        assert!(!ends_with_answer::<ThreadEntry>(&[]));
        assert!(!ends_with_answer(&[marker]));
    }

    #[test]
    fn the_closing_result_says_interrupted_in_the_error_shape() {
        let e = interrupted_result(id(1), "call_7", "why", 5);
        let v: serde_json::Value = serde_json::from_str(&e.text).unwrap_or_default();
        assert_eq!(v["error"]["code"], "interrupted");
        assert_eq!(v["error"]["message"], "why");
        assert_eq!(e.tool_call_id.as_deref(), Some("call_7"));
    }
}
