//! What the CLI costs: a usage limit waited out until its reset, an interrupted turn's tokens counted.

use super::*;

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
