//! Waiting for what becomes of a run: a door looks at the run's agent again each time one of
//! its events arrives, and every half second besides (an event may be missed, or made by
//! another process, with Redis).

use agentd_bus::Logged;
use agentd_proto::Event;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

/// How long a wait goes without looking, when no event of its agent arrives.
const LOOK_AGAIN: Duration = Duration::from_millis(500);

/// Whether `event` may change what became of a run of agent `agent_id` (text deltas do not).
pub fn concerns(event: &Event, agent_id: &str) -> bool {
    !matches!(event, Event::TextDelta { .. }) && event.agent_id() == agent_id
}

/// Looks (`look`) until it answers `Some`: at once, then each time an event of agent
/// `agent_id` arrives on `rx` — subscribed before the work waited for began, so none is missed
/// — and at least every [`LOOK_AGAIN`]. A closed event log leaves the periodic look alone.
pub async fn until<T, E, F, Fut>(
    rx: &mut Receiver<Arc<Logged>>,
    agent_id: &str,
    mut look: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, E>>,
{
    loop {
        if let Some(found) = look().await? {
            return Ok(found);
        }
        let deadline = tokio::time::sleep(LOOK_AGAIN);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                got = rx.recv() => match got {
                    Ok(l) if concerns(&l.event, agent_id) => break,
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => {
                        (&mut deadline).await;
                        break;
                    }
                },
                _ = &mut deadline => break,
            }
        }
    }
}
