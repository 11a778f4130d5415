//! Time as a port. Timeouts, backoff and deadlines read a [`Clock`], so tests drive time with a
//! [`ManualClock`] instead of sleeping (tokio's paused time covers one runtime only, and actix
//! runs one per Arbiter).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;

/// What [`Clock::sleep`] answers.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Wall-clock time and sleeping.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
    /// A future that completes `ms` milliseconds from now.
    fn sleep(&self, ms: u64) -> Sleep;
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }

    fn sleep(&self, ms: u64) -> Sleep {
        Box::pin(tokio::time::sleep(std::time::Duration::from_millis(ms)))
    }
}

#[derive(Default)]
struct ManualState {
    now: u64,
    sleepers: Vec<(u64, oneshot::Sender<()>)>,
}

/// A clock that only moves when a test calls [`ManualClock::advance`].
#[derive(Clone, Default)]
pub struct ManualClock {
    state: Arc<Mutex<ManualState>>,
}

impl ManualClock {
    /// A clock at `start_ms`.
    pub fn new(start_ms: u64) -> Self {
        let clock = ManualClock::default();
        clock.lock().now = start_ms;
        clock
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ManualState> {
        // A poisoned clock only means a test panicked while holding it; the state is still valid.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves time forward and wakes every sleeper whose deadline has passed.
    pub fn advance(&self, ms: u64) {
        let due = {
            let mut st = self.lock();
            st.now += ms;
            let now = st.now;
            let (due, keep): (Vec<_>, Vec<_>) = st
                .sleepers
                .drain(..)
                .partition(|(deadline, _)| *deadline <= now);
            st.sleepers = keep;
            due
        };
        for (_, tx) in due {
            let _ = tx.send(());
        }
    }

    /// How many sleepers are waiting (tests wait for a timer to be armed before advancing).
    pub fn sleepers(&self) -> usize {
        let mut st = self.lock();
        st.sleepers.retain(|(_, tx)| !tx.is_closed());
        st.sleepers.len()
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.lock().now
    }

    fn sleep(&self, ms: u64) -> Sleep {
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.lock();
            let deadline = st.now + ms;
            if ms == 0 {
                let _ = tx.send(());
            } else {
                st.sleepers.push((deadline, tx));
            }
        }
        Box::pin(async move {
            // A dropped sender means the clock is gone; never wake in that case.
            if rx.await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

/// Shared handle to a clock.
pub type SharedClock = Arc<dyn Clock>;
