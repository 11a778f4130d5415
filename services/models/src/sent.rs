//! The conversation a backend sends its model for a request, whatever its wire format: every
//! tool call answered right after it, and every entry in the voice the model hears it in — a
//! forward from another agent is input, even where the thread keeps it as an assistant entry
//! (`agentd_proto::conversation::as_sent`). A compaction's request ends with the ask for the
//! summary. A request that would still end with the model's own answer is refused before it
//! goes out: it would give the model nothing to answer (on Anthropic, a prefill it continues as
//! its own words).

use agentd_ports::{ModelError, ModelRequest, Purpose};
use agentd_proto::conversation::{as_sent, ends_with_answer};
use agentd_proto::ids::derived_id;
use agentd_proto::{Role, ThreadEntry};
use std::borrow::Cow;
use std::sync::Arc;

/// What a compaction asks the model, after the part of the thread it summarises.
pub(crate) const COMPACT_REQUEST: &str = "Summarise the conversation so far for your own later use: the task, what was decided and done, and what is still open. Answer with the summary only.";

/// What `req` sends its model of its thread.
pub(crate) fn conversation(req: &ModelRequest) -> Result<Cow<'_, [Arc<ThreadEntry>]>, ModelError> {
    let mut sent = as_sent(&req.thread);
    if req.purpose == Purpose::Compact {
        let last = sent.last().map_or(uuid::Uuid::nil(), |e| e.id);
        let at_ms = sent.last().map_or(0, |e| e.at_ms);
        sent.to_mut().push(Arc::new(ThreadEntry::text(
            derived_id(last, "compact-request"),
            Role::User,
            COMPACT_REQUEST,
            at_ms,
        )));
    }
    if ends_with_answer(&sent) {
        return Err(ModelError::Failed(
            "the conversation ends with the model's own answer: a request must end with input for it to answer".into(),
        ));
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(entries: Vec<ThreadEntry>, purpose: Purpose) -> ModelRequest {
        ModelRequest {
            agent_id: "a".into(),
            agent_type: "lead".into(),
            title: "Lead".into(),
            model: None,
            provider: None,
            env: Default::default(),
            system_prompt: "".into(),
            thread: Arc::new(entries.into_iter().map(Arc::new).collect()),
            tools: Arc::default(),
            purpose,
            cli_session_id: None,
            cli_tools: Arc::default(),
            observer: None,
            cancel: tokio_util::sync::CancellationToken::new(),
        }
    }

    fn entry(n: u128, role: Role, text: &str) -> ThreadEntry {
        ThreadEntry::text(uuid::Uuid::from_u128(n), role, text, 0)
    }

    #[test]
    fn a_compaction_ends_with_its_ask_even_after_an_answer() {
        let req = request(
            vec![
                entry(1, Role::User, "hi"),
                entry(2, Role::Assistant, "hello"),
            ],
            Purpose::Compact,
        );
        let sent = conversation(&req).map(Cow::into_owned).unwrap_or_default();
        assert_eq!(sent.len(), 3);
        assert_eq!(
            (sent[2].role, sent[2].text.as_str()),
            (Role::User, COMPACT_REQUEST)
        );
    }

    #[test]
    fn a_turn_that_would_end_with_the_models_own_answer_is_refused() {
        let req = request(
            vec![
                entry(1, Role::User, "hi"),
                entry(2, Role::Assistant, "hello"),
            ],
            Purpose::Turn,
        );
        assert!(matches!(conversation(&req), Err(ModelError::Failed(_))));
        let mut forward = entry(3, Role::Assistant, "From Ops: done");
        forward.from_agent = Some("w".into());
        let req = request(
            vec![
                entry(1, Role::User, "hi"),
                entry(2, Role::Assistant, "hello"),
                forward,
            ],
            Purpose::Turn,
        );
        let sent = conversation(&req).map(Cow::into_owned).unwrap_or_default();
        assert_eq!(sent.last().map(|e| e.role), Some(Role::User));
    }
}
