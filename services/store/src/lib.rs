//! `agentd-store`: implementations of the `ThreadStore` port.
//!
//! | module | what it holds |
//! |---|---|
//! | [`memory`] | [`MemoryStore`]: everything in process memory (tests, throwaway runs) |
//! | [`embedded`] | [`RedbStore`]: the durable embedded default, one redb file under the data dir |
//! | [`conformance`] | the suite every implementation must pass |

pub mod conformance;
pub mod embedded;
pub mod memory;

pub use embedded::RedbStore;
pub use memory::MemoryStore;
