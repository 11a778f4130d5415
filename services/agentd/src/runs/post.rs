//! Posting a run's item: the run is stored (with `unposted` set) before its last item is
//! posted — the `Runs` invariant, so no reader takes the item's turn for work no run started
//! — and stored again once the post answered: posted, or rejected with why.

use agentd_actors::{AgentSystem, Run, StoreError};
use agentd_proto::{AgentdError, InboxItem};
use uuid::Uuid;

/// Why a run's item was not posted.
#[derive(Debug)]
pub enum PostError {
    /// The store failed: the run may be stored unposted (readers conclude nothing from it).
    Store(StoreError),
    /// The post failed: the run is stored rejected with this error's text
    /// ([`super::refused_before_running`] tells a refusal from a failure of the request).
    Refused(AgentdError),
}

/// Posts `item` as envelope `item_id` from `sender` to `run`'s agent, `run` (whose last item
/// it is) being stored `unposted` already; stores `run` again, posted or rejected.
pub async fn post(
    system: &AgentSystem,
    run: &mut Run,
    sender: &str,
    item_id: Uuid,
    item: InboxItem,
) -> Result<(), PostError> {
    let posted = system
        .post_as_from(sender, &run.agent_id, item_id, item)
        .await;
    run.unposted = false;
    if let Err(e) = &posted {
        run.rejected = Some(e.to_string());
    }
    let store = &system.deps().store;
    store.run_put(run).await.map_err(PostError::Store)?;
    posted.map(|_| ()).map_err(PostError::Refused)
}
