//! [`RedbStore`]: opening the file (moving an earlier layout's rows on the way), and the
//! `ThreadStore` calls, each a read on tokio's blocking pool or a write through the writer
//! thread.

use super::layout::{CHECKPOINTS, INBOX, THREADS, alias_key};
use super::migrate::migrate;
use super::tables::Tables;
use super::writer::Writer;
use super::{be, de, external_ids, inbox, reads, writes};
use agentd_ports::{
    AgentRecords, AgentValues, Batches, Checkpoints, Claim, ClaimEnd, ExternalClaim, ExternalIds,
    ExternalKey, IdempotencyClaims, Inboxes, Pushed, Retention, Runs, StoreError, StoreErrorKind,
    StoreKind, StoreResult, StoreWrite, Threads, ToolCalls, Tree, WorkerAlias,
};
use agentd_proto::codec::encode;
use agentd_proto::{AgentRecord, Checkpoint, Envelope, ThreadEntry};
use async_trait::async_trait;
use redb::{Database, ReadableTable};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use uuid::Uuid;

/// A `ThreadStore` in a redb file.
#[derive(Clone)]
pub struct RedbStore {
    writer: Arc<Writer>,
    db: Arc<Database>,
    /// The seq of the next output kept in [`OUTBOX`](super::layout::OUTBOX).
    outbox_seq: Arc<AtomicU64>,
}

impl RedbStore {
    /// Opens (or creates) `<data_dir>/agentd.redb`, creating the directory if needed.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|e| {
            StoreError::caused_by(
                StoreErrorKind::Transient,
                format!("creating {}: {e}", data_dir.display()),
                e,
            )
        })?;
        let db = Database::create(data_dir.join("agentd.redb")).map_err(be)?;
        let tx = db.begin_write().map_err(be)?;
        let outbox_seq = {
            let mut tables = Tables::open(&tx)?; // creates the tables of a new file
            migrate(&tx, &mut tables)?;
            let mut next = 0;
            for item in tables.outbox.iter().map_err(be)? {
                next = next.max(item.map_err(be)?.1.value().0 + 1);
            }
            next
        };
        tx.commit().map_err(be)?;
        let db = Arc::new(db);
        let writer = Arc::new(Writer::start(db.clone())?);
        Ok(RedbStore {
            writer,
            db,
            outbox_seq: Arc::new(outbox_seq.into()),
        })
    }

    /// Runs `f` on tokio's blocking pool.
    async fn run<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Database) -> StoreResult<T> + Send + 'static,
    {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| {
                StoreError::caused_by(StoreErrorKind::Transient, format!("store task: {e}"), e)
            })?
    }

    /// How many rows of any table still mention `id` (as a key, or as a child/alias value).
    /// Deletion tests use it to prove nothing is left behind.
    pub async fn rows_mentioning(&self, id: &str) -> StoreResult<usize> {
        let id = id.to_string();
        self.run(move |db| reads::rows_mentioning(db, &id)).await
    }
}

impl StoreKind for RedbStore {
    fn kind(&self) -> &'static str {
        "embedded"
    }
}

#[async_trait]
impl AgentRecords for RedbStore {
    async fn put_agent(&self, record: &AgentRecord) -> StoreResult<()> {
        let bytes = encode(record).map_err(de)?;
        let id = record.id.clone();
        self.writer
            .write(move |t| writes::put_agent_in(t, &id, &bytes))
            .await
    }

    async fn get_agent(&self, agent_id: &str) -> StoreResult<Option<AgentRecord>> {
        let id = agent_id.to_string();
        self.run(move |db| reads::get_agent(db, &id)).await
    }

    async fn agent_exists(&self, agent_id: &str) -> StoreResult<bool> {
        let id = agent_id.to_string();
        self.run(move |db| reads::agent_exists(db, &id)).await
    }

    async fn list_roots(&self) -> StoreResult<Vec<AgentRecord>> {
        self.run(reads::list_roots).await
    }

    async fn delete_agent(&self, agent_id: &str) -> StoreResult<()> {
        let id = agent_id.to_string();
        self.writer
            .write(move |t| writes::delete_agent_in(t, &id))
            .await
    }
}

#[async_trait]
impl Threads for RedbStore {
    async fn append(&self, agent_id: &str, entry: &ThreadEntry) -> StoreResult<bool> {
        let bytes = encode(entry).map_err(de)?;
        let id = agent_id.to_string();
        let entry_id = entry.id;
        self.writer
            .write(move |t| writes::append_in(t, &id, &entry_id, &bytes))
            .await
    }

    async fn thread(&self, agent_id: &str) -> StoreResult<Vec<ThreadEntry>> {
        let id = agent_id.to_string();
        self.run(move |db| reads::read_sequence(db, THREADS, &id))
            .await
    }

    async fn replace_thread(&self, agent_id: &str, entries: &[ThreadEntry]) -> StoreResult<()> {
        let encoded = entries
            .iter()
            .map(|e| Ok((e.id, encode(e).map_err(de)?)))
            .collect::<StoreResult<Vec<_>>>()?;
        let id = agent_id.to_string();
        self.writer
            .write(move |t| writes::replace_thread_in(t, &id, &encoded))
            .await
    }
}

#[async_trait]
impl Tree for RedbStore {
    async fn add_child(&self, parent_id: &str, child_id: &str) -> StoreResult<()> {
        let (parent, child) = (parent_id.to_string(), child_id.to_string());
        self.writer
            .write(move |t| writes::add_child_in(t, &parent, &child))
            .await
    }

    async fn add_dependent(&self, dependency: &str, dependent: &str) -> StoreResult<()> {
        let (dependency, dependent) = (dependency.to_string(), dependent.to_string());
        self.writer
            .write(move |t| writes::add_dependent_in(t, &dependency, &dependent))
            .await
    }

    async fn remove_dependent(&self, dependency: &str, dependent: &str) -> StoreResult<()> {
        let (dependency, dependent) = (dependency.to_string(), dependent.to_string());
        self.writer
            .write(move |t| writes::remove_dependent_in(t, &dependency, &dependent))
            .await
    }

    async fn dependents(&self, dependency: &str) -> StoreResult<Vec<String>> {
        let dependency = dependency.to_string();
        self.run(move |db| reads::dependents(db, &dependency)).await
    }

    async fn children(&self, parent_id: &str) -> StoreResult<Vec<String>> {
        let parent = parent_id.to_string();
        self.run(move |db| reads::children(db, &parent)).await
    }

    async fn alias_get_or_create(
        &self,
        parent_id: &str,
        worker_title: &str,
        alias: &str,
        candidate: &str,
    ) -> StoreResult<(String, bool)> {
        let parent = parent_id.to_string();
        let key = alias_key(worker_title, alias);
        let candidate = candidate.to_string();
        self.writer
            .write(move |t| writes::alias_get_or_create_in(t, &parent, &key, &candidate))
            .await
    }

    async fn aliases(&self, parent_id: &str) -> StoreResult<Vec<WorkerAlias>> {
        let parent = parent_id.to_string();
        self.run(move |db| reads::aliases(db, &parent)).await
    }
}

#[async_trait]
impl Inboxes for RedbStore {
    async fn inbox_push(&self, agent_id: &str, env: &Envelope) -> StoreResult<bool> {
        Ok(self.inbox_push_then(agent_id, env, &[]).await?.fresh)
    }

    async fn inbox_push_then(
        &self,
        agent_id: &str,
        env: &Envelope,
        then: &[StoreWrite],
    ) -> StoreResult<Pushed> {
        let bytes = encode(env).map_err(de)?;
        let id = agent_id.to_string();
        let env_id = env.id;
        let then = writes::encode_writes(then, &self.outbox_seq)?;
        self.writer
            .write(move |t| {
                let fresh = inbox::inbox_push_in(t, &id, &env_id, &bytes)?;
                if fresh {
                    writes::apply_writes(t, &then)?;
                }
                Ok(Pushed {
                    fresh,
                    then_applied: fresh,
                })
            })
            .await
    }

    async fn inbox_pending(&self, agent_id: &str) -> StoreResult<Vec<Envelope>> {
        let id = agent_id.to_string();
        self.run(move |db| reads::read_sequence(db, INBOX, &id))
            .await
    }

    async fn inbox_done(&self, agent_id: &str, env_id: Uuid) -> StoreResult<()> {
        let id = agent_id.to_string();
        self.writer
            .write(move |t| inbox::inbox_done_in(t, &id, &env_id))
            .await
    }

    fn keeps_outbox(&self) -> bool {
        true
    }

    async fn outbox_pending(&self) -> StoreResult<Vec<Envelope>> {
        self.run(reads::outbox_pending).await
    }

    async fn outbox_done(&self, env_id: Uuid) -> StoreResult<()> {
        let id = env_id.to_string();
        self.writer
            .write(move |t| writes::outbox_done_in(t, &id))
            .await
    }
}

#[async_trait]
impl Checkpoints for RedbStore {
    async fn checkpoint_put(&self, checkpoint: &Checkpoint, keep: usize) -> StoreResult<()> {
        let bytes = encode(checkpoint).map_err(de)?;
        let id = checkpoint.agent_id.clone();
        self.writer
            .write(move |t| writes::checkpoint_put_in(t, &id, &bytes, keep))
            .await
    }

    async fn checkpoints(&self, agent_id: &str) -> StoreResult<Vec<Checkpoint>> {
        let id = agent_id.to_string();
        let mut list: Vec<Checkpoint> = self
            .run(move |db| reads::read_sequence(db, CHECKPOINTS, &id))
            .await?;
        list.reverse();
        Ok(list)
    }
}

#[async_trait]
impl Batches for RedbStore {
    async fn write_batch(&self, batch: &[StoreWrite]) -> StoreResult<()> {
        let encoded = writes::encode_writes(batch, &self.outbox_seq)?;
        self.writer
            .write(move |t| writes::apply_writes(t, &encoded))
            .await
    }
}

#[async_trait]
impl IdempotencyClaims for RedbStore {
    async fn idempotency_claim(
        &self,
        home: &str,
        key: &str,
        fingerprint: &str,
        ttl_ms: u64,
    ) -> StoreResult<Option<Claim>> {
        let (home, key, fingerprint) = (home.to_string(), key.to_string(), fingerprint.to_string());
        let now = now_ms();
        self.writer
            .write(move |t| writes::claim_in(t, &home, &key, &fingerprint, ttl_ms, now))
            .await
    }

    async fn idempotency_claim_end(&self, home: &str, key: &str, end: ClaimEnd) -> StoreResult<()> {
        let (home, key) = (home.to_string(), key.to_string());
        let now = now_ms();
        self.writer
            .write(move |t| writes::claim_end_in(t, &home, &key, end, now))
            .await
    }
}

#[async_trait]
impl ToolCalls for RedbStore {
    async fn tool_call_put(&self, call: &agentd_proto::ToolCallRecord) -> StoreResult<()> {
        let bytes = serde_json::to_vec(call).map_err(|e| StoreError::corrupt(e.to_string()))?;
        let key = super::layout::uuid_key(&call.call_id);
        self.writer
            .write(move |t| writes::tool_call_put_in(t, &key, &bytes))
            .await
    }

    async fn tool_call_get(
        &self,
        call_id: Uuid,
    ) -> StoreResult<Option<agentd_proto::ToolCallRecord>> {
        self.run(move |db| reads::tool_call(db, &call_id)).await
    }

    async fn tool_call_close(
        &self,
        call_id: Uuid,
        closing: &agentd_ports::ToolCallClosing,
    ) -> StoreResult<agentd_proto::ToolCallClose> {
        let closing = closing.clone();
        self.writer
            .write(move |t| writes::tool_call_close_in(t, &call_id, &closing))
            .await
    }

    async fn tool_calls_open(&self) -> StoreResult<Vec<agentd_proto::ToolCallRecord>> {
        self.run(reads::tool_calls_open).await
    }
}

#[async_trait]
impl AgentValues for RedbStore {
    async fn agent_value_put(
        &self,
        agent_id: &str,
        task_id: &str,
        value: &[u8],
    ) -> StoreResult<()> {
        let (a, task, bytes) = (agent_id.to_string(), task_id.to_string(), value.to_vec());
        self.writer
            .write(move |t| writes::a2a_task_put_in(t, &a, &task, &bytes))
            .await
    }

    async fn agent_value_put_new(
        &self,
        agent_id: &str,
        task_id: &str,
        value: &[u8],
    ) -> StoreResult<bool> {
        let (a, task, bytes) = (agent_id.to_string(), task_id.to_string(), value.to_vec());
        self.writer
            .write(move |t| writes::a2a_task_put_new_in(t, &a, &task, &bytes))
            .await
    }

    async fn agent_value_get(&self, agent_id: &str, task_id: &str) -> StoreResult<Option<Vec<u8>>> {
        let (a, task) = (agent_id.to_string(), task_id.to_string());
        self.run(move |db| reads::a2a_task(db, &a, &task)).await
    }

    async fn agent_values(&self, agent_id: &str) -> StoreResult<Vec<(String, Vec<u8>)>> {
        let a = agent_id.to_string();
        self.run(move |db| reads::a2a_tasks(db, &a)).await
    }
}

impl Runs for RedbStore {}

#[async_trait]
impl ExternalIds for RedbStore {
    async fn external_id_claim(
        &self,
        key: &ExternalKey,
        claim: &ExternalClaim,
        keep: Retention,
    ) -> StoreResult<Option<ExternalClaim>> {
        let (key, claim) = (key.encoded(), claim.clone());
        let now = now_ms();
        self.writer
            .write(move |t| external_ids::claim_in(t, &key, &claim, keep, now))
            .await
    }

    async fn external_id_settle(
        &self,
        key: &ExternalKey,
        agent_id: &str,
        keep: Retention,
    ) -> StoreResult<()> {
        let (key, a) = (key.encoded(), agent_id.to_string());
        let now = now_ms();
        self.writer
            .write(move |t| external_ids::settle_in(t, &key, &a, keep, now))
            .await
    }

    async fn external_id_get(&self, key: &ExternalKey) -> StoreResult<Option<ExternalClaim>> {
        let key = key.encoded();
        let now = now_ms();
        self.run(move |db| external_ids::get(db, &key, now)).await
    }

    async fn external_id_release(
        &self,
        key: &ExternalKey,
        claim: &ExternalClaim,
    ) -> StoreResult<()> {
        let (key, claim) = (key.encoded(), claim.clone());
        let now = now_ms();
        self.writer
            .write(move |t| external_ids::release_in(t, &key, &claim, now))
            .await
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it): claims expire by the wall
/// clock, which a restart keeps.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
