//! Push notifications as the task map keeps them: a task's configs and the notices of its
//! state changes waiting in the context's outbox. [`reconcile`](super::reconcile) writes a
//! notice per live config when a task reaches a new state; the deliverer (`a2a/push.rs`) posts
//! them.

use super::TaskView;
use super::map::Stored;
use crate::a2a::error::A2aError;
use agentd_actors::AgentSystem;
use agentd_proto::ids::derived_id;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

/// `AuthenticationInfo`: the `Authorization` header a notification carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Auth {
    /// The HTTP scheme (`Bearer`, `Basic`, …).
    pub scheme: String,
    /// Its credentials.
    #[serde(default)]
    pub credentials: String,
}

/// A task's push notification config (`TaskPushNotificationConfig`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushConfig {
    /// The task.
    pub task_id: String,
    /// Its id, unique within the task.
    pub id: String,
    /// Where notifications are posted.
    pub url: String,
    /// Sent as `X-A2A-Notification-Token`.
    #[serde(default)]
    pub token: Option<String>,
    /// Sent as `Authorization: <scheme> <credentials>`.
    #[serde(default)]
    pub authentication: Option<Auth>,
    /// Deleted (the store keeps a tombstone: its notices are dropped).
    #[serde(default)]
    pub deleted: bool,
}

impl PushConfig {
    pub(in crate::a2a) fn key(&self) -> String {
        format!("{}#push:{}", self.task_id, self.id)
    }

    /// Its ProtoJSON.
    pub fn json(&self) -> Value {
        let mut v = json!({"id": self.id, "taskId": self.task_id, "url": self.url});
        if let Some(t) = &self.token {
            v["token"] = json!(t);
        }
        if let Some(a) = &self.authentication {
            v["authentication"] = json!({"scheme": a.scheme, "credentials": a.credentials});
        }
        v
    }
}

/// Where a notice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Not delivered yet.
    Pending,
    /// The receiver answered 2xx.
    Delivered,
    /// Attempts used up, or its config was deleted.
    GaveUp,
}

/// One notification in the outbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notice {
    /// Stable: the same state change of the same task for the same config has the same id.
    pub id: Uuid,
    /// The task.
    pub task_id: String,
    /// The config it goes to.
    pub config_id: String,
    /// The `StreamResponse` posted.
    pub payload: Value,
    /// Where it is.
    pub delivery: Delivery,
    /// Failed attempts so far.
    #[serde(default)]
    pub attempts: u32,
    /// Not before this, ms since the epoch.
    pub next_at_ms: u64,
    /// Why the last attempt failed.
    #[serde(default)]
    pub last_error: Option<String>,
    /// Written, ms since the epoch (the order notices go out in).
    pub created_ms: u64,
}

impl Notice {
    /// Whether it still waits to go out.
    pub fn is_pending(&self) -> bool {
        self.delivery == Delivery::Pending
    }

    pub(in crate::a2a) fn key(&self) -> String {
        format!("{}#notice:{}", self.task_id, self.id)
    }
}

/// Writes a notice of `v`'s state for each live config of its task that has none yet.
pub(in crate::a2a) async fn enqueue(
    system: &AgentSystem,
    configs: &[PushConfig],
    notices: &mut Vec<Notice>,
    v: &TaskView,
    input: Uuid,
) -> Result<(), A2aError> {
    let t = &v.task;
    for c in configs.iter().filter(|c| c.task_id == t.id && !c.deleted) {
        let id = derived_id(
            Uuid::try_parse(&t.context_id).unwrap_or_default(),
            &format!("push:{}:{}:{input}:{}", t.id, c.id, v.state().wire()),
        );
        if notices.iter().any(|n| n.id == id) {
            continue;
        }
        let now = super::now_ms();
        let n = Notice {
            id,
            task_id: t.id.clone(),
            config_id: c.id.clone(),
            payload: json!({"task": super::task_json(v, None, true)}),
            delivery: Delivery::Pending,
            attempts: 0,
            next_at_ms: now,
            last_error: None,
            created_ms: now,
        };
        // Only if new: another process reading the same state writes the same notice (same
        // id), which its deliverer may have delivered since; it is not put back to pending.
        super::put_new(system, &t.context_id, &n.key(), &Stored::Notice(n.clone())).await?;
        notices.push(n);
    }
    Ok(())
}
