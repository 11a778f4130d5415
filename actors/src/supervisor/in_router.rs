//! What the process router holds that a send straight to an actor could overtake: counts the
//! router keeps as it is handed things and passes them on, which `shortcuts.rs` reads before it
//! sends past the router.

use std::sync::atomic::{AtomicUsize, Ordering};

/// What the process router holds that a shortcut could overtake.
#[derive(Debug, Default)]
pub(crate) struct InRouter {
    /// Envelopes handed to the router and not routed yet.
    envelopes: AtomicUsize,
    /// Receivers' lanes the router keeps open.
    lanes: AtomicUsize,
    /// Child outputs handed to the router and not passed on yet.
    outputs: AtomicUsize,
}

impl InRouter {
    /// An envelope was handed to the router.
    pub(super) fn envelope_handed(&self) {
        self.envelopes.fetch_add(1, Ordering::AcqRel);
    }

    /// A child output was handed to the router.
    pub(super) fn output_handed(&self) {
        self.outputs.fetch_add(1, Ordering::AcqRel);
    }

    /// The router routed an envelope it was handed (to the actor's mailbox or into a lane).
    pub(crate) fn envelope_routed(&self) {
        self.envelopes.fetch_sub(1, Ordering::AcqRel);
    }

    /// The router opened a lane.
    pub(crate) fn lane_opened(&self) {
        self.lanes.fetch_add(1, Ordering::AcqRel);
    }

    /// The router closed a lane (it passed on everything in it).
    pub(crate) fn lane_closed(&self) {
        self.lanes.fetch_sub(1, Ordering::AcqRel);
    }

    /// The router passed on (or gave up) an output it was handed.
    pub(crate) fn output_passed_on(&self) {
        self.outputs.fetch_sub(1, Ordering::AcqRel);
    }

    pub(super) fn no_envelopes(&self) -> bool {
        self.envelopes.load(Ordering::Acquire) == 0 && self.lanes.load(Ordering::Acquire) == 0
    }

    pub(super) fn no_outputs(&self) -> bool {
        self.outputs.load(Ordering::Acquire) == 0
    }
}
