//! `GetTask` and `ListTasks`.

use super::params::{boolean, history_length, number, params, required_id};
use crate::a2a::A2a;
use crate::a2a::error::A2aError;
use crate::a2a::task::{self, State, TaskView, task_json};
use serde::Deserialize;
use serde_json::{Value, json};

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
        Some(id) => super::context::find(a2a, agent_type, id)
            .await?
            .map(|c| c.agent)
            .into_iter()
            .collect(),
        None => contexts_of(a2a, agent_type).await?,
    };
    let mut views = Vec::new();
    for ctx in contexts {
        let Some((seen, vs)) = task::reconcile(&a2a.system, &ctx).await? else {
            continue;
        };
        if *seen.rec.agent_type != *agent_type {
            continue;
        }
        views.extend(vs);
    }
    views.retain(|v| {
        state.is_none_or(|s| v.state() == s) && after.is_none_or(|a| v.outcome.at_ms >= a)
    });
    views.sort_by(|a, b| {
        b.outcome
            .at_ms
            .cmp(&a.outcome.at_ms)
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
                .position(|v| (v.outcome.at_ms, v.task.id.as_str()) < (ms, id))
                .unwrap_or(views.len())
        }
    };
    let page: Vec<&TaskView> = views.iter().skip(start).take(page_size).collect();
    let next = if start + page.len() < total {
        page.last()
            .map(|v| format!("{}~{}", v.outcome.at_ms, v.task.id))
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
        if *r.agent_type == *agent_type && task::is_context(&a2a.system, &r.id).await? {
            out.push(r.id);
        }
    }
    Ok(out)
}
