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
//!
//! The log keeps the process's own events from its first subscriber on: before anyone
//! followed it, no client holds an id of it to resume after, so there is nothing to keep, and
//! a process nobody watches (the bench's, a test's) neither names nor stores its events — nor
//! do its agents build them ([`EventSink::is_listened`]). A service serving A2A subscribes at
//! start (its watcher), so its ring holds everything from then on.

use agentd_ports::EventSink;
use agentd_proto::Event;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// Prefix of the ids the log gives its own events: the process's start (ms) and `-`.
    prefix: String,
    /// Whether anyone has subscribed yet: until then the process's own events are not kept.
    followed: AtomicBool,
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
            prefix: format!("{epoch}-"),
            followed: AtomicBool::new(false),
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
        self.followed.store(true, Ordering::Release);
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
        self.followed.store(true, Ordering::Release);
        let rx = self.tx.subscribe();
        (rx, ring.events.iter().cloned().collect())
    }

    /// Whether anyone follows the live events now.
    pub fn has_subscribers(&self) -> bool {
        self.tx.receiver_count() > 0
    }
}

impl EventSink for EventLog {
    /// Names the event (`<epoch>-<n>`) and appends it, once anyone has subscribed.
    fn publish(&self, event: &Event) {
        if !self.followed.load(Ordering::Acquire) {
            return;
        }
        let mut ring = self.ring();
        // Every event of the process is named here, on the agents' path: the prefix is made
        // once, and the number written without the formatting machinery.
        let mut id = String::with_capacity(self.prefix.len() + 20);
        id.push_str(&self.prefix);
        push_decimal(&mut id, ring.next);
        ring.next += 1;
        self.push(
            &mut ring,
            Arc::new(Logged {
                id,
                event: event.clone(),
            }),
        );
    }

    /// From the first subscriber on: the ring keeps events for clients that come back, even
    /// while none is connected.
    fn is_listened(&self) -> bool {
        self.followed.load(Ordering::Acquire)
    }
}

/// The events of a process on its own (no Redis): its in-process subscribers' bus and its log.
/// One sink of two known kinds rather than a [`crate::Fanout`] of any: agents ask
/// [`EventSink::is_listened`] before every status change and usage count, and this answers
/// without a virtual call per sink (the log's flag first, an atomic read).
pub struct LocalEvents {
    /// The in-process subscribers (tests, the bench).
    pub bus: crate::InProcessBus,
    /// What `/v1/events` shows.
    pub log: Arc<EventLog>,
}

impl EventSink for LocalEvents {
    fn publish(&self, event: &Event) {
        self.bus.publish(event);
        self.log.publish(event);
    }

    fn is_listened(&self) -> bool {
        self.log.is_listened() || self.bus.is_listened()
    }
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        out.push(char::from(d));
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

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 7, 10, 1_000_000, u64::MAX] {
            let mut out = String::from("x-");
            push_decimal(&mut out, n);
            assert_eq!(out, format!("x-{n}"));
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
        let _first = log.subscribe(None);
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
    fn nothing_is_kept_or_listened_before_the_first_subscriber() {
        let log = EventLog::new(16, 7);
        assert!(!log.is_listened());
        log.publish(&deleted(0));
        let (_, ring) = log.subscribe_with_ring();
        assert!(ring.is_empty(), "an event nobody could resume after");
        assert!(log.is_listened());
        log.publish(&deleted(1));
        let (_, replay) = log.subscribe(Some("7-1"));
        assert_eq!(ids(replay), Some(vec![]), "numbered from 1 once followed");
        let (_, ring) = log.subscribe_with_ring();
        assert_eq!(ring.len(), 1);
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
