//! Making a [`RedisStore`]: connecting (an unreachable Redis fails at once), its scripts and
//! settings, the accessors the bus and the HTTP API use, and loading the scripts the flush
//! pipeline calls by their SHA-1.

use super::{RedisStore, be, scripts};
use crate::RedisConnection;
use crate::RedisTarget;
use crate::redis_keys::Keys;
use agentd_ports::{DEDUP_WINDOW, StoreResult};
use redis::Script;
use std::sync::Arc;

impl RedisStore {
    /// Connects to one Redis at `url` (`redis://` or `rediss://`, with user and password if
    /// needed); see [`Self::connect_to`].
    pub async fn connect(url: &str, namespace: &str, partitions: u32) -> StoreResult<Self> {
        Self::connect_to(&RedisTarget::single(url), namespace, partitions).await
    }

    /// Connects to `target` (one Redis, or a Redis Cluster by its seed nodes) for namespace
    /// `namespace` with `partitions` partitions; fails at once if Redis cannot be reached, and
    /// if the namespace's layout is not this code's or has another number of partitions (see
    /// [`super::layout`]): a namespace of the earlier layout needs `agentd migrate` first. The
    /// connection reconnects by itself afterwards.
    pub async fn connect_to(
        target: &RedisTarget,
        namespace: &str,
        partitions: u32,
    ) -> StoreResult<Self> {
        let store = Self::connect_unchecked(target, namespace, partitions).await?;
        let mut con = store.connection();
        super::layout::ensure(&mut con, store.keys()).await?;
        // Loaded before the first writes, which come many at once after a start.
        store.load_flush_scripts(&mut con).await?;
        Ok(store)
    }

    /// [`Self::connect_to`] without the layout check (for `agentd migrate`, which moves it).
    pub(crate) async fn connect_unchecked(
        target: &RedisTarget,
        namespace: &str,
        partitions: u32,
    ) -> StoreResult<Self> {
        let con = target.connect().await.map_err(be)?;
        let mut store = Self::with_connection(con, Keys::new(namespace, partitions));
        store.transactions = super::fenced::Transactions::new(target).map(Arc::new);
        Ok(store)
    }

    /// A store over an existing connection (its namespace's layout checked by the caller).
    pub fn with_connection(con: RedisConnection, keys: Keys) -> Self {
        RedisStore {
            con,
            keys,
            append: scripts::append(),
            append_new: Script::new(scripts::APPEND_NEW),
            replace: Script::new(scripts::REPLACE),
            add_child: Script::new(scripts::ADD_CHILD),
            alias_get_or_create: Script::new(scripts::ALIAS_GET_OR_CREATE),
            push_many: scripts::push_many(),
            pushes: Arc::default(),
            tool_call_close: Script::new(scripts::TOOL_CALL_CLOSE),
            tool_call_put: Script::new(scripts::TOOL_CALL_PUT),
            flush_many: scripts::flush_many(),
            flushes: Arc::default(),
            transactions: None,
            flush_scripts_loaded: Arc::default(),
            dedup_window: DEDUP_WINDOW,
            fence: Arc::default(),
            replicas: Default::default(),
            waits: Arc::default(),
        }
    }

    /// Remembers the last `window` envelope ids per agent for de-duplication (default
    /// [`DEDUP_WINDOW`]).
    pub fn with_dedup_window(mut self, window: usize) -> Self {
        self.dedup_window = window.max(1);
        self
    }

    /// The key builder of this store's namespace.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// A clone of the multiplexed command connection.
    pub fn connection(&self) -> RedisConnection {
        self.con.clone()
    }

    /// Loads the scripts the flush pipeline and the grouped pushes call by their SHA-1 (a push
    /// call answered `NOSCRIPT` is sent again after the calls behind it, which would reorder
    /// two pushes of one agent).
    pub(super) async fn load_flush_scripts(&self, con: &mut RedisConnection) -> StoreResult<()> {
        for script in [
            &self.append,
            &self.append_new,
            &self.flush_many,
            &self.push_many,
        ] {
            script.load_async(con).await.map_err(be)?;
        }
        self.flush_scripts_loaded
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}
