//! Routes about the service itself: liveness, readiness, metrics, info, this API's document,
//! the trees, the work queue, and any command as the Redis command stream takes it.

use super::{ApiResult, ApiState, run, scope, within};
use crate::errors::JsonObject;
use actix_web::{HttpRequest, HttpResponse, web};
use agentd_proto::{AgentTrees, AgentdError, Command, ErrorCode, WorkQueue};

/// Liveness: the process is up.
#[utoipa::path(
    get, path = "/healthz", tag = "operations",
    responses(
        (status = 200, description = "Up", body = super::bodies::Health),
    )
)]
pub(crate) async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(super::bodies::Health {
        status: "ok".into(),
    })
}

/// Prometheus metrics (text exposition format 0.0.4).
#[utoipa::path(
    get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "The metrics", body = String, content_type = "text/plain"),
    )
)]
pub(crate) async fn metrics(st: web::Data<ApiState>) -> HttpResponse {
    let m = agentd_observe::metrics::global();
    if let Some(bus) = &st.redis {
        m.set(
            "agentd_partitions_owned",
            "Partitions this process owns.",
            &[],
            bus.owned().len() as f64,
        );
        for (k, pending, lag) in bus.partition_stats().await {
            let k = k.to_string();
            m.set(
                "agentd_stream_pending",
                "Entries read but not acknowledged, per partition.",
                &[("partition", &k)],
                pending as f64,
            );
            m.set(
                "agentd_stream_lag",
                "Entries not yet read, per partition.",
                &[("partition", &k)],
                lag as f64,
            );
        }
    }
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(m.render())
}

/// Readiness: the process serves what it can. With Redis, from what its lease rounds last
/// learnt (no request to Redis per probe): ready while it reaches Redis at all, naming the
/// partitions it owns but cannot serve now (their node failing over or unreachable); without,
/// the store answers a point read.
#[utoipa::path(
    get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready: it serves its partitions but those in `partitions_degraded`", body = super::bodies::Ready),
        (status = 503, description = "`unavailable`: it reaches neither Redis nor its store now", body = AgentdError),
    )
)]
pub(crate) async fn readyz(st: web::Data<ApiState>) -> ApiResult {
    let ready = match &st.redis {
        Some(bus) => {
            let r = bus.readiness();
            if !r.serving {
                return Err(AgentdError::new(
                    ErrorCode::Unavailable,
                    "redis: no heartbeat or lease renewal reached Redis within the fence time",
                )
                .into());
            }
            super::bodies::Ready {
                status: "ready".into(),
                partitions_owned: Some(r.owned),
                partitions_degraded: Some(r.degraded),
            }
        }
        None => {
            st.system
                .deps()
                .store
                .agent_exists(READINESS_PROBE)
                .await
                .map_err(|e| AgentdError::new(ErrorCode::Unavailable, e.to_string()))?;
            super::bodies::Ready {
                status: "ready".into(),
                partitions_owned: None,
                partitions_degraded: None,
            }
        }
    };
    Ok(HttpResponse::Ok().json(ready))
}

/// The agent id a readiness probe looks up in a store without Redis: one point read, whatever
/// the store holds.
const READINESS_PROBE: &str = "00000000-0000-0000-0000-000000000000";

/// Version, model backend and providers, store, agent types, owned partitions.
#[utoipa::path(
    get, path = "/v1/info", tag = "operations",
    responses(
        (status = 200, description = "About this process", body = super::bodies::Info),
    )
)]
pub(crate) async fn info(st: web::Data<ApiState>) -> HttpResponse {
    let live_agents = st.system.live_count().await.ok();
    let deps = st.system.deps();
    let agent_types = deps
        .config
        .types
        .iter()
        .map(|t| super::bodies::AgentTypeInfo {
            name: t.name.clone(),
            title: t.title.clone(),
            description: t.description.clone(),
            workers: t.workers.clone(),
        })
        .collect();
    let mcp_servers = deps
        .tools
        .mcp()
        .map(|m| m.status())
        .unwrap_or_default()
        .into_iter()
        .map(|s| super::bodies::McpServerInfo {
            name: s.name,
            transport: s.transport.to_string(),
            up: s.up,
            tools: s.tools,
            skipped: s.skipped,
            missing: s.missing,
            last_error: s.last_error,
        })
        .collect();
    let names = deps.config.providers.iter().map(|n| Some(n.as_str()));
    let providers = std::iter::once(None)
        .chain(names)
        .map(|name| super::bodies::ProviderInfo {
            name: name.unwrap_or("default").to_string(),
            backend: deps.model.backend_of(name).to_string(),
            capabilities: deps.model.capabilities_of(name).into(),
        })
        .collect();
    HttpResponse::Ok().json(super::bodies::Info {
        service: "agentd".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        model_backend: deps.model.backend().into(),
        providers,
        store: deps.store.kind().into(),
        agent_types,
        process_id: st.redis.as_ref().map(|r| r.process_id().to_string()),
        partitions_owned: st.redis.as_ref().map(|r| r.owned()),
        live_agents,
        mcp_servers,
        trace_url: st.trace_url.clone(),
    })
}

/// Every tree with statuses, tokens and cost rolled up.
#[utoipa::path(
    get, path = "/v1/tree", tag = "agents",
    responses(
        (status = 200, description = "One node per root", body = AgentTrees),
    )
)]
pub(crate) async fn tree(st: web::Data<ApiState>, req: HttpRequest) -> ApiResult {
    let roots = within(&st, st.system.tree(scope(&req).as_deref())).await?;
    Ok(HttpResponse::Ok().json(AgentTrees { roots }))
}

/// Execute any command (same schema as the Redis command stream).
#[utoipa::path(
    post, path = "/v1/commands", tag = "agents",
    request_body(content = Command, content_type = "application/json"),
    responses(
        (status = 200, description = "The command's result (its shape is the matching route's)", body = Value),
        (status = 409, description = "`invalid_transition`: the agent's status does not allow it", body = AgentdError),
        (status = 429, description = "`depth_limit`, `fanout_limit` or `budget_exceeded`", body = AgentdError),
    )
)]
pub(crate) async fn command(
    st: web::Data<ApiState>,
    req: HttpRequest,
    body: JsonObject<Command>,
) -> ApiResult {
    Ok(HttpResponse::Ok().json(run(&st, &req, body.into_inner()).await?))
}

/// Agents with work pending or running, by priority then age, with their queue state.
#[utoipa::path(
    get, path = "/v1/queue", tag = "agents",
    responses(
        (status = 200, description = "The work queue", body = WorkQueue),
    )
)]
pub(crate) async fn queue(st: web::Data<ApiState>, req: HttpRequest) -> ApiResult {
    let tasks = within(&st, st.system.queue(scope(&req).as_deref())).await?;
    Ok(HttpResponse::Ok().json(WorkQueue { tasks }))
}
