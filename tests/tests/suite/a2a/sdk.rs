//! The official SDK's client scenarios on both bindings (embedded store, a token, two processes on Redis, every method through a process that does not own the context), cards, and requests wrong in several ways answered as the SDK's own server answers them.

use super::*;

const ALL: [&str; 9] = [
    "discovery",
    "basics",
    "raw_errors",
    "cancel",
    "streaming",
    "resubscribe",
    "input_required",
    "agent_output",
    "discovery",
];

#[test]
fn the_sdk_client_works_against_agentd_with_the_embedded_store() {
    let Some(py) = python() else {
        eprintln!(
            "SKIPPED: the A2A SDK is not installed (target/.venv-a2a); `bash scripts/test.sh` installs it"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let p = AgentdProcess::start(&env(&[
        ("AGENTD__STORE__KIND", "embedded".to_string()),
        ("AGENTD__STORE__DATA_DIR", dir.path().display().to_string()),
    ]));
    for binding in BINDINGS {
        client(&py, &ALL, &p.url, None, binding, None);
    }
}

#[test]
fn the_sdk_client_needs_the_token_when_the_api_has_one() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let p = AgentdProcess::start(&env(&[
        ("AGENTD__STORE__KIND", "memory".to_string()),
        ("AGENTD__AUTH__TOKEN", "s3cret".to_string()),
    ]));
    for binding in BINDINGS {
        client(
            &py,
            &["discovery", "auth", "basics"],
            &p.url,
            None,
            binding,
            Some("s3cret"),
        );
    }
}

#[test]
fn the_sdk_client_works_across_two_agentd_processes_on_redis() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let redis = TestRedis::from_env();
    let (a, b) = two_processes_on(&redis);
    for binding in BINDINGS {
        // Each scenario's calls go to one process, its contexts live wherever their partition
        // is owned; a resubscription goes to the other process.
        client(&py, &ALL, &a.url, Some(&b.url), binding, None);
        client(
            &py,
            &["basics", "cancel", "resubscribe"],
            &b.url,
            Some(&a.url),
            binding,
            None,
        );
    }
}

/// Every method works on whichever process receives it: for a context owned by each
/// process, messages go through one process and gets, lists, cancels (queued and running),
/// a subscription and the answer to a question through the other, on both bindings.
#[test]
fn every_method_works_on_a_process_that_does_not_own_the_context() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let redis = TestRedis::from_env();
    let (a, b) = two_processes_on(&redis);
    for binding in BINDINGS {
        let contexts = format!("{},{}", context_owned_by(&a), context_owned_by(&b));
        let mut cmd = Command::new(&py);
        cmd.arg(root().join("tests/a2a/client.py"))
            .arg("any_process")
            .args(["--url", &a.url, "--url2", &b.url, "--binding", binding])
            .args(["--contexts", &contexts]);
        let out = cmd.output().expect("run the A2A client");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(&format!("ok any_process ({binding})")),
            "the A2A client failed ({binding}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn idle_contexts_close_and_type_files_give_the_cards_skills() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let p = AgentdProcess::start(&env(&[
        ("AGENTD__STORE__KIND", "embedded".to_string()),
        ("AGENTD__STORE__DATA_DIR", dir.path().display().to_string()),
        ("AGENTD__A2A__EXPOSE", "research,scout".to_string()),
        ("AGENTD__A2A__CONTEXT_IDLE_CLOSE_MS", "1000".to_string()),
        (
            "AGENTD__AGENTS__DIR",
            root().join("tests/a2a/types").display().to_string(),
        ),
    ]));
    for binding in BINDINGS {
        client(&py, &["skills", "idle_close"], &p.url, None, binding, None);
    }
}

/// A request wrong in more than one way gets the error the SDK's own server gives it: the
/// JSON-RPC method and the params' types before the `A2A-Version` (which the TCK does not
/// send), the HTTP+JSON route before the version, the version before the body. Each request
/// goes to the SDK's server (`tests/a2a/remote.py`) and to agentd, which must answer alike.
#[test]
fn requests_wrong_in_several_ways_get_the_error_the_sdk_server_gives() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let p = AgentdProcess::start(&env(&[("AGENTD__STORE__KIND", "memory".to_string())]));
    let sdk = agentd_tests::a2a_remote::RemoteAgent::start(&py, false);
    let sdk_url = sdk.card_url().replace("/.well-known/agent-card.json", "");
    let agentd = format!("{}/a2a/research", p.url);
    // (body, with the version header, the code both must answer)
    let rpc: [(&str, bool, i64); 12] = [
        (
            r#"{"jsonrpc":"2.0","id":"3","method":"SendMessageXXX","params":{}}"#,
            false,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"nonexistent/method","params":{}}"#,
            false,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"Nope","params":[1]}"#,
            false,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"SendMessage","params":{"message":{"parts":"invalid"}}}"#,
            false,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"GetTask","params":{"id":12345}}"#,
            false,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"ListTasks","params":{"pageSize":"abc"}}"#,
            false,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"configuration":{"returnImmediately":"yes"}}}"#,
            false,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":8,"method":"GetTask","params":{"id":"x"}}"#,
            false,
            -32009,
        ),
        (
            r#"{"jsonrpc":"2.0","id":9,"method":"SendMessage","params":{"message":{"kind":"message"}}}"#,
            false,
            -32009,
        ),
        (
            r#"{"jsonrpc":"1.0","id":10,"method":"Nope"}"#,
            false,
            -32600,
        ),
        (r#"{nope"#, false, -32700),
        (
            r#"{"jsonrpc":"2.0","id":11,"method":"Nope","params":{}}"#,
            true,
            -32601,
        ),
    ];
    for (body, versioned, code) in rpc {
        let (_, theirs) = raw("POST", &format!("{sdk_url}/"), versioned, Some(body));
        let (status, ours) = raw("POST", &agentd, versioned, Some(body));
        assert_eq!(
            theirs["error"]["code"], code,
            "the SDK's server, {body}: {theirs}"
        );
        assert_eq!(status, 200, "{body}: {ours}");
        assert_eq!(ours["error"]["code"], code, "agentd, {body}: {ours}");
        assert_eq!(ours["id"], theirs["id"], "{body}");
    }
    let sdk_rest = agentd_tests::a2a_remote::RemoteAgent::start_with(
        &py,
        agentd_tests::a2a_remote::Options {
            rest: true,
            ..Default::default()
        },
    );
    let rest_url = sdk_rest
        .card_url()
        .replace("/.well-known/agent-card.json", "");
    // (HTTP method, path, with the version header, body, the status both must answer)
    let routes: [(&str, &str, bool, Option<&str>, u16); 5] = [
        ("GET", "/nope", false, None, 404),
        ("POST", "/tasks/x:nope", false, Some("{}"), 404),
        ("GET", "/tasks/x", false, None, 400),
        ("POST", "/message:send", false, Some("{nope"), 400),
        ("GET", "/tasks/x", true, None, 404),
    ];
    for (method, path, versioned, body, status) in routes {
        let (theirs, their_body) = raw(method, &format!("{rest_url}{path}"), versioned, body);
        let (ours, our_body) = raw(method, &format!("{agentd}{path}"), versioned, body);
        assert_eq!(
            theirs, status,
            "the SDK's server, {method} {path}: {their_body}"
        );
        assert_eq!(ours, status, "agentd, {method} {path}: {our_body}");
    }
    // An A2A error's HTTP status and reason, as the specification's table (5.4) of 1.0.1 and
    // the SDK give them: a completed task cannot be cancelled.
    let cancel_completed = |base: &str| {
        let send =
            r#"{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hello"}]}}"#;
        let (status, sent) = raw("POST", &format!("{base}/message:send"), true, Some(send));
        assert_eq!(status, 200, "{base}: {sent}");
        assert_eq!(
            sent["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{sent}"
        );
        let id = sent["task"]["id"].as_str().unwrap().to_string();
        raw(
            "POST",
            &format!("{base}/tasks/{id}:cancel"),
            true,
            Some("{}"),
        )
    };
    let (theirs, their_body) = cancel_completed(&rest_url);
    let (ours, our_body) = cancel_completed(&agentd);
    assert_eq!((theirs, ours), (400, 400), "{their_body} {our_body}");
    let reason = |b: &serde_json::Value| b["error"]["details"][0]["reason"].clone();
    assert_eq!(reason(&our_body), reason(&their_body), "{our_body}");
    assert_eq!(reason(&our_body), "TASK_NOT_CANCELABLE");
}
