//! The process backend's `claude-code` protocol with the real Claude Code CLI (`tests/claude`,
//! installed by `scripts/test.sh`), run offline against a local Anthropic endpoint that streams
//! SSE: a turn's text and usage in the thread and in `inspect`, a tool the CLI runs itself,
//! pause and resume past the call's timeout, one session across messages and across a restart
//! (`--resume`), a reset's new session, a cancel that stops the process, a usage limit's wait
//! until the reset the CLI reports, the cost of a turn an interrupt cut short, and a worker's
//! forward sent to the CLI as the user's input whether it starts a turn or was relayed.
//!
//! | module | what it tests |
//! |---|---|
//! | `sessions` | The CLI's turns and sessions: a turn in the thread and a follow-up in the same session, a tool it runs, a restart that resumes the session, an interrupt, a sub-agent's answer, forwards as the CLI's input. |
//! | `controls` | Controls on the CLI's process: pause past the timeout, the signals of each control, cancel, close keeping the session and delete removing it. |
//! | `usage` | What the CLI costs: a usage limit waited out until its reset, an interrupted turn's tokens counted. |

mod controls;
mod sessions;
mod usage;

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
