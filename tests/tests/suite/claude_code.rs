//! The process backend's `claude-code` protocol with the real Claude Code CLI (`tests/claude`,
//! installed by `scripts/test.sh`), run offline against a local Anthropic endpoint that streams
//! SSE: a turn's text and usage in the thread and in `inspect`, a tool the CLI runs itself,
//! pause and resume past the call's timeout, one session across messages and across a restart
//! (`--resume`), a reset's new session, a cancel that stops the process, a usage limit's wait
//! until the reset the CLI reports, the cost of a turn an interrupt cut short, and a worker's
//! forward sent to the CLI as the user's input whether it starts a turn or was relayed.

use agentd_actors::{AgentType, ModelClient, SystemClock, ThreadStore};
use agentd_models::claude_code::protocol::four_kinds;
use agentd_models::process::is_stopped;
use agentd_models::{ClaudeCodeModel, ClaudeCodeSettings, ModelRouter, ScriptedModel};
use agentd_proto::{
    AgentStatus, AsyncForward, Control, InboxItem, ManageOptions, Role, SpawnRequest,
};
use agentd_store::MemoryStore;
use agentd_tests::anthropic_sse::{
    AnthropicSse, SseReply, USAGE, answers_a_tool, conversation_text,
};
use agentd_tests::strict_provider::last_text_of;
use agentd_tests::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The CLI of `tests/claude` (pinned by its package-lock.json).
fn claude() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("claude/node_modules/.bin/claude");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/test.sh (it runs `npm ci --prefix tests/claude`)",
        bin.display()
    );
    bin
}

/// The endpoint's answers: a message asking to "use bash" gets a Bash call of `echo hi`, and
/// its result a text quoting it; a message saying "slow" waits a second; anything else is
/// answered with the number of user messages the CLI sent and the last one's text.
fn endpoint() -> AnthropicSse {
    AnthropicSse::start(|body: &Value| {
        let last = last_user_text(body);
        let delay = if last.contains("slow") {
            Duration::from_secs(1)
        } else {
            Duration::ZERO
        };
        let reply = if answers_a_tool(body) {
            let result = body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .map(|m| m["content"][0]["content"].to_string())
                .unwrap_or_default();
            SseReply::Text(format!("the tool said {result}"))
        } else if last.contains("use bash") {
            SseReply::ToolUse {
                name: "Bash".into(),
                input: json!({"command": "echo hi", "description": "Say hi"}),
            }
        } else {
            SseReply::Text(format!("answer to: {last}"))
        };
        (reply, delay)
    })
}

/// The last text block of the last user message (the CLI puts reminders before it).
fn last_user_text(body: &Value) -> String {
    let Some(last) = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    last_text_of(last)
}

struct Cli {
    sys: TestSystem,
    backend: Arc<ClaudeCodeModel>,
}

/// The provider's model: the CLI's unless an agent's type or spawn names one.
const PROVIDER_MODEL: &str = "claude-agentd-test";

/// An agent system whose agents run the CLI, on `store`, with `home` holding the agents'
/// directories (the data directory's `claude-code`).
async fn cli_system(store: Arc<dyn ThreadStore>, home: &std::path::Path, timeout: Duration) -> Cli {
    cli_system_running(vec![claude().display().to_string()], store, home, timeout).await
}

/// [`cli_system`] whose backend starts the CLI with `command`.
async fn cli_system_running(
    command: Vec<String>,
    store: Arc<dyn ThreadStore>,
    home: &std::path::Path,
    timeout: Duration,
) -> Cli {
    let backend = Arc::new(ClaudeCodeModel::new(ClaudeCodeSettings {
        command,
        home: home.to_path_buf(),
        workdir: None,
        model: Some(PROVIDER_MODEL.into()),
        grace: Duration::from_millis(300),
        timeout,
    }));
    // The CLI is the `claude` provider; other agents answer from a script.
    let mut cli = agent_type("cli", "CLI", &[]);
    cli.cli_tools = vec!["Bash".into()];
    cli.provider = Some("claude".into());
    let mut types: Vec<AgentType> = default_types(ManageOptions::default());
    // Leads on the CLI whose worker `ops` (on the script) forwards its answers: one runs a
    // turn on a forward, one relays it.
    for (name, title, forward) in [
        ("cli_lead", "CLI Lead", AsyncForward::Turn),
        ("cli_relay", "CLI Relay", AsyncForward::Relay),
    ] {
        let mut lead = cli.clone();
        lead.name = name.into();
        lead.title = title.into();
        lead.workers = vec!["ops".into()];
        lead.manage.async_forward = forward;
        types.push(lead);
    }
    types.push(cli);
    let script = ScriptedModel::from_toml_str(
        "[defaults]\ntext = \"parent heard it\"\n",
        Arc::new(SystemClock),
    )
    .unwrap();
    let claude: Arc<dyn ModelClient> = backend.clone();
    let model = ModelRouter::new(Arc::new(script)).with("claude", claude);
    let sys = TestSystem::builder()
        .model(Arc::new(model))
        .types(types)
        .store(store)
        .config(|c| {
            c.providers.insert("claude".into());
            c.limits.compact_keep_recent = 1;
        })
        .start()
        .await;
    Cli { sys, backend }
}

/// A temporary home, the endpoint, and a system on a memory store whose calls may take a
/// minute: what most tests start from.
async fn fresh() -> (tempfile::TempDir, AnthropicSse, Cli) {
    let tmp = tempfile::tempdir().unwrap();
    let ep = endpoint();
    let cli = cli_system(
        Arc::new(MemoryStore::new()),
        tmp.path(),
        Duration::from_secs(60),
    )
    .await;
    (tmp, ep, cli)
}

/// The offline environment, given to the agent (so it reaches its process).
fn offline_env(endpoint: &AnthropicSse, home: &std::path::Path) -> Vec<(String, String)> {
    [
        ("ANTHROPIC_BASE_URL", endpoint.url.as_str()),
        ("ANTHROPIC_API_KEY", "dummy"),
        ("DISABLE_TELEMETRY", "1"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("CLAUDE_CODE_MAX_RETRIES", "0"),
        ("HOME", &home.display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

async fn spawn(cli: &Cli, endpoint: &AnthropicSse, home: &std::path::Path, prompt: &str) -> String {
    spawn_under(cli, endpoint, home, prompt, None).await
}

async fn spawn_under(
    cli: &Cli,
    endpoint: &AnthropicSse,
    home: &std::path::Path,
    prompt: &str,
    parent_id: Option<String>,
) -> String {
    cli.sys
        .system
        .spawn(SpawnRequest {
            agent_type: Some("cli".into()),
            prompt: Some(prompt.into()),
            env: offline_env(endpoint, home).into_iter().collect(),
            parent_id,
            ..Default::default()
        })
        .await
        .expect("spawn")
        .id
}

/// Waits (up to 30 s: the CLI starts in about a second) for an assistant entry containing
/// `text`.
async fn answer(sys: &TestSystem, id: &str, text: &str) -> Vec<agentd_proto::ThreadEntry> {
    let what = format!("an answer containing {text:?}");
    eventually(Duration::from_secs(30), &what, || async {
        let thread = sys.thread(id).await;
        if thread
            .iter()
            .any(|e| e.role == Role::Assistant && e.text.contains(text))
        {
            return Ok(thread);
        }
        let rec = sys.record(id).await;
        assert!(
            rec.status != AgentStatus::Failed,
            "the agent failed: {:?}",
            rec.last_error
        );
        Err(format!("last error {:?}: {thread:?}", rec.last_error))
    })
    .await
}

fn state_of(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit(')').next()?.trim_start().chars().next()
}

async fn wait_long(what: &str, mut cond: impl FnMut() -> bool) {
    eventually(Duration::from_secs(30), what, || std::future::ready(cond())).await
}

#[actix_rt::test]
async fn a_turn_lands_in_the_thread_and_inspect_and_a_follow_up_continues_the_session() {
    let (tmp, ep, cli) = fresh().await;
    let id = spawn(&cli, &ep, tmp.path(), "remember the word kiwi").await;
    answer(&cli.sys, &id, "answer to: remember the word kiwi").await;
    let rec = cli.sys.wait_for_status(&id, AgentStatus::Idle).await;
    let (input, output, cache_write, cache_read) = USAGE;
    let usage = four_kinds(input, output, cache_write, cache_read);
    assert_eq!(rec.usage, usage, "the result line's usage, in four kinds");
    let priced = cli.sys.system.deps().config.price_of(None).cost(&usage);
    assert!((rec.cost_usd - priced).abs() < 1e-12, "priced by our table");
    let session = cli.backend.session_id(&id).expect("a session");
    let inspection = serde_json::to_value(cli.sys.system.inspect(&id).await.unwrap()).unwrap();
    assert_eq!(inspection["cli_session_id"], json!(session));
    assert!(inspection["reported_cost_usd"].as_f64().unwrap() > 0.0);
    assert_eq!(inspection["usage"]["cache_write"], json!(cache_write));
    let pid = cli.backend.pid(&id).expect("a process");

    cli.sys
        .system
        .send(&id, "what was the word", false)
        .await
        .unwrap();
    answer(&cli.sys, &id, "answer to: what was the word").await;
    assert_eq!(
        cli.backend.pid(&id),
        Some(pid),
        "one process, stdin kept open"
    );
    let last = ep.turns().pop().unwrap();
    assert!(
        conversation_text(&last.body).contains("remember the word kiwi"),
        "the endpoint sees the earlier conversation: {}",
        last.body["messages"]
    );
    let rec = cli.sys.wait_for_status(&id, AgentStatus::Idle).await;
    assert_eq!(
        rec.agent_cli.and_then(|c| c.session_id),
        Some(session.clone())
    );
    let cp = cli.sys.system.checkpoint(&id).await.unwrap();
    assert_eq!(
        cp.cli_session_id,
        Some(session.clone()),
        "checkpoints keep it"
    );

    // A compaction is the CLI's own (`/compact`): its summary heads agentd's thread.
    let calls = ep.turns().len();
    cli.sys.system.post(&id, InboxItem::Compact).await.unwrap();
    wait_long("the CLI's summary call", || ep.turns().len() > calls).await;
    let thread = eventually(
        Duration::from_secs(30),
        "a thread of two entries",
        || async {
            let thread = cli.sys.thread(&id).await;
            if thread.len() == 2 {
                Ok(thread)
            } else {
                Err(format!("{thread:?}"))
            }
        },
    )
    .await;
    assert!(
        thread[0]
            .text
            .starts_with("Summary of the earlier conversation: ")
            && thread[1].role == Role::Assistant,
        "{thread:?}"
    );
    assert!(
        thread[0].text.contains("answer to: "),
        "the summary the endpoint wrote, through the CLI: {}",
        thread[0].text
    );
    assert_eq!(cli.backend.session_id(&id), Some(session.clone()));
    cli.sys.wait_for_status(&id, AgentStatus::Idle).await;

    // A reset starts a new session: the endpoint no longer sees the old conversation.
    cli.sys
        .system
        .post(
            &id,
            InboxItem::Reset {
                message: Some("fresh start".into()),
            },
        )
        .await
        .unwrap();
    answer(&cli.sys, &id, "answer to: fresh start").await;
    let last = ep.turns().pop().unwrap();
    assert!(!conversation_text(&last.body).contains("kiwi"));
    let rec = cli.sys.wait_for_status(&id, AgentStatus::Idle).await;
    let new_session = rec.agent_cli.and_then(|c| c.session_id);
    assert!(new_session.is_some() && new_session != Some(session.clone()));

    // Restoring the checkpoint resumes its session in a new process.
    cli.sys.system.restore(&id, Some(cp.id)).await.unwrap();
    cli.sys.wait_for_status(&id, AgentStatus::Idle).await;
    cli.sys
        .system
        .send(&id, "after the restore", false)
        .await
        .unwrap();
    answer(&cli.sys, &id, "answer to: after the restore").await;
    assert_eq!(cli.backend.session_id(&id), Some(session));
    cli.sys.system.shutdown().await;
}

#[actix_rt::test]
async fn a_tool_the_cli_runs_is_recorded_as_executed_and_paired() {
    let (tmp, ep, cli) = fresh().await;
    let id = spawn(&cli, &ep, tmp.path(), "use bash to say hi").await;
    let thread = answer(&cli.sys, &id, "the tool said").await;
    let call = thread
        .iter()
        .find(|e| !e.tool_calls.is_empty())
        .expect("the CLI's call in the thread");
    assert_eq!(call.tool_calls[0].name, "Bash");
    assert_eq!(call.tool_calls[0].arguments["command"], "echo hi");
    let result = thread
        .iter()
        .find(|e| e.role == Role::Tool)
        .expect("its result");
    assert_eq!(result.tool_call_id.as_deref(), Some("toolu_1"));
    assert_eq!(result.text.trim(), "hi", "the output of the CLI's own Bash");
    assert!(agentd_proto::conversation::is_paired(&thread));
    let final_text = &thread.last().unwrap().text;
    assert!(final_text.contains("hi"), "{final_text}");
    // The endpoint saw the CLI's tool result.
    assert!(ep.turns().iter().any(|t| answers_a_tool(&t.body)));
    cli.sys.system.shutdown().await;
}

#[actix_rt::test]
async fn a_paused_call_outlasts_its_timeout_and_finishes_on_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let ep = endpoint();
    let timeout = Duration::from_secs(4);
    let cli = cli_system(Arc::new(MemoryStore::new()), tmp.path(), timeout).await;
    let id = spawn(&cli, &ep, tmp.path(), "a slow one").await;
    wait_long("the CLI's call at the endpoint", || !ep.turns().is_empty()).await;
    let pid = cli.backend.pid(&id).expect("a process");
    cli.sys.system.control(&id, Control::Pause).await.unwrap();
    wait_long("the process stopped", || is_stopped(pid)).await;
    tokio::time::sleep(timeout + Duration::from_secs(1)).await;
    assert!(is_stopped(pid));
    assert!(
        cli.sys.texts_of(&id, Role::Assistant).await.is_empty(),
        "nothing answers while paused"
    );
    assert_ne!(cli.sys.record(&id).await.status, AgentStatus::Failed);
    cli.sys.system.control(&id, Control::Resume).await.unwrap();
    answer(&cli.sys, &id, "answer to: a slow one").await;
    assert_eq!(cli.backend.pid(&id), Some(pid));
    cli.sys.system.shutdown().await;
}

#[actix_rt::test]
async fn a_restart_resumes_the_session_in_a_new_process() {
    let tmp = tempfile::tempdir().unwrap();
    let ep = endpoint();
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let first = cli_system(store.clone(), tmp.path(), Duration::from_secs(60)).await;
    let id = spawn(&first, &ep, tmp.path(), "remember the word fig").await;
    answer(&first.sys, &id, "answer to: remember the word fig").await;
    first.sys.wait_for_status(&id, AgentStatus::Idle).await;
    let pid = first.backend.pid(&id).expect("a process");
    let session = first.backend.session_id(&id).expect("a session");
    first.sys.system.shutdown().await;
    wait_long("the first process gone", || state_of(pid).is_none()).await;

    // A new agentd on the same store and data directory: the record names the session.
    let second = cli_system(store, tmp.path(), Duration::from_secs(60)).await;
    second
        .sys
        .system
        .send(&id, "which word was it", false)
        .await
        .unwrap();
    answer(&second.sys, &id, "answer to: which word was it").await;
    let last = ep.turns().pop().unwrap();
    assert!(
        conversation_text(&last.body).contains("remember the word fig"),
        "the resumed session holds the earlier conversation: {}",
        last.body["messages"]
    );
    assert_eq!(second.backend.session_id(&id), Some(session));
    assert_ne!(second.backend.pid(&id), Some(pid));
    second.sys.system.shutdown().await;
}

/// Starts the CLI (its arguments) after a process that joins the CLI's process group and
/// notes the name of each signal the group is sent (SIGTSTP, SIGCONT, SIGTERM) in
/// `$0.d/<the CLI's pid>`, until the CLI is gone: what a pause, a resume, a cancel and a
/// terminate send the CLI shows there (SIGKILL and SIGSTOP, which no process can note, by
/// their absence).
const NOTING_WRAPPER: &str = r#"#!/usr/bin/env bash
python3 - "$0.d/$$" $$ </dev/null >/dev/null 2>&1 <<'PY' &
import os, signal, sys, time
notes = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
def note(signum, _frame):
    os.write(notes, (signal.Signals(signum).name[3:] + "\n").encode())
for s in (signal.SIGTSTP, signal.SIGCONT, signal.SIGTERM):
    signal.signal(s, note)
os.write(notes, b"")
cli = int(sys.argv[2])
while True:
    try:
        os.kill(cli, 0)
    except ProcessLookupError:
        break
    time.sleep(0.05)
PY
# The notes file appears once the notes are taken: the CLI starts after that.
while [ ! -e "$0.d/$$" ]; do sleep 0.01; done
exec "$@"
"#;

/// The signals noted for the CLI process `pid` under `wrapper` ([`NOTING_WRAPPER`]).
fn noted(wrapper: &std::path::Path, pid: u32) -> Vec<String> {
    let file = PathBuf::from(format!("{}.d/{pid}", wrapper.display()));
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Pause sends the CLI's process group SIGTSTP (and SIGSTOP after the grace, if it did not
/// stop), resume SIGCONT, cancel a graceful SIGTERM, terminate SIGKILL without one (seed 001).
#[actix_rt::test]
async fn the_cli_s_process_group_gets_the_signals_of_each_control() {
    let tmp = tempfile::tempdir().unwrap();
    let ep = endpoint();
    let wrapper = tmp.path().join("noting");
    std::fs::write(&wrapper, NOTING_WRAPPER).unwrap();
    std::fs::create_dir(tmp.path().join("noting.d")).unwrap();
    let command = vec![
        "bash".to_string(),
        wrapper.display().to_string(),
        claude().display().to_string(),
    ];
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let cli = cli_system_running(
        command,
        Arc::new(MemoryStore::new()),
        &home,
        Duration::from_secs(60),
    )
    .await;
    let id = spawn(&cli, &ep, &home, "a slow one").await;
    wait_long("the CLI's call at the endpoint", || !ep.turns().is_empty()).await;
    let pid = cli.backend.pid(&id).expect("a process");
    cli.sys.system.control(&id, Control::Pause).await.unwrap();
    wait_long("the CLI stopped", || is_stopped(pid)).await;
    cli.sys.system.control(&id, Control::Resume).await.unwrap();
    wait_long("the CLI running again", || !is_stopped(pid)).await;
    // Both noted (a process stopped by SIGSTOP with both pending may handle them in either
    // order).
    wait_long("SIGTSTP and SIGCONT noted", || {
        let mut notes = noted(&wrapper, pid);
        notes.sort();
        notes == vec!["CONT", "TSTP"]
    })
    .await;
    answer(&cli.sys, &id, "answer to: a slow one").await;
    cli.sys.system.control(&id, Control::Cancel).await.unwrap();
    wait_long("the cancelled CLI gone", || state_of(pid).is_none()).await;
    // The noting process writes what it was sent when it is next scheduled, which may be
    // after the CLI is gone: wait for the note rather than read it once.
    wait_long("cancel's graceful SIGTERM noted", || {
        noted(&wrapper, pid).iter().skip(2).any(|s| s == "TERM")
    })
    .await;

    let calls = ep.turns().len();
    let id = spawn(&cli, &ep, &home, "another slow one").await;
    wait_long("its call at the endpoint", || ep.turns().len() > calls).await;
    let pid = cli.backend.pid(&id).expect("a process");
    cli.sys
        .system
        .control(&id, Control::Terminate)
        .await
        .unwrap();
    wait_long("the terminated CLI gone", || state_of(pid).is_none()).await;
    assert!(
        !noted(&wrapper, pid).contains(&"TERM".to_string()),
        "terminate is SIGKILL, no SIGTERM before it: {:?}",
        noted(&wrapper, pid)
    );
    cli.sys.system.shutdown().await;
}

#[actix_rt::test]
async fn cancel_stops_the_process() {
    let (tmp, ep, cli) = fresh().await;
    let id = spawn(&cli, &ep, tmp.path(), "slow work").await;
    wait_long("the CLI's call at the endpoint", || !ep.turns().is_empty()).await;
    let pid = cli.backend.pid(&id).expect("a process");
    cli.sys.system.control(&id, Control::Cancel).await.unwrap();
    wait_long("the process gone", || state_of(pid).is_none()).await;
    assert_eq!(cli.backend.pid(&id), None);
    let rec = cli.sys.wait_for_status(&id, AgentStatus::Cancelled).await;
    assert!(rec.last_error.is_none(), "{:?}", rec.last_error);
    cli.sys.system.shutdown().await;
}

#[actix_rt::test]
async fn the_provider_model_is_asked_for_close_keeps_the_session_and_delete_removes_it() {
    let (tmp, ep, cli) = fresh().await;
    let id = spawn(&cli, &ep, tmp.path(), "say hello").await;
    answer(&cli.sys, &id, "answer to: say hello").await;
    let asked = ep.turns().pop().unwrap();
    assert_eq!(asked.body["model"], json!(PROVIDER_MODEL), "--model");
    let own = tmp.path().join(&id);
    let pid = cli.backend.pid(&id).expect("a process");
    cli.sys.system.control(&id, Control::Close).await.unwrap();
    wait_long("the process gone", || state_of(pid).is_none()).await;
    assert!(
        own.join("config").is_dir(),
        "a closed agent's session stays: {}",
        own.display()
    );
    cli.sys.system.control(&id, Control::Delete).await.unwrap();
    wait_long("the agent's CLI directory removed", || !own.exists()).await;
    assert_eq!(cli.backend.session_id(&id), None);
    cli.sys.system.shutdown().await;
}

#[actix_rt::test]
async fn an_interrupt_ends_the_cli_turn_and_the_next_continues_the_session() {
    let (tmp, ep, cli) = fresh().await;
    let id = spawn(&cli, &ep, tmp.path(), "first things").await;
    answer(&cli.sys, &id, "answer to: first things").await;
    cli.sys.wait_for_status(&id, AgentStatus::Idle).await;
    let session = cli.backend.session_id(&id).expect("a session");
    cli.sys
        .system
        .send(&id, "slow thoughts", false)
        .await
        .unwrap();
    wait_long("the slow call at the endpoint", || ep.turns().len() == 2).await;
    cli.sys.system.send(&id, "quick one", true).await.unwrap();
    answer(&cli.sys, &id, "quick one").await;
    assert_eq!(
        cli.backend.session_id(&id),
        Some(session),
        "the same session"
    );
    let thread = cli.sys.thread(&id).await;
    assert!(
        !thread
            .iter()
            .any(|e| e.role == Role::Assistant && e.text == "answer to: slow thoughts"),
        "the interrupted turn's late answer is not taken: {thread:?}"
    );
    assert!(agentd_proto::conversation::is_paired(&thread));
    // The CLI was sent what it had not seen: the interruption and the new message, not the
    // interrupted message again (which its session holds if it saved it before it was
    // stopped).
    let last = ep.turns().pop().unwrap();
    let user_texts: Vec<String> = last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect();
    let sent = user_texts
        .iter()
        .map(|t| t.matches("slow thoughts").count())
        .sum::<usize>();
    assert!(sent <= 1, "{user_texts:?}");
    assert!(user_texts.iter().any(|t| t.contains("first things")));
    cli.sys.system.shutdown().await;
}

#[actix_rt::test]
async fn a_sub_agent_the_cli_runs_yields_its_answer_to_its_parent() {
    let (tmp, ep, cli) = fresh().await;
    let parent = cli.sys.root("plain", None).await;
    let child = spawn_under(
        &cli,
        &ep,
        tmp.path(),
        "count the files",
        Some(parent.id.clone()),
    )
    .await;
    let rec = cli
        .sys
        .wait_for_status(&child, AgentStatus::Completed)
        .await;
    assert_eq!(
        rec.result.as_deref(),
        Some(&json!("answer to: count the files")),
        "its answer is its yield"
    );
    cli.sys
        .wait_for_entry(&parent.id, Role::User, "answer to: count the files")
        .await;
    cli.sys.system.shutdown().await;
}

/// The offline environment of a subscription (`CLAUDE_CODE_OAUTH_TOKEN` instead of an API
/// key): the CLI reads a usage limit's reset from the refusal's headers only then.
fn subscription_env(endpoint: &AnthropicSse, home: &std::path::Path) -> Vec<(String, String)> {
    let mut env = offline_env(endpoint, home);
    env.retain(|(k, _)| k != "ANTHROPIC_API_KEY");
    env.push(("CLAUDE_CODE_OAUTH_TOKEN".into(), "dummy".into()));
    env
}

/// A usage limit refuses the call until its reset: the CLI reports the reset
/// (`rate_limit_event`), and the agent waits in `waiting_rate_limit` until then, not a fixed
/// minute.
#[actix_rt::test]
async fn a_usage_limit_waits_until_the_reset_the_cli_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let in_an_hour = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let ep = AnthropicSse::start(move |_| {
        (
            SseReply::UsageLimited {
                resets_at_secs: in_an_hour,
            },
            Duration::ZERO,
        )
    });
    let cli = cli_system(
        Arc::new(MemoryStore::new()),
        tmp.path(),
        Duration::from_secs(60),
    )
    .await;
    let id = cli
        .sys
        .system
        .spawn(SpawnRequest {
            agent_type: Some("cli".into()),
            prompt: Some("over the limit".into()),
            env: subscription_env(&ep, tmp.path()).into_iter().collect(),
            ..Default::default()
        })
        .await
        .expect("spawn")
        .id;
    let rec = eventually(Duration::from_secs(30), "waiting_rate_limit", || async {
        let rec = cli.sys.record(&id).await;
        if rec.status == AgentStatus::WaitingRateLimit {
            return Ok(rec);
        }
        let shown = format!("{:?} {:?}", rec.status, rec.last_error);
        assert!(rec.status != AgentStatus::Failed, "{shown}");
        Err(shown)
    })
    .await;
    assert!(!ep.turns().is_empty(), "the CLI called the endpoint");
    let resume_at = rec.resume_at_ms.expect("a resume time");
    let reset_ms = in_an_hour * 1000;
    // Both computed from the real clock a few ms apart: the same moment, give or take.
    assert!(
        resume_at.abs_diff(reset_ms) < 5_000,
        "resumes at {resume_at}, the limit resets at {reset_ms}"
    );
    cli.sys.system.shutdown().await;
}

/// An interrupt that ends a CLI turn after the CLI reported a model call, before its `result`
/// line: that call's tokens count (the usage its line reported, the output estimated from what
/// it wrote), as an aborted call of the HTTP backends does.
#[actix_rt::test]
async fn an_interrupted_cli_turn_counts_what_it_cost_so_far() {
    let tmp = tempfile::tempdir().unwrap();
    // A Bash call, then a long wait for the answer to its result: the interrupt comes while
    // the second call waits.
    let ep = AnthropicSse::start(|body: &Value| {
        if answers_a_tool(body) {
            (SseReply::Text("late".into()), Duration::from_secs(20))
        } else if last_user_text(body).contains("use bash") {
            (
                SseReply::ToolUse {
                    name: "Bash".into(),
                    input: json!({"command": "echo hi", "description": "Say hi"}),
                },
                Duration::ZERO,
            )
        } else {
            (
                SseReply::Text(format!("answer to: {}", last_user_text(body))),
                Duration::ZERO,
            )
        }
    });
    let cli = cli_system(
        Arc::new(MemoryStore::new()),
        tmp.path(),
        Duration::from_secs(60),
    )
    .await;
    let id = spawn(&cli, &ep, tmp.path(), "use bash to say hi").await;
    wait_long("the call answering the tool's result", || {
        ep.turns().iter().any(|t| answers_a_tool(&t.body))
    })
    .await;
    cli.sys.system.send(&id, "quick one", true).await.unwrap();
    answer(&cli.sys, &id, "quick one").await;
    let rec = cli.sys.wait_for_status(&id, AgentStatus::Idle).await;
    // The interrupted turn's first call (its `assistant` line's usage, as at its start:
    // output 1) and the quick one's (its `result` line's).
    let (input, output, cache_write, cache_read) = USAGE;
    assert_eq!(
        (rec.usage.input, rec.usage.cache_write, rec.usage.cache_read),
        (2 * input, 2 * cache_write, 2 * cache_read),
        "{:?}",
        rec.usage
    );
    assert!(
        rec.usage.output > output + 1 && rec.usage.estimated,
        "the interrupted call's output is estimated from the Bash call it wrote: {:?}",
        rec.usage
    );
    cli.sys.system.shutdown().await;
}

/// A lead of `agent_type` on the CLI that said "hello there" and was answered, then sent its
/// worker Ops a message in async mode; Ops (on the script) answers "parent heard it".
async fn cli_lead_asked_ops(
    cli: &Cli,
    ep: &AnthropicSse,
    home: &std::path::Path,
    agent_type: &str,
) -> String {
    let lead = cli
        .sys
        .system
        .spawn(SpawnRequest {
            agent_type: Some(agent_type.into()),
            prompt: Some("hello there".into()),
            env: offline_env(ep, home).into_iter().collect(),
            ..Default::default()
        })
        .await
        .expect("spawn")
        .id;
    answer(&cli.sys, &lead, "answer to: hello there").await;
    cli.sys.wait_for_status(&lead, AgentStatus::Idle).await;
    cli.sys
        .send_async(&lead, "Ops", "status please", "bg")
        .await;
    lead
}

/// The user message of the endpoint's last turn that carries the CLI's newest input.
fn last_user_message(ep: &AnthropicSse) -> String {
    last_user_text(&ep.turns().pop().expect("a turn").body)
}

#[actix_rt::test]
async fn a_forward_that_starts_a_turn_is_the_message_the_cli_is_sent() {
    let (tmp, ep, cli) = fresh().await;
    let lead = cli_lead_asked_ops(&cli, &ep, tmp.path(), "cli_lead").await;
    // The CLI's answer quotes the message it was sent: the forward, its sender named.
    let thread = answer(&cli.sys, &lead, "] From Ops: parent heard it").await;
    let forward = thread
        .iter()
        .find(|e| e.text == "From Ops: parent heard it")
        .expect("the forward on the lead's thread");
    assert_eq!(forward.role, Role::User, "{thread:#?}");
    let sent = last_user_message(&ep);
    assert!(sent.contains("From Ops: parent heard it"), "{sent:?}");
    cli.sys.system.shutdown().await;
}

#[actix_rt::test]
async fn a_relayed_forward_goes_to_the_cli_with_the_next_message() {
    let (tmp, ep, cli) = fresh().await;
    let lead = cli_lead_asked_ops(&cli, &ep, tmp.path(), "cli_relay").await;
    cli.sys
        .wait_for_entry(&lead, Role::Assistant, "From Ops: parent heard it")
        .await;
    let rec = cli.sys.wait_for_status(&lead, AgentStatus::Idle).await;
    assert_eq!(rec.turns, 1, "no turn on the relayed forward");
    cli.sys
        .system
        .send(&lead, "what did Ops say", false)
        .await
        .unwrap();
    answer(&cli.sys, &lead, "what did Ops say").await;
    let sent = last_user_message(&ep);
    assert!(
        sent.contains("From Ops: parent heard it") && sent.contains("what did Ops say"),
        "the forward is the user's input, not the CLI's own answer: {sent:?}"
    );
    cli.sys.system.shutdown().await;
}
