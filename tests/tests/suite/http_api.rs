//! The HTTP API of the real binary answers every refusal as `{code, message}` with a stable
//! code (the framework's own refusals included), and takes an optional body as absent only
//! when it is empty: a malformed one is refused and changes nothing. A body naming a field its
//! route does not take, and an agent id that is not one, are `invalid_argument`; a body that
//! stops short of its `Content-Length` is `408 request_timeout` after
//! `server.request_timeout_ms`.

use agentd_tests::AgentdProcess;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// `(status, content type, body as JSON or Null)` of any request, whatever its status.
fn raw(
    p: &AgentdProcess,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Option<&[u8]>,
) -> (u16, String, Value) {
    let mut req = ureq::request(method, &format!("{}{path}", p.url));
    if let Some(ct) = content_type {
        req = req.set("content-type", ct);
    }
    let res = match body {
        Some(b) => req.send_bytes(b),
        None => req.call(),
    };
    let r = match res {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {path}: {e}"),
    };
    let status = r.status();
    let ct = r.header("content-type").unwrap_or("").to_string();
    let text = r.into_string().unwrap_or_default();
    (
        status,
        ct,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

/// Asserts an error answer: the status, JSON, and `{code, message}` with `code`.
fn assert_error(got: (u16, String, Value), status: u16, code: &str, what: &str) {
    let (s, ct, body) = got;
    assert_eq!(s, status, "{what}: {body}");
    assert!(
        ct.starts_with("application/json"),
        "{what}: content type {ct}"
    );
    assert_eq!(body["code"], code, "{what}: {body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {body}"
    );
}

const JSON: Option<&str> = Some("application/json");

fn start(dir: &std::path::Path, extra: &[(&str, String)]) -> AgentdProcess {
    let script = dir.join("script.toml");
    std::fs::write(&script, "[[rule]]\ntext = \"done: {{input}}\"\n").unwrap();
    let mut env = vec![
        ("AGENTD__STORE__KIND", "memory".to_string()),
        ("AGENTD__MODEL__SCRIPT", script.display().to_string()),
    ];
    env.extend(extra.iter().cloned());
    AgentdProcess::start(&env)
}

fn spawn(p: &AgentdProcess, prompt: &str) -> String {
    let id = p.spawn("subagent", prompt);
    let answer = format!("done: {prompt}");
    p.wait_for("the first answer", |p| p.texts(&id).contains(&answer));
    id
}

#[test]
fn every_refusal_is_json_with_a_stable_code() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(
        dir.path(),
        &[("AGENTD__SERVER__MAX_BODY_BYTES", "4096".to_string())],
    );
    let id = spawn(&p, "first");
    let messages = format!("/v1/agents/{id}/messages");

    // What actix's JSON extractor refuses.
    assert_error(
        raw(&p, "POST", "/v1/agents", JSON, Some(b"{")),
        400,
        "invalid_argument",
        "invalid JSON",
    );
    assert_error(
        raw(&p, "POST", "/v1/agents", JSON, Some(br#"{"title": 5}"#)),
        400,
        "invalid_argument",
        "a wrong type",
    );
    assert_error(
        raw(&p, "POST", &messages, JSON, Some(b"{}")),
        400,
        "invalid_argument",
        "a missing field",
    );
    // serde reads a struct from a JSON array too; a body must be an object.
    let before = p.get("/v1/agents")["agents"].as_array().unwrap().len();
    for (path, body) in [
        ("/v1/agents", &b"[null, null]"[..]),
        (messages.as_str(), br#"["hi", false]"#),
        ("/v1/commands", br#"["inspect"]"#),
    ] {
        assert_error(
            raw(&p, "POST", path, JSON, Some(body)),
            400,
            "invalid_argument",
            "an array body",
        );
    }
    let after = p.get("/v1/agents")["agents"].as_array().unwrap().len();
    assert_eq!(after, before, "an array body spawned nothing");
    assert_error(
        raw(&p, "POST", &messages, Some("text/plain"), Some(b"hi")),
        415,
        "unsupported_media_type",
        "a wrong content type",
    );
    assert_error(
        raw(&p, "POST", &messages, None, Some(br#"{"text": "hi"}"#)),
        415,
        "unsupported_media_type",
        "no content type",
    );
    let big = serde_json::to_vec(&json!({"text": "x".repeat(8000)})).unwrap();
    assert_error(
        raw(&p, "POST", &messages, JSON, Some(&big)),
        413,
        "payload_too_large",
        "a body over server.max_body_bytes",
    );
    // What the query and path extractors refuse.
    assert_error(
        raw(&p, "GET", "/v1/agents?parent_id=a&parent_id=b", None, None),
        400,
        "invalid_argument",
        "a query field given twice",
    );

    // No such route, no such method.
    for path in ["/v1/nope", "/nope", "/v1/agents/x/nope"] {
        assert_error(raw(&p, "GET", path, None, None), 404, "not_found", path);
    }
    for (method, path) in [("DELETE", "/v1/tree"), ("PUT", "/v1/info")] {
        assert_error(
            raw(&p, method, path, None, None),
            405,
            "method_not_allowed",
            path,
        );
    }

    // The budget route is in the route table (so in the OpenAPI document) and answers.
    let doc = p.get("/v1/openapi.json");
    assert!(
        doc["paths"]["/v1/agents/{id}/budget"]["post"].is_object(),
        "{}",
        doc["paths"]
    );
    let v = p
        .post(
            &format!("/v1/agents/{id}/budget"),
            json!({"max_tokens": 1000}),
        )
        .unwrap();
    assert_eq!(v["budget"]["max_tokens"], 1000);
    p.stop();
}

#[test]
fn malformed_optional_bodies_of_reset_and_restore_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(
        dir.path(),
        &[("AGENTD__SERVER__MAX_BODY_BYTES", "4096".to_string())],
    );
    let id = spawn(&p, "first");
    let cp = p
        .post(&format!("/v1/agents/{id}/checkpoints"), json!({}))
        .unwrap()["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    p.post(
        &format!("/v1/agents/{id}/messages"),
        json!({"text": "second"}),
    )
    .unwrap();
    p.wait_for("the second answer", |p| {
        p.texts(&id).contains(&"done: second".to_string())
    });
    let four = vec!["first", "done: first", "second", "done: second"];
    assert_eq!(p.texts(&id), four);
    // A second checkpoint, the newest: a restore without a body goes back to it, not to `cp`.
    p.post(&format!("/v1/agents/{id}/checkpoints"), json!({}))
        .unwrap();

    // restore: a truncated or mistyped body is not "no body" (the newest checkpoint).
    let restore = format!("/v1/agents/{id}/restore");
    for bad in [
        &br#"{"checkpoint_id": "01a2"#[..],
        br#"{"checkpoint_id": "01a2"}"#,
        br#"{"checkpoint_id": 5}"#,
        br#"{"checkpoint": "x"}"#,
        b"[]",
        b"null",
    ] {
        let what = String::from_utf8_lossy(bad).into_owned();
        assert_error(
            raw(&p, "POST", &restore, JSON, Some(bad)),
            400,
            "invalid_argument",
            &what,
        );
        assert_eq!(p.texts(&id), four, "{what} restored nothing");
    }
    // reset: a malformed body is not a reset without a message, nor is one over the limit.
    let reset = format!("/v1/agents/{id}/reset");
    let big = serde_json::to_vec(&json!({"message": "x".repeat(8000)})).unwrap();
    assert_error(
        raw(&p, "POST", &reset, JSON, Some(&big)),
        413,
        "payload_too_large",
        "an optional body over server.max_body_bytes",
    );
    for bad in [&b"{"[..], br#"{"message": 5}"#, br#"{"mesage": "typo"}"#] {
        let what = String::from_utf8_lossy(bad).into_owned();
        assert_error(
            raw(&p, "POST", &reset, JSON, Some(bad)),
            400,
            "invalid_argument",
            &what,
        );
    }
    // Nothing was posted: a message sent now finds the whole conversation.
    p.post(
        &format!("/v1/agents/{id}/messages"),
        json!({"text": "third"}),
    )
    .unwrap();
    p.wait_for("the third answer", |p| {
        p.texts(&id).contains(&"done: third".to_string())
    });
    assert_eq!(p.texts(&id).len(), 6, "{:?}", p.texts(&id));

    // Absent bodies (empty, `{}`) restore the newest checkpoint; the field names one.
    let (status, _, _) = raw(&p, "POST", &restore, None, Some(b""));
    assert_eq!(status, 200);
    assert_eq!(p.texts(&id), four, "the newest checkpoint, not the first");
    p.post(
        &format!("/v1/agents/{id}/messages"),
        json!({"text": "fourth"}),
    )
    .unwrap();
    p.wait_for("the fourth answer", |p| {
        p.texts(&id).contains(&"done: fourth".to_string())
    });
    assert_eq!(raw(&p, "POST", &restore, JSON, Some(b"{}")).0, 200);
    assert_eq!(p.texts(&id), four, "the newest checkpoint again");
    let body = serde_json::to_vec(&json!({"checkpointId": cp})).unwrap();
    assert_eq!(raw(&p, "POST", &restore, JSON, Some(&body)).0, 200);
    assert_eq!(p.texts(&id), vec!["first", "done: first"], "the one named");
    assert_eq!(raw(&p, "POST", &reset, None, None).0, 202);
    p.wait_for("an empty session", |p| p.texts(&id).is_empty());
    assert_eq!(raw(&p, "POST", &reset, JSON, Some(b"{}")).0, 202);
    let body = serde_json::to_vec(&json!({"message": "again"})).unwrap();
    assert_eq!(raw(&p, "POST", &reset, JSON, Some(&body)).0, 202);
    p.wait_for("a session seeded by the reset", |p| {
        p.texts(&id) == vec!["again", "done: again"]
    });
    p.stop();
}

/// The roots there are now.
fn roots(p: &AgentdProcess) -> usize {
    p.get("/v1/agents")["agents"].as_array().unwrap().len()
}

/// Asserts `invalid_argument` whose message names `field`.
fn assert_names(got: (u16, String, Value), field: &str, what: &str) {
    let message = got.2["message"].as_str().unwrap_or("").to_string();
    assert_error(got, 400, "invalid_argument", what);
    assert!(message.contains(&format!("`{field}`")), "{what}: {message}");
}

#[test]
fn a_body_with_a_field_its_route_does_not_take_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(dir.path(), &[]);
    let id = spawn(&p, "first");
    let before = roots(&p);
    let post = |path: &str, body: Value| {
        raw(
            &p,
            "POST",
            path,
            JSON,
            Some(&serde_json::to_vec(&body).unwrap()),
        )
    };

    // The typo that spawned an agent that never runs.
    assert_names(
        post("/v1/agents", json!({"agent_type": "lead", "promt": "hi"})),
        "promt",
        "spawn",
    );
    // Fields of nested objects too.
    assert_names(
        post(
            "/v1/agents",
            json!({"agent_type": "lead", "budget": {"max_token": 5}}),
        ),
        "max_token",
        "spawn budget",
    );
    assert_names(
        post(
            "/v1/agents",
            json!({"agent_type": "lead", "manage": {"mode": "async", "mod": "x"}}),
        ),
        "mod",
        "spawn manage",
    );
    // A nested object is an object: serde would read a struct from a list of its fields too.
    for (path, body) in [
        (
            "/v1/agents",
            json!({"agent_type": "lead", "budget": [null, null]}),
        ),
        (
            "/v1/commands",
            json!({"type": "control", "agent_id": id, "control": ["pause"]}),
        ),
    ] {
        let got = post(path, body.clone());
        let message = got.2["message"].as_str().unwrap_or("").to_string();
        assert_error(got, 400, "invalid_argument", &body.to_string());
        assert!(message.contains("expected an object"), "{body}: {message}");
    }
    assert_eq!(roots(&p), before, "nothing was spawned");

    let agent = |route: &str| format!("/v1/agents/{id}/{route}");
    let call = "0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162";
    for (path, body, field) in [
        (
            agent("messages"),
            json!({"text": "hi", "interupt": true}),
            "interupt",
        ),
        (
            agent("control"),
            json!({"control": "pause", "force": true}),
            "force",
        ),
        (agent("dependency"), json!({"value": "x", "why": 1}), "why"),
        (agent("answer"), json!({"answer": "x", "why": 1}), "why"),
        (agent("budget"), json!({"max_token": 10}), "max_token"),
        (agent("env"), json!({"env": {}, "vars": {}}), "vars"),
        (agent("reset"), json!({"mesage": "x"}), "mesage"),
        (agent("restore"), json!({"checkpoint": "x"}), "checkpoint"),
        (
            agent(&format!("tool_results/{call}")),
            json!({"result": 1, "status": "ok"}),
            "status",
        ),
        (
            agent(&format!("tool_results/{call}")),
            json!({"error": {"message": "no", "detail": "x"}}),
            "detail",
        ),
        (
            agent(&format!("approvals/{call}")),
            json!({"approve": true, "note": "x"}),
            "note",
        ),
        (
            "/v1/tools/current_time".to_string(),
            json!({"agent_id": id, "arg": {}}),
            "arg",
        ),
        (
            "/v1/commands".to_string(),
            json!({"type": "inspect", "agent_id": id, "verbose": true}),
            "verbose",
        ),
        (
            "/v1/commands".to_string(),
            json!({"type": "spawn", "agent_type": "lead", "promt": "hi"}),
            "promt",
        ),
    ] {
        assert_names(post(&path, body.clone()), field, &format!("{path} {body}"));
    }
    assert_eq!(roots(&p), before, "nothing was spawned");
    assert_eq!(p.status(&id), "idle", "nothing was applied");
    assert_eq!(p.texts(&id), vec!["first", "done: first"]);

    // The camelCase names stay accepted, and the aliases of each route.
    let v = post(
        "/v1/agents",
        json!({"agentType": "subagent", "prompt": "second", "parentId": id, "dependsOn": [],
               "allowedTools": [], "contextFiles": [], "manage": {"syncTimeoutMs": 5}}),
    );
    assert_eq!(v.0, 201, "{}", v.2);
    assert_eq!(v.2["parent_id"], id.as_str());
    assert_eq!(post(&agent("messages"), json!({"message": "third"})).0, 202);
    p.wait_for("the third answer", |p| {
        p.texts(&id).contains(&"done: third".to_string())
    });
    assert_eq!(post(&agent("control"), json!({"action": "pause"})).0, 200);
    assert_eq!(post(&agent("control"), json!({"action": "resume"})).0, 200);
    p.stop();
}

#[test]
fn a_malformed_agent_id_in_a_path_or_a_query_is_invalid_argument() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(dir.path(), &[]);
    let id = spawn(&p, "first");
    let unknown = "0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162";
    let call = "0190a5f2-7b6e-7cc0-8a4b-1d2e3f405163";
    for (method, path, body) in [
        ("GET", "/v1/agents/zzz".to_string(), None),
        ("DELETE", "/v1/agents/zzz".to_string(), None),
        ("GET", "/v1/agents/zzz/thread".to_string(), None),
        ("GET", "/v1/agents/zzz/children".to_string(), None),
        ("GET", "/v1/agents/zzz/tools".to_string(), None),
        ("GET", "/v1/agents/zzz/checkpoints".to_string(), None),
        ("GET", format!("/v1/agents/zzz/checkpoints/{call}"), None),
        ("POST", "/v1/agents/zzz/compact".to_string(), None),
        (
            "POST",
            "/v1/agents/zzz/messages".to_string(),
            Some(json!({"text": "hi"})),
        ),
        (
            "POST",
            "/v1/agents/zzz/control".to_string(),
            Some(json!({"control": "pause"})),
        ),
        (
            "POST",
            "/v1/agents/zzz/tools/current_time".to_string(),
            Some(json!({})),
        ),
        (
            "POST",
            format!("/v1/agents/zzz/tool_results/{call}"),
            Some(json!({"result": 1})),
        ),
        (
            "POST",
            format!("/v1/agents/zzz/approvals/{call}"),
            Some(json!({"approve": true})),
        ),
        // Not even a uuid's form: too short, braces, uuid without dashes.
        ("GET", format!("/v1/agents/{}", &id[..35]), None),
        ("GET", format!("/v1/agents/{{{id}}}"), None),
        ("GET", format!("/v1/agents/{}", id.replace('-', "")), None),
        ("GET", "/v1/agents?parent_id=zzz".to_string(), None),
        ("GET", "/v1/events?agent_id=zzz".to_string(), None),
        ("GET", "/v1/events?root_id=zzz".to_string(), None),
    ] {
        let body = body.map(|b| serde_json::to_vec(&b).unwrap());
        let ct = body.as_ref().map(|_| "application/json");
        let got = raw(&p, method, &path, ct, body.as_deref());
        let message = got.2["message"].as_str().unwrap_or("").to_string();
        assert_error(got, 400, "invalid_argument", &format!("{method} {path}"));
        assert!(message.contains("not an agent id"), "{path}: {message}");
    }
    // A well-formed id of no agent is still `agent_not_found`, in a query too.
    for path in [
        format!("/v1/agents/{unknown}"),
        format!("/v1/agents/{unknown}/thread"),
        format!("/v1/agents?parent_id={unknown}"),
        format!("/v1/events?agent_id={unknown}"),
    ] {
        assert_error(
            raw(&p, "GET", &path, None, None),
            404,
            "agent_not_found",
            &path,
        );
    }
    let children = p.get(&format!("/v1/agents?parent_id={id}"));
    assert_eq!(children["agents"], json!([]));
    assert_eq!(p.status(&id), "idle");
    p.stop();
}

/// Sends `head` and `body` on a raw connection to `p`, with `pause` between the body's bytes
/// (none: all at once), and answers what the server sent until it closed the connection (or
/// 10 s passed).
fn send_raw(p: &AgentdProcess, head: &str, body: &[u8], pause: Option<Duration>) -> String {
    let addr = p.url.trim_start_matches("http://");
    let mut con = TcpStream::connect(addr).unwrap();
    con.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    con.write_all(head.as_bytes()).unwrap();
    let mut reader = con.try_clone().unwrap();
    let body = body.to_vec();
    let writer = std::thread::spawn(move || match pause {
        None => {
            let _ = con.write_all(&body);
        }
        Some(pause) => {
            for byte in body {
                // The server closes the connection once the deadline passes.
                if con.write_all(&[byte]).is_err() {
                    break;
                }
                std::thread::sleep(pause);
            }
        }
    });
    let mut answer = Vec::new();
    let _ = reader.read_to_end(&mut answer);
    let _ = writer.join();
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn a_body_that_stops_short_of_its_length_is_answered_408_after_the_request_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(
        dir.path(),
        &[("AGENTD__SERVER__REQUEST_TIMEOUT_MS", "300".to_string())],
    );
    let before = roots(&p);
    let head = |length: usize| {
        format!(
            "POST /v1/agents HTTP/1.1\r\nHost: agentd\r\nContent-Type: application/json\r\n\
             Content-Length: {length}\r\n\r\n"
        )
    };
    let body = br#"{"agent_type": "subagent", "prompt": "never whole"}"#;
    for (what, pause) in [
        ("a body that stops", None),
        ("a body that trickles", Some(Duration::from_millis(50))),
    ] {
        let started = Instant::now();
        // The length announces more than will ever come.
        let answer = send_raw(&p, &head(body.len() + 100), body, pause);
        let waited = started.elapsed();
        assert!(answer.starts_with("HTTP/1.1 408"), "{what}: {answer:?}");
        assert!(
            answer.to_ascii_lowercase().contains("connection: close"),
            "{what}: {answer:?}"
        );
        let json = &answer[answer.find("\r\n\r\n").unwrap() + 4..];
        let error: Value = serde_json::from_str(json).unwrap();
        assert_eq!(error["code"], "request_timeout", "{what}: {error}");
        assert!(waited >= Duration::from_millis(300), "{what}: {waited:?}");
    }
    assert_eq!(roots(&p), before, "nothing was spawned");
    // A whole body within the time is served as always.
    let answer = send_raw(
        &p,
        &head(body.len()).replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n"),
        body,
        None,
    );
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer:?}");
    assert_eq!(roots(&p), before + 1);
    p.stop();
}
