//! Contexts and their tasks in the store: a `contextId` the client chose (on two processes, across a restart, gone with its agent), a task kept as a run with its outcome, tasks deleted with their context.

use super::*;

/// A `contextId` the client chooses opens one context, even when its first messages reach two
/// processes at once, and every method on either process finds it under that id.
#[test]
fn a_context_the_client_chose_is_one_context_on_two_processes_on_redis() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let redis = TestRedis::from_env();
    let (a, b) = two_processes_on(&redis);
    for binding in BINDINGS {
        client(
            &py,
            &["client_context"],
            &a.url,
            Some(&b.url),
            binding,
            None,
        );
    }
}

/// A client-chosen `contextId` names the same context after a restart (embedded store), and
/// is free again once that context is deleted: the next message opens a new one.
#[test]
fn a_context_the_client_chose_outlives_a_restart_and_goes_with_its_agent() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let embedded = || {
        env(&[
            ("AGENTD__STORE__KIND", "embedded".to_string()),
            ("AGENTD__STORE__DATA_DIR", dir.path().display().to_string()),
        ])
    };
    let mut p = AgentdProcess::start(&embedded());
    for binding in BINDINGS {
        let out = client_with(&py, &["client_context"], &p.url, None, binding, None, None);
        let (cid, agent) = (printed(&out, "CONTEXT"), printed(&out, "AGENT"));
        p.stop();
        p = AgentdProcess::start(&embedded());
        let again = |p: &AgentdProcess| {
            run_client(
                &py,
                &[
                    "client_context_again",
                    "--url",
                    &p.url,
                    "--binding",
                    binding,
                    "--context",
                    &cid,
                ],
            )
        };
        let out = again(&p);
        assert_eq!(printed(&out, "AGENT"), agent, "{out}");
        // Three first messages, a question answered, a stream, and this one.
        assert_eq!(printed(&out, "TASKS"), "6", "{out}");
        ureq::delete(&format!("{}/v1/agents/{agent}", p.url))
            .call()
            .expect("delete the context");
        let out = again(&p);
        assert_ne!(printed(&out, "AGENT"), agent, "{out}");
        assert_eq!(printed(&out, "TASKS"), "1", "{out}");
    }
}

/// Deleting a context agent deletes its tasks with it (they live under its keys, docs/a2a.md):
/// a task found before the delete is not found after it, and its context lists none.
/// An A2A task is a run of door `a2a` under its context agent (the store's `Runs` concern),
/// and its completed state the run's outcome: the answer, the thread entries it is made of, the
/// tokens used — what the LangGraph and MCP doors read runs by.
#[test]
fn an_a2a_task_is_kept_as_a_run_of_its_context_with_its_outcome() {
    use agentd_actors::{RunOrigin, RunState, Runs, Threads};
    let dir = tempfile::tempdir().unwrap();
    let p = AgentdProcess::start(&env(&[
        ("AGENTD__STORE__KIND", "embedded".to_string()),
        ("AGENTD__STORE__DATA_DIR", dir.path().display().to_string()),
    ]));
    let base = format!("{}/a2a/research", p.url);
    let send = r#"{"message":{"messageId":"m-run","role":"ROLE_USER","parts":[{"text":"hello"}]}}"#;
    let (status, sent) = raw("POST", &format!("{base}/message:send"), true, Some(send));
    assert_eq!(status, 200, "{sent}");
    assert_eq!(
        sent["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
    let id = sent["task"]["id"].as_str().unwrap().to_string();
    let agent = id.split('.').next().unwrap().to_string();
    p.stop();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = agentd_store::RedbStore::open(dir.path()).unwrap();
        let runs = store.runs(&agent).await.unwrap();
        assert_eq!(runs.len(), 1, "{runs:?}");
        let (run, outcome) = (&runs[0].run, runs[0].outcome.as_ref().expect("an outcome"));
        assert_eq!((run.id.as_str(), run.door.as_str()), (id.as_str(), "a2a"));
        assert_eq!(run.origin, RunOrigin::Door);
        assert_eq!(run.items.len(), 1);
        assert_eq!(run.fields["history"][0]["messageId"], "m-run");
        assert_eq!(outcome.state, RunState::Completed);
        assert_eq!(outcome.answer.as_deref(), Some("echo: hello"));
        let thread = store.thread(&agent).await.unwrap();
        let answered: Vec<_> = thread
            .iter()
            .filter(|e| outcome.answer_entries.contains(&e.id))
            .map(|e| e.text.as_str())
            .collect();
        assert_eq!(
            answered,
            ["echo: hello"],
            "the answer's entries in the thread"
        );
        assert!(outcome.usage.total() > 0, "{:?}", outcome.usage);
    });
}

#[test]
fn deleting_a_context_deletes_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let p = AgentdProcess::start(&env(&[
        ("AGENTD__STORE__KIND", "embedded".to_string()),
        ("AGENTD__STORE__DATA_DIR", dir.path().display().to_string()),
    ]));
    let base = format!("{}/a2a/research", p.url);
    let send = r#"{"message":{"messageId":"m-del","role":"ROLE_USER","parts":[{"text":"hello"}]}}"#;
    let (status, sent) = raw("POST", &format!("{base}/message:send"), true, Some(send));
    assert_eq!(status, 200, "{sent}");
    let id = sent["task"]["id"].as_str().unwrap().to_string();
    let ctx = sent["task"]["contextId"].as_str().unwrap().to_string();
    let agent = id.split('.').next().unwrap().to_string();
    let listed = |p: &AgentdProcess| {
        let url = format!("{}/a2a/research/tasks?contextId={ctx}", p.url);
        let (status, body) = raw("GET", &url, true, None);
        assert_eq!(status, 200, "{body}");
        body["tasks"].as_array().map_or(0, Vec::len)
    };
    assert_eq!(raw("GET", &format!("{base}/tasks/{id}"), true, None).0, 200);
    assert_eq!(listed(&p), 1);
    ureq::delete(&format!("{}/v1/agents/{agent}", p.url))
        .call()
        .expect("delete the context");
    let (status, body) = raw("GET", &format!("{base}/tasks/{id}"), true, None);
    assert_eq!(status, 404, "the task went with its context: {body}");
    assert_eq!(listed(&p), 0, "the context lists no task");
}
