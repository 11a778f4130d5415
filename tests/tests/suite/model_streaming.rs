//! Streamed answers of the HTTP backends against a local streaming provider, through real
//! actors: text arrives as `text_delta` events and lands whole in the thread, tool calls are
//! assembled from their deltas, usage comes from the stream's last events, a `length` stop is
//! not an answer, 429 and 5xx before the first byte behave as for whole answers, and a call
//! cancelled or paused mid-stream is aborted (the provider sees the hang-up) with its tokens
//! counted: the provider's report when it gave one, an estimate flagged `estimated` otherwise.

use agentd_actors::{ManualClock, ModelClient, SystemClock};
use agentd_models::{AnthropicModel, HttpSettings, OpenAiModel};
use agentd_proto::{AgentStatus, Control, Event, Role};
use agentd_tests::streaming_provider::{
    anthropic_text, anthropic_tool_use, openai_text, openai_tool_call,
};
use agentd_tests::*;
use std::sync::Arc;
use std::time::Duration;

fn http(url: &str) -> HttpSettings {
    HttpSettings {
        base_url: url.to_string(),
        api_key: "test-key".into(),
        timeout: Duration::from_secs(5),
        stream: true,
        idle_timeout: Duration::from_secs(5),
        max_retries: 2,
        backoff: Duration::from_millis(5),
    }
}

fn openai(url: &str) -> Arc<dyn ModelClient> {
    Arc::new(OpenAiModel::new(http(url), "gpt-test".into()).unwrap())
}

fn anthropic(url: &str) -> Arc<dyn ModelClient> {
    Arc::new(AnthropicModel::new(http(url), "claude-test".into(), 64).unwrap())
}

async fn system(model: Arc<dyn ModelClient>, clock: Arc<dyn agentd_actors::Clock>) -> TestSystem {
    TestSystem::builder()
        .model(model)
        .types(plain_with_clock())
        .clock(clock)
        .start()
        .await
}

/// The text of `agent`'s `text_delta` events received so far, in order, with their seqs.
fn deltas_of(rx: &mut tokio::sync::broadcast::Receiver<Event>, agent: &str) -> (String, Vec<u64>) {
    let mut text = String::new();
    let mut seqs = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if let Event::TextDelta {
            agent_id,
            seq,
            text: piece,
            ..
        } = e
            && agent_id == agent
        {
            text.push_str(&piece);
            seqs.push(seq);
        }
    }
    (text, seqs)
}

#[actix_rt::test]
async fn openai_streamed_text_reaches_the_thread_and_the_events() {
    let provider = StreamingProvider::start(vec![openai_text(
        &["Hel", "lo, ", "stream", "ed world"],
        "stop",
        Some((100, 7)),
    )]);
    let sys = system(openai(&provider.url), Arc::new(SystemClock)).await;
    let mut rx = sys.events();
    let a = sys.root("plain", Some("hi")).await;
    sys.wait_for_entry(&a.id, Role::Assistant, "Hello, streamed world")
        .await;
    let rec = sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    assert_eq!((rec.usage.input, rec.usage.output), (100, 7));
    assert!(!rec.usage.estimated, "the provider reported it");
    let (text, seqs) = deltas_of(&mut rx, &a.id);
    assert_eq!(text, "Hello, streamed world", "every piece, in order");
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    let body = &provider.bodies()[0];
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
}

#[actix_rt::test]
async fn tool_call_deltas_are_assembled_into_calls() {
    // OpenAI: the arguments arrive three characters at a time.
    let provider = StreamingProvider::start(vec![
        openai_tool_call(
            "call_7",
            "current_time",
            r#"{"why": "to know the time"}"#,
            3,
        ),
        openai_text(&["It is ", "late."], "stop", Some((120, 5))),
    ]);
    let sys = system(openai(&provider.url), Arc::new(SystemClock)).await;
    let a = sys.root("plain", Some("what time is it?")).await;
    let thread = sys
        .wait_for_entry(&a.id, Role::Assistant, "It is late.")
        .await;
    let call = thread
        .iter()
        .find_map(|e| e.tool_calls.first())
        .expect("the call is recorded");
    assert_eq!(call.id, "call_7");
    assert_eq!(call.name, "current_time");
    assert_eq!(
        call.arguments,
        serde_json::json!({"why": "to know the time"})
    );
    assert!(
        thread
            .iter()
            .any(|e| e.role == Role::Tool && e.tool_call_id.as_deref() == Some("call_7"))
    );
    let rec = sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    assert_eq!((rec.usage.input, rec.usage.output), (50 + 120, 8 + 5));
    // The second request carries the assembled call back.
    let second = &provider.bodies()[1];
    let msgs = second["messages"].as_array().unwrap();
    let assistant = msgs.iter().find(|m| m["tool_calls"].is_array()).unwrap();
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        r#"{"why":"to know the time"}"#
    );

    // Anthropic: text and a tool_use block whose input arrives in pieces; usage in four kinds.
    let provider = StreamingProvider::start(vec![
        anthropic_tool_use(
            "Let me look.",
            "toolu_1",
            "current_time",
            r#"{"zone": "UTC"}"#,
            4,
        ),
        anthropic_text(&["It is ", "noon."], "end_turn", 90, 4),
    ]);
    let sys = system(anthropic(&provider.url), Arc::new(SystemClock)).await;
    let a = sys.root("plain", Some("what time is it?")).await;
    let thread = sys
        .wait_for_entry(&a.id, Role::Assistant, "It is noon.")
        .await;
    let step = thread
        .iter()
        .find(|e| !e.tool_calls.is_empty())
        .expect("the call is recorded");
    assert_eq!(step.text, "Let me look.");
    assert_eq!(step.tool_calls[0].id, "toolu_1");
    assert_eq!(
        step.tool_calls[0].arguments,
        serde_json::json!({"zone": "UTC"})
    );
    let rec = sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    assert_eq!(
        (
            rec.usage.input,
            rec.usage.output,
            rec.usage.cache_write,
            rec.usage.cache_read
        ),
        (70 + 90, 12 + 4, 30, 20)
    );
    assert_eq!(provider.bodies()[0]["stream"], true);
}

#[actix_rt::test]
async fn a_length_stop_is_not_an_answer() {
    for (backend, provider) in [
        (
            "openai",
            StreamingProvider::start(vec![openai_text(
                &["The answer ", "is forty"],
                "length",
                Some((100, 16)),
            )]),
        ),
        (
            "anthropic",
            StreamingProvider::start(vec![anthropic_text(
                &["The answer ", "is forty"],
                "max_tokens",
                100,
                16,
            )]),
        ),
    ] {
        let model = if backend == "openai" {
            openai(&provider.url)
        } else {
            anthropic(&provider.url)
        };
        let sys = system(model, Arc::new(SystemClock)).await;
        let a = sys.root("plain", Some("what is the answer?")).await;
        let rec = sys.wait_for_status(&a.id, AgentStatus::Failed).await;
        let error = rec.last_error.clone().unwrap_or_default();
        assert!(
            error.contains("cut off at its token limit"),
            "{backend}: {error}"
        );
        let inspected = sys.system.inspect(&a.id).await.unwrap();
        let shown = serde_json::to_string(&inspected).unwrap();
        assert!(
            shown.contains("cut off at its token limit"),
            "{backend}: {shown}"
        );
        assert!(
            sys.texts_of(&a.id, Role::Assistant).await.is_empty(),
            "{backend}: the partial text is not an answer"
        );
        assert_eq!(rec.usage.output, 16, "{backend}: its tokens are counted");
    }
}

#[actix_rt::test]
async fn a_429_waits_and_a_5xx_before_the_first_byte_is_retried() {
    let provider = StreamingProvider::start(vec![
        Reply::status(429, &[("retry-after", "7")]),
        Reply::status(503, &[]),
        Reply::status(502, &[]),
        openai_text(&["done ", "after all"], "stop", Some((10, 2))),
    ]);
    let clock = ManualClock::new(1_000);
    let sys = system(openai(&provider.url), Arc::new(clock.clone())).await;
    let a = sys.root("plain", Some("hello")).await;
    let rec = sys
        .wait_for_status(&a.id, AgentStatus::WaitingRateLimit)
        .await;
    assert_eq!(rec.resume_at_ms, Some(8_000), "retry-after: 7 s");
    wait_until("resume timer", || async { clock.sleepers() == 1 }).await;
    clock.advance(7_000);
    sys.wait_for_entry(&a.id, Role::Assistant, "done after all")
        .await;
    assert_eq!(
        provider.bodies().len(),
        4,
        "the 429, two 5xx retried, the answer"
    );
}

/// A stream that stalls longer than `idle_timeout` fails the call instead of hanging the turn.
#[actix_rt::test]
async fn a_silent_stream_times_out_between_chunks() {
    let provider = StreamingProvider::start(vec![
        openai_text(&["slow"], "stop", None).paced(2, Duration::from_millis(1_500)),
    ]);
    let mut settings = http(&provider.url);
    settings.idle_timeout = Duration::from_millis(300);
    settings.max_retries = 0;
    let model: Arc<dyn ModelClient> =
        Arc::new(OpenAiModel::new(settings, "gpt-test".into()).unwrap());
    let sys = system(model, Arc::new(SystemClock)).await;
    let a = sys.root("plain", Some("hello")).await;
    let rec = sys.wait_for_status(&a.id, AgentStatus::Failed).await;
    let error = rec.last_error.unwrap_or_default();
    assert!(error.contains("idle_timeout_ms"), "{error}");
}

/// A `plain` root agent spawned with `prompt`, once its answer has begun to arrive.
async fn answering(sys: &TestSystem, prompt: &str) -> agentd_proto::AgentRecord {
    let mut rx = sys.events();
    let a = sys.root("plain", Some(prompt)).await;
    next_event(
        &mut rx,
        "text arriving",
        |e| matches!(e, Event::TextDelta { agent_id, .. } if *agent_id == a.id),
    )
    .await;
    a
}

/// The pieces of a long answer, sent slowly.
fn slow_pieces() -> Vec<&'static str> {
    vec!["one two three four "; 60]
}

#[actix_rt::test]
async fn a_call_cancelled_mid_stream_is_aborted_and_its_tokens_estimated() {
    // OpenAI reports usage only at the end: an aborted call's tokens are an estimate.
    let provider = StreamingProvider::start(vec![
        openai_text(&slow_pieces(), "stop", Some((500, 300))).paced(3, Duration::from_millis(50)),
    ]);
    let sys = system(openai(&provider.url), Arc::new(SystemClock)).await;
    let a = answering(&sys, "tell me a long story").await;
    sys.system.control(&a.id, Control::Cancel).await.unwrap();
    let rec = sys.wait_for_status(&a.id, AgentStatus::Cancelled).await;
    wait_until("the provider to see the hang-up", || async {
        provider.hung_up() == 1
    })
    .await;
    assert!(rec.usage.estimated, "{:?}", rec.usage);
    assert!(
        rec.usage.output > 0 && rec.usage.output < 300,
        "what was streamed so far: {:?}",
        rec.usage
    );
    assert!(
        rec.usage.input > 0,
        "the input is estimated too: {:?}",
        rec.usage
    );
    assert!(sys.texts_of(&a.id, Role::Assistant).await.is_empty());
}

#[actix_rt::test]
async fn a_call_interrupted_after_the_provider_reported_usage_counts_the_report() {
    // Everything but `message_stop` comes at once, then the stream stalls: the interrupting
    // message aborts it with the provider's own figures in hand.
    let reply = anthropic_text(&["All ", "of it"], "end_turn", 1_234, 56);
    let stop_at = match &reply {
        Reply::Stream(events) => events.len() - 1,
        Reply::Status { .. } => unreachable!(),
    };
    let provider = StreamingProvider::start(vec![
        reply.paced(stop_at, Duration::from_secs(30)),
        anthropic_text(&["next"], "end_turn", 10, 1),
    ]);
    let sys = system(anthropic(&provider.url), Arc::new(SystemClock)).await;
    let a = answering(&sys, "first").await;
    // The report is in once the whole text arrived (the usage precedes message_stop).
    tokio::time::sleep(Duration::from_millis(200)).await;
    sys.system.send(&a.id, "stop that", true).await.unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "next").await;
    let rec = sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    wait_until("the provider to see the hang-up", || async {
        provider.hung_up() == 1
    })
    .await;
    assert_eq!(
        (rec.usage.input, rec.usage.output, rec.usage.estimated),
        (1_234 + 10, 56 + 1, false),
        "the aborted call's reported usage and the next call's"
    );
}

#[actix_rt::test]
async fn a_pause_aborts_the_call_in_flight_and_resume_runs_the_step_again() {
    let provider = StreamingProvider::start(vec![
        anthropic_text(&slow_pieces(), "end_turn", 300, 200).paced(4, Duration::from_millis(50)),
        anthropic_text(&["resumed ", "answer"], "end_turn", 300, 2),
    ]);
    let sys = system(anthropic(&provider.url), Arc::new(SystemClock)).await;
    let a = answering(&sys, "tell me a long story").await;
    sys.system.control(&a.id, Control::Pause).await.unwrap();
    let rec = sys.wait_for_status(&a.id, AgentStatus::Paused).await;
    wait_until("the provider to see the hang-up", || async {
        provider.hung_up() == 1
    })
    .await;
    assert_eq!(
        rec.usage.input, 300,
        "message_start's report: {:?}",
        rec.usage
    );
    assert!(
        rec.usage.estimated && rec.usage.output > 0,
        "the output streamed so far, estimated: {:?}",
        rec.usage
    );
    assert!(sys.texts_of(&a.id, Role::Assistant).await.is_empty());
    sys.system.control(&a.id, Control::Resume).await.unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "resumed answer")
        .await;
    let rec = sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    assert_eq!(rec.usage.input, 600, "both calls: {:?}", rec.usage);
    assert_eq!(provider.bodies().len(), 2);
}

#[actix_rt::test]
async fn a_shutdown_aborts_the_call_in_flight_and_stores_what_it_cost() {
    let provider = StreamingProvider::start(vec![
        openai_text(&slow_pieces(), "stop", Some((500, 300))).paced(3, Duration::from_millis(50)),
    ]);
    let sys = system(openai(&provider.url), Arc::new(SystemClock)).await;
    let a = answering(&sys, "tell me a long story").await;
    sys.system.shutdown().await;
    wait_until("the provider to see the hang-up", || async {
        provider.hung_up() == 1
    })
    .await;
    let stored = sys.store.get_agent(&a.id).await.unwrap().unwrap();
    assert!(
        stored.usage.estimated && stored.usage.output > 0 && stored.usage.input > 0,
        "the aborted call's estimate is stored: {:?}",
        stored.usage
    );
}
