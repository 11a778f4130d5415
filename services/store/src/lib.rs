//! `agentd-store`: implementations of the `ThreadStore` port.
//!
//! | module | what it holds |
//! |---|---|
//! | [`memory`] | [`MemoryStore`]: everything in process memory (tests, throwaway runs) |
//! | [`embedded`] | [`RedbStore`]: the durable embedded default, one redb file under the data dir |
//! | [`redis_store`] | [`RedisStore`]: records, threads, maps and inboxes in Redis |
//! | [`redis_keys`] | the Redis key names of one namespace |
//! | [`conformance`] | the suite every implementation must pass |

pub mod conformance;
pub mod embedded;
pub mod memory;
pub mod redis_keys;
pub mod redis_store;

pub use embedded::RedbStore;
pub use memory::MemoryStore;
pub use redis_keys::Keys;
pub use redis_store::{PushFence, RedisStore};
