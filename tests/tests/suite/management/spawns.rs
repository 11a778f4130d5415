//! What a spawn gives its sub-agent: its allowed tools, context files from allowed directories only, the stacked system prompt.

use super::*;

#[actix_rt::test]
async fn a_tool_using_sub_agent_runs_its_allowed_tool() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let child = spawn_coder(&sys, &lead.id, "use the clock").await;
    let t = sys
        .wait_for_entry(&child, Role::Assistant, "clock answer")
        .await;
    let tool_entry = t.iter().find(|e| e.role == Role::Tool).unwrap();
    assert!(tool_entry.text.contains("now_ms"), "{}", tool_entry.text);
    assert_eq!(
        tool_entry.tool_call_id.as_deref(),
        t.iter()
            .find(|e| !e.tool_calls.is_empty())
            .map(|e| e.tool_calls[0].id.as_str())
    );
}

#[actix_rt::test]
async fn context_files_are_attached_only_from_allowed_directories_and_capped() {
    let allowed = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(allowed.path().join("spec.md"), "the spec says hello").unwrap();
    std::fs::write(allowed.path().join("big.txt"), "x".repeat(2048)).unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        allowed.path().join("link.txt"),
    )
    .unwrap();
    let dir = allowed.path().to_path_buf();
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .config(move |c| {
            c.context_dirs = vec![dir];
            c.limits.context_file_max_bytes = 1024;
        })
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let spec = allowed.path().join("spec.md").display().to_string();
    let r = tool(
        &sys,
        &lead.id,
        "spawn_agent",
        json!({"agent_type": "coding", "prompt": "read it", "contextFiles": [spec]}),
    )
    .await
    .unwrap();
    let child = r["agent_id"].as_str().unwrap();
    let t = sys.wait_for_entry(child, Role::User, "read it").await;
    assert!(
        t[0].text.contains("the spec says hello") && t[0].text.contains("<context_file"),
        "{}",
        t[0].text
    );
    // A path relative to a context dir is read from there.
    let r = tool(
        &sys,
        &lead.id,
        "spawn_agent",
        json!({"agent_type": "coding", "prompt": "relative", "context_files": ["./spec.md"]}),
    )
    .await
    .unwrap();
    let child = r["agent_id"].as_str().unwrap();
    let t = sys.wait_for_entry(child, Role::User, "relative").await;
    assert!(t[0].text.contains("the spec says hello"), "{}", t[0].text);

    let escape = format!(
        "{}/../{}/secret.txt",
        allowed.path().display(),
        outside.path().file_name().unwrap().to_string_lossy()
    );
    let relative_escape = format!(
        "../{}/secret.txt",
        outside.path().file_name().unwrap().to_string_lossy()
    );
    let big = allowed.path().join("big.txt").display().to_string();
    let r = tool(
        &sys,
        &lead.id,
        "spawn_agent",
        json!({"agent_type": "coding", "prompt": "x", "context_files": [big]}),
    )
    .await;
    assert_eq!(code(r), Some(ErrorCode::PayloadTooLarge));
    // Outside (existing or not, directly, by `..` or through a link), missing, or not a
    // readable file: one answer, so nothing can be learnt about files outside the dirs.
    for file in [
        outside.path().join("secret.txt").display().to_string(),
        outside.path().join("missing.txt").display().to_string(),
        "/etc/hostname".to_string(),
        escape,
        relative_escape,
        allowed.path().join("link.txt").display().to_string(),
        allowed.path().join("missing.txt").display().to_string(),
        allowed.path().display().to_string(),
        String::new(),
    ] {
        let r = tool(
            &sys,
            &lead.id,
            "spawn_agent",
            json!({"agent_type": "coding", "prompt": "x", "context_files": [file]}),
        )
        .await;
        let e = r.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{file}: {e}");
        assert_eq!(
            e.message,
            format!(
                "context file `{file}` is not a readable text file inside the context \
                 directories (agents.context_dirs)"
            ),
        );
    }
}

#[actix_rt::test]
async fn the_system_prompt_stacks_base_subagent_and_type_overlays() {
    const ECHO_PROMPT: &str = "[[rule]]\ntext = \"{{system_prompt}}\"\n";
    let mut t = managing_cast();
    for ty in &mut t {
        if ty.name == "coding" {
            ty.prompt = "TYPE OVERLAY".into();
        }
    }
    let sys = TestSystem::builder()
        .script(ECHO_PROMPT)
        .types(t)
        .config(|c| {
            c.base_prompt = "BASE".into();
            c.subagent_prompt = "SUBAGENT ROLE".into();
        })
        .start()
        .await;
    let lead = sys.root("lead", Some("hi")).await;
    let root_prompt = sys.wait_for_entry(&lead.id, Role::Assistant, "BASE").await;
    assert_eq!(
        root_prompt.last().unwrap().text,
        "BASE",
        "roots get no sub-agent overlay"
    );
    let child = spawn_coder(&sys, &lead.id, "go").await;
    let t = sys.wait_for_entry(&child, Role::Assistant, "BASE").await;
    assert_eq!(
        t.last().unwrap().text,
        "BASE\n\nSUBAGENT ROLE\n\nTYPE OVERLAY"
    );
}
