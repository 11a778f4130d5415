//! The two bindings of A2A 1.0 over HTTP: JSON-RPC 2.0 (`POST /a2a/<type>`, section 9 of the
//! specification) and HTTP+JSON (`/a2a/<type>/message:send`, … section 11), their version
//! check (`A2A-Version`, header or query parameter; none is 0.3, which this server does not
//! serve), and Server-Sent Events for the streaming methods.

use super::error::A2aError;
use super::{A2a, card, push, service, shape, stream};
use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use agentd_proto::strict::UniqueKeys;
use futures::{Stream, StreamExt};
use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// Registers the card routes and both bindings.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource(card::WELL_KNOWN).route(web::get().to(root_card)))
        .service(web::resource("/a2a/{agent_type}").route(web::post().to(jsonrpc)))
        .service(web::resource("/a2a/{agent_type}/{tail:.*}").to(rest));
}

/// The base of the cards' URLs: `public_url`, else the request's scheme and host.
fn base_url(a2a: &A2a, req: &HttpRequest) -> String {
    if !a2a.public_url.trim().is_empty() {
        return a2a.public_url.trim_end_matches('/').to_string();
    }
    let info = req.connection_info();
    format!("{}://{}", info.scheme(), info.host())
}

async fn root_card(a2a: web::Data<A2a>, req: HttpRequest) -> HttpResponse {
    let first = a2a.exposed.first().cloned().unwrap_or_default();
    serve_card(&a2a, &req, &first)
}

fn serve_card(a2a: &A2a, req: &HttpRequest, agent_type: &str) -> HttpResponse {
    match card::card(a2a, agent_type, &base_url(a2a, req)) {
        Some(c) => HttpResponse::Ok().json(c),
        None => not_served(agent_type),
    }
}

fn not_served(agent_type: &str) -> HttpResponse {
    HttpResponse::NotFound().json(agentd_proto::AgentdError::new(
        agentd_proto::ErrorCode::NotFound,
        format!("no A2A agent `{agent_type}` here ([a2a] expose lists the agent types served)"),
    ))
}

/// The version the request asks for, checked: 1.0 (a patch, or `1`, too). None is 0.3.
fn check_version(req: &HttpRequest) -> Result<(), A2aError> {
    let header = req
        .headers()
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_string());
    let query = query(req).remove("A2A-Version");
    let asked = header.or(query).filter(|v| !v.is_empty());
    match asked.as_deref() {
        Some(v) if is_1_0(v) => Ok(()),
        other => Err(A2aError::version(other)),
    }
}

fn is_1_0(v: &str) -> bool {
    let mut parts = v.split('.');
    parts.next() == Some("1") && parts.next().is_none_or(|minor| minor == "0")
}

fn query(req: &HttpRequest) -> HashMap<String, String> {
    web::Query::<HashMap<String, String>>::from_query(req.query_string())
        .map(web::Query::into_inner)
        .unwrap_or_default()
}

/// The end of a stream: when the service stops.
async fn stopped(mut shutdown: crate::sse::Shutdown) {
    loop {
        if *shutdown.borrow() || shutdown.changed().await.is_err() {
            return;
        }
    }
}

/// `values` as Server-Sent Events, each framed by `frame`.
fn sse(
    a2a: &A2a,
    values: impl Stream<Item = Value> + 'static,
    frame: impl Fn(Value) -> Value + 'static,
) -> HttpResponse {
    let body = values
        .take_until(stopped(a2a.shutdown.clone()))
        .map(move |v| Ok::<_, actix_web::Error>(Bytes::from(format!("data: {}\n\n", frame(v)))));
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("cache-control", "no-cache"))
        .streaming(body)
}

// ---- JSON-RPC 2.0 ----

fn rpc_error(id: Value, e: &A2aError) -> HttpResponse {
    HttpResponse::Ok().json(json!({"jsonrpc": "2.0", "id": id, "error": e.jsonrpc()}))
}

fn rpc_result(id: Value, result: Value) -> HttpResponse {
    HttpResponse::Ok().json(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// A JSON-RPC request, checked as a JSON-RPC 2.0 request object: its id, method and params
/// (which [`shape::check`] checks against the method).
fn rpc_request(body: &[u8]) -> Result<(Value, String, Value), (Value, A2aError)> {
    // A key given twice is refused, as at every door (`agentd_proto::strict`).
    let v: Value = serde_json::from_slice::<UniqueKeys>(body)
        .map(|v| v.0)
        .map_err(|e| {
            (
                Value::Null,
                A2aError::Parse(format!("the body is not valid JSON: {e}")),
            )
        })?;
    let Value::Object(obj) = v else {
        let what = if v.is_array() {
            "batch requests are not supported: send one request object"
        } else {
            "a JSON-RPC request is an object"
        };
        return Err((Value::Null, A2aError::InvalidRequest(what.into())));
    };
    let id = obj.get("id").cloned().unwrap_or(Value::Null);
    if !matches!(id, Value::Null | Value::String(_) | Value::Number(_)) {
        return Err((
            Value::Null,
            A2aError::InvalidRequest("`id` must be a string, a number or null".into()),
        ));
    }
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((
            id,
            A2aError::InvalidRequest("`jsonrpc` must be \"2.0\"".into()),
        ));
    }
    let Some(method) = obj.get("method").and_then(Value::as_str) else {
        return Err((
            id,
            A2aError::InvalidRequest("`method` must be a string".into()),
        ));
    };
    let params = obj.get("params").cloned().unwrap_or(Value::Null);
    Ok((id, method.to_string(), params))
}

async fn jsonrpc(
    a2a: web::Data<A2a>,
    req: HttpRequest,
    path: web::Path<String>,
    body: Bytes,
) -> HttpResponse {
    let agent_type = path.into_inner();
    if !a2a.serves(&agent_type) {
        return not_served(&agent_type);
    }
    let (id, method, params) = match rpc_request(&body) {
        Ok(r) => r,
        Err((id, e)) => return rpc_error(id, &e),
    };
    // The order of the SDK's server: the method and the params' types, then the version,
    // then what the operation asks of the values.
    if let Err(e) = shape::check(&method, &params).and_then(|()| check_version(&req)) {
        return rpc_error(id, &e);
    }
    let streaming = matches!(method.as_str(), "SendStreamingMessage" | "SubscribeToTask");
    if streaming {
        let started = match method.as_str() {
            "SendStreamingMessage" => match service::send(&a2a, &agent_type, &params).await {
                Ok(sent) => stream::follow(&a2a, &sent.task_id).await,
                Err(e) => Err(e),
            },
            _ => match service::subscribable(&a2a, &params).await {
                Ok(task) => stream::follow(&a2a, &task).await,
                Err(e) => Err(e),
            },
        };
        return match started {
            Ok(s) => sse(
                &a2a,
                s,
                move |v| json!({"jsonrpc": "2.0", "id": id.clone(), "result": v}),
            ),
            Err(e) => rpc_error(id, &e),
        };
    }
    let res = match method.as_str() {
        "SendMessage" => send_blocking(&a2a, &agent_type, &params).await,
        "GetTask" => service::get_task(&a2a, &params).await,
        "ListTasks" => service::list_tasks(&a2a, &agent_type, &params).await,
        "CancelTask" => service::cancel_task(&a2a, &params).await,
        "CreateTaskPushNotificationConfig" => push::create(&a2a, &params).await,
        "GetTaskPushNotificationConfig" => push::get(&a2a, &params).await,
        "ListTaskPushNotificationConfigs" => push::list(&a2a, &params).await,
        "DeleteTaskPushNotificationConfig" => push::delete(&a2a, &params).await,
        "GetExtendedAgentCard" => Err(A2aError::Unsupported(
            "this agent has no extended card (capabilities.extendedAgentCard is false)".into(),
        )),
        other => Err(A2aError::MethodNotFound(format!(
            "`{other}` is not a method of A2A 1.0"
        ))),
    };
    match res {
        Ok(v) => rpc_result(id, v),
        Err(e) => rpc_error(id, &e),
    }
}

/// `SendMessage`: the task once it is terminal or asks for input, or at once when the client
/// asked to return immediately.
async fn send_blocking(a2a: &A2a, agent_type: &str, params: &Value) -> Result<Value, A2aError> {
    let sent = service::send(a2a, agent_type, params).await?;
    let view = if sent.return_immediately {
        super::task::get(&a2a.system, &sent.task_id).await?.1
    } else {
        service::wait(a2a, &sent.task_id).await?
    };
    Ok(json!({"task": super::task::task_json(&view, sent.history, true)}))
}

// ---- HTTP+JSON ----

fn rest_error(e: &A2aError) -> HttpResponse {
    let status = StatusCode::from_u16(e.http().0).unwrap_or(StatusCode::BAD_REQUEST);
    HttpResponse::build(status).json(e.rest())
}

fn rest_body(body: &[u8]) -> Result<Value, A2aError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Map::new()));
    }
    let v: Value = serde_json::from_slice::<UniqueKeys>(body)
        .map(|v| v.0)
        .map_err(|e| A2aError::Parse(format!("the body is not valid JSON: {e}")))?;
    if !v.is_object() {
        return Err(A2aError::InvalidParams(
            "the body must be a JSON object".into(),
        ));
    }
    Ok(v)
}

/// The query parameters as a request object (their values as strings; the operations read
/// numbers and booleans from strings too).
fn query_object(req: &HttpRequest) -> Value {
    let mut m = Map::new();
    for (k, v) in query(req) {
        if k != "A2A-Version" {
            m.insert(k, Value::String(v));
        }
    }
    Value::Object(m)
}

async fn rest(
    a2a: web::Data<A2a>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: Bytes,
) -> HttpResponse {
    let (agent_type, tail) = path.into_inner();
    if !a2a.serves(&agent_type) {
        return not_served(&agent_type);
    }
    let method = req.method().as_str().to_string();
    if format!("/{tail}") == card::WELL_KNOWN && method == "GET" {
        return serve_card(&a2a, &req, &agent_type);
    }
    // The order of the SDK's server: the route, then the version, then the body.
    let route = match Route::of(&method, &tail) {
        Some(r) => r,
        None => {
            return rest_error(&A2aError::MethodNotFound(format!(
                "`{method} /a2a/{agent_type}/{tail}` is not a route of A2A 1.0's HTTP+JSON \
                 binding"
            )));
        }
    };
    if let Err(e) = check_version(&req) {
        return rest_error(&e);
    }
    match rest_call(&a2a, &req, &agent_type, route, &body).await {
        Ok(Reply::Json(v)) => HttpResponse::Ok().json(v),
        Ok(Reply::Stream(task)) => match stream::follow(&a2a, &task).await {
            Ok(s) => sse(&a2a, s, |v| v),
            Err(e) => rest_error(&e),
        },
        Err(e) => rest_error(&e),
    }
}

enum Reply {
    Json(Value),
    /// The stream of this task.
    Stream(String),
}

/// A route of the HTTP+JSON binding (section 11.3), with the ids its path names.
enum Route<'a> {
    Send,
    Stream,
    ListTasks,
    ExtendedCard,
    GetTask(&'a str),
    Cancel(&'a str),
    Subscribe(&'a str),
    CreateConfig(&'a str),
    ListConfigs(&'a str),
    GetConfig(&'a str, &'a str),
    DeleteConfig(&'a str, &'a str),
}

impl<'a> Route<'a> {
    /// The route `method` on `tail` (the path after `/a2a/<type>/`); `None`: no such route.
    fn of(method: &str, tail: &'a str) -> Option<Route<'a>> {
        match (method, tail) {
            ("POST", "message:send") => return Some(Route::Send),
            ("POST", "message:stream") => return Some(Route::Stream),
            ("GET", "tasks") => return Some(Route::ListTasks),
            ("GET", "extendedAgentCard") => return Some(Route::ExtendedCard),
            _ => {}
        }
        let rest = tail.strip_prefix("tasks/")?;
        if let Some((task_id, configs)) = rest.split_once('/') {
            return match (method, configs.split_once('/')) {
                ("POST", None) if configs == "pushNotificationConfigs" => {
                    Some(Route::CreateConfig(task_id))
                }
                ("GET", None) if configs == "pushNotificationConfigs" => {
                    Some(Route::ListConfigs(task_id))
                }
                (_, Some(("pushNotificationConfigs", id)))
                    if !id.is_empty() && !id.contains('/') =>
                {
                    match method {
                        "GET" => Some(Route::GetConfig(task_id, id)),
                        "DELETE" => Some(Route::DeleteConfig(task_id, id)),
                        _ => None,
                    }
                }
                _ => None,
            };
        }
        if let Some(id) = rest.strip_suffix(":cancel") {
            return (method == "POST").then_some(Route::Cancel(id));
        }
        if let Some(id) = rest.strip_suffix(":subscribe") {
            return matches!(method, "POST" | "GET").then_some(Route::Subscribe(id));
        }
        (method == "GET" && !rest.is_empty() && !rest.contains(':')).then_some(Route::GetTask(rest))
    }
}

async fn rest_call(
    a2a: &A2a,
    req: &HttpRequest,
    agent_type: &str,
    route: Route<'_>,
    body: &[u8],
) -> Result<Reply, A2aError> {
    let config = |task_id: &str, id: Option<&str>, mut p: Value| {
        p["taskId"] = json!(task_id);
        if let Some(id) = id {
            p["id"] = json!(id);
        }
        p
    };
    let v = match route {
        Route::Send => send_blocking(a2a, agent_type, &rest_body(body)?).await?,
        Route::Stream => {
            let sent = service::send(a2a, agent_type, &rest_body(body)?).await?;
            return Ok(Reply::Stream(sent.task_id));
        }
        Route::ListTasks => service::list_tasks(a2a, agent_type, &query_object(req)).await?,
        Route::ExtendedCard => {
            return Err(A2aError::Unsupported(
                "this agent has no extended card (capabilities.extendedAgentCard is false)".into(),
            ));
        }
        Route::GetTask(id) => {
            let mut p = query_object(req);
            p["id"] = json!(id);
            service::get_task(a2a, &p).await?
        }
        Route::Cancel(id) => service::cancel_task(a2a, &json!({"id": id})).await?,
        Route::Subscribe(id) => {
            let task = service::subscribable(a2a, &json!({"id": id})).await?;
            return Ok(Reply::Stream(task));
        }
        Route::CreateConfig(task) => {
            push::create(a2a, &config(task, None, rest_body(body)?)).await?
        }
        Route::ListConfigs(task) => push::list(a2a, &config(task, None, query_object(req))).await?,
        Route::GetConfig(task, id) => push::get(a2a, &config(task, Some(id), json!({}))).await?,
        Route::DeleteConfig(task, id) => {
            push::delete(a2a, &config(task, Some(id), json!({}))).await?
        }
    };
    Ok(Reply::Json(v))
}
