//! What a provider's configuration limits, checked before each call: its context window (a
//! call whose estimated input would not leave `max_tokens` for the answer compacts the thread
//! first, with a `context_compacted` event) and its pace (`requests_per_minute`: calls beyond
//! it wait in `waiting_rate_limit` without calling); and what its backend reports of itself
//! (a rate limit shared by every agent of the provider, or its agent's own).

use agentd_actors::{
    ContextWindow, ManualClock, ModelCapabilities, ModelClient, ModelError, ModelRequest,
    ModelResponse,
};
use agentd_models::ScriptedModel;
use agentd_proto::{AgentStatus, CompactionTrigger, Event, Role, SpawnRequest};
use agentd_tests::*;
use std::sync::Arc;

const SCRIPT: &str = r#"
[[rule]]
purpose = "compact"
text = "they said three things"

[[rule]]
agent = "plain"
text = "ok: {{input}}"
"#;

/// A message of 200 characters (50 tokens by the estimate).
fn message(n: usize) -> String {
    format!("message {n} ")
        .repeat(20)
        .chars()
        .take(200)
        .collect()
}

#[actix_rt::test]
async fn a_call_that_would_overflow_the_window_compacts_the_thread_first() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .config(|c| {
            c.limits.compact_keep_recent = 2;
            c.context_windows.insert(
                "default".into(),
                ContextWindow {
                    context_tokens: 300,
                    max_tokens: 50,
                },
            );
        })
        .start()
        .await;
    let mut events = sys.events();
    // A background root sees no management tools: the request is the prompt and the thread.
    let a = sys
        .system
        .spawn(SpawnRequest {
            agent_type: Some("plain".into()),
            background: true,
            ..Default::default()
        })
        .await
        .unwrap();
    for n in 1..=2 {
        sys.system.send(&a.id, &message(n), false).await.unwrap();
        sys.wait_for_entry(&a.id, Role::Assistant, &format!("ok: {}", message(n)))
            .await;
    }
    let before = sys.thread(&a.id).await;
    assert!(!before[0].text.starts_with("Summary"), "two messages fit");
    // The third would make ~265 tokens of input: 15 more than the window leaves.
    sys.system.send(&a.id, &message(3), false).await.unwrap();
    let event = next_event(&mut events, "the compaction", |e| {
        matches!(e, Event::ContextCompacted { .. })
    })
    .await;
    let Event::ContextCompacted {
        agent_id,
        estimated_tokens,
        context_tokens,
        trigger,
        entries_before,
        entries_after,
        estimated_tokens_after,
        checkpoint_id,
    } = event
    else {
        unreachable!()
    };
    assert_eq!((agent_id.as_str(), context_tokens), (a.id.as_str(), 300));
    assert!(estimated_tokens > 250, "{estimated_tokens}");
    // The runtime's own compaction: logged with its sizes, no checkpoint.
    assert_eq!(trigger, CompactionTrigger::ContextWindow);
    assert_eq!(checkpoint_id, None);
    assert!(
        entries_after < entries_before && estimated_tokens_after < estimated_tokens,
        "{entries_before} → {entries_after} entries, {estimated_tokens} → {estimated_tokens_after} tokens"
    );
    let t = sys
        .wait_for_entry(&a.id, Role::Assistant, &format!("ok: {}", message(3)))
        .await;
    assert_eq!(
        t[0].text,
        "Summary of the earlier conversation: they said three things"
    );
    assert!(
        !t.iter().any(|e| e.text == message(1)),
        "the oldest went into the summary"
    );
    assert_eq!(
        sys.wait_for_status(&a.id, AgentStatus::Idle).await.status,
        AgentStatus::Idle
    );
}

/// `requests_per_minute`: the provider's calls beyond its rate wait in `waiting_rate_limit`
/// (without calling) until the pace lets them through.
#[actix_rt::test]
async fn calls_beyond_a_provider_s_rate_wait_their_turn_without_calling() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .config(|c| {
            c.provider_rates.insert(
                "default".into(),
                agentd_actors::ProviderRates {
                    requests_per_minute: 2,
                    tokens_per_minute: 0,
                },
            );
        })
        .start()
        .await;
    let mut ids = Vec::new();
    for n in 1..=3 {
        let a = sys.root("plain", Some(&format!("call {n}"))).await;
        ids.push(a.id);
    }
    for (n, id) in ids.iter().take(2).enumerate() {
        sys.wait_for_entry(id, Role::Assistant, &format!("ok: call {}", n + 1))
            .await;
    }
    let third = sys
        .wait_for_status(&ids[2], AgentStatus::WaitingRateLimit)
        .await;
    let wait = third.resume_at_ms.unwrap() - third.updated_at_ms;
    assert!(
        (25_000..=30_000).contains(&wait),
        "the third call waits for the pace: {wait} ms"
    );
    assert!(sys.texts_of(&ids[2], Role::Assistant).await.is_empty());
}

/// A backend that says what it can do as the test tells it, and answers through `inner`: its
/// name stays `inner`'s (here `scripted`), so only the capability can make a difference.
struct Reporting {
    inner: Arc<dyn ModelClient>,
    can: ModelCapabilities,
}

#[async_trait::async_trait]
impl ModelClient for Reporting {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn capabilities(&self) -> ModelCapabilities {
        self.can
    }

    async fn complete(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        self.inner.complete(request).await
    }
}

/// The first agent's call meets a 5 s rate limit (once); every other call answers.
const LIMITED_ONCE: &str = r#"
[[rule]]
agent = "plain"
contains = "first"
once = true
rate_limit_ms = 5000

[[rule]]
agent = "plain"
text = "ok: {{input}}"
"#;

/// Whether one agent's rate limit holds the other agents of its provider is what the backend
/// reports (`shared_rate_limit`), whatever its name: the same `scripted` backend holds a second
/// agent until the first one's reset (without calling) when it says its limits are shared, and
/// lets it answer at once when it says they are its agent's own.
#[actix_rt::test]
async fn a_rate_limit_holds_the_provider_s_agents_only_when_the_backend_says_it_is_shared() {
    for shared in [true, false] {
        let clock = ManualClock::new(1_000);
        let scripted = ScriptedModel::from_toml_str(LIMITED_ONCE, Arc::new(clock.clone()));
        let recorder = Arc::new(RecordingModel::new(Arc::new(scripted.unwrap())));
        let model = Reporting {
            inner: recorder.clone(),
            can: ModelCapabilities {
                shared_rate_limit: shared,
                ..ModelCapabilities::default()
            },
        };
        assert_eq!(model.backend(), "scripted");
        let sys = TestSystem::builder()
            .model(Arc::new(model))
            .clock(Arc::new(clock.clone()))
            .start()
            .await;
        let a = sys.root("plain", Some("first")).await;
        let limited = sys
            .wait_for_status(&a.id, AgentStatus::WaitingRateLimit)
            .await;
        assert_eq!(limited.resume_at_ms, Some(6_000), "shared: {shared}");
        let b = sys.root("plain", Some("second")).await;
        if shared {
            let held = sys
                .wait_for_status(&b.id, AgentStatus::WaitingRateLimit)
                .await;
            assert_eq!(held.resume_at_ms, Some(6_000), "the first one's reset");
            assert!(
                recorder.requests_of(b.id.as_str()).is_empty(),
                "the second agent did not call"
            );
            wait_until("both resume timers", || async { clock.sleepers() == 2 }).await;
            clock.advance(5_000);
            for (id, text) in [(&a.id, "ok: first"), (&b.id, "ok: second")] {
                sys.wait_for_entry(id, Role::Assistant, text).await;
            }
        } else {
            sys.wait_for_entry(&b.id, Role::Assistant, "ok: second")
                .await;
            assert_eq!(
                sys.record(&a.id).await.status,
                AgentStatus::WaitingRateLimit,
                "the first agent still waits for its own reset"
            );
        }
    }
}
