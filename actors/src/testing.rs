//! Helpers for this crate's unit tests.

use agentd_proto::{AgentRecord, AgentStatus, Channel};

/// A root agent's record, as a spawn without options makes it.
pub(crate) fn record(id: &str) -> AgentRecord {
    AgentRecord {
        id: id.into(),
        parent_id: None,
        root_id: id.into(),
        depth: 0,
        title: "Test".into(),
        agent_type: "worker".into(),
        status: AgentStatus::Idle,
        status_reason: None,
        foreground: true,
        allowed_tools: None,
        channel: Channel::None,
        last_error: None,
        usage: Default::default(),
        cost_usd: 0.0,
        phase: None,
        current_step: None,
        progress: None,
        resume_at_ms: None,
        provider: None,
        model: None,
        env: Default::default(),
        turns: 0,
        budget: None,
        priority: Default::default(),
        depends_on: Vec::new(),
        dependencies_settled: false,
        on_dependency_failure: None,
        attempts: 0,
        current_task: None,
        task_steps_counted: 0,
        trace: None,
        result: None,
        agent_cli: None,
        prompt_preview: None,
        created_at_ms: 0,
        updated_at_ms: 0,
    }
}
