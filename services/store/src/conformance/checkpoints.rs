//! Checkpoints: newest first, pruned to the number kept.

use super::*;

pub(super) fn checkpoint(agent: &str, n: u64) -> agentd_proto::Checkpoint {
    agentd_proto::Checkpoint {
        id: agentd_proto::ids::new_id(),
        agent_id: agent.into(),
        reason: agentd_proto::CheckpointReason::Auto,
        trigger: format!("phase {n} complete"),
        created_at_ms: n,
        status: AgentStatus::Running,
        phase: Some(n as u32),
        current_step: None,
        progress: Some(0.5),
        conversation: vec![entry(&format!("entry {n}"))],
        pending: vec![envelope(&format!("pending {n}"))],
        environment: [("K".to_string(), format!("v{n}"))].into(),
        usage: Usage::default(),
        cost_usd: 0.0,
        turns: n,
        cli_session_id: None,
    }
}

pub(super) async fn checkpoints_are_kept_newest_first_and_pruned(store: &dyn ThreadStore) {
    let all: Vec<_> = (1..=5).map(|n| checkpoint("c-agent", n)).collect();
    for cp in &all[..3] {
        store.checkpoint_put(cp, 0).await.unwrap();
    }
    let listed = store.checkpoints("c-agent").await.unwrap();
    assert_eq!(listed, vec![all[2].clone(), all[1].clone(), all[0].clone()]);
    // Keeping 2 prunes the oldest ones.
    store.checkpoint_put(&all[3], 2).await.unwrap();
    store.checkpoint_put(&all[4], 2).await.unwrap();
    let listed = store.checkpoints("c-agent").await.unwrap();
    assert_eq!(listed, vec![all[4].clone(), all[3].clone()]);
    assert!(store.checkpoints("c-other").await.unwrap().is_empty());
    store.put_agent(&record("c-agent", None, 1)).await.unwrap();
    store.delete_agent("c-agent").await.unwrap();
    assert!(store.checkpoints("c-agent").await.unwrap().is_empty());
}

/// Runs every property of checkpoints against `store`, which must be empty of the ids they use.
pub async fn run(store: Arc<dyn ThreadStore>) {
    checkpoints_are_kept_newest_first_and_pruned(store.as_ref()).await;
}
