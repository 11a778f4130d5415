//! The HTTP model backends against a local canned server, through real actors: tool-call round
//! trip, usage in four kinds and cost, 429 → waiting_rate_limit → automatic resume on a manual
//! clock, 5xx retried, malformed response → a clear error.

use agentd_actors::{ManualClock, ModelClient};
use agentd_models::{AnthropicModel, HttpSettings, OpenAiModel};
use agentd_proto::{AgentStatus, Role};
use agentd_tests::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn http(url: &str) -> HttpSettings {
    HttpSettings {
        base_url: url.to_string(),
        api_key: "test-key".into(),
        timeout: Duration::from_secs(5),
        stream: false,
        idle_timeout: Duration::from_secs(5),
        max_retries: 2,
        backoff: Duration::from_millis(5),
    }
}

fn openai_tool_call() -> Canned {
    Canned::json(
        json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "current_time", "arguments": "{}"}}
    ]}}], "usage": {"prompt_tokens": 100, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 40}}}),
    )
}

fn openai_text(text: &str) -> Canned {
    Canned::json(
        json!({"choices": [{"message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 5}}),
    )
}

#[actix_rt::test]
async fn openai_tool_call_round_trip_with_usage_and_cost() {
    let server = MockHttp::start(vec![
        Canned::raw(503, "busy"),
        openai_tool_call(),
        openai_text("It is late."),
    ]);
    let model: Arc<dyn ModelClient> =
        Arc::new(OpenAiModel::new(http(&server.url), "gpt-test".into()).unwrap());
    let sys = TestSystem::builder()
        .model(model)
        .types(plain_with_clock())
        .start()
        .await;
    let a = sys.root("plain", Some("what time is it?")).await;
    let t = sys
        .wait_for_entry(&a.id, Role::Assistant, "It is late.")
        .await;
    assert!(t.iter().any(|e| e.role == Role::Tool
        && e.text.contains("now_ms")
        && e.tool_call_id.as_deref() == Some("call_1")));
    let rec = sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    assert_eq!(
        (rec.usage.input, rec.usage.cache_read, rec.usage.output),
        (60 + 120, 40, 15)
    );
    let expected = (180.0 * 3.0 + 15.0 * 15.0 + 40.0 * 0.30) / 1e6;
    assert!(
        (rec.cost_usd - expected).abs() < 1e-12,
        "{} vs {expected}",
        rec.cost_usd
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3, "the 503 was retried");
    assert_eq!(reqs[1].path, "/chat/completions");
    assert!(
        reqs[1]
            .headers
            .iter()
            .any(|(k, v)| k == "authorization" && v == "Bearer test-key")
    );
    assert_eq!(reqs[1].body["model"], "gpt-test");
    let names: Vec<&str> = reqs[1].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"current_time") && names.contains(&"Manage"),
        "{names:?}"
    );
    // The second call carries the tool call and its result back.
    let msgs = reqs[2].body["messages"].as_array().unwrap();
    assert_eq!(msgs[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(msgs[3]["role"], "tool");
    assert_eq!(msgs[3]["tool_call_id"], "call_1");
}

#[actix_rt::test]
async fn openai_429_waits_then_resumes_by_itself() {
    let mut limited = Canned::raw(429, "{\"error\": \"slow down\"}");
    limited.headers.push(("retry-after".into(), "7".into()));
    let server = MockHttp::start(vec![limited, openai_text("done after the limit")]);
    let clock = ManualClock::new(1_000);
    let model: Arc<dyn ModelClient> =
        Arc::new(OpenAiModel::new(http(&server.url), "gpt-test".into()).unwrap());
    let sys = TestSystem::builder()
        .model(model)
        .types(plain_with_clock())
        .clock(Arc::new(clock.clone()))
        .start()
        .await;
    let a = sys.root("plain", Some("hello")).await;
    sys.wait_for_status(&a.id, AgentStatus::WaitingRateLimit)
        .await;
    wait_until("resume timer", || async { clock.sleepers() == 1 }).await;
    clock.advance(6_999);
    tokio::task::yield_now().await;
    assert_eq!(
        sys.record(&a.id).await.status,
        AgentStatus::WaitingRateLimit
    );
    clock.advance(1);
    sys.wait_for_entry(&a.id, Role::Assistant, "done after the limit")
        .await;
    assert_eq!(server.requests().len(), 2);
}

/// A provider still failing after the backend's own retries (5xx) fails the turn for now: it
/// runs again after the backoff (`limits.max_attempts`, 3 by default) and answers; one that
/// refuses the request (400) fails the agent at its first attempt.
#[actix_rt::test]
async fn a_provider_down_for_now_is_retried_and_one_that_refuses_is_not() {
    let server = MockHttp::start(vec![
        Canned::raw(503, "busy"),
        Canned::raw(503, "busy"),
        Canned::raw(503, "still busy"),
        openai_text("answered on the second attempt"),
        Canned::raw(400, "{\"error\": {\"message\": \"bad request\"}}"),
    ]);
    let clock = ManualClock::new(1_000);
    let model: Arc<dyn ModelClient> =
        Arc::new(OpenAiModel::new(http(&server.url), "gpt-test".into()).unwrap());
    let sys = TestSystem::builder()
        .model(model)
        .types(plain_with_clock())
        .clock(Arc::new(clock.clone()))
        .start()
        .await;
    let a = sys.root("plain", Some("hello")).await;
    let rec = sys.wait_for_status(&a.id, AgentStatus::Queued).await;
    assert_eq!(
        rec.status_reason.as_deref(),
        Some("retry 2 of 3 in 1000 ms")
    );
    assert!(rec.last_error.unwrap().contains("still busy"));
    wait_until("backoff armed", || async { clock.sleepers() == 1 }).await;
    clock.advance(1_000);
    sys.wait_for_entry(&a.id, Role::Assistant, "answered on the second attempt")
        .await;
    sys.system.send(&a.id, "again", false).await.unwrap();
    let rec = sys.wait_for_status(&a.id, AgentStatus::Failed).await;
    assert!(rec.last_error.unwrap().contains("bad request"));
    assert_eq!(rec.attempts, 1, "no retry of a refused request");
    assert_eq!(server.requests().len(), 5);
}

#[actix_rt::test]
async fn a_malformed_response_fails_the_agent_with_a_clear_error() {
    let server = MockHttp::start(vec![
        Canned::raw(200, "{not json"),
        Canned::raw(400, "{\"error\": {\"message\": \"bad model\"}}"),
    ]);
    let model: Arc<dyn ModelClient> =
        Arc::new(OpenAiModel::new(http(&server.url), "gpt-test".into()).unwrap());
    let sys = TestSystem::builder()
        .model(model)
        .types(plain_with_clock())
        .start()
        .await;
    let a = sys.root("plain", Some("hello")).await;
    let rec = sys.wait_for_status(&a.id, AgentStatus::Failed).await;
    assert!(
        rec.last_error
            .as_deref()
            .unwrap_or("")
            .contains("malformed response"),
        "{rec:?}"
    );
    sys.system.send(&a.id, "again", false).await.unwrap();
    // Waits for the provider's message, not for "400": the first error names the mock
    // server's URL, whose port may hold those digits.
    wait_until("second failure", || async {
        sys.record(&a.id)
            .await
            .last_error
            .unwrap_or_default()
            .contains("bad model")
    })
    .await;
    assert!(sys.record(&a.id).await.last_error.unwrap().contains("400"));
}

#[actix_rt::test]
async fn anthropic_tool_use_round_trip_with_four_usage_kinds() {
    let server = MockHttp::start(vec![
        Canned::json(
            json!({"content": [{"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_1", "name": "current_time", "input": {}}],
            "usage": {"input_tokens": 50, "output_tokens": 8, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 30}}),
        ),
        Canned::json(
            json!({"content": [{"type": "text", "text": "Done."}], "usage": {"input_tokens": 60, "output_tokens": 2}}),
        ),
    ]);
    let model: Arc<dyn ModelClient> =
        Arc::new(AnthropicModel::new(http(&server.url), "claude-test".into(), 1024).unwrap());
    let sys = TestSystem::builder()
        .model(model)
        .types(plain_with_clock())
        .start()
        .await;
    let a = sys.root("plain", Some("time?")).await;
    sys.wait_for_entry(&a.id, Role::Assistant, "Done.").await;
    let rec = sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    assert_eq!(
        (
            rec.usage.input,
            rec.usage.output,
            rec.usage.cache_write,
            rec.usage.cache_read
        ),
        (110, 10, 20, 30)
    );
    let reqs = server.requests();
    assert_eq!(reqs[0].path, "/v1/messages");
    assert!(
        reqs[0]
            .headers
            .iter()
            .any(|(k, v)| k == "x-api-key" && v == "test-key")
    );
    assert!(
        reqs[0]
            .headers
            .iter()
            .any(|(k, _)| k == "anthropic-version")
    );
    assert!(
        reqs[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "current_time" && t["input_schema"].is_object())
    );
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["content"][1]["type"], "tool_use");
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
    assert_eq!(msgs[2]["content"][0]["tool_use_id"], "toolu_1");
    // Prompt caching: breakpoints after the system prompt, the tools and the conversation,
    // and nowhere else (the API takes at most four).
    let body = &reqs[1].body;
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(body["system"][0]["cache_control"], ephemeral);
    assert_eq!(
        body["tools"].as_array().unwrap().last().unwrap()["cache_control"],
        ephemeral
    );
    let last_block = msgs.last().unwrap()["content"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    assert_eq!(last_block["cache_control"], ephemeral);
    assert_eq!(
        body.to_string().matches("cache_control").count(),
        3,
        "{body}"
    );
}

fn request(text: &str) -> agentd_actors::ModelRequest {
    agentd_actors::ModelRequest {
        agent_id: "a".into(),
        agent_type: "plain".into(),
        title: "Plain".into(),
        model: None,
        provider: None,
        env: Default::default(),
        system_prompt: "be brief".into(),
        thread: Arc::new(vec![Arc::new(agentd_proto::ThreadEntry::text(
            uuid::Uuid::from_u128(1),
            Role::User,
            text,
            1,
        ))]),
        tools: Arc::default(),
        purpose: agentd_actors::Purpose::Turn,
        cli_session_id: None,
        cli_tools: Arc::default(),
        observer: None,
        cancel: agentd_actors::CancellationToken::new(),
    }
}

/// More calls in flight than tokio's blocking pool has threads (512): each waits on the
/// network, not on a thread, so all of them reach the provider at once.
#[actix_rt::test]
async fn six_hundred_calls_are_in_flight_at_once() {
    const CALLS: usize = 600;
    let arrived = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let all_at_once = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (a, once) = (arrived.clone(), all_at_once.clone());
    let server = StrictProvider::start(move |_, _| {
        use std::sync::atomic::Ordering::SeqCst;
        a.fetch_add(1, SeqCst);
        // Every answer waits until all the calls have arrived (or gives up after 15 s).
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while a.load(SeqCst) < CALLS {
            if std::time::Instant::now() > deadline {
                once.store(false, SeqCst);
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Answer::now(json!({"choices": [{"message": {"role": "assistant", "content": "ok"}}]}))
    });
    let mut settings = http(&server.url);
    settings.timeout = Duration::from_secs(30);
    let model = OpenAiModel::new(settings, "gpt-test".into()).unwrap();
    let calls = (0..CALLS).map(|i| model.complete(request(&format!("call {i}"))));
    let answers = futures::future::join_all(calls).await;
    assert!(
        answers
            .iter()
            .all(|a| a.as_ref().is_ok_and(|r| r.text == "ok"))
    );
    assert!(
        all_at_once.load(std::sync::atomic::Ordering::SeqCst),
        "only {} calls were in flight at once",
        arrived.load(std::sync::atomic::Ordering::SeqCst)
    );
}

/// A call whose future is dropped (the turn was interrupted, cancelled or shut down) closes its
/// request at once: the provider sees the client go, and stops working (and billing) for it.
#[actix_rt::test]
async fn a_dropped_call_closes_its_request() {
    let server = StrictProvider::start(|_, _| Answer {
        delay: Duration::from_secs(30),
        body: json!({"choices": [{"message": {"role": "assistant", "content": "late"}}]}),
    });
    let model = OpenAiModel::new(http(&server.url), "gpt-test".into()).unwrap();
    let cut = tokio::time::timeout(Duration::from_millis(300), model.complete(request("hi"))).await;
    assert!(cut.is_err(), "the call was still waiting");
    wait_until("the provider sees the client hang up", || async {
        server.hung_up() == 1
    })
    .await;
}

/// One agent's 429 closes its provider's gate: another agent of the same provider waits for
/// the same reset time (`waiting_rate_limit`) without calling, and both go on once it passes.
#[actix_rt::test]
async fn a_rate_limit_holds_every_agent_of_the_provider_until_its_reset() {
    let mut limited = Canned::raw(429, "{\"error\": \"slow down\"}");
    limited.headers.push(("retry-after".into(), "5".into()));
    let server = MockHttp::start(vec![limited, openai_text("after the reset")]);
    let clock = ManualClock::new(1_000);
    let model: Arc<dyn ModelClient> =
        Arc::new(OpenAiModel::new(http(&server.url), "gpt-test".into()).unwrap());
    let sys = TestSystem::builder()
        .model(model)
        .types(plain_with_clock())
        .clock(Arc::new(clock.clone()))
        .start()
        .await;
    let a = sys.root("plain", Some("first")).await;
    let limited_a = sys
        .wait_for_status(&a.id, AgentStatus::WaitingRateLimit)
        .await;
    assert_eq!(limited_a.resume_at_ms, Some(6_000));
    let b = sys.root("plain", Some("second")).await;
    let limited_b = sys
        .wait_for_status(&b.id, AgentStatus::WaitingRateLimit)
        .await;
    assert_eq!(limited_b.resume_at_ms, Some(6_000), "the same reset time");
    assert_eq!(server.requests().len(), 1, "b did not call the provider");
    wait_until("both resume timers", || async { clock.sleepers() == 2 }).await;
    clock.advance(5_000);
    for id in [&a.id, &b.id] {
        sys.wait_for_entry(id, Role::Assistant, "after the reset")
            .await;
    }
    assert_eq!(server.requests().len(), 3);
}

/// An answer the provider cut off at its token limit is not taken as an answer: the turn fails
/// with a clear error (in `inspect`'s `last_error`), no partial text joins the thread, and the
/// tokens it cost are counted.
#[actix_rt::test]
async fn an_answer_cut_off_at_max_tokens_is_not_taken_as_finished() {
    let openai = MockHttp::start(vec![Canned::json(json!({
        "choices": [{"message": {"role": "assistant", "content": "The answer is forty"},
                     "finish_reason": "length"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 16}
    }))]);
    let anthropic = MockHttp::start(vec![Canned::json(json!({
        "content": [{"type": "text", "text": "The answer is forty"}],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 100, "output_tokens": 16}
    }))]);
    let backends: [Arc<dyn ModelClient>; 2] = [
        Arc::new(OpenAiModel::new(http(&openai.url), "gpt-test".into()).unwrap()),
        Arc::new(AnthropicModel::new(http(&anthropic.url), "claude-test".into(), 16).unwrap()),
    ];
    for model in backends {
        let backend = model.backend();
        let sys = TestSystem::builder()
            .model(model)
            .types(plain_with_clock())
            .start()
            .await;
        let a = sys.root("plain", Some("what is the answer?")).await;
        let rec = sys.wait_for_status(&a.id, AgentStatus::Failed).await;
        let error = rec.last_error.unwrap_or_default();
        assert!(
            error.contains("cut off at its token limit"),
            "{backend}: {error}"
        );
        assert!(
            sys.texts_of(&a.id, Role::Assistant).await.is_empty(),
            "{backend}: the partial text is not an answer"
        );
        assert_eq!(rec.usage.output, 16, "{backend}: its tokens are counted");
    }
}
