//! The A2A operations, whichever binding carries them: the request's parameters in (JSON as
//! the specification's ProtoJSON shapes them), a response object or an [`A2aError`] out.

use super::A2a;
use super::error::A2aError;
use super::task::{self, Origin, State, TaskRecord, TaskView};
use agentd_proto::ids::derived_id;
use agentd_proto::{AgentdError, Command, ErrorCode, InboxItem, ItemCancel, SpawnRequest};
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;

/// A part of a message (unknown fields are ignored, as the specification asks).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    text: Option<String>,
    raw: Option<Value>,
    url: Option<Value>,
    data: Option<Value>,
    #[serde(alias = "media_type")]
    media_type: Option<String>,
}

/// A client's message.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Message {
    #[serde(alias = "message_id")]
    message_id: Option<String>,
    #[serde(alias = "context_id")]
    context_id: Option<String>,
    #[serde(alias = "task_id")]
    task_id: Option<String>,
    role: Option<Value>,
    parts: Option<Vec<Part>>,
}

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

fn params<T: for<'de> Deserialize<'de> + Default>(v: &Value) -> Result<T, A2aError> {
    if v.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(v.clone())
        .map_err(|e| A2aError::InvalidParams(format!("invalid parameters: {e}")))
}

/// The task id of a call whose only parameter is `id` (`CancelTask`, `SubscribeToTask`).
fn task_id(p: &Value) -> Result<String, A2aError> {
    #[derive(Default, Deserialize)]
    struct P {
        id: Option<String>,
    }
    let p: P = params(p)?;
    required_id(p.id)
}

/// A call's `id`, which it must name.
fn required_id(id: Option<String>) -> Result<String, A2aError> {
    id.ok_or_else(|| A2aError::InvalidParams("`id` is required".into()))
}

/// What a message says to the agent: its text parts, and its data parts as JSON text. File
/// parts (raw bytes or a URL) are refused.
fn text_of(parts: &[Part]) -> Result<String, A2aError> {
    let mut pieces = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        if p.raw.is_some() || p.url.is_some() {
            let kind = p.media_type.as_deref().unwrap_or("a file");
            return Err(A2aError::ContentType(format!(
                "message.parts[{i}] is {kind} (raw bytes or a URL): this agent takes text and \
                 data parts only"
            )));
        }
        if let Some(t) = &p.text {
            pieces.push(t.clone());
        } else if let Some(d) = &p.data {
            pieces.push(d.to_string());
        } else {
            return Err(A2aError::InvalidParams(format!(
                "message.parts[{i}] has no content (text, data, raw or url)"
            )));
        }
    }
    Ok(pieces.join("\n"))
}

/// A checked message: its id, its text, the JSON kept in the task's history.
struct Incoming {
    message_id: String,
    context_id: Option<String>,
    task_id: Option<String>,
    text: String,
    json: Value,
}

fn incoming(v: Option<&Value>) -> Result<Incoming, A2aError> {
    let v = v.ok_or_else(|| A2aError::InvalidParams("`message` is required".into()))?;
    let m: Message = params(v)?;
    let message_id = m
        .message_id
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| A2aError::InvalidParams("`message.messageId` is required".into()))?;
    match m.role.as_ref().and_then(Value::as_str) {
        Some("ROLE_USER" | "user") => {}
        Some(other) => {
            return Err(A2aError::InvalidParams(format!(
                "`message.role` is `{other}`: a client sends ROLE_USER"
            )));
        }
        None => {
            return Err(A2aError::InvalidParams(
                "`message.role` is required (ROLE_USER)".into(),
            ));
        }
    }
    let parts = m.parts.unwrap_or_default();
    if parts.is_empty() {
        return Err(A2aError::InvalidParams(
            "`message.parts` needs at least one part".into(),
        ));
    }
    let text = text_of(&parts)?;
    if text.trim().is_empty() {
        return Err(A2aError::InvalidParams("the message has no text".into()));
    }
    Ok(Incoming {
        message_id,
        context_id: m.context_id.filter(|s| !s.is_empty()),
        task_id: m.task_id.filter(|s| !s.is_empty()),
        text,
        json: v.clone(),
    })
}

/// A `historyLength` (`None`: no limit; negative: refused).
fn history_length(v: Option<i64>) -> Result<Option<usize>, A2aError> {
    match v {
        None => Ok(None),
        Some(n) if n < 0 => Err(A2aError::InvalidParams(format!(
            "historyLength is {n}: it must be 0 or more"
        ))),
        Some(n) => Ok(Some(n as usize)),
    }
}

/// The ProtoJSON of a task.
pub fn task_json(v: &TaskView, history: Option<usize>, artifacts: bool) -> Value {
    let t = &v.task;
    let mut status = json!({
        "state": v.state.wire(),
        "timestamp": agentd_proto::time::rfc3339_utc(v.at_ms),
    });
    if let Some(text) = &v.status_text {
        status["message"] = json!({
            "messageId": derived_id(Uuid::try_parse(&t.context_id).unwrap_or_default(),
                &format!("{}:{}", t.id, v.state.wire())).to_string(),
            "contextId": t.context_id,
            "taskId": t.id,
            "role": "ROLE_AGENT",
            "parts": [{"text": text}],
        });
    }
    let mut out = json!({"id": t.id, "contextId": t.context_id, "status": status});
    if t.origin == Origin::Agent {
        out["metadata"] = json!({"agentd.origin": "agent"});
    }
    if artifacts && let Some(a) = v.answer.as_ref().filter(|a| !a.is_empty()) {
        out["artifacts"] = json!([artifact(a)]);
    }
    let keep = history.unwrap_or(usize::MAX);
    if keep > 0 && !t.history.is_empty() {
        let skip = t.history.len().saturating_sub(keep);
        out["history"] = Value::Array(t.history[skip..].to_vec());
    }
    out
}

/// The answer as the task's one artifact.
pub fn artifact(text: &str) -> Value {
    json!({"artifactId": "answer", "name": "answer", "parts": [{"text": text}]})
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

/// agentd refused the item before it ran for a reason the task's `rejected` state stands for.
fn refused_before_running(e: &AgentdError) -> bool {
    matches!(
        e.code,
        ErrorCode::BudgetExceeded
            | ErrorCode::DepthLimit
            | ErrorCode::FanoutLimit
            | ErrorCode::Unavailable
    )
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
        super::push::check_with_message(c)?;
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
    let mut t = view.task;
    if let Some(ctx) = &msg.context_id
        && *ctx != t.context_id
    {
        return Err(A2aError::InvalidParams(format!(
            "task `{id}` belongs to context `{}`, not `{ctx}`",
            t.context_id
        )));
    }
    let item = item_id(&t.context_id, &msg.message_id);
    if t.items.contains(&item) {
        return Ok(t.id); // a resend
    }
    match view.state {
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
    t.history.push(with_ids(&msg.json, &t.context_id, &t.id));
    t.unposted = true;
    task::save(&a2a.system, &t).await?;
    if let Some(c) = push {
        super::push::save_with_message(&a2a.system, &t.context_id, &t.id, c).await?;
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

/// A message starting a task: in the context it names, or in a new one.
async fn new_task(
    a2a: &A2a,
    agent_type: &str,
    msg: &Incoming,
    push: Option<&Value>,
) -> Result<String, A2aError> {
    let system = &a2a.system;
    let ctx = match &msg.context_id {
        Some(ctx) => {
            let unknown = || {
                A2aError::InvalidParams(format!(
                    "no context `{ctx}` for agent `{agent_type}` (omit contextId to start one)"
                ))
            };
            if ctx.len() != 36 || Uuid::try_parse(ctx).is_err() {
                return Err(unknown());
            }
            let rec = system
                .deps()
                .store
                .get_agent(ctx)
                .await
                .map_err(|e| A2aError::Internal(e.to_string()))?
                .ok_or_else(unknown)?;
            if rec.agent_type != agent_type || rec.parent_id.is_some() {
                return Err(unknown());
            }
            ctx.clone()
        }
        None => {
            let rec = system
                .spawn(SpawnRequest {
                    agent_type: Some(agent_type.to_string()),
                    ..SpawnRequest::default()
                })
                .await
                .map_err(A2aError::from)?;
            rec.id
        }
    };
    let item = item_id(&ctx, &msg.message_id);
    let id = task::task_id(&ctx, item);
    if let Ok((_, existing)) = task::get(system, &id).await
        && !existing.task.unposted
    {
        return Ok(id); // a resend of the same message
    }
    let mut t = TaskRecord {
        id: id.clone(),
        context_id: ctx.clone(),
        items: vec![item],
        inputs: vec![derived_id(item, "input")],
        history: vec![with_ids(&msg.json, &ctx, &id)],
        origin: Origin::Client,
        rejected: None,
        cancel_requested: false,
        unposted: true,
        created_ms: task::now_ms(),
    };
    task::save(system, &t).await?;
    if let Some(c) = push {
        super::push::save_with_message(system, &ctx, &id, c).await?;
    }
    let posted = system
        .post_as_from(SENDER, &ctx, item, InboxItem::followup(&msg.text, false))
        .await;
    t.unposted = false;
    match posted {
        Ok(_) => task::save(system, &t).await?,
        Err(e) if refused_before_running(&e) => {
            t.rejected = Some(e.to_string());
            task::save(system, &t).await?;
        }
        Err(e) => {
            t.rejected = Some(e.to_string());
            task::save(system, &t).await?;
            return Err(e.into());
        }
    }
    Ok(id)
}

/// Waits until task `id` is terminal or asks for input (a blocking `SendMessage`), and answers
/// it. The context's events wake the wait; a periodic look covers a missed one.
pub async fn wait(a2a: &A2a, id: &str) -> Result<TaskView, A2aError> {
    let (mut rx, _) = a2a.events.log.subscribe_with_ring();
    let ctx = task::context_of(id).unwrap_or_default().to_string();
    loop {
        let (_, v) = task::get(&a2a.system, id).await?;
        if v.state.ends_wait() {
            return Ok(v);
        }
        let deadline = tokio::time::sleep(Duration::from_millis(500));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                got = rx.recv() => match got {
                    Ok(l) if super::stream::concerns(&l.event, &ctx) => break,
                    Ok(_) => {}
                    Err(_) => break,
                },
                _ = &mut deadline => break,
            }
        }
    }
}

/// `GetTask`.
pub async fn get_task(a2a: &A2a, p: &Value) -> Result<Value, A2aError> {
    #[derive(Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct P {
        id: Option<String>,
        #[serde(alias = "history_length")]
        history_length: Option<Value>,
    }
    let p: P = params(p)?;
    let id = required_id(p.id)?;
    let history = history_length(number(&p.history_length, "historyLength")?)?;
    let (_, v) = task::get(&a2a.system, &id).await?;
    Ok(task_json(&v, history, true))
}

/// `ListTasks` parameters.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListParams {
    #[serde(alias = "context_id")]
    context_id: Option<String>,
    status: Option<String>,
    #[serde(alias = "page_size")]
    page_size: Option<Value>,
    #[serde(alias = "page_token")]
    page_token: Option<String>,
    #[serde(alias = "history_length")]
    history_length: Option<Value>,
    #[serde(alias = "status_timestamp_after")]
    status_timestamp_after: Option<String>,
    #[serde(alias = "include_artifacts")]
    include_artifacts: Option<Value>,
}

/// A number that may come as a JSON number or (a query parameter) a string.
fn number(v: &Option<Value>, name: &str) -> Result<Option<i64>, A2aError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| A2aError::InvalidParams(format!("`{name}` must be an integer"))),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| A2aError::InvalidParams(format!("`{name}` must be an integer"))),
        Some(_) => Err(A2aError::InvalidParams(format!(
            "`{name}` must be an integer"
        ))),
    }
}

fn boolean(v: &Option<Value>, name: &str) -> Result<bool, A2aError> {
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" => Ok(true),
        Some(Value::String(s)) if s == "false" => Ok(false),
        Some(_) => Err(A2aError::InvalidParams(format!(
            "`{name}` must be true or false"
        ))),
    }
}

/// `ListTasks`: the tasks of one context or of every context of this agent type, most
/// recently updated first, in pages whose token names the last task of the page before.
pub async fn list_tasks(a2a: &A2a, agent_type: &str, p: &Value) -> Result<Value, A2aError> {
    let p: ListParams = params(p)?;
    let page_size = match number(&p.page_size, "pageSize")? {
        None => 50,
        Some(n @ 1..=100) => n as usize,
        Some(n) => {
            return Err(A2aError::InvalidParams(format!(
                "pageSize is {n}: it must be from 1 to 100"
            )));
        }
    };
    let history = history_length(number(&p.history_length, "historyLength")?)?;
    let artifacts = boolean(&p.include_artifacts, "includeArtifacts")?;
    let state =
        match p.status.as_deref().filter(|s| !s.is_empty()) {
            None | Some("TASK_STATE_UNSPECIFIED") => None,
            Some(s) => Some(State::parse(s).ok_or_else(|| {
                A2aError::InvalidParams(format!("status `{s}` is not a task state"))
            })?),
        };
    let after = match p
        .status_timestamp_after
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        None => None,
        Some(s) => Some(task::parse_timestamp(s).ok_or_else(|| {
            A2aError::InvalidParams(format!(
                "statusTimestampAfter `{s}` is not an ISO 8601 UTC timestamp"
            ))
        })?),
    };
    let contexts = match p.context_id.as_deref().filter(|s| !s.is_empty()) {
        Some(ctx) => vec![ctx.to_string()],
        None => contexts_of(a2a, agent_type).await?,
    };
    let mut views = Vec::new();
    for ctx in contexts {
        if Uuid::try_parse(&ctx).is_err() {
            continue;
        }
        let Some((seen, vs)) = task::reconcile(&a2a.system, &ctx).await? else {
            continue;
        };
        if seen.rec.agent_type != agent_type {
            continue;
        }
        views.extend(vs);
    }
    views.retain(|v| state.is_none_or(|s| v.state == s) && after.is_none_or(|a| v.at_ms >= a));
    views.sort_by(|a, b| {
        b.at_ms
            .cmp(&a.at_ms)
            .then_with(|| b.task.id.cmp(&a.task.id))
    });
    let total = views.len();
    let start = match p.page_token.as_deref().filter(|s| !s.is_empty()) {
        None => 0,
        Some(token) => {
            let (ms, id) = token
                .split_once('~')
                .and_then(|(ms, id)| Some((ms.parse::<u64>().ok()?, id)))
                .ok_or_else(|| {
                    A2aError::InvalidParams(format!("pageToken `{token}` is not one of ours"))
                })?;
            views
                .iter()
                .position(|v| (v.at_ms, v.task.id.as_str()) < (ms, id))
                .unwrap_or(views.len())
        }
    };
    let page: Vec<&TaskView> = views.iter().skip(start).take(page_size).collect();
    let next = if start + page.len() < total {
        page.last()
            .map(|v| format!("{}~{}", v.at_ms, v.task.id))
            .unwrap_or_default()
    } else {
        String::new()
    };
    let tasks: Vec<Value> = page
        .iter()
        .map(|v| task_json(v, history, artifacts))
        .collect();
    Ok(json!({
        "tasks": tasks,
        "nextPageToken": next,
        "pageSize": page_size,
        "totalSize": total,
    }))
}

/// The contexts of `agent_type`: its roots that have tasks.
async fn contexts_of(a2a: &A2a, agent_type: &str) -> Result<Vec<String>, A2aError> {
    let roots = a2a
        .system
        .deps()
        .store
        .list_roots()
        .await
        .map_err(|e| A2aError::Internal(e.to_string()))?;
    let mut out = Vec::new();
    for r in roots {
        if r.agent_type == agent_type && task::is_context(&a2a.system, &r.id).await? {
            out.push(r.id);
        }
    }
    Ok(out)
}

/// `CancelTask`: a queued task is taken out of the inbox alone; a running one has its turn
/// interrupted, and the sub-agents that turn started are cancelled; the context goes on with
/// its other tasks.
pub async fn cancel_task(a2a: &A2a, p: &Value) -> Result<Value, A2aError> {
    let id = task_id(p)?;
    let system = &a2a.system;
    let (seen, view) = task::get(system, &id).await?;
    if view.state.is_terminal() {
        return Err(A2aError::TaskNotCancelable(format!(
            "task `{id}` is {}: there is nothing to cancel",
            view.state.wire()
        )));
    }
    let mut t = view.task.clone();
    t.cancel_requested = true;
    task::save(system, &t).await?;
    let ctx = t.context_id.clone();
    if let Some(item) = t.items.last().copied()
        && view.state != State::InputRequired
    {
        let turn_started = seen
            .thread
            .iter()
            .find(|e| Some(&e.id) == t.inputs.last())
            .map(|e| e.at_ms);
        let done = system
            .execute(Command::CancelItem {
                agent_id: ctx.clone(),
                item_id: item,
            })
            .await
            .map_err(A2aError::from)?;
        let done: Option<ItemCancel> = done
            .get("cancel")
            .and_then(|c| serde_json::from_value(c.clone()).ok());
        if done == Some(ItemCancel::Interrupted)
            && let Some(since) = turn_started
        {
            cancel_children_since(a2a, &ctx, since).await;
        }
    }
    // The agent marks the item done with its next write: the task is read until it shows.
    let mut v = task::get(system, &id).await?.1;
    for _ in 0..100 {
        if v.state.is_terminal() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        v = task::get(system, &id).await?.1;
    }
    if v.state != State::Canceled {
        return Err(A2aError::TaskNotCancelable(format!(
            "task `{id}` became {} before the cancel reached it",
            v.state.wire()
        )));
    }
    Ok(task_json(&v, None, true))
}

/// Cancels the context's children created since `since_ms` (those the cancelled turn
/// started) that still run: the cancel control cascades to their own descendants.
async fn cancel_children_since(a2a: &A2a, ctx: &str, since_ms: u64) {
    let store = &a2a.system.deps().store;
    let Ok(children) = store.children(ctx).await else {
        return;
    };
    for child in children {
        let Ok(Some(rec)) = store.get_agent(&child).await else {
            continue;
        };
        let over = matches!(
            rec.status,
            agentd_proto::AgentStatus::Completed
                | agentd_proto::AgentStatus::Failed
                | agentd_proto::AgentStatus::Cancelled
                | agentd_proto::AgentStatus::Terminated
                | agentd_proto::AgentStatus::Closed
        );
        if rec.created_at_ms >= since_ms
            && !over
            && let Err(e) = a2a
                .system
                .control(&child, agentd_proto::Control::Cancel)
                .await
        {
            tracing::warn!(agent_id = %child, error = %e, "cancelling a sub-agent of a cancelled task");
        }
    }
}

/// The task `id` names, for `SubscribeToTask` (`UnsupportedOperation` once it is terminal).
pub async fn subscribable(a2a: &A2a, p: &Value) -> Result<String, A2aError> {
    let id = task_id(p)?;
    let (_, v) = task::get(&a2a.system, &id).await?;
    if v.state.is_terminal() {
        return Err(A2aError::Unsupported(format!(
            "task `{id}` is {}: there is nothing to subscribe to",
            v.state.wire()
        )));
    }
    Ok(id)
}
