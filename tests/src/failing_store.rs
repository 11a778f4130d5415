//! A store whose batch writes can be made to fail: a store (the memory store unless told
//! otherwise) behind a switch, for tests of what an agent does while its store refuses writes
//! (a Redis outage, a full disk), and that can keep a copy of every batch written, for tests
//! of what goes together in one batch, and slow its inbox pushes down (a push's round trip to
//! Redis) or make them fail, for tests of what an agent does while one is under way and of
//! what a spawn answers.

use agentd_actors::{
    AgentRecords, AgentValues, Batches, Checkpoints, ExternalIds, IdempotencyClaims, Inboxes,
    StoreError, StoreErrorKind, StoreKind, StoreResult, StoreWrite, ThreadStore, Threads,
    ToolCalls, Tree, WorkerAlias,
};
use agentd_actors::{ExternalClaim, ExternalKey, Retention, Runs, ToolCallClosing};
use agentd_proto::{AgentRecord, Checkpoint, Envelope, ThreadEntry, ToolCallClose, ToolCallRecord};
use agentd_store::MemoryStore;
use async_trait::async_trait;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use uuid::Uuid;

/// A store (by default a [`MemoryStore`]) whose `write_batch` fails while
/// [`FailingWrites::fail`] (a backend failure, which passes) or
/// [`FailingWrites::fail_to_encode`] (which would not) is on. It also counts the record and
/// child-list reads it serves ([`FailingWrites::tree_reads`]) and the alias look-ups
/// ([`FailingWrites::alias_lookups`]), can fail thread reads with an error of a chosen kind
/// ([`FailingWrites::fail_thread_reads`]) and, once asked
/// ([`FailingWrites::keep_batches`]), keeps the batches written ([`FailingWrites::batches`]).
pub struct FailingWrites {
    inner: Arc<dyn ThreadStore>,
    failing: AtomicBool,
    unencodable: AtomicBool,
    refused: AtomicUsize,
    tree_reads: AtomicUsize,
    alias_lookups: AtomicUsize,
    kept: Mutex<Option<Vec<Vec<StoreWrite>>>>,
    push_delay_ms: AtomicU64,
    failing_pushes: AtomicBool,
    thread_failure: Mutex<Option<StoreErrorKind>>,
    refused_reads: AtomicUsize,
}

impl Default for FailingWrites {
    fn default() -> Self {
        Self::over(Arc::new(MemoryStore::new()))
    }
}

impl FailingWrites {
    /// `inner` behind the switch.
    pub fn over(inner: Arc<dyn ThreadStore>) -> Self {
        FailingWrites {
            inner,
            failing: AtomicBool::new(false),
            unencodable: AtomicBool::new(false),
            refused: AtomicUsize::new(0),
            tree_reads: AtomicUsize::new(0),
            alias_lookups: AtomicUsize::new(0),
            kept: Mutex::new(None),
            push_delay_ms: AtomicU64::new(0),
            failing_pushes: AtomicBool::new(false),
            thread_failure: Mutex::new(None),
            refused_reads: AtomicUsize::new(0),
        }
    }

    /// From now on keeps a copy of every batch written.
    pub fn keep_batches(&self) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.get_or_insert_with(Vec::new);
    }

    /// The batches written since [`Self::keep_batches`], in order.
    pub fn batches(&self) -> Vec<Vec<StoreWrite>> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.clone().unwrap_or_default()
    }

    /// Turns the failure of batch writes on or off.
    pub fn fail(&self, on: bool) {
        self.failing.store(on, Ordering::SeqCst);
    }

    /// Turns on or off batch writes failing as if their values could not be encoded.
    pub fn fail_to_encode(&self, on: bool) {
        self.unencodable.store(on, Ordering::SeqCst);
    }

    /// From now on thread reads fail with an error of `kind` (`None`: they work again).
    pub fn fail_thread_reads(&self, kind: Option<StoreErrorKind>) {
        *self
            .thread_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = kind;
    }

    /// How many thread reads were refused so far.
    pub fn refused_reads(&self) -> usize {
        self.refused_reads.load(Ordering::SeqCst)
    }

    /// From now on every inbox push takes `ms` longer (0: as long as the inner store's).
    pub fn delay_pushes(&self, ms: u64) {
        self.push_delay_ms.store(ms, Ordering::SeqCst);
    }

    /// Turns the failure of inbox pushes on or off (a Redis master lost between a spawn's
    /// record and its first message).
    pub fn fail_pushes(&self, on: bool) {
        self.failing_pushes.store(on, Ordering::SeqCst);
    }

    async fn push_delay(&self) {
        let ms = self.push_delay_ms.load(Ordering::SeqCst);
        if ms > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
    }

    /// How many batches were refused so far.
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::SeqCst)
    }

    /// How many worker aliases (`alias_get_or_create`) were looked up so far.
    pub fn alias_lookups(&self) -> usize {
        self.alias_lookups.load(Ordering::SeqCst)
    }

    /// How many records (`get_agent`) and child lists (`children`) were read so far.
    pub fn tree_reads(&self) -> usize {
        self.tree_reads.load(Ordering::SeqCst)
    }
}

impl StoreKind for FailingWrites {
    fn kind(&self) -> &'static str {
        "failing-writes"
    }
}

#[async_trait]
impl AgentRecords for FailingWrites {
    async fn put_agent(&self, record: &AgentRecord) -> StoreResult<()> {
        self.inner.put_agent(record).await
    }

    async fn get_agent(&self, agent_id: &str) -> StoreResult<Option<AgentRecord>> {
        self.tree_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.get_agent(agent_id).await
    }

    async fn list_roots(&self) -> StoreResult<Vec<AgentRecord>> {
        self.inner.list_roots().await
    }

    async fn delete_agent(&self, agent_id: &str) -> StoreResult<()> {
        self.inner.delete_agent(agent_id).await
    }
}

#[async_trait]
impl Threads for FailingWrites {
    async fn append(&self, agent_id: &str, entry: &ThreadEntry) -> StoreResult<bool> {
        self.inner.append(agent_id, entry).await
    }

    async fn thread(&self, agent_id: &str) -> StoreResult<Vec<ThreadEntry>> {
        let failure = *self
            .thread_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(kind) = failure {
            self.refused_reads.fetch_add(1, Ordering::SeqCst);
            return Err(StoreError::new(kind, "thread reads are switched off"));
        }
        self.inner.thread(agent_id).await
    }

    async fn replace_thread(&self, agent_id: &str, entries: &[ThreadEntry]) -> StoreResult<()> {
        self.inner.replace_thread(agent_id, entries).await
    }
}

#[async_trait]
impl Tree for FailingWrites {
    async fn add_child(&self, parent_id: &str, child_id: &str) -> StoreResult<()> {
        self.inner.add_child(parent_id, child_id).await
    }

    async fn add_dependent(&self, dependency: &str, dependent: &str) -> StoreResult<()> {
        self.inner.add_dependent(dependency, dependent).await
    }

    async fn remove_dependent(&self, dependency: &str, dependent: &str) -> StoreResult<()> {
        self.inner.remove_dependent(dependency, dependent).await
    }

    async fn dependents(&self, dependency: &str) -> StoreResult<Vec<String>> {
        self.inner.dependents(dependency).await
    }

    async fn children(&self, parent_id: &str) -> StoreResult<Vec<String>> {
        self.tree_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.children(parent_id).await
    }

    async fn alias_get_or_create(
        &self,
        parent_id: &str,
        worker_title: &str,
        alias: &str,
        candidate: &str,
    ) -> StoreResult<(String, bool)> {
        self.alias_lookups.fetch_add(1, Ordering::SeqCst);
        self.inner
            .alias_get_or_create(parent_id, worker_title, alias, candidate)
            .await
    }

    async fn aliases(&self, parent_id: &str) -> StoreResult<Vec<WorkerAlias>> {
        self.inner.aliases(parent_id).await
    }
}

#[async_trait]
impl Inboxes for FailingWrites {
    async fn inbox_push(&self, agent_id: &str, env: &Envelope) -> StoreResult<bool> {
        self.push_delay().await;
        if self.failing_pushes.load(Ordering::SeqCst) {
            return Err(StoreError::transient("inbox pushes are switched off"));
        }
        self.inner.inbox_push(agent_id, env).await
    }

    async fn inbox_pending(&self, agent_id: &str) -> StoreResult<Vec<Envelope>> {
        self.inner.inbox_pending(agent_id).await
    }

    async fn inbox_done(&self, agent_id: &str, env_id: Uuid) -> StoreResult<()> {
        self.inner.inbox_done(agent_id, env_id).await
    }

    fn keeps_outbox(&self) -> bool {
        self.inner.keeps_outbox()
    }

    async fn outbox_pending(&self) -> StoreResult<Vec<Envelope>> {
        self.inner.outbox_pending().await
    }

    async fn outbox_done(&self, env_id: Uuid) -> StoreResult<()> {
        self.inner.outbox_done(env_id).await
    }
}

#[async_trait]
impl Checkpoints for FailingWrites {
    async fn checkpoint_put(&self, checkpoint: &Checkpoint, keep: usize) -> StoreResult<()> {
        self.inner.checkpoint_put(checkpoint, keep).await
    }

    async fn checkpoints(&self, agent_id: &str) -> StoreResult<Vec<Checkpoint>> {
        self.inner.checkpoints(agent_id).await
    }
}

#[async_trait]
impl Batches for FailingWrites {
    async fn replicated(&self, agent_id: &str) -> StoreResult<()> {
        self.inner.replicated(agent_id).await
    }

    async fn write_batch(&self, writes: &[StoreWrite]) -> StoreResult<()> {
        if self.failing.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(StoreError::transient("batch writes are switched off"));
        }
        if self.unencodable.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(StoreError::corrupt("batch values are made unencodable"));
        }
        self.inner.write_batch(writes).await?;
        if let Some(kept) = self.kept.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            kept.push(writes.to_vec());
        }
        Ok(())
    }

    fn takes_forwards(&self) -> bool {
        self.inner.takes_forwards()
    }
}

#[async_trait]
impl IdempotencyClaims for FailingWrites {
    async fn idempotency_claim(
        &self,
        home: &str,
        key: &str,
        fingerprint: &str,
        ttl_ms: u64,
    ) -> StoreResult<Option<agentd_actors::Claim>> {
        self.inner
            .idempotency_claim(home, key, fingerprint, ttl_ms)
            .await
    }

    async fn idempotency_claim_end(
        &self,
        home: &str,
        key: &str,
        end: agentd_actors::ClaimEnd,
    ) -> StoreResult<()> {
        self.inner.idempotency_claim_end(home, key, end).await
    }
}

#[async_trait]
impl ToolCalls for FailingWrites {
    async fn tool_call_put(&self, call: &ToolCallRecord) -> StoreResult<()> {
        self.inner.tool_call_put(call).await
    }
    async fn tool_call_get(&self, call_id: Uuid) -> StoreResult<Option<ToolCallRecord>> {
        self.inner.tool_call_get(call_id).await
    }
    async fn tool_call_close(
        &self,
        call_id: Uuid,
        closing: &ToolCallClosing,
    ) -> StoreResult<ToolCallClose> {
        self.inner.tool_call_close(call_id, closing).await
    }
    async fn tool_calls_open(&self) -> StoreResult<Vec<ToolCallRecord>> {
        self.inner.tool_calls_open().await
    }
}

#[async_trait]
impl AgentValues for FailingWrites {
    async fn agent_value_put(
        &self,
        agent_id: &str,
        task_id: &str,
        value: &[u8],
    ) -> StoreResult<()> {
        self.inner.agent_value_put(agent_id, task_id, value).await
    }
    async fn agent_value_put_new(
        &self,
        agent_id: &str,
        task_id: &str,
        value: &[u8],
    ) -> StoreResult<bool> {
        self.inner
            .agent_value_put_new(agent_id, task_id, value)
            .await
    }
    async fn agent_value_get(&self, agent_id: &str, task_id: &str) -> StoreResult<Option<Vec<u8>>> {
        self.inner.agent_value_get(agent_id, task_id).await
    }
    async fn agent_values(&self, agent_id: &str) -> StoreResult<Vec<(String, Vec<u8>)>> {
        self.inner.agent_values(agent_id).await
    }
}

/// Runs pass through the wrapped store's values (the concern's defaults), so they fail as
/// those do.
impl Runs for FailingWrites {}

#[async_trait]
impl ExternalIds for FailingWrites {
    async fn external_id_claim(
        &self,
        key: &ExternalKey,
        claim: &ExternalClaim,
        keep: Retention,
    ) -> StoreResult<Option<ExternalClaim>> {
        self.inner.external_id_claim(key, claim, keep).await
    }
    async fn external_id_settle(
        &self,
        key: &ExternalKey,
        agent_id: &str,
        keep: Retention,
    ) -> StoreResult<()> {
        self.inner.external_id_settle(key, agent_id, keep).await
    }
    async fn external_id_get(&self, key: &ExternalKey) -> StoreResult<Option<ExternalClaim>> {
        self.inner.external_id_get(key).await
    }
    async fn external_id_release(
        &self,
        key: &ExternalKey,
        claim: &ExternalClaim,
    ) -> StoreResult<()> {
        self.inner.external_id_release(key, claim).await
    }
}
