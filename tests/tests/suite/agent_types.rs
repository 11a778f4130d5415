//! Agent types as a user meets them (seed 004): a spawn that names no type starts the built-in
//! `subagent` (the shipped `deploy/agents/subagent.toml`, through a real turn), and the running
//! service's `agents.dir` replaces built-in types — by a file's name, by its stem, and for a
//! name that is otherwise an alias.

use agentd_proto::{AgentStatus, Role};
use agentd_tests::process::AgentdProcess;
use agentd_tests::*;
use serde_json::{Value, json};

/// A lead that delegates without naming a type, once with `spawn_agent` and once with the
/// `spawn_subagent` alias and a blank type; the sub-agents yield who they are.
const DELEGATING_LEAD: &str = r#"
[[rule]]
agent = "lead"
role = "user"
contains = "delegate"
text = "Delegating."
[[rule.tool_calls]]
name = "spawn_agent"
arguments = { prompt = "first errand" }
[[rule.tool_calls]]
name = "spawn_subagent"
arguments = { prompt = "second errand", agent_type = " " }

[[rule]]
agent = "subagent"
role = "user"
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = "{{agent_type}} | {{title}} | {{tools}} | {{system_prompt}}" }

[[rule]]
text = "lead heard: {{input}}"
"#;

#[actix_rt::test]
async fn a_spawn_that_names_no_type_starts_the_built_in_subagent() {
    let types = agentd::builtin::load_agent_types(None).unwrap();
    let sys = TestSystem::builder()
        .script(DELEGATING_LEAD)
        .types(types.iter().cloned().collect())
        .start()
        .await;
    let lead = sys.root("lead", Some("delegate two errands")).await;
    let children = || async {
        sys.system
            .list(Some(&lead.id))
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.view.summary.agent_id.to_string())
            .collect::<Vec<_>>()
    };
    wait_until("both sub-agents", || async { children().await.len() == 2 }).await;
    let shipped = types.get("subagent").unwrap();
    for child in children().await {
        let rec = sys.wait_for_status(&child, AgentStatus::Completed).await;
        assert_eq!((&*rec.agent_type, &*rec.title), ("subagent", "Sub-agent"));
        // The model saw the type's overlay under the sub-agent role, and only
        // `yield_to_parent` (the type lists no tools).
        let said = rec.result.as_deref().and_then(Value::as_str).unwrap();
        let parts: Vec<&str> = said.splitn(4, " | ").collect();
        assert_eq!(parts[..3], ["subagent", "Sub-agent", "yield_to_parent"]);
        let prompt = parts[3];
        assert!(
            prompt.ends_with(shipped.prompt.trim()),
            "the shipped overlay last: {prompt}"
        );
        assert!(
            prompt.contains(sys.system.deps().config.subagent_prompt.trim()),
            "the sub-agent role: {prompt}"
        );
    }
    // The lead heard both.
    wait_until("both results at the lead", || async {
        sys.thread(&lead.id)
            .await
            .iter()
            .filter(|e| e.role == Role::User && e.text.starts_with("From Sub-agent"))
            .count()
            == 2
    })
    .await;
}

/// The answer of every agent says what its model was shown.
const SELF_DESCRIBING: &str =
    "[[rule]]\ntext = \"{{agent_type}} | {{title}} | {{tools}} | {{system_prompt}}\"\n";

fn view(p: &AgentdProcess, id: &str) -> Value {
    p.get(&format!("/v1/agents/{id}"))
}

/// The answer of agent `id` once it has one.
fn answer_of(p: &AgentdProcess, id: &str) -> String {
    p.wait_for("its answer", |p| p.texts(id).len() >= 2);
    p.texts(id)[1].clone()
}

#[test]
fn agents_dir_replaces_built_in_types_in_the_running_service() {
    let dir = tempfile::tempdir().unwrap();
    let types = dir.path().join("types");
    std::fs::create_dir(&types).unwrap();
    // By name (the default type), by a `name` that is not the file's stem, and a file named
    // for an alias.
    std::fs::write(
        types.join("subagent.toml"),
        "title = \"Helper\"\nprompt = \"You are the replaced helper.\"\ntools = [\"current_time\"]\n",
    )
    .unwrap();
    std::fs::write(
        types.join("engineer.toml"),
        "name = \"coding\"\ntitle = \"Engineer\"\nprompt = \"You engineer.\"\n",
    )
    .unwrap();
    std::fs::write(
        types.join("debugger.toml"),
        "title = \"Bug Hunter\"\nprompt = \"You hunt bugs.\"\n",
    )
    .unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SELF_DESCRIBING).unwrap();
    let p = AgentdProcess::start(&[
        ("AGENTD__STORE__KIND", "memory".into()),
        ("AGENTD__MODEL__SCRIPT", script.display().to_string()),
        ("AGENTD__AGENTS__DIR", types.display().to_string()),
    ]);

    let info = p.get("/v1/info");
    let listed: Vec<(String, String)> = info["agent_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["title"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let title_of = |name: &str| {
        let found: Vec<&str> = listed
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, t)| t.as_str())
            .collect();
        assert_eq!(found.len(), 1, "{name} listed once: {listed:?}");
        found[0].to_string()
    };
    assert_eq!(title_of("subagent"), "Helper");
    assert_eq!(title_of("coding"), "Engineer");
    assert_eq!(title_of("debugger"), "Bug Hunter");
    assert_eq!(title_of("debug"), "Debugger", "the built-in stays");
    assert_eq!(title_of("lead"), "Lead");
    // A sub-agent without a type is the replaced `subagent`, with its prompt and tools.
    let lead = p.post("/v1/agents", json!({"agent_type": "lead"})).unwrap()["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    let child = p
        .post("/v1/agents", json!({"parent_id": lead, "prompt": "help"}))
        .unwrap()["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    let v = view(&p, &child);
    assert_eq!(
        (v["agent_type"].as_str(), v["title"].as_str()),
        (Some("subagent"), Some("Helper"))
    );
    let said = answer_of(&p, &child);
    assert!(
        said.starts_with("subagent | Helper | ")
            && said.contains("current_time")
            && said.ends_with("You are the replaced helper."),
        "{said}"
    );
    assert!(!said.contains("Complete the task and yield"), "{said}");

    // `worker` still names `coding`, now the replaced one; `debugger` names its own file's type.
    let built_in = agentd::builtin::load_agent_types(None).unwrap();
    let debug_prompt = built_in.get("debug").unwrap().prompt.trim().to_string();
    for (asked, name, title, prompt) in [
        ("worker", "coding", "Engineer", "You engineer."),
        ("coding", "coding", "Engineer", "You engineer."),
        ("debugger", "debugger", "Bug Hunter", "You hunt bugs."),
        ("debug", "debug", "Debugger", debug_prompt.as_str()),
    ] {
        let id = p.spawn(asked, "who are you");
        let v = view(&p, &id);
        assert_eq!(
            (v["agent_type"].as_str(), v["title"].as_str()),
            (Some(name), Some(title)),
            "{asked}"
        );
        let said = answer_of(&p, &id);
        assert!(said.starts_with(&format!("{name} | {title} |")), "{said}");
        assert!(said.ends_with(prompt), "{asked}: {said}");
    }
    p.stop();
}
