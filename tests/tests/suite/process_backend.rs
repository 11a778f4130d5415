//! The process backend: one real OS process per agent, JSON lines, usage parsed from its
//! output, pause/resume/terminate observed on the process state, and a worker's forward sent
//! to the parent's process as input, never in the parent's own voice.

use agentd_actors::ModelClient;
use agentd_models::ProcessModel;
use agentd_models::process::is_stopped;
use agentd_proto::{AgentStatus, AsyncForward, Control, ManageOptions, Role};
use agentd_tests::*;
use std::sync::Arc;
use std::time::Duration;

/// An agent that writes the name of each signal it is sent to the file `$SIGNALS` (SIGTSTP and
/// SIGCONT, then goes on; SIGTERM, then exits): a pause that escalated to SIGSTOP at once, a
/// resume without SIGCONT, a cancel without SIGTERM or a terminate with it would show there.
const AGENT: &str = r#"#!/usr/bin/env bash
trap 'echo TSTP >> "$SIGNALS"' TSTP
trap 'echo CONT >> "$SIGNALS"' CONT
trap 'echo TERM >> "$SIGNALS"; exit 0' TERM
while true; do
  IFS= read -r line
  status=$?
  # Above 128: the read was cut by a signal whose trap ran; else 0 (a line) or the end of input.
  if [ $status -gt 128 ]; then continue; fi
  if [ $status -ne 0 ]; then exit 0; fi
  echo "chatter that is not JSON"
  echo "{\"text\":\"pid $$ at your service\",\"usage\":{\"input\":7,\"output\":3}}"
done
"#;

/// The signals an [`AGENT`] noted in `file`, in order.
fn signals(file: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A root of type `plain` whose process notes its signals in `file`, answered once.
async fn noting_signals(sys: &TestSystem, file: &std::path::Path) -> agentd_proto::AgentRecord {
    let a = sys
        .system
        .spawn(agentd_proto::SpawnRequest {
            agent_type: Some("plain".into()),
            prompt: Some("hello".into()),
            env: [("SIGNALS".to_string(), file.display().to_string())].into(),
            ..Default::default()
        })
        .await
        .unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "at your service")
        .await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await
}

/// A system whose agents each run `program` on `source` (written to a temporary file, kept as
/// long as the answer's directory) through the process backend.
async fn on_process_backend(
    program: &str,
    source: &str,
) -> (tempfile::TempDir, Arc<ProcessModel>, TestSystem) {
    on_process_backend_with(program, source, default_types(ManageOptions::default())).await
}

/// [`on_process_backend`] with these agent types.
async fn on_process_backend_with(
    program: &str,
    source: &str,
    types: Vec<agentd_actors::AgentType>,
) -> (tempfile::TempDir, Arc<ProcessModel>, TestSystem) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("agent");
    std::fs::write(&script, source).unwrap();
    let backend = Arc::new(ProcessModel::new(
        vec![program.into(), script.display().to_string()],
        Duration::from_millis(200),
        Duration::from_secs(10),
    ));
    let model: Arc<dyn ModelClient> = backend.clone();
    let sys = TestSystem::builder()
        .model(model)
        .types(types)
        .start()
        .await;
    (dir, backend, sys)
}

fn state_of(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit(')').next()?.trim_start().chars().next()
}

#[actix_rt::test]
async fn a_process_per_agent_follows_pause_resume_and_terminate() {
    let (dir, backend, sys) = on_process_backend("bash", AGENT).await;
    let noted = dir.path().join("signals-a");
    let rec = noting_signals(&sys, &noted).await;
    let a = rec.clone();
    let pid = backend.pid(&a.id).expect("a process runs for the agent");
    let t = sys.thread(&a.id).await;
    assert!(
        t.iter()
            .any(|e| e.text == format!("pid {pid} at your service"))
    );
    assert_eq!(
        (rec.usage.input, rec.usage.output),
        (7, 3),
        "usage parsed from the process output"
    );

    // Pause: SIGTSTP first; this agent only notes it, so SIGSTOP follows after the grace.
    sys.system.control(&a.id, Control::Pause).await.unwrap();
    wait_until("process stopped (SIGTSTP noted, then SIGSTOP)", || async {
        is_stopped(pid)
    })
    .await;
    assert_eq!(signals(&noted), vec!["TSTP"]);
    // Resume: SIGCONT.
    sys.system.control(&a.id, Control::Resume).await.unwrap();
    wait_until("process running again", || async { !is_stopped(pid) }).await;
    wait_until("SIGCONT noted", || async {
        signals(&noted) == vec!["TSTP", "CONT"]
    })
    .await;
    // Still the same process, and it still answers.
    sys.system.send(&a.id, "again", false).await.unwrap();
    wait_until("second answer", || async {
        sys.thread(&a.id)
            .await
            .iter()
            .filter(|e| e.role == Role::Assistant)
            .count()
            == 2
    })
    .await;
    assert_eq!(backend.pid(&a.id), Some(pid));

    // Terminate: SIGKILL, which no process can note (no SIGTERM before it).
    sys.system.control(&a.id, Control::Terminate).await.unwrap();
    wait_until("process gone and reaped (no zombie)", || async {
        state_of(pid).is_none()
    })
    .await;
    assert!(
        !signals(&noted).contains(&"TERM".to_string()),
        "terminate kills without a graceful SIGTERM: {:?}",
        signals(&noted)
    );
    assert_eq!(backend.pid(&a.id), None);
    // A follow-up starts a fresh process with the whole thread.
    sys.system.send(&a.id, "back again", false).await.unwrap();
    wait_until("a new process answers", || async {
        sys.thread(&a.id)
            .await
            .iter()
            .filter(|e| e.role == Role::Assistant)
            .count()
            == 3
    })
    .await;
    assert_ne!(backend.pid(&a.id), Some(pid));

    // Cancel: a graceful SIGTERM, which the process handles by exiting.
    let noted = dir.path().join("signals-b");
    let b = noting_signals(&sys, &noted).await;
    let pid = backend.pid(&b.id).expect("a process runs for the agent");
    sys.system.control(&b.id, Control::Cancel).await.unwrap();
    wait_until("the cancelled process gone", || async {
        state_of(pid).is_none()
    })
    .await;
    assert_eq!(signals(&noted).last().map(String::as_str), Some("TERM"));
}

const ENV_AGENT: &str = r#"#!/usr/bin/env bash
while IFS= read -r line; do
  echo "{\"text\":\"region=${REGION:-none} pid=$$\"}"
done
"#;

#[actix_rt::test]
async fn restoring_a_checkpoint_reinjects_its_environment_into_a_new_process() {
    let (_dir, backend, sys) = on_process_backend("bash", ENV_AGENT).await;
    let a = sys
        .system
        .spawn(agentd_proto::SpawnRequest {
            agent_type: Some("plain".into()),
            prompt: Some("where are you".into()),
            env: [("REGION".to_string(), "eu".to_string())].into(),
            ..Default::default()
        })
        .await
        .unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "region=eu")
        .await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    let first_pid = backend.pid(&a.id).unwrap();
    let cp = sys.system.checkpoint(&a.id).await.unwrap();

    // A new environment: the process is started again with it.
    sys.system
        .set_env(&a.id, [("REGION".to_string(), "us".to_string())].into())
        .await
        .unwrap();
    sys.system.send(&a.id, "and now", false).await.unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "region=us")
        .await;
    let second_pid = backend.pid(&a.id).unwrap();
    assert_ne!(first_pid, second_pid);
    wait_until("the old process is gone", || async {
        state_of(first_pid).is_none()
    })
    .await;

    // Restoring the checkpoint brings REGION=eu back, in a new process.
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    sys.system.restore(&a.id, Some(cp.id)).await.unwrap();
    sys.system
        .send(&a.id, "after restore", false)
        .await
        .unwrap();
    wait_until("an answer after the restore", || async {
        sys.thread(&a.id).await.len() == 4
    })
    .await;
    let t = sys.thread(&a.id).await;
    assert_eq!(t[0].text, "where are you");
    assert!(t[1].text.starts_with("region=eu"), "{t:?}");
    assert_eq!(t[2].text, "after restore");
    assert!(t[3].text.starts_with("region=eu"), "{t:?}");
    assert_ne!(backend.pid(&a.id).unwrap(), second_pid);
}

/// Answers each request with its `id`; a request whose last message says "slow" is answered
/// after a second.
const ECHOING_AGENT: &str = r#"
import json, sys, time
for line in sys.stdin:
    req = json.loads(line)
    last = req["thread"][-1]["text"] if req["thread"] else ""
    if "slow" in last:
        time.sleep(1)
    print(json.dumps({"id": req["id"], "text": "answer to " + last}), flush=True)
"#;

/// An interrupt aborts a call while the process still works on it; the process answers it
/// late, and the next call discards that answer (another request's id) and reads its own.
#[actix_rt::test]
async fn a_late_answer_to_an_aborted_call_is_discarded() {
    let (_dir, backend, sys) = on_process_backend("python3", ECHOING_AGENT).await;
    let a = sys.root("plain", Some("slow one")).await;
    // The process is started by the call, which writes its request at once.
    wait_until("the slow call under way", || async {
        backend.pid(&a.id).is_some()
    })
    .await;
    sys.system.send(&a.id, "fast two", true).await.unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "answer to fast two")
        .await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    let answers = sys.texts_of(&a.id, Role::Assistant).await;
    assert_eq!(answers, vec!["answer to fast two"]);
}

/// An agent program as strict as the HTTP providers about whose voice a message is in: it
/// refuses (answers an error for) a request whose thread ends with an assistant entry, or that
/// puts a worker's forward (`From Ops: …`) in an assistant entry. The `ops` worker answers
/// "ops did: <its message>"; the lead answers "hello" with "lead ok", and anything else by
/// quoting its last entry.
const STRICT_AGENT: &str = r#"
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    thread = req["thread"]
    last = thread[-1]["text"] if thread else ""
    if thread and thread[-1]["role"] == "assistant":
        answer = {"error": "the request ends with an assistant message: " + last}
    elif any(e["role"] == "assistant" and "From Ops" in e["text"] for e in thread):
        answer = {"error": "a forward in the assistant's voice"}
    elif req["agent_type"] == "ops":
        answer = {"text": "ops did: " + last}
    elif last == "hello":
        answer = {"text": "lead ok"}
    else:
        answer = {"text": "lead heard: " + last}
    answer["id"] = req["id"]
    print(json.dumps(answer), flush=True)
"#;

/// A lead (and its worker) on [`STRICT_AGENT`], forwarding as `forward` says, after one
/// exchange; it has sent Ops "status please" in async mode.
async fn lead_asked_ops(
    forward: AsyncForward,
) -> (tempfile::TempDir, Arc<ProcessModel>, TestSystem, String) {
    let (dir, backend, sys) = on_process_backend_with(
        "python3",
        STRICT_AGENT,
        default_types(ManageOptions {
            async_forward: forward,
            ..ManageOptions::default()
        }),
    )
    .await;
    let lead = sys.root("lead", Some("hello")).await.id;
    sys.wait_for_entry(&lead, Role::Assistant, "lead ok").await;
    sys.wait_for_status(&lead, AgentStatus::Idle).await;
    sys.send_async(&lead, "Ops", "status please", "bg").await;
    (dir, backend, sys, lead)
}

/// Waits until the lead answered `text`, or failed (its process refused the request).
async fn lead_answered(sys: &TestSystem, lead: &str, text: &str) {
    wait_until("the lead's answer or its failure", || async {
        sys.texts_of(lead, Role::Assistant)
            .await
            .iter()
            .any(|t| t == text)
            || sys.record(lead).await.status == AgentStatus::Failed
    })
    .await;
    let rec = sys.record(lead).await;
    assert_ne!(rec.status, AgentStatus::Failed, "{:?}", rec.last_error);
}

#[actix_rt::test]
async fn a_forward_that_starts_a_turn_reaches_the_process_as_input() {
    let (_dir, _backend, sys, lead) = lead_asked_ops(AsyncForward::Turn).await;
    lead_answered(&sys, &lead, "lead heard: From Ops: ops did: status please").await;
    let thread = sys.thread(&lead).await;
    let forward = thread
        .iter()
        .find(|e| e.text == "From Ops: ops did: status please")
        .unwrap();
    assert_eq!(forward.role, Role::User, "{thread:#?}");
}

#[actix_rt::test]
async fn a_relayed_forward_reaches_the_process_as_input_with_the_next_message() {
    let (_dir, _backend, sys, lead) = lead_asked_ops(AsyncForward::Relay).await;
    sys.wait_for_entry(&lead, Role::Assistant, "From Ops: ops did: status please")
        .await;
    sys.wait_for_status(&lead, AgentStatus::Idle).await;
    sys.system
        .send(&lead, "what did Ops say", false)
        .await
        .unwrap();
    lead_answered(&sys, &lead, "lead heard: what did Ops say").await;
}
