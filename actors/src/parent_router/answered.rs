//! What a sync Manage call run again finds of its first run. A parent's turn may stop between
//! its Manage message and the call's recorded result (a crash, a restart); the turn then runs
//! the call again, which sends the same message (the worker takes it once) and must not wait
//! for answers the worker gave meanwhile, perhaps while no process ran: they are read from the
//! worker's thread and record ([`answered_before`]). And an answer that reaches the parent's
//! router while no sync wait is registered is left to that call if the parent's thread shows
//! it still open ([`call_awaits`]), rather than starting a turn of the parent's own.

use crate::catalogue::BuiltinTool;
use crate::deps::Deps;
use crate::hashing::FastHashSet;
use agentd_proto::ids::{derived_id, derived_step_id};
use agentd_proto::{
    AgentRecord, AgentStatus, AgentdError, ManageChannel, ManageCommand, ManageMode, ManageOptions,
    ManageRequest, Role, ThreadEntry,
};
use uuid::Uuid;

/// What a worker answered to one message so far.
#[derive(Debug, Default)]
pub(super) struct Answered {
    /// Its messages, in order, each with the id of what carried it (the entry, or the
    /// message's own id for a yield): the same id as the output that brought it live, so a
    /// wait takes each once.
    pub messages: Vec<(Uuid, String)>,
    /// The worker failed on the message: its error.
    pub failed: Option<String>,
}

/// What worker `child` answered to message `sent`: the assistant messages of the turn it ran
/// on it (the entries whose ids derive from the message's, as the replies its parent got
/// do), its yield if that turn yielded, its error if the turn failed it.
pub(super) async fn answered_before(
    deps: &Deps,
    child: &str,
    sent: Uuid,
) -> Result<Answered, AgentdError> {
    let mut answered = Answered::default();
    let thread = deps.store.thread(child).await?;
    let input = derived_id(sent, "input");
    let Some(start) = thread.iter().position(|e| e.id == input) else {
        // Not taken yet (queued, or still on its way): everything is still to come.
        return Ok(answered);
    };
    let max_steps = deps.config.limits.max_steps_per_turn.max(1);
    let steps: FastHashSet<Uuid> = (1..=u64::from(max_steps))
        .map(|n| derived_step_id(sent, n))
        .collect();
    answered.messages = thread[start + 1..]
        .iter()
        .filter(|e| e.role == Role::Assistant && steps.contains(&e.id))
        .filter(|e| !e.text.trim().is_empty())
        .map(|e| (e.id, e.text.clone()))
        .collect();
    let Some(rec) = deps.store.get_agent(child).await? else {
        return Ok(answered);
    };
    if rec.current_task == Some(sent) {
        match rec.status {
            AgentStatus::Completed => {
                if let Some(result) = rec.result.as_deref() {
                    answered.messages.push((sent, super::value_text(result)));
                }
            }
            AgentStatus::Failed => {
                answered.failed = Some(rec.last_error.clone().unwrap_or_default());
            }
            _ => {}
        }
    }
    Ok(answered)
}

/// Whether `parent`'s thread ends with a sync Manage `send_message` to the worker of `channel`
/// that has no result yet: the turn that made it runs it again (or is about to), and will
/// take the worker's answer from its thread.
pub(super) async fn call_awaits(
    deps: &Deps,
    parent: &AgentRecord,
    channel: &ManageChannel,
) -> Result<bool, AgentdError> {
    let thread = deps.store.thread(&parent.id).await?;
    let options = deps.config.types.get(&parent.agent_type).map(|t| &t.manage);
    Ok(open_sync_call(&thread, options, channel))
}

/// Whether `thread`'s last step that called tools made a sync Manage `send_message` to the
/// worker of `channel` (under the caller type's Manage `options`) that has no result yet.
fn open_sync_call(
    thread: &[ThreadEntry],
    options: Option<&ManageOptions>,
    channel: &ManageChannel,
) -> bool {
    let Some(at) = thread
        .iter()
        .rposition(|e| e.role == Role::Assistant && !e.tool_calls.is_empty())
    else {
        return false;
    };
    let answered = |call_id: &str| {
        thread[at + 1..]
            .iter()
            .any(|e| e.tool_call_id.as_deref() == Some(call_id))
    };
    thread[at].tool_calls.iter().any(|call| {
        BuiltinTool::Manage.is_named(&call.name)
            && sends_sync_to(&call.arguments, options, channel)
            && !answered(&call.id)
    })
}

/// Whether Manage arguments `args` send a sync message to the worker of `channel`, under the
/// caller type's Manage `options`.
fn sends_sync_to(
    args: &serde_json::Value,
    options: Option<&ManageOptions>,
    channel: &ManageChannel,
) -> bool {
    let Ok(req) = ManageRequest::from_json(args) else {
        return false;
    };
    let mode = match options {
        Some(o) => o.with_overrides(&req).mode,
        None => ManageOptions::default().with_overrides(&req).mode,
    };
    req.command == ManageCommand::SendMessage
        && mode == ManageMode::Sync
        && req.worker.as_deref().map(str::trim) == Some(channel.worker_title.as_str())
        && req.thread_alias.as_deref().map(str::trim) == Some(channel.alias.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_proto::ToolCall;
    use serde_json::json;

    fn channel() -> ManageChannel {
        ManageChannel {
            parent_id: "lead".into(),
            worker_title: "Researcher".into(),
            alias: "harbour".into(),
            options: ManageOptions::default(),
        }
    }

    /// A thread whose last step calls Manage with `args`, answered if `answered`.
    fn thread(args: serde_json::Value, answered: bool) -> Vec<ThreadEntry> {
        let mut step = ThreadEntry::text(Uuid::nil(), Role::Assistant, "asking", 1);
        step.tool_calls = vec![ToolCall {
            id: "call-1".into(),
            name: "Manage".into(),
            arguments: args,
        }]
        .into();
        let mut thread = vec![ThreadEntry::text(Uuid::nil(), Role::User, "ask", 0), step];
        if answered {
            let mut result = ThreadEntry::text(Uuid::nil(), Role::Tool, "{}", 2);
            result.tool_call_id = Some("call-1".into());
            thread.push(result);
        }
        thread
    }

    fn send(mode: Option<&str>, worker: &str, alias: &str) -> serde_json::Value {
        let mut args = json!({
            "command": "send_message", "worker": worker, "message": "count", "threadAlias": alias
        });
        if let Some(mode) = mode {
            args["mode"] = json!(mode);
        }
        args
    }

    #[test]
    fn only_an_unanswered_sync_send_to_the_same_worker_and_alias_awaits() {
        let sync = ManageOptions::default();
        let async_by_type = ManageOptions {
            mode: ManageMode::Async,
            ..ManageOptions::default()
        };
        let c = channel();
        let open = |args, answered, options: &ManageOptions| {
            open_sync_call(&thread(args, answered), Some(options), &c)
        };
        assert!(open(send(None, "Researcher", "harbour"), false, &sync));
        assert!(open(send(None, " Researcher ", " harbour"), false, &sync));
        assert!(open(
            send(Some("sync"), "Researcher", "harbour"),
            false,
            &async_by_type
        ));
        assert!(!open(send(None, "Researcher", "harbour"), true, &sync));
        assert!(!open(
            send(Some("async"), "Researcher", "harbour"),
            false,
            &sync
        ));
        assert!(!open(
            send(None, "Researcher", "harbour"),
            false,
            &async_by_type
        ));
        assert!(!open(send(None, "Coder", "harbour"), false, &sync));
        assert!(!open(send(None, "Researcher", "docks"), false, &sync));
        let status = json!({"command": "check_status", "threadAlias": "harbour"});
        assert!(!open(status, false, &sync));
        assert!(!open_sync_call(&[], Some(&sync), &c));
    }
}
