//! The CLI's turns and sessions: a turn in the thread and a follow-up in the same session, a tool it runs, a restart that resumes the session, an interrupt, a sub-agent's answer, forwards as the CLI's input.

use super::*;

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
