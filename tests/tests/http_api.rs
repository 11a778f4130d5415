//! The HTTP API of the real binary answers every refusal as `{code, message}` with a stable
//! code (the framework's own refusals included), and takes an optional body as absent only
//! when it is empty: a malformed one is refused and changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_tests::AgentdProcess;
use serde_json::{Value, json};

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

    // Absent bodies: empty, `{}`, or the fields themselves.
    let (status, _, _) = raw(&p, "POST", &restore, None, Some(b""));
    assert_eq!(status, 200);
    assert_eq!(p.texts(&id), vec!["first", "done: first"]);
    assert_eq!(raw(&p, "POST", &restore, JSON, Some(b"{}")).0, 200);
    let body = serde_json::to_vec(&json!({"checkpointId": cp})).unwrap();
    assert_eq!(raw(&p, "POST", &restore, JSON, Some(&body)).0, 200);
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
