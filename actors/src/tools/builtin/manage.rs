//! The Manage tool (seed 000; alias `manage`): `send_message` to a worker's persistent child
//! thread (sync or async), and `check_status` of the caller's child threads.

use super::super::{Call, ToolContext};
use super::BuiltinTool;
use crate::deps::Deps;
use crate::messages::{CancelWait, ManageSend, WaitResult};
use crate::ports::ToolSpec;
use actix::WeakRecipient;
use agentd_proto::ids::derived_v7;
use agentd_proto::{
    AgentRecord, AgentdError, ErrorCode, ManageCommand, ManageMode, ManageOptions, ManageRequest,
};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// The spec `rec` is shown: its description names the workers of `rec`'s type.
pub(super) fn spec(rec: &AgentRecord, deps: &Deps) -> ToolSpec {
    let titles: Vec<String> = deps
        .config
        .types
        .workers_of(&rec.agent_type)
        .iter()
        .map(|w| w.title.trim().to_string())
        .collect();
    BuiltinTool::Manage.described(
        format!(
            "Send a message to a connected worker on a persistent child thread, or check \
             the status of your child threads. Workers: {}.",
            if titles.is_empty() {
                "none".into()
            } else {
                titles.join(", ")
            }
        ),
        json!({"type": "object", "properties": {
            "command": {"type": "string", "enum": ["send_message", "check_status"]},
            "worker": {"type": "string", "description": "Worker title."},
            "message": {"type": "string"},
            "threadAlias": {"type": "string", "description": "Child thread alias."},
            "mode": {"type": "string", "enum": ["sync", "async"]},
            "syncTimeoutMs": {"type": "integer", "minimum": 0},
            "syncMaxMessages": {"type": "integer", "minimum": 1}
        }, "required": ["command", "threadAlias"]}),
    )
}

pub(super) async fn run(ctx: &ToolContext, call: Call, args: &Value) -> Result<Value, AgentdError> {
    let mut req = ManageRequest::from_json(args)?;
    let types = &ctx.deps.config.types;
    let caller_type = types.get(&ctx.caller.agent_type);
    let workers = caller_type.into_iter().flat_map(|t| types.workers(t));
    let no_workers = workers.clone().next().is_none();
    match req.command {
        ManageCommand::CheckStatus => {
            // Seed 000's schema requires the alias for both commands, though `check_status`
            // counts every child thread of the caller.
            ManageRequest::required(&req.thread_alias, "threadAlias")?;
            check_status(ctx, no_workers).await
        }
        ManageCommand::SendMessage => {
            if no_workers {
                return Err(AgentdError::new(
                    ErrorCode::NoWorkers,
                    format!(
                        "agent type `{}` has no connected workers",
                        ctx.caller.agent_type
                    ),
                ));
            }
            let worker = ManageRequest::required(&req.worker, "worker")?;
            ManageRequest::required(&req.message, "message")?;
            let worker = worker.to_string();
            let message = req.message.take().unwrap_or_default();
            ctx.deps
                .config
                .limits
                .input()
                .message("message", &message)?;
            let alias = ManageRequest::required(&req.thread_alias, "threadAlias")?.to_string();
            let worker_type = workers
                .clone()
                .find(|w| w.title.trim() == worker.as_str())
                .ok_or_else(|| {
                    let known: Vec<&str> = workers.map(|w| w.title.trim()).collect();
                    AgentdError::new(
                        ErrorCode::UnknownWorker,
                        format!(
                            "no worker titled `{worker}` (workers: {})",
                            known.join(", ")
                        ),
                    )
                })?;
            let options = match caller_type {
                Some(t) => t.manage.with_overrides(&req),
                None => ManageOptions::default().with_overrides(&req),
            };
            let (mode, sync_timeout_ms) = (options.mode, options.sync_timeout_ms);
            let dispatched = ctx
                .agents
                .manage(ManageSend {
                    parent: std::sync::Arc::clone(&ctx.caller),
                    worker_type: worker_type.name.clone(),
                    worker_title: worker.clone(),
                    alias: alias.clone(),
                    message,
                    options,
                    cause: ctx.cause,
                    message_id: derived_v7(call.id, "manage", call.made_at_ms),
                    again: call.again,
                    trace: agentd_observe::telemetry::current(),
                })
                .await?;
            let child = dispatched.child_id;
            let Some(wait) = dispatched.wait else {
                debug_assert_eq!(mode, ManageMode::Async);
                let sent = SendAnswer {
                    status: "sent",
                    mode: "async",
                    worker,
                    alias,
                    child,
                    created: dispatched.created,
                };
                return Ok(sent.into_json(None, None));
            };
            // A call run again waits for what is left of its timeout, counted from when the
            // model made it.
            let waited_ms = if call.again {
                ctx.deps.clock.now_ms().saturating_sub(call.made_at_ms)
            } else {
                0
            };
            let sleep = ctx
                .deps
                .clock
                .sleep(sync_timeout_ms.saturating_sub(waited_ms));
            let mut rx = wait.result;
            let dropped = || WaitResult {
                status: "failed",
                messages: vec![],
                error: Some("the wait was dropped".into()),
            };
            let result = tokio::select! {
                done = &mut rx => done.unwrap_or_else(|_| dropped()),
                _ = sleep => match cancel(&wait.cancel, wait.id).await {
                    Some(messages) => WaitResult { status: "timeout", messages, error: None },
                    // The wait completed between the timer and the cancel: its result is in `rx`.
                    _ => rx.await.unwrap_or_else(|_| dropped()),
                },
            };
            let answered = SendAnswer {
                status: result.status,
                mode: "sync",
                worker,
                alias,
                child,
                created: dispatched.created,
            };
            Ok(answered.into_json(Some(result.messages), result.error))
        }
    }
}

/// What `send_message` answers, before it becomes the tool's JSON.
struct SendAnswer {
    status: &'static str,
    mode: &'static str,
    worker: String,
    alias: String,
    child: String,
    created: bool,
}

impl SendAnswer {
    /// The answer as the seed's JSON object. Built by moving the strings into the map, not
    /// through `json!`, which serialises each value from a reference (a copy of every string
    /// and of each collected message): the answer is made on every Manage call.
    fn into_json(self, messages: Option<Vec<String>>, error: Option<String>) -> Value {
        let mut out = serde_json::Map::new();
        out.insert("status".into(), Value::from(self.status));
        out.insert("mode".into(), Value::from(self.mode));
        out.insert("worker".into(), Value::String(self.worker));
        out.insert("threadAlias".into(), Value::String(self.alias));
        out.insert("childThreadId".into(), Value::String(self.child));
        out.insert("created".into(), Value::Bool(self.created));
        if let Some(messages) = messages {
            let messages = messages.into_iter().map(Value::String).collect();
            out.insert("messages".into(), Value::Array(messages));
        }
        if let Some(error) = error {
            out.insert("error".into(), Value::String(error));
        }
        Value::Object(out)
    }
}

/// Gives up wait `id` at its router: the messages it had collected, or `None` if it completed
/// meanwhile (or its router is gone, taking the wait with it).
async fn cancel(router: &WeakRecipient<CancelWait>, id: u64) -> Option<Vec<String>> {
    router.upgrade()?.send(CancelWait(id)).await.ok().flatten()
}

async fn check_status(ctx: &ToolContext, no_workers: bool) -> Result<Value, AgentdError> {
    if no_workers {
        return Ok(json!({ "activeTasks": 0, "childThreadIds": [] }));
    }
    let store = &ctx.deps.store;
    let children: BTreeSet<String> = store
        .aliases(&ctx.caller.id)
        .await?
        .into_iter()
        .map(|a| a.child_id)
        .collect();
    let mut active = Vec::new();
    for child in children {
        if let Some(rec) = store.get_agent(&child).await?
            && rec.status.is_active()
        {
            active.push(child);
        }
    }
    Ok(json!({ "activeTasks": active.len(), "childThreadIds": active }))
}
