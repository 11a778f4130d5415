//! In-process event bus: a tokio broadcast channel. Publishing never blocks; a subscriber that
//! falls behind by more than the capacity loses the oldest events (and is told how many).

use agentd_ports::EventSink;
use agentd_proto::Event;
use tokio::sync::broadcast;

/// Broadcasts every event to every current subscriber.
#[derive(Clone)]
pub struct InProcessBus {
    tx: broadcast::Sender<Event>,
}

impl InProcessBus {
    /// A bus that buffers up to `capacity` events per subscriber.
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(16));
        InProcessBus { tx }
    }

    /// A receiver of every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }

    /// Whether anyone listens now (a feed from elsewhere can rest while nobody does).
    pub fn has_subscribers(&self) -> bool {
        self.tx.receiver_count() > 0
    }
}

impl Default for InProcessBus {
    fn default() -> Self {
        Self::new(4096)
    }
}

impl EventSink for InProcessBus {
    fn publish(&self, event: &Event) {
        // No subscriber is fine: events are observations, not work (and then not copied).
        if self.is_listened() {
            let _ = self.tx.send(event.clone());
        }
    }

    fn is_listened(&self) -> bool {
        self.tx.receiver_count() > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribers_see_events_published_after_they_subscribe() {
        let bus = InProcessBus::new(16);
        assert!(!bus.is_listened(), "nobody subscribed yet");
        let mut rx = bus.subscribe();
        assert!(bus.is_listened());
        bus.publish(&Event::Deleted {
            agent_id: "a".into(),
        });
        assert_eq!(
            rx.try_recv().ok(),
            Some(Event::Deleted {
                agent_id: "a".into()
            })
        );
        drop(rx);
        assert!(!bus.is_listened(), "its only subscriber left");
    }
}
