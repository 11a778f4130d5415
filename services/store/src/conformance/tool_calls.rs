//! Calls of service tools: stored, listed while open, closed once.

use super::*;

/// A tool call is stored, found by its id, listed while open, and closed once: of racing
/// closings exactly one wins and the others find it closed with the winner's answer. An
/// approval moves it from `awaiting_approval` to `pending` (still open), once.
pub(super) async fn tool_calls_close_once(store: Arc<dyn ThreadStore>) {
    use agentd_ports::ToolCallClosing;
    use agentd_proto::{ToolAnswer, ToolCallClose, ToolCallRecord, ToolCallStatus, ToolKind};
    let call = |n: u128, status| ToolCallRecord {
        call_id: uuid::Uuid::from_u128(0x7c00 + n),
        agent_id: "tc-agent".into(),
        root_id: "tc-root".into(),
        tool: "lookup_order".into(),
        kind: ToolKind::Service,
        arguments: serde_json::json!({"order_id": "A-1"}),
        status,
        requested_at_ms: 1_000 + n as u64,
        deadline_ms: Some(60_000),
        model_call_id: format!("call_{n}"),
        published: false,
        answer: None,
        reason: None,
        closed_at_ms: None,
    };
    let pending = call(1, ToolCallStatus::Pending);
    let gated = call(2, ToolCallStatus::AwaitingApproval);
    store.tool_call_put(&pending).await.unwrap();
    store.tool_call_put(&gated).await.unwrap();
    let mut published = pending.clone();
    published.published = true;
    store.tool_call_put(&published).await.unwrap();
    assert_eq!(
        store.tool_call_get(pending.call_id).await.unwrap(),
        Some(published.clone())
    );
    assert_eq!(
        store.tool_calls_open().await.unwrap(),
        vec![published.clone(), gated.clone()]
    );
    let answer = |n: u64| ToolCallClosing {
        status: ToolCallStatus::Answered,
        answer: Some(ToolAnswer::Result(serde_json::json!({"n": n}))),
        reason: None,
        at_ms: 2_000 + n,
    };
    let racing: Vec<_> = (0..8)
        .map(|n| {
            let store = store.clone();
            let closing = answer(n);
            tokio::spawn(async move { store.tool_call_close(pending.call_id, &closing).await })
        })
        .collect();
    let mut winners = Vec::new();
    let mut losers = Vec::new();
    for r in racing {
        match r.await.unwrap().unwrap() {
            ToolCallClose::Closed(c) => winners.push(c),
            ToolCallClose::AlreadyClosed(c) => losers.push(c),
            ToolCallClose::NotFound => panic!("the call is stored"),
        }
    }
    assert_eq!(winners.len(), 1, "one closing wins");
    assert!(losers.iter().all(|c| c == &winners[0]), "the others see it");
    assert_eq!(winners[0].status, ToolCallStatus::Answered);
    assert!(winners[0].closed_at_ms.is_some());
    // A late write of the open call leaves it closed.
    store.tool_call_put(&published).await.unwrap();
    assert_eq!(
        store.tool_call_get(pending.call_id).await.unwrap(),
        Some(winners[0].clone())
    );
    // An approval opens the gated call for its answer, once.
    let approve = ToolCallClosing {
        status: ToolCallStatus::Pending,
        answer: None,
        reason: None,
        at_ms: 3_000,
    };
    assert!(matches!(
        store.tool_call_close(gated.call_id, &approve).await.unwrap(),
        ToolCallClose::Closed(c) if c.status == ToolCallStatus::Pending && c.closed_at_ms.is_none()
    ));
    assert!(matches!(
        store
            .tool_call_close(gated.call_id, &approve)
            .await
            .unwrap(),
        ToolCallClose::AlreadyClosed(_)
    ));
    let open = store.tool_calls_open().await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].status, ToolCallStatus::Pending);
    assert_eq!(
        store
            .tool_call_close(uuid::Uuid::from_u128(9), &answer(0))
            .await
            .unwrap(),
        ToolCallClose::NotFound
    );
}

/// Runs every property of tool calls against `store`, which must be empty of the ids they use.
pub async fn run(store: Arc<dyn ThreadStore>) {
    tool_calls_close_once(store.clone()).await;
}
