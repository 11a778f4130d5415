//! `SendMessage` and `SendStreamingMessage`: a client's message becomes a task — an item in
//! its context's durable inbox, or the answer to the question a task asked — and a blocking
//! send waits for the task's end.

use super::context;
use super::message::{Incoming, incoming};
use super::params::{history_length, params};
use crate::a2a::A2a;
use crate::a2a::error::A2aError;
use crate::a2a::task::{self, Origin, State, TaskRecord, TaskView};
use crate::runs::PostError;
use agentd_proto::ids::derived_id;
use agentd_proto::{Command, InboxItem, SpawnRequest};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendConfiguration {
    #[serde(alias = "history_length")]
    history_length: Option<i64>,
    #[serde(alias = "return_immediately")]
    return_immediately: Option<bool>,
    #[serde(alias = "task_push_notification_config")]
    task_push_notification_config: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendParams {
    message: Option<Value>,
    configuration: Option<SendConfiguration>,
}

/// Where a send leaves the task.
pub struct Sent {
    /// The task.
    pub task_id: String,
    /// Whether the client asked not to wait.
    pub return_immediately: bool,
    /// Its `historyLength`.
    pub history: Option<usize>,
}

/// The A2A sender of every item this layer posts.
pub const SENDER: &str = "a2a";

/// `SendMessage` / `SendStreamingMessage` up to the item in the context's durable inbox.
pub async fn send(a2a: &A2a, agent_type: &str, p: &Value) -> Result<Sent, A2aError> {
    let sp: SendParams = params(p)?;
    let msg = incoming(sp.message.as_ref())?;
    let cfg = sp.configuration.unwrap_or_default();
    let history = history_length(cfg.history_length)?;
    let push_cfg = cfg.task_push_notification_config.filter(|v| !v.is_null());
    if let Some(c) = &push_cfg {
        crate::a2a::push::check_with_message(c)?;
    }
    let system = &a2a.system;
    system
        .deps()
        .config
        .limits
        .input()
        .message("message", &msg.text)
        .map_err(A2aError::from)?;
    let task_id = match &msg.task_id {
        Some(id) => answer_task(a2a, &msg, id, push_cfg.as_ref()).await?,
        None => new_task(a2a, agent_type, &msg, push_cfg.as_ref()).await?,
    };
    Ok(Sent {
        task_id,
        return_immediately: cfg.return_immediately.unwrap_or(false),
        history,
    })
}

/// A message naming a task: the answer to the question it asked.
async fn answer_task(
    a2a: &A2a,
    msg: &Incoming,
    id: &str,
    push: Option<&Value>,
) -> Result<String, A2aError> {
    let (_, view) = task::get(&a2a.system, id).await?;
    let state = view.state();
    let mut t = view.task;
    if let Some(ctx) = &msg.context_id
        && *ctx != t.shown_context()
        && *ctx != t.context_id
    {
        return Err(A2aError::InvalidParams(format!(
            "task `{id}` belongs to context `{}`, not `{ctx}`",
            t.shown_context()
        )));
    }
    let item = item_id(&t.context_id, &msg.message_id);
    if t.items.contains(&item) {
        return Ok(t.id); // a resend
    }
    match state {
        State::InputRequired => {}
        s if s.is_terminal() => {
            return Err(A2aError::Unsupported(format!(
                "task `{id}` is {}: it takes no more messages (send to its context for a new \
                 task)",
                s.wire()
            )));
        }
        s => {
            return Err(A2aError::Unsupported(format!(
                "task `{id}` is {} and asked nothing: send to its context (contextId) for a \
                 new task",
                s.wire()
            )));
        }
    }
    t.items.push(item);
    t.inputs.push(derived_id(item, "input"));
    t.history
        .push(with_ids(&msg.json, t.shown_context(), &t.id));
    t.unposted = true;
    task::save(&a2a.system, &t).await?;
    if let Some(c) = push {
        crate::a2a::push::save_with_message(&a2a.system, &t.context_id, &t.id, c).await?;
    }
    let cmd = Command::AnswerQuestion {
        agent_id: t.context_id.clone(),
        answer: msg.text.clone(),
        item_id: Some(item),
    };
    if let Err(e) = a2a.system.execute(cmd).await {
        // Not taken: the task is as it was.
        t.items.pop();
        t.inputs.pop();
        t.history.pop();
        t.unposted = false;
        task::save(&a2a.system, &t).await?;
        return Err(e.into());
    }
    t.unposted = false;
    task::save(&a2a.system, &t).await?;
    Ok(t.id)
}

/// The inbox item a client's message becomes: the same message id, the same item.
fn item_id(ctx: &str, message_id: &str) -> Uuid {
    derived_id(
        Uuid::try_parse(ctx).unwrap_or_default(),
        &format!("a2a-message:{message_id}"),
    )
}

/// The message as kept in the task's history: with its context and task.
fn with_ids(msg: &Value, ctx: &str, task: &str) -> Value {
    let mut m = msg.clone();
    m["contextId"] = json!(ctx);
    m["taskId"] = json!(task);
    m
}

/// A message starting a task: in the context it names (one the client chose is opened by
/// its first message), or in a new one.
async fn new_task(
    a2a: &A2a,
    agent_type: &str,
    msg: &Incoming,
    push: Option<&Value>,
) -> Result<String, A2aError> {
    let system = &a2a.system;
    let (ctx, client_context_id) = match &msg.context_id {
        Some(id) => {
            let c = context::find_or_open(a2a, agent_type, id).await?;
            (c.agent, c.client_id)
        }
        None => {
            // A new context, made once per message id: a message sent again without its
            // context (its first answer lost) finds the context, and the task, the first made.
            let rec = system
                .spawn(SpawnRequest {
                    agent_type: Some(agent_type.to_string()),
                    // Any string is a message id: the key is a digest of it.
                    idempotency_key: Some(format!(
                        "a2a message {agent_type} {}",
                        derived_id(Uuid::nil(), &msg.message_id)
                    )),
                    ..SpawnRequest::default()
                })
                .await
                .map_err(A2aError::from)?;
            (rec.id, None)
        }
    };
    let item_id = item_id(&ctx, &msg.message_id);
    let id = task::task_id(&ctx, item_id);
    if let Ok((_, existing)) = task::get(system, &id).await
        && !existing.task.unposted
    {
        return Ok(id); // a resend of the same message
    }
    let shown = client_context_id.clone().unwrap_or_else(|| ctx.clone());
    let t = TaskRecord {
        id: id.clone(),
        context_id: ctx.clone(),
        client_context_id,
        items: vec![item_id],
        inputs: vec![derived_id(item_id, "input")],
        history: vec![with_ids(&msg.json, &shown, &id)],
        origin: Origin::Client,
        rejected: None,
        cancel_requested: false,
        unposted: true,
        created_ms: task::now_ms(),
    };
    task::save(system, &t).await?;
    if let Some(c) = push {
        crate::a2a::push::save_with_message(system, &ctx, &id, c).await?;
    }
    let item = InboxItem::followup(&msg.text, false);
    match crate::runs::post(system, &mut t.to_run(), SENDER, item_id, item).await {
        Ok(()) => Ok(id),
        Err(PostError::Refused(e)) if crate::runs::refused_before_running(&e) => Ok(id),
        Err(PostError::Refused(e)) => Err(e.into()),
        Err(PostError::Store(e)) => Err(A2aError::store(e)),
    }
}

/// Waits until task `id` is terminal or asks for input (a blocking `SendMessage`), and answers
/// it. The context's events wake the wait; a periodic look covers a missed one.
pub async fn wait(a2a: &A2a, id: &str) -> Result<TaskView, A2aError> {
    let (mut rx, _) = a2a.events.log.subscribe_with_ring();
    let ctx = task::context_of(id).unwrap_or_default().to_string();
    crate::runs::until(&mut rx, &ctx, || async {
        let (_, v) = task::get(&a2a.system, id).await?;
        Ok(v.state().ends_wait().then_some(v))
    })
    .await
}
