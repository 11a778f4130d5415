//! [`ChildOutput`]: a child's output (a reply, a yield, a failure) on its way to its parent's
//! router, and how outputs leave with the store batch that records them.
//!
//! Most outputs leave with the child's own store batch ([`outputs_into_batch`]), so no output is
//! lost between the write that records what it answers and the parent: with a bus, as a forward
//! to the parent's partition stream; on a store that keeps an outbox, kept there until the
//! parent's router has handled it. What is left reaches the channel router as a message.

use crate::deps::Deps;
use crate::ports::StoreWrite;
use actix::prelude::*;
use agentd_proto::ids::derived_id;
use agentd_proto::{Address, AgentRecord, Envelope, Item, Output};
use std::sync::Arc;
use uuid::Uuid;

/// A child's output on its way to the parent's router (the thread "outbox"). The channel router
/// takes it first and passes it on, to the parent's router in this process or to the process
/// that owns the parent.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ChildOutput {
    /// The child's record (its channel says where the output goes), shared with the child.
    pub child: Arc<AgentRecord>,
    /// What it produced.
    pub output: Output,
    /// Id of the thread entry (or envelope) that carries it; forwards derive their ids from it.
    pub cause: Uuid,
    /// Kept in the store's outbox ([`crate::ports::StoreWrite::Outbox`]) until the parent's
    /// router has handled it, which then lets it go.
    pub kept: bool,
}

/// Where the agents and turns of one process send the child outputs that did not leave with a
/// store batch (the process's shared handle, a floor above, is one): to the parent's router,
/// keeping each child's outputs in the order they were sent.
pub(crate) trait OutputPort: Send + Sync {
    fn send_output(&self, out: ChildOutput);
}

/// The envelope that carries `out` to `parent_id`'s router in another process: its id is
/// derived from the entry that carries the output, so a turn re-run after a crash sends the
/// same envelope again and the parent takes it once.
pub(crate) fn output_envelope(out: &ChildOutput, parent_id: &str, now_ms: u64) -> Envelope {
    let mut env = Envelope::new(
        Address::agent(&out.child.id),
        Address::agent(parent_id),
        Item::Output(out.output.clone()),
        now_ms,
    );
    env.id = derived_id(out.cause, "output");
    env.causation_id = Some(out.cause);
    env.trace = out.child.trace;
    env
}

/// Moves `outputs` into `writes`, the store batch they were made from, where the store can
/// carry them: with a bus, as [`StoreWrite::Forward`] to the parent's partition stream (also
/// when this process owns the parent: handed over in memory after the batch, an output would be
/// lost if the process died in between, since the child's item was done and nothing would make
/// it again); without one, a store that keeps an outbox keeps them ([`StoreWrite::Outbox`],
/// marked `kept`) until the parent's router has handled them. They leave in the same round
/// trip or commit as the writes before them and are written again with them if the batch
/// fails. What is left in `outputs` goes to the router once the batch is written.
pub(crate) fn outputs_into_batch(
    deps: &Deps,
    writes: &mut Vec<StoreWrite>,
    outputs: &mut Vec<ChildOutput>,
) {
    if outputs.is_empty() {
        return;
    }
    let now = deps.clock.now_ms();
    let transport = match &deps.transport {
        Some(transport) if deps.store.takes_forwards() => transport,
        Some(_) => return,
        None => {
            if deps.store.keeps_outbox() {
                for out in outputs.iter_mut() {
                    if let Some(parent) = out.child.channel.parent_id() {
                        let env = output_envelope(out, parent, now);
                        writes.push(StoreWrite::Outbox { env: Arc::new(env) });
                        out.kept = true;
                    }
                }
            }
            return;
        }
    };
    outputs.retain(|out| {
        let Some(parent) = out.child.channel.parent_id() else {
            return true;
        };
        let Some(stream) = transport.stream_for(parent) else {
            return true;
        };
        let env = output_envelope(out, parent, now);
        writes.push(StoreWrite::Forward {
            stream,
            env: Arc::new(env),
        });
        false
    });
}
