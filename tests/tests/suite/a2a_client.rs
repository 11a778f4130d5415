//! agentd as an A2A *client*: a provider of `backend = "a2a"` whose agents' turns are answered
//! by a remote agent written with the official SDK's server classes (`tests/a2a/remote.py`,
//! `a2a-sdk` installed by `scripts/test.sh` into `target/.venv-a2a`). The remote is a Manage
//! worker (sync and async, one remote context per named thread), a `spawn_agent` child, a root
//! that asks a question through `input-required`, streams its answer as `text_delta` events,
//! answers with data parts and reports its tokens, and has its task cancelled with the agent,
//! in one process on the embedded store; each message carries the turn's `traceparent`.
//! `a2a_client_processes` runs it with real agentd processes: across a `kill -9`, across two
//! processes on Redis, and agentd as the remote. The tests skip, saying so, only when the venv
//! is missing: CI runs `scripts/test.sh`, which
//! always installs it.

use agentd_models::{ModelRouter, ScriptedModel};
use agentd_proto::{AgentStatus, Control, Event, InboxItem, ManageOptions, Role};
use agentd_tests::a2a_remote::{Options, RemoteAgent, python};
use agentd_tests::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const SCRIPT: &str = r#"
[[rule]]
agent = "lead"
role = "user"
contains = "From Ops"
text = "Noted the forward."

[[rule]]
agent = "lead"
role = "tool"
text = "Tool said: {{input}}"

[[rule]]
agent = "lead"
text = "lead here"
"#;

/// A system on the embedded store (in the directory it answers with) whose `ops` worker (of
/// `lead`) is the remote agent (provider `remote`).
async fn system(remote: &RemoteAgent) -> (TestSystem, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let script =
        ScriptedModel::from_toml_str(SCRIPT, Arc::new(agentd_actors::SystemClock)).unwrap();
    let model = ModelRouter::new(Arc::new(script)).with("remote", remote.backend());
    let mut types = default_types(ManageOptions::default());
    for t in &mut types {
        if t.name == "ops" {
            t.provider = Some("remote".into());
        }
        if t.name == "subagent" || t.name == "plain" {
            t.workers.clear();
        }
    }
    let mut sub = agent_type("remote_sub", "Remote sub-agent", &[]);
    sub.provider = Some("remote".into());
    types.push(sub);
    let sys = TestSystem::builder()
        .model(Arc::new(model))
        .embedded(dir.path())
        .types(types)
        .config(|c| {
            c.providers.insert("remote".into());
        })
        .start()
        .await;
    (sys, dir)
}

async fn manage(sys: &TestSystem, caller: &str, args: Value) -> Value {
    sys.system
        .invoke_tool(Some(caller), "Manage", args)
        .await
        .expect("Manage")
}

macro_rules! remote_or_skip {
    ($streams:expr) => {{
        let Some(py) = python() else {
            eprintln!(
                "SKIPPED: the A2A SDK is not installed (target/.venv-a2a); `bash scripts/test.sh` installs it"
            );
            return;
        };
        RemoteAgent::start(&py, $streams)
    }};
}

#[actix_rt::test]
async fn a_remote_agent_answers_as_a_sync_manage_worker_in_one_remote_context() {
    for streams in [false, true] {
        let remote = remote_or_skip!(streams);
        let (sys, _dir) = system(&remote).await;
        let lead = sys.root("lead", None).await;
        let send = |message: &str, alias: &str| json!({"command": "send_message", "worker": "Ops", "message": message, "threadAlias": alias});
        let first = manage(&sys, &lead.id, send("hello there", "r")).await;
        assert_eq!(first["status"], "ok", "{first}");
        assert_eq!(first["messages"], json!(["remote #1 heard: hello there"]));
        let child = first["childThreadId"].as_str().unwrap().to_string();
        // The same named thread is the same remote conversation.
        let second = manage(&sys, &lead.id, send("and again", "r")).await;
        assert_eq!(second["childThreadId"], child.as_str());
        assert_eq!(second["messages"], json!(["remote #2 heard: and again"]));
        // Another named thread is another remote context.
        let other = manage(&sys, &lead.id, send("elsewhere", "s")).await;
        assert_eq!(other["messages"], json!(["remote #1 heard: elsewhere"]));

        let received = remote.received();
        assert_eq!(received.len(), 3, "{received:?}");
        assert_eq!(received[0]["contextId"], received[1]["contextId"]);
        assert_ne!(received[0]["contextId"], received[2]["contextId"]);
        // Message ids derive from the input entries: the first is the child's first entry's.
        let thread = sys.thread(&child).await;
        assert_eq!(
            received[0]["messageId"],
            json!(format!("agentd-{}", thread[0].id))
        );
        let rec = sys.wait_for_status(&child, AgentStatus::Idle).await;
        let session: Value = serde_json::from_str(
            &rec.agent_cli
                .and_then(|c| c.session_id)
                .expect("the remote context on the record"),
        )
        .unwrap();
        assert_eq!(session["contextId"], received[0]["contextId"]);
        assert_eq!(
            sys.system.deps().model.backend_of(Some("remote")),
            "a2a",
            "streams: {streams}"
        );
        // Each message carried the W3C trace context of the turn it answers (telemetry off:
        // the turn's own, which its record keeps; tests/tests/suite/telemetry.rs has the
        // `chat` span's with export on).
        let other_child = other["childThreadId"].as_str().unwrap();
        let rec = sys.wait_for_status(other_child, AgentStatus::Idle).await;
        let turn = rec.trace.expect("the turn's trace context");
        assert_eq!(
            received[2]["traceparent"],
            json!(turn.to_string()),
            "streams: {streams}"
        );
    }
}

#[actix_rt::test]
async fn a_remote_agent_answers_an_async_manage_worker_and_the_answer_is_forwarded() {
    let remote = remote_or_skip!(true);
    let (sys, _dir) = system(&remote).await;
    let lead = sys.root("lead", None).await;
    let sent = manage(
        &sys,
        &lead.id,
        json!({"command": "send_message", "worker": "Ops", "message": "status please", "threadAlias": "bg", "mode": "async"}),
    )
    .await;
    let child = sent["childThreadId"].as_str().unwrap().to_string();
    sys.wait_for_entry(&child, Role::Assistant, "remote #1 heard: status please")
        .await;
    sys.wait_for_entry(&lead.id, Role::User, "remote #1 heard: status please")
        .await;
    assert_eq!(remote.received().len(), 1);
}

#[actix_rt::test]
async fn a_streaming_remote_sends_text_deltas_and_a_spawned_remote_yields_its_answer() {
    let remote = remote_or_skip!(true);
    let (sys, _dir) = system(&remote).await;
    let mut events = sys.events();
    let lead = sys.root("lead", None).await;
    let child = sys
        .spawn_child(&lead.id, "remote_sub", "count the ships")
        .await;
    let mut deltas = String::new();
    while deltas != "remote #1 heard: count the ships" {
        let e = next_event(
            &mut events,
            "the remote's text deltas",
            |e| matches!(e, Event::TextDelta { agent_id, .. } if *agent_id == child),
        )
        .await;
        if let Event::TextDelta { text, .. } = e {
            deltas.push_str(&text);
        }
    }
    let rec = sys.wait_for_status(&child, AgentStatus::Completed).await;
    assert_eq!(
        rec.result.as_deref(),
        Some(&json!("remote #1 heard: count the ships"))
    );
}

#[actix_rt::test]
async fn input_required_makes_the_agent_wait_and_the_answer_goes_to_the_same_remote_task() {
    for streams in [true, false] {
        let remote = remote_or_skip!(streams);
        let (sys, _dir) = system(&remote).await;
        let ops = sys.root("ops", Some("ask me where")).await;
        let rec = sys
            .wait_for_status(&ops.id, AgentStatus::WaitingQuestion)
            .await;
        assert_eq!(rec.status_reason.as_deref(), Some("Which region?"));
        let shown = agentd_proto::view::AgentSummary::of(&rec);
        assert_eq!(
            shown.remote_task_id.as_deref(),
            remote.received()[0]["taskId"].as_str(),
            "inspect names the remote task that waits"
        );
        sys.system
            .provide(&ops.id, AgentStatus::WaitingQuestion, "north")
            .await
            .unwrap();
        // The answer reaches the remote as agentd writes it in the thread.
        sys.wait_for_entry(&ops.id, Role::Assistant, "region noted: Answer: north")
            .await;
        let received = remote.received();
        assert_eq!(received.len(), 2, "{received:?}");
        assert_eq!(
            received[0]["taskId"], received[1]["taskId"],
            "the answer continues the remote task"
        );
        let task = remote.task(&received[0]["taskId"]);
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    }
}

#[actix_rt::test]
async fn a_remotes_data_parts_are_json_text_and_its_reported_tokens_count() {
    for streams in [true, false] {
        let remote = remote_or_skip!(streams);
        let (sys, _dir) = system(&remote).await;
        let ops = sys.root("ops", Some("data please")).await;
        // (Protocol Buffers' JSON writes the `Struct`'s number as a double.)
        sys.wait_for_entry(&ops.id, Role::Assistant, "counted\n{\"ships\":3.0}")
            .await;
        // The remote reports its tokens under `agentd.usage`: they are the agent's usage,
        // which its budgets count.
        let rec = sys.wait_for_status(&ops.id, AgentStatus::Idle).await;
        assert_eq!(
            (rec.usage.input, rec.usage.output),
            (11, 7),
            "streams: {streams}"
        );
    }
    // A budget of fewer tokens than the remote reports pauses the agent after its answer.
    let remote = remote_or_skip!(true);
    let (sys, _dir) = system(&remote).await;
    let capped = sys
        .system
        .spawn(agentd_proto::SpawnRequest {
            agent_type: Some("ops".into()),
            prompt: Some("data please".into()),
            budget: Some(agentd_proto::Budget {
                max_tokens: Some(10),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let rec = sys.wait_for_status(&capped.id, AgentStatus::Paused).await;
    assert_eq!(
        rec.status_reason.as_deref(),
        Some("budget_exceeded: tokens")
    );
}

#[actix_rt::test]
async fn cancel_terminate_and_interrupt_cancel_the_agents_remote_task() {
    let remote = remote_or_skip!(true);
    let (sys, _dir) = system(&remote).await;
    let ops = sys.root("ops", Some("slow work")).await;
    wait_until("the remote to receive the message", || async {
        !remote.received().is_empty()
    })
    .await;
    // Wait for the first streamed event to have named the task.
    tokio::time::sleep(Duration::from_millis(300)).await;
    sys.system.control(&ops.id, Control::Cancel).await.unwrap();
    let task_id = remote.received()[0]["taskId"].clone();
    wait_until("the remote task to be cancelled", || async {
        remote.task(&task_id)["status"]["state"] == "TASK_STATE_CANCELED"
    })
    .await;
    // A question the remote waits on is cancelled with its agent too.
    let asker = sys.root("ops", Some("ask me now")).await;
    sys.wait_for_status(&asker.id, AgentStatus::WaitingQuestion)
        .await;
    let waiting = remote.received()[1]["taskId"].clone();
    sys.system
        .control(&asker.id, Control::Terminate)
        .await
        .unwrap();
    wait_until("the waiting remote task to be cancelled", || async {
        remote.task(&waiting)["status"]["state"] == "TASK_STATE_CANCELED"
    })
    .await;
    // An interrupt ends the turn and cancels its remote task; the interrupting message is
    // the next one the remote gets.
    let busy = sys.root("ops", Some("slow again")).await;
    wait_until("the remote to receive the slow one", || async {
        remote.received().iter().any(|m| m["text"] == "slow again")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    sys.system
        .post(&busy.id, InboxItem::followup("never mind", true))
        .await
        .unwrap();
    let slow = remote
        .received()
        .into_iter()
        .find(|m| m["text"] == "slow again")
        .map(|m| m["taskId"].clone())
        .unwrap_or_default();
    wait_until("the interrupted remote task to be cancelled", || async {
        remote.task(&slow)["status"]["state"] == "TASK_STATE_CANCELED"
    })
    .await;
    wait_until("the interrupting message to reach the remote", || async {
        remote
            .received()
            .iter()
            .any(|m| m["text"].as_str().is_some_and(|t| t.contains("never mind")))
    })
    .await;
}

#[actix_rt::test]
async fn a_remote_serving_http_json_only_answers_asks_and_is_cancelled() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    for streams in [true, false] {
        let remote = RemoteAgent::start_with(
            &py,
            Options {
                streams,
                rest: true,
                ..Options::default()
            },
        );
        let (sys, _dir) = system(&remote).await;
        let lead = sys.root("lead", None).await;
        for (n, message) in ["hello there", "and again"].iter().enumerate() {
            let r = manage(
                &sys,
                &lead.id,
                json!({"command": "send_message", "worker": "Ops", "message": message, "threadAlias": "r"}),
            )
            .await;
            assert_eq!(
                r["messages"],
                json!([format!("remote #{} heard: {message}", n + 1)]),
                "streams: {streams}"
            );
        }
        let ops = sys.root("ops", Some("ask me where")).await;
        sys.wait_for_status(&ops.id, AgentStatus::WaitingQuestion)
            .await;
        sys.system
            .provide(&ops.id, AgentStatus::WaitingQuestion, "north")
            .await
            .unwrap();
        sys.wait_for_entry(&ops.id, Role::Assistant, "region noted: Answer: north")
            .await;
        let slow = sys.root("ops", Some("slow work")).await;
        wait_until("the remote to receive the slow one", || async {
            remote.received().iter().any(|m| m["text"] == "slow work")
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        sys.system.control(&slow.id, Control::Cancel).await.unwrap();
        let task = remote
            .received()
            .into_iter()
            .find(|m| m["text"] == "slow work")
            .map(|m| m["taskId"].clone())
            .unwrap_or_default();
        if streams {
            // A whole `SendMessage` names its task only in its answer: a call dropped before
            // then cannot cancel it (docs/a2a.md).
            wait_until("the remote task to be cancelled", || async {
                remote.task(&task)["status"]["state"] == "TASK_STATE_CANCELED"
            })
            .await;
        }
        let calls = remote.calls();
        assert!(
            calls
                .iter()
                .all(|c| c.starts_with("GET ") || c.starts_with("POST ")),
            "HTTP+JSON only: {calls:?}"
        );
    }
}
