//! Push notifications: a task's webhook configs, and a durable outbox their notifications are
//! delivered from, outside any turn.
//!
//! A config and each notification are values in the context's task map (beside the task, so
//! deleting the context deletes them). When `task::reconcile` sees a task reach a new
//! state it writes one [`Notice`] per live config **before** it writes the settled state: a
//! crash between the two finds the state unsettled and writes the same notices again (their ids
//! derive from the task, the config, the input and the state, so they are the same values).
//! A deliverer in each process posts the pending notices of the contexts this process owns as
//! soon as the watcher (`super::watch`), which reads those contexts as they change, finds them
//! (a sweep every [`SWEEP_EVERY`] finds the rest: a partition taken over, a crash), oldest
//! first and in order per config, with backoff between attempts; what it marks
//! delivered is never sent again, and a notice whose delivery was cut off by a crash is sent
//! again with the same id (`Idempotency-Key`), so a receiver de-duplicates.

use super::A2a;
use super::error::A2aError;
use super::task::{self, Auth, Contents, Delivery, Notice, PushConfig, Stored};
use agentd_actors::AgentSystem;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use uuid::Uuid;

/// How long one delivery may take (the specification recommends 10 to 30 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The wait after the first failed attempt; it doubles with each failure, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF_MS: u64 = 1_000;
/// The longest wait between two attempts.
const MAX_BACKOFF_MS: u64 = 300_000;
/// Attempts before a notice is given up (about 40 minutes of retrying).
const MAX_ATTEMPTS: u32 = 16;
/// How often every context is looked at again (notices of partitions this process took over,
/// states a crash left unnotified).
const SWEEP_EVERY: Duration = Duration::from_secs(15);

// ---- configs ----

/// A `TaskPushNotificationConfig` as a client sends it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigIn {
    id: Option<String>,
    url: Option<String>,
    token: Option<String>,
    authentication: Option<AuthIn>,
}

#[derive(Debug, Default, Deserialize)]
struct AuthIn {
    scheme: Option<String>,
    credentials: Option<String>,
}

fn parse(v: &Value) -> Result<ConfigIn, A2aError> {
    serde_json::from_value(v.clone())
        .map_err(|e| A2aError::InvalidParams(format!("invalid push notification config: {e}")))
}

/// Checks a config for task `task_id` (not stored yet).
fn checked(task_id: &str, c: ConfigIn) -> Result<PushConfig, A2aError> {
    let url = c.url.filter(|u| !u.trim().is_empty()).ok_or_else(|| {
        A2aError::InvalidParams("the push notification config needs a `url`".into())
    })?;
    let parsed = reqwest::Url::parse(&url)
        .map_err(|e| A2aError::InvalidParams(format!("`url` `{url}` is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(A2aError::InvalidParams(format!(
            "`url` `{url}` is not an http or https URL"
        )));
    }
    let authentication = match c.authentication {
        None => None,
        Some(a) => Some(Auth {
            scheme: a.scheme.filter(|s| !s.trim().is_empty()).ok_or_else(|| {
                A2aError::InvalidParams("`authentication.scheme` is required".into())
            })?,
            credentials: a.credentials.unwrap_or_default(),
        }),
    };
    Ok(PushConfig {
        task_id: task_id.to_string(),
        id: c
            .id
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| Uuid::new_v4().to_string()),
        url,
        token: c.token.filter(|t| !t.is_empty()),
        authentication,
        deleted: false,
    })
}

/// Saves the config a `SendMessage` carries (`configuration.taskPushNotificationConfig`) for
/// task `task_id` of context `ctx`, before its item is posted.
pub(super) async fn save_with_message(
    system: &AgentSystem,
    ctx: &str,
    task_id: &str,
    cfg: &Value,
) -> Result<(), A2aError> {
    let c = checked(task_id, parse(cfg)?)?;
    task::put(system, ctx, &c.key(), &Stored::Push(c.clone())).await
}

/// Checks a `SendMessage`'s config before anything is queued.
pub(super) fn check_with_message(cfg: &Value) -> Result<(), A2aError> {
    checked("", parse(cfg)?).map(|_| ())
}

fn task_param(v: &Value, name: &str) -> Result<String, A2aError> {
    v.get(name)
        .or_else(|| v.get("task_id"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| A2aError::InvalidParams(format!("`{name}` is required")))
}

/// The configs of task `id` (it must exist).
async fn configs_of(a2a: &A2a, id: &str) -> Result<(String, Vec<PushConfig>), A2aError> {
    let (_, v) = task::get(&a2a.system, id).await?;
    let ctx = v.task.context_id;
    let Contents { push, .. } = task::stored(&a2a.system, &ctx).await?;
    let live = push
        .into_iter()
        .filter(|c| c.task_id == id && !c.deleted)
        .collect();
    Ok((ctx, live))
}

/// `CreateTaskPushNotificationConfig`.
pub async fn create(a2a: &A2a, p: &Value) -> Result<Value, A2aError> {
    let task_id = task_param(p, "taskId")?;
    let c = checked(&task_id, parse(p)?)?;
    let (ctx, _) = configs_of(a2a, &task_id).await?;
    task::put(&a2a.system, &ctx, &c.key(), &Stored::Push(c.clone())).await?;
    Ok(c.json())
}

fn config_id(p: &Value) -> Result<String, A2aError> {
    p.get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| A2aError::InvalidParams("`id` (the config's) is required".into()))
}

/// `GetTaskPushNotificationConfig`.
pub async fn get(a2a: &A2a, p: &Value) -> Result<Value, A2aError> {
    let task_id = task_param(p, "taskId")?;
    let id = config_id(p)?;
    let (_, configs) = configs_of(a2a, &task_id).await?;
    configs
        .iter()
        .find(|c| c.id == id)
        .map(PushConfig::json)
        .ok_or_else(|| {
            A2aError::TaskNotFound(format!(
                "task `{task_id}` has no push notification config `{id}`"
            ))
        })
}

/// `ListTaskPushNotificationConfigs` (one page: a task has few).
pub async fn list(a2a: &A2a, p: &Value) -> Result<Value, A2aError> {
    let task_id = task_param(p, "taskId")?;
    let (_, configs) = configs_of(a2a, &task_id).await?;
    let configs: Vec<Value> = configs.iter().map(PushConfig::json).collect();
    Ok(json!({"configs": configs, "nextPageToken": ""}))
}

/// `DeleteTaskPushNotificationConfig`: idempotent; the config's pending notices are dropped.
pub async fn delete(a2a: &A2a, p: &Value) -> Result<Value, A2aError> {
    let task_id = task_param(p, "taskId")?;
    let id = config_id(p)?;
    let (ctx, configs) = configs_of(a2a, &task_id).await?;
    if let Some(c) = configs.into_iter().find(|c| c.id == id) {
        let gone = PushConfig { deleted: true, ..c };
        task::put(&a2a.system, &ctx, &gone.key(), &Stored::Push(gone.clone())).await?;
    }
    Ok(json!({}))
}

// ---- delivery ----

/// The contexts with notices to deliver, by when the next is due; shared by the watcher (which
/// pokes a context when its state shows pending notices) and the deliverer.
#[derive(Clone, Default)]
pub struct Pusher {
    due: Arc<Mutex<HashMap<String, u64>>>,
    wake: Arc<Notify>,
}

impl Pusher {
    /// Context `ctx` has notices due now.
    pub fn poke(&self, ctx: &str) {
        self.set_due(ctx, task::now_ms());
        self.wake.notify_one();
    }

    fn set_due(&self, ctx: &str, at: u64) {
        if let Ok(mut due) = self.due.lock() {
            let e = due.entry(ctx.to_string()).or_insert(at);
            *e = (*e).min(at);
        }
    }

    fn take_due(&self, now: u64) -> Vec<String> {
        let Ok(mut due) = self.due.lock() else {
            return Vec::new();
        };
        let ready: Vec<String> = due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(c, _)| c.clone())
            .collect();
        for c in &ready {
            due.remove(c);
        }
        ready
    }
}

/// Starts the deliverer: a sweep of every context now and every [`SWEEP_EVERY`], and the
/// delivery of due notices whenever the watcher pokes a context or a retry falls due.
pub fn start(a2a: A2a) {
    let client = match reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "push notifications: no HTTP client; none will be sent");
            return;
        }
    };
    actix_rt::spawn(async move {
        let in_flight: Arc<Mutex<HashSet<String>>> = Arc::default();
        let mut sweep = tokio::time::interval(SWEEP_EVERY);
        loop {
            let mut shutdown = a2a.shutdown.clone();
            tokio::select! {
                _ = sweep.tick() => sweep_contexts(&a2a).await,
                _ = a2a.pusher.wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = shutdown.changed() => return,
            }
            for ctx in a2a.pusher.take_due(task::now_ms()) {
                if a2a.system.deps().is_owned_elsewhere(&ctx) {
                    continue; // its owner delivers (its sweep finds them after a takeover)
                }
                if !in_flight.lock().is_ok_and(|mut s| s.insert(ctx.clone())) {
                    a2a.pusher.set_due(&ctx, task::now_ms() + 500);
                    continue;
                }
                let (a2a, client, in_flight) = (a2a.clone(), client.clone(), in_flight.clone());
                actix_rt::spawn(async move {
                    match drain(&a2a, &client, &ctx).await {
                        Ok(Some(next)) => a2a.pusher.set_due(&ctx, next),
                        Ok(None) => {}
                        Err(e) => {
                            tracing::warn!(context = %ctx, error = %e, "delivering push notifications");
                            a2a.pusher.set_due(&ctx, task::now_ms() + FIRST_BACKOFF_MS);
                        }
                    }
                    if let Ok(mut s) = in_flight.lock() {
                        s.remove(&ctx);
                    }
                });
            }
        }
    });
}

/// Reads every context of the exposed types again (writing the notices of states a crash left
/// unnotified) and pokes those with pending notices.
async fn sweep_contexts(a2a: &A2a) {
    let roots = match a2a.system.deps().store.list_roots().await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "push notifications: listing contexts");
            return;
        }
    };
    for r in roots {
        if !a2a.serves(&r.agent_type) || a2a.system.deps().is_owned_elsewhere(&r.id) {
            continue;
        }
        let has_configs = task::stored(&a2a.system, &r.id)
            .await
            .is_ok_and(|c| !c.push.is_empty());
        if !has_configs {
            continue;
        }
        match task::reconcile(&a2a.system, &r.id).await {
            Ok(Some((seen, _))) if seen.push_pending => a2a.pusher.poke(&r.id),
            Ok(_) => {}
            Err(e) => tracing::warn!(context = %r.id, error = %e, "push notifications: sweep"),
        }
    }
}

/// Posts context `ctx`'s due notices; answers when the next pending one is due (`None`: none
/// is pending).
async fn drain(a2a: &A2a, client: &reqwest::Client, ctx: &str) -> Result<Option<u64>, A2aError> {
    let system = &a2a.system;
    let Contents {
        push, mut notices, ..
    } = task::stored(system, ctx).await?;
    notices.retain(Notice::is_pending);
    notices.sort_by(|a, b| a.created_ms.cmp(&b.created_ms).then(a.id.cmp(&b.id)));
    let mut next: Option<u64> = None;
    // A config whose earlier notice is not out yet: its later ones wait (they go in order).
    let mut held: HashSet<(String, String)> = HashSet::new();
    for mut n in notices {
        let pair = (n.task_id.clone(), n.config_id.clone());
        let now = task::now_ms();
        if held.contains(&pair) {
            continue;
        }
        if n.next_at_ms > now {
            next = Some(next.map_or(n.next_at_ms, |x| x.min(n.next_at_ms)));
            held.insert(pair);
            continue;
        }
        let config = push
            .iter()
            .find(|c| c.task_id == n.task_id && c.id == n.config_id && !c.deleted);
        match config {
            None => {
                n.delivery = Delivery::GaveUp;
                n.last_error = Some("its config was deleted".into());
            }
            Some(c) => match post(client, c, &n).await {
                Ok(()) => {
                    n.delivery = Delivery::Delivered;
                    n.last_error = None;
                }
                Err(e) => {
                    n.attempts += 1;
                    n.last_error = Some(e.clone());
                    if n.attempts >= MAX_ATTEMPTS {
                        n.delivery = Delivery::GaveUp;
                        tracing::warn!(task = %n.task_id, url = %c.url, error = %e,
                            "push notification given up after {MAX_ATTEMPTS} attempts");
                    } else {
                        let wait = FIRST_BACKOFF_MS
                            .saturating_mul(1 << (n.attempts - 1).min(20))
                            .min(MAX_BACKOFF_MS);
                        n.next_at_ms = task::now_ms() + wait;
                        next = Some(next.map_or(n.next_at_ms, |x| x.min(n.next_at_ms)));
                        held.insert(pair);
                    }
                }
            },
        }
        task::put(system, ctx, &n.key(), &Stored::Notice(n.clone())).await?;
    }
    Ok(next)
}

/// One attempt: `POST` the `StreamResponse` with the config's token and authentication, and
/// the notice's id as `Idempotency-Key`. A 2xx answer delivers it.
async fn post(client: &reqwest::Client, c: &PushConfig, n: &Notice) -> Result<(), String> {
    let body = serde_json::to_vec(&n.payload).map_err(|e| e.to_string())?;
    let mut req = client
        .post(&c.url)
        .header("Content-Type", "application/a2a+json")
        .header("Idempotency-Key", n.id.to_string())
        .body(body);
    if let Some(t) = &c.token {
        req = req.header("X-A2A-Notification-Token", t);
    }
    if let Some(a) = c
        .authentication
        .as_ref()
        .filter(|a| !a.credentials.is_empty())
    {
        req = req.header("Authorization", format!("{} {}", a.scheme, a.credentials));
    }
    let res = req.send().await.map_err(|e| e.to_string())?;
    if res.status().is_success() {
        Ok(())
    } else {
        Err(format!("the receiver answered {}", res.status()))
    }
}
