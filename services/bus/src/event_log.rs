//! The events a process shows on `/v1/events`, each with an id, the most recent kept in a
//! bounded ring so a client whose stream dropped resumes after the last id it saw
//! (`Last-Event-ID`) instead of missing what happened meanwhile.
//!
//! Ids: in one process (no Redis) the log names its events itself, `<start ms>-<n>`, so an id
//! of an earlier run of the process is never taken for one of this run; with Redis the
//! [`crate::RedisEventsTail`] appends what it reads under the streams' entry ids (its
//! `StreamPosition`s).
//!
//! Invariant: ids in the ring and on the broadcast appear in append order, and a subscriber
//! gets every event appended after the ones its replay ends with, none twice (subscribing and
//! appending take the same lock).

use agentd_actors::EventSink;
use agentd_proto::Event;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::broadcast;

/// An event with its id.
#[derive(Debug, Clone, PartialEq)]
pub struct Logged {
    /// Its id (the SSE `id:`).
    pub id: String,
    /// The event.
    pub event: Event,
}

/// What a subscriber resuming after an id gets before the live events.
#[derive(Debug)]
pub enum Replay {
    /// The events after the id, oldest first (empty if it was the newest).
    After(Vec<Arc<Logged>>),
    /// The ring does not hold the id (older than its oldest event, or not one of this log's).
    NotKept,
}

/// The ring and the numbering of a process's own events.
struct Ring {
    events: VecDeque<Arc<Logged>>,
    /// Number of the next event the log names itself.
    next: u64,
}

/// Recent events with ids, and their live broadcast.
pub struct EventLog {
    ring: Mutex<Ring>,
    capacity: usize,
    tx: broadcast::Sender<Arc<Logged>>,
    /// Prefix of the ids the log gives its own events (the process's start, ms).
    epoch: u64,
}

impl EventLog {
    /// A log keeping the last `capacity` events, whose own ids start with `epoch` (e.g. the
    /// process's start in ms since the epoch).
    pub fn new(capacity: usize, epoch: u64) -> Self {
        let capacity = capacity.max(16);
        let (tx, _) = broadcast::channel(capacity);
        EventLog {
            ring: Mutex::new(Ring {
                events: VecDeque::with_capacity(capacity.min(4096)),
                next: 1,
            }),
            capacity,
            tx,
            epoch,
        }
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        // Each change is a push and a pop: a panic cannot leave it half made.
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends `event` under `id` (ids from elsewhere: the Redis streams).
    pub fn append(&self, id: String, event: Event) {
        let mut ring = self.ring();
        self.push(&mut ring, Arc::new(Logged { id, event }));
    }

    fn push(&self, ring: &mut Ring, logged: Arc<Logged>) {
        if ring.events.len() == self.capacity {
            ring.events.pop_front();
        }
        ring.events.push_back(Arc::clone(&logged));
        // Nobody listening is fine: the ring keeps it for a resume.
        let _ = self.tx.send(logged);
    }

    /// The live events from now on, and (with `after`, a `Last-Event-ID`) what came after it.
    pub fn subscribe(
        &self,
        after: Option<&str>,
    ) -> (broadcast::Receiver<Arc<Logged>>, Option<Replay>) {
        let ring = self.ring();
        let rx = self.tx.subscribe();
        let replay = after.map(
            |id| match ring.events.iter().position(|logged| logged.id == id) {
                Some(at) => Replay::After(ring.events.iter().skip(at + 1).cloned().collect()),
                None => Replay::NotKept,
            },
        );
        (rx, replay)
    }

    /// The live events from now on, and every event the ring holds now, oldest first: a
    /// reader that builds a snapshot from the ring then goes on with the receiver misses
    /// nothing and sees nothing twice (both are taken under the same lock).
    pub fn subscribe_with_ring(&self) -> (broadcast::Receiver<Arc<Logged>>, Vec<Arc<Logged>>) {
        let ring = self.ring();
        let rx = self.tx.subscribe();
        (rx, ring.events.iter().cloned().collect())
    }

    /// Whether anyone follows the live events now.
    pub fn has_subscribers(&self) -> bool {
        self.tx.receiver_count() > 0
    }
}

impl EventSink for EventLog {
    /// Names the event (`<epoch>-<n>`) and appends it.
    fn publish(&self, event: &Event) {
        let mut ring = self.ring();
        let id = format!("{}-{}", self.epoch, ring.next);
        ring.next += 1;
        self.push(
            &mut ring,
            Arc::new(Logged {
                id,
                event: event.clone(),
            }),
        );
    }

    /// Always: the ring keeps events for clients that come back.
    fn is_listened(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deleted(n: usize) -> Event {
        Event::Deleted {
            agent_id: format!("a{n}"),
        }
    }

    fn ids(replay: Option<Replay>) -> Option<Vec<String>> {
        match replay? {
            Replay::After(events) => Some(events.iter().map(|l| l.id.clone()).collect()),
            Replay::NotKept => None,
        }
    }

    #[test]
    fn a_resume_gets_what_came_after_its_id_and_an_id_too_old_is_not_kept() {
        let log = EventLog::new(16, 7);
        for n in 0..20 {
            log.publish(&deleted(n));
        }
        let (_, replay) = log.subscribe(Some("7-18"));
        assert_eq!(ids(replay), Some(vec!["7-19".into(), "7-20".into()]));
        let (_, replay) = log.subscribe(Some("7-20"));
        assert_eq!(ids(replay), Some(vec![]), "the newest: nothing to replay");
        let (_, replay) = log.subscribe(Some("7-2"));
        assert!(
            matches!(replay, Some(Replay::NotKept)),
            "dropped from the ring"
        );
        let (_, replay) = log.subscribe(Some("3-19"));
        assert!(
            matches!(replay, Some(Replay::NotKept)),
            "an id of an earlier run"
        );
        let (_, replay) = log.subscribe(None);
        assert!(replay.is_none());
    }

    #[test]
    fn subscribers_get_every_later_event_with_its_id() {
        let log = EventLog::new(16, 1);
        log.publish(&deleted(0));
        let (mut rx, _) = log.subscribe(Some("1-1"));
        log.append("5-0,0-0".into(), deleted(1));
        let got = rx.try_recv().ok().map(|l| (l.id.clone(), l.event.clone()));
        assert_eq!(got, Some(("5-0,0-0".into(), deleted(1))));
    }
}
