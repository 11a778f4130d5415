//! The event port: where lifecycle, usage and marker events go.

use agentd_proto::Event;

/// Where events go (in-process broadcast, Redis stream, ...). Publishing never blocks a turn.
pub trait EventSink: Send + Sync + 'static {
    /// Publishes one event.
    fn publish(&self, event: &Event);

    /// Whether anything would see a published event now. An agent asks before it builds one
    /// of the events it emits for every message (status changes, token usage), so that a
    /// process nobody watches does not build them on its hot path only to drop them.
    fn is_listened(&self) -> bool {
        true
    }
}
