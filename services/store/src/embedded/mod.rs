//! The embedded durable `ThreadStore`: one redb file (`agentd.redb`) under the data directory.
//! Every mutating call is atomic and durable when it returns, so a crash leaves either the
//! whole change or none of it. Writes go through one writer thread that **group-commits**: the
//! writes that arrive while a commit (and its fsync) is under way are applied together in the
//! next transaction, so many agents writing at once pay for one fsync between them. A write
//! that fails inside a shared transaction does not take the others down: the batch is
//! rolled back and each of its writes is run again in a transaction of its own. Reads run on
//! tokio's blocking pool so they never stall an actor's Arbiter.
//!
//! | module | what it holds |
//! |---|---|
//! | [`store`] | [`RedbStore`]: opening the file, and the `ThreadStore` calls mapped onto reads and writes |
//! | [`layout`] | the tables, the kinds of an agent's rows, key encodings and range scans |
//! | [`tables`] | the tables of one write transaction, and the writer's guesses of next sequence numbers |
//! | [`writer`] | the writer thread: batching writes into one transaction, one commit for all |
//! | [`writes`] | what each write does to the tables, and batches of [`StoreWrite`](agentd_ports::StoreWrite)s |
//! | [`inbox`] | the durable inbox and its de-duplication window |
//! | [`external_ids`] | outside ids mapped to agents, with their expiry |
//! | [`reads`] | reads, each in a read transaction of its own |
//! | [`migrate`] | moving a file written in an earlier layout into the current one, on open |

mod external_ids;
mod inbox;
mod layout;
mod migrate;
mod reads;
mod store;
mod tables;
mod writer;
mod writes;

pub use store::RedbStore;

use agentd_ports::{StoreError, StoreErrorKind};

/// A redb failure, as a transient store error.
fn be(e: impl Into<redb::Error>) -> StoreError {
    let e = e.into();
    StoreError::caused_by(StoreErrorKind::Transient, e.to_string(), e)
}

/// A stored value that does not decode (or encode), as a corrupt store error.
fn de(e: agentd_proto::AgentdError) -> StoreError {
    StoreError::caused_by(StoreErrorKind::Corrupt, e.message.clone(), e)
}
