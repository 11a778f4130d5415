//! What the actors of one process share: the [`SystemHandle`] every agent, router and tool
//! holds (the ports, the supervisor's and the router's addresses, the scheduler, the directory
//! of live actors), and the sends that go straight to a live actor past the process router.
//! Its own module, beside the actors it addresses, so that an agent reaches the supervisor only
//! by the messages it sends it.
//!
//! | module | what it holds |
//! |---|---|
//! | [`handle`] | [`SystemHandle`] and the [`Shared`] state behind it |
//! | [`in_router`] | what the process router holds that a shortcut could overtake |
//! | [`shortcuts`] | envelopes and child outputs sent straight to a live actor, past the process router, when nothing can be overtaken |

mod handle;
mod in_router;
mod shortcuts;

pub(crate) use handle::{Shared, SystemHandle};
pub(crate) use shortcuts::deliver_acked;
