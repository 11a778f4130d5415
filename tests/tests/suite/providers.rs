//! Model providers per agent type and per spawn, and the concurrency limits per parent and per
//! provider: through real actors, and through the service's own wiring from config.

use agentd_actors::{ManualClock, ModelClient};
use agentd_models::{ModelRouter, ScriptedModel};
use agentd_proto::{AgentStatus, ErrorCode, Role, SpawnRequest};
use agentd_tests::*;
use std::sync::Arc;

const SLOW: &str = r#"
[[rule]]
contains = "slow-task"
delay_ms = 1000
text = "finished"

[[rule]]
text = "ok: {{input}}"
"#;

fn scripted(script: &str, clock: &ManualClock) -> Arc<dyn ModelClient> {
    Arc::new(ScriptedModel::from_toml_str(script, Arc::new(clock.clone())).unwrap())
}

async fn spawn(
    sys: &TestSystem,
    parent: Option<&str>,
    provider: Option<&str>,
    prompt: &str,
) -> agentd_proto::AgentRecord {
    sys.spawn(SpawnRequest {
        agent_type: Some("plain".into()),
        parent_id: parent.map(str::to_string),
        provider: provider.map(str::to_string),
        prompt: Some(prompt.into()),
        ..Default::default()
    })
    .await
}

#[actix_rt::test]
async fn one_parent_runs_one_child_turn_at_a_time_others_are_not_held_back() {
    let sys = TestSystem::builder()
        .script(SLOW)
        .manual_clock()
        .config(|c| c.limits.max_running_turns_per_parent = 1)
        .start()
        .await;
    let clock = sys.manual_clock();
    let p1 = sys.root("plain", None).await;
    let p2 = sys.root("plain", None).await;
    let c1 = spawn(&sys, Some(&p1.id), None, "slow-task one").await;
    wait_until("c1 runs", || async { clock.sleepers() == 1 }).await;
    let c2 = spawn(&sys, Some(&p1.id), None, "slow-task two").await;
    sys.wait_for_status(&c2.id, AgentStatus::Queued).await;
    // Another parent's child is not held back by p1's limit.
    let d1 = spawn(&sys, Some(&p2.id), None, "slow-task three").await;
    wait_until("d1 runs beside c1", || async { clock.sleepers() == 2 }).await;
    assert_eq!(sys.record(&c1.id).await.status, AgentStatus::Running);
    assert_eq!(sys.record(&d1.id).await.status, AgentStatus::Running);
    assert_eq!(sys.record(&c2.id).await.status, AgentStatus::Queued);
    clock.advance(1000);
    sys.wait_for_entry(&c1.id, Role::Assistant, "finished")
        .await;
    // c1's slot goes to c2.
    wait_until("c2 runs", || async {
        sys.record(&c2.id).await.status == AgentStatus::Running && clock.sleepers() == 1
    })
    .await;
    clock.advance(1000);
    sys.wait_for_entry(&c2.id, Role::Assistant, "finished")
        .await;
}

#[actix_rt::test]
async fn providers_are_chosen_per_spawn_and_limited_each_on_its_own() {
    let clock = ManualClock::new(1_000_000);
    let router = ModelRouter::new(scripted(SLOW, &clock)).with(
        "fast",
        scripted(
            "[[rule]]\ncontains = \"busy\"\ndelay_ms = 1000\ntext = \"fast busy\"\n\n[[rule]]\ntext = \"fast: {{input}}\"\n",
            &clock,
        ),
    );
    let sys = TestSystem::builder()
        .model(Arc::new(router))
        .clock(Arc::new(clock.clone()))
        .config(|c| {
            c.providers.insert("fast".into());
            c.provider_limits.insert("fast".into(), 1);
        })
        .start()
        .await;
    let d = spawn(&sys, None, None, "hello").await;
    let f = spawn(&sys, None, Some("fast"), "hello").await;
    sys.wait_for_entry(&d.id, Role::Assistant, "ok: hello")
        .await;
    sys.wait_for_entry(&f.id, Role::Assistant, "fast: hello")
        .await;
    assert_eq!(sys.record(&f.id).await.provider.as_deref(), Some("fast"));

    // "fast" runs one turn at a time; the default provider is not limited.
    let f1 = spawn(&sys, None, Some("fast"), "busy 1").await;
    wait_until("f1 runs", || async { clock.sleepers() == 1 }).await;
    let f2 = spawn(&sys, None, Some("fast"), "busy 2").await;
    sys.wait_for_status(&f2.id, AgentStatus::Queued).await;
    let d1 = spawn(&sys, None, None, "slow-task 3").await;
    wait_until("d1 runs beside f1", || async { clock.sleepers() == 2 }).await;
    assert_eq!(sys.record(&d1.id).await.status, AgentStatus::Running);
    clock.advance(1000);
    sys.wait_for_entry(&f1.id, Role::Assistant, "fast busy")
        .await;
    wait_until("f2 runs", || async {
        sys.record(&f2.id).await.status == AgentStatus::Running && clock.sleepers() == 1
    })
    .await;
    clock.advance(1000);
    sys.wait_for_entry(&f2.id, Role::Assistant, "fast busy")
        .await;

    let err = sys
        .system
        .spawn(SpawnRequest {
            provider: Some("nope".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::UnknownProvider);
}

#[actix_rt::test]
async fn the_service_routes_agent_types_to_their_configured_provider() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let default_script = write("default.toml", "[[rule]]\ntext = \"default: {{input}}\"\n");
    let fast_script = write("fast.toml", "[[rule]]\ntext = \"fast: {{input}}\"\n");
    let types = dir.path().join("types");
    std::fs::create_dir(&types).unwrap();
    std::fs::write(
        types.join("quick.toml"),
        "name = \"quick\"\ntitle = \"Quick\"\nprovider = \"fast\"\nmodel = \"tiny-1\"\nphases = 3\n",
    )
    .unwrap();
    let settings = agentd::settings::Settings::from_overrides(&format!(
        "[server]\nbind = \"127.0.0.1:0\"\n[store]\nkind = \"memory\"\n\
         [model]\nscript = \"{default_script}\"\n\
         [providers.fast]\nscript = \"{fast_script}\"\nmax_concurrent = 2\n\
         [agents]\ndir = \"{}\"\n",
        types.display()
    ))
    .unwrap();
    let running = agentd::Builder::new(settings.clone())
        .serve()
        .await
        .unwrap();
    let sys = &running.system;
    let by_type = sys
        .spawn(SpawnRequest {
            agent_type: Some("quick".into()),
            prompt: Some("one".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_type.model.as_deref(), Some("tiny-1"));
    let by_spawn = sys
        .spawn(SpawnRequest {
            provider: Some("fast".into()),
            prompt: Some("two".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let plain = sys
        .spawn(SpawnRequest {
            prompt: Some("three".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let last_text = |id: String| async move {
        wait_until("an answer", || async {
            sys.thread(&id).await.unwrap().len() == 2
        })
        .await;
        sys.thread(&id).await.unwrap()[1].text.clone()
    };
    assert_eq!(last_text(by_type.id).await, "fast: one");
    assert_eq!(last_text(by_spawn.id).await, "fast: two");
    assert_eq!(last_text(plain.id).await, "default: three");
    running.stop().await;

    // A type naming a provider that is not configured is a start-up error.
    let bad = agentd::settings::Settings::from_overrides(&format!(
        "[server]\nbind = \"127.0.0.1:0\"\n[store]\nkind = \"memory\"\n[agents]\ndir = \"{}\"\n",
        types.display()
    ))
    .unwrap();
    let err = agentd::Builder::new(bad.clone())
        .serve()
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("provider `fast`"), "{err}");
}
