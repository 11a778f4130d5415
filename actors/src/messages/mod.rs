//! The messages actors send one another that more than one floor names: a spawn, a Manage
//! call to a parent's router, a child's output. They sit on a low floor so that the tools and
//! the turn can send them without naming the actors that handle them. Messages only one actor
//! handles, sent only from its own floor, live beside that actor (`<actor>/messages.rs`).
//!
//! | module | what it holds |
//! |---|---|
//! | [`spawn`] | [`Spawn`], [`SpawnSpec`], [`Spawned`]: create an agent (handled by the supervisor) |
//! | [`manage`] | [`ManageSend`], [`Wait`], [`CancelWait`]: a Manage call (handled by a parent router) |
//! | [`output`] | [`ChildOutput`]: a child's output for its parent (handled by the channel router) |

mod manage;
mod output;
mod spawn;

pub(crate) use manage::{CancelWait, Dispatched, ManageSend, Wait, WaitResult};
pub(crate) use output::{ChildOutput, OutputPort, output_envelope, outputs_into_batch};
pub(crate) use spawn::{FirstMessage, Spawn, SpawnSpec, Spawned};
