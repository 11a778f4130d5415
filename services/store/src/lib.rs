//! `agentd-store`: implementations of the `ThreadStore` port.
//!
//! | module | what it holds |
//! |---|---|
//! | [`memory`] | [`MemoryStore`]: everything in process memory (tests, throwaway runs) |
//! | `claims` | the memory store's idempotency claims, kept in the process's memory |
//! | [`embedded`] | [`RedbStore`]: the durable embedded default, one redb file under the data dir |
//! | [`redis_store`] | [`RedisStore`]: records, threads, maps and inboxes in Redis; its [`PushFence`] |
//! | [`redis_connection`] | where Redis is ([`RedisTarget`]: one server or a Redis Cluster) and the command connection ([`RedisConnection`]) the store and the bus share |
//! | [`redis_keys`] | [`Keys`]: the Redis key names of one namespace (the store's and the bus's), and a key's Cluster [`slot`] |
//! | [`conformance`] | the suite every implementation must pass |
//!
//! Only the conformance suite is a public module; the stores and [`Keys`] are re-exported here.

mod claims;
pub mod conformance;
mod embedded;
mod memory;
mod redis_connection;
mod redis_keys;
mod redis_store;

pub use embedded::RedbStore;
pub use memory::MemoryStore;
pub use redis_connection::{Patience, RedisConnection, RedisTarget};
pub use redis_keys::{
    GROUP, Keys, LAYOUT_VERSION, assert_one_slot, keys_of, partition_index, pipeline_slots, slot,
};
pub use redis_store::{Migrated, PushFence, RedisStore};
