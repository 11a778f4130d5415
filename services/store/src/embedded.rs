//! The embedded durable `ThreadStore`: one redb file (`agentd.redb`) under the data directory.
//! Every mutating call is atomic and durable when it returns, so a crash leaves either the
//! whole change or none of it. Writes go through one writer thread that **group-commits**: the
//! writes that arrive while a commit (and its fsync) is under way are applied together in the
//! next transaction, so many agents writing at once pay for one fsync between them. A write
//! that fails inside a shared transaction does not take the others down: the batch is
//! rolled back and each of its writes is run again in a transaction of its own. Reads run on
//! tokio's blocking pool so they never stall an actor's Arbiter.

use agentd_actors::{
    DEDUP_WINDOW, FastHashMap, Pushed, StoreError, StoreErrorKind, StoreResult, StoreWrite,
    ThreadStore, WorkerAlias,
};
use agentd_proto::codec::{decode, encode};
use agentd_proto::{AgentRecord, Checkpoint, Envelope, ThreadEntry};
use async_trait::async_trait;
use redb::{
    Database, ReadableDatabase, ReadableTable, TableDefinition, TableHandle, WriteTransaction,
};
use std::path::Path;
use std::sync::{Arc, mpsc};
use uuid::Uuid;

/// (agent, kind, key) → value: every small row of an agent side by side, of the kinds in
/// [`row`]: its record, the id index of its thread, the order of its de-duplication window,
/// its children and its worker aliases. A message writes several of them; keyed by the agent
/// first in one table, they share the agent's leaf page while its rows fit one (a few dozen),
/// where a table per kind dirtied a page per kind and agent — and nearly all of the writer's
/// cost (copying, checksumming, writing and syncing pages) is per page. Past a leaf, rows of
/// different kinds land on different pages again.
const ROWS: TableDefinition<(&str, u8, &[u8]), &[u8]> = TableDefinition::new("agent_rows");

/// The kinds of [`ROWS`], in key order.
mod row {
    /// `[]` → MessagePack record.
    pub const RECORD: u8 = 0;
    /// entry id (16 bytes) → its seq in the thread: de-duplication of appends.
    pub const THREAD_ID: u8 = 1;
    /// seen seq → envelope id: the order of the de-duplication window ([`super::SEEN`]), to
    /// drop the oldest id when the window is full.
    pub const WINDOW: u8 = 2;
    /// seq → child id, in insertion order.
    pub const CHILD: u8 = 3;
    /// `title\x1falias` → child id.
    pub const ALIAS: u8 = 4;
}

/// (envelope id, agent) → seen seq (8 bytes, big-endian): the de-duplication window. Keyed by
/// the id first: new ids are mostly v7, ordered by time, so a commit's pushes all land in the
/// last leaf or two instead of one leaf per agent.
const SEEN: TableDefinition<(&[u8], &str), &[u8]> = TableDefinition::new("seen_by_id");

/// (agent, seq) → MessagePack entry.
const THREADS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("threads");

/// (agent, seen seq) → MessagePack envelope: the durable inbox, in arrival order. Keyed by the
/// envelope's seq in the de-duplication window, so marking it done finds it through the
/// window ([`SEEN`]). Only pending envelopes are here, so it stays small and a
/// commit's pushes and done marks share a few pages.
const INBOX: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("inbox_by_seen");

/// envelope id → (seq, MessagePack envelope): child outputs kept until their parent's router
/// has handled them ([`StoreWrite::Outbox`]), the seq keeping their order.
const OUTBOX: TableDefinition<&str, (u64, &[u8])> = TableDefinition::new("outbox");

/// (agent, seq) → MessagePack checkpoint, oldest first.
const CHECKPOINTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("checkpoints");

/// Tables of earlier layouts, moved into the current ones when such a file is opened
/// ([`migrate`]).
mod earlier {
    use redb::TableDefinition;
    /// id → record: now [`super::row::RECORD`].
    pub const AGENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("agents");
    /// (agent, entry id) → seq: now [`super::row::THREAD_ID`].
    pub const THREAD_IDS: TableDefinition<(&str, &str), u64> = TableDefinition::new("thread_ids");
    /// (parent, seq) → child: now [`super::row::CHILD`].
    pub const CHILDREN: TableDefinition<(&str, u64), &str> = TableDefinition::new("children");
    /// (parent, "title\x1falias") → child: now [`super::row::ALIAS`].
    pub const ALIASES: TableDefinition<(&str, &str), &str> = TableDefinition::new("aliases");
    /// (agent, envelope id) → seen seq: now [`super::SEEN`].
    pub const SEEN: TableDefinition<(&str, &str), u64> = TableDefinition::new("seen");
    /// (agent, seen seq) → envelope id: now [`super::row::WINDOW`].
    pub const SEEN_SEQ: TableDefinition<(&str, u64), &str> = TableDefinition::new("seen_seq");
    /// The inbox before `inbox_by_seen` (its own slot numbers, and an id index in
    /// [`INBOX_IDS`]): now [`super::INBOX`].
    pub const INBOX: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("inbox");
    /// (agent, envelope id) → slot in [`INBOX`].
    pub const INBOX_IDS: TableDefinition<(&str, &str), u64> = TableDefinition::new("inbox_ids");
}

const SEP: char = '\x1f';

/// A row key with nothing after its kind (a record's), and the low end of a kind's range.
const NO_KEY: &[u8] = &[];

/// The type of [`ROWS`]' keys.
type RowKey = (&'static str, u8, &'static [u8]);
/// [`ROWS`], open in a write transaction.
type RowTable<'t> = redb::Table<'t, RowKey, &'static [u8]>;

/// The tables of one write transaction, each opened once for all the writes of a batch
/// (opening a table costs a table-tree lookup, and closing it a root update).
struct Tables<'t> {
    rows: RowTable<'t>,
    seen: redb::Table<'t, (&'static [u8], &'static str), &'static [u8]>,
    threads: redb::Table<'t, (&'static str, u64), &'static [u8]>,
    inbox: redb::Table<'t, (&'static str, u64), &'static [u8]>,
    checkpoints: redb::Table<'t, (&'static str, u64), &'static [u8]>,
    outbox: redb::Table<'t, &'static str, (u64, &'static [u8])>,
    /// The writer's cache of next sequence numbers (empty outside the writer thread).
    seqs: NextSeqs,
}

/// The next sequence number of each agent's thread and of its de-duplication window, as the
/// writer thread last wrote them: finding it in the B-tree (a range look-up) was one of the
/// four B-tree operations of every append and one of the five of every push. Kept across
/// transactions, dropped whenever one is rolled back. A number from here is only a guess
/// checked by the insert itself: an insert that finds the key taken puts the old value back
/// and takes the number from the B-tree, so a stale guess can never overwrite an entry (a
/// guess that is too high leaves a gap, which ordered scans do not mind).
#[derive(Default)]
struct NextSeqs {
    threads: FastHashMap<String, u64>,
    seen: FastHashMap<String, u64>,
}

/// Past this many agents the cache starts over (it holds no state of its own).
const NEXT_SEQS_MAX: usize = 100_000;

impl NextSeqs {
    fn note(map: &mut FastHashMap<String, u64>, id: &str, next: u64) {
        if let Some(n) = map.get_mut(id) {
            *n = next;
            return;
        }
        if map.len() >= NEXT_SEQS_MAX {
            map.clear();
        }
        map.insert(id.to_string(), next);
    }

    /// Forgets `id` (its thread was replaced, or it was deleted).
    fn forget(&mut self, id: &str) {
        self.threads.remove(id);
        self.seen.remove(id);
    }
}

impl<'t> Tables<'t> {
    /// Opens (and on a new file creates) every table in `tx`.
    fn open(tx: &'t WriteTransaction) -> StoreResult<Self> {
        Self::open_with(tx, NextSeqs::default())
    }

    /// [`Self::open`], with the writer's cache of next sequence numbers.
    fn open_with(tx: &'t WriteTransaction, seqs: NextSeqs) -> StoreResult<Self> {
        Ok(Tables {
            seqs,
            rows: tx.open_table(ROWS).map_err(be)?,
            seen: tx.open_table(SEEN).map_err(be)?,
            threads: tx.open_table(THREADS).map_err(be)?,
            inbox: tx.open_table(INBOX).map_err(be)?,
            checkpoints: tx.open_table(CHECKPOINTS).map_err(be)?,
            outbox: tx.open_table(OUTBOX).map_err(be)?,
        })
    }
}

/// The keys of `agent`'s rows of `kind`.
fn kind_range(agent: &str, kind: u8) -> std::ops::Range<(&str, u8, &'static [u8])> {
    (agent, kind, NO_KEY)..(agent, kind + 1, NO_KEY)
}

/// The smallest id above `agent`: every row of `agent` sorts below `(after(agent), 0, [])`,
/// every row of an agent after it at or above.
fn after(agent: &str) -> String {
    format!("{agent}\0")
}

/// A sequence number as a row key (big-endian, so keys sort by number).
fn seq_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// The sequence number of a [`seq_key`] (or of a row value written as one).
fn seq_of(bytes: &[u8]) -> StoreResult<u64> {
    <[u8; 8]>::try_from(bytes)
        .map(u64::from_be_bytes)
        .map_err(|_| StoreError::corrupt(format!("a sequence number of {} bytes", bytes.len())))
}

/// A UUID as a row key: its 16 bytes.
fn uuid_key(id: &Uuid) -> [u8; 16] {
    *id.as_bytes()
}

/// An id written as text by an earlier layout, as a row key: its 16 bytes if it is a UUID
/// (all of agentd's are), else its text.
fn text_id_key(id: &str) -> Vec<u8> {
    match Uuid::parse_str(id) {
        Ok(uuid) => uuid.as_bytes().to_vec(),
        Err(_) => id.as_bytes().to_vec(),
    }
}

/// A row value that holds an agent id.
fn agent_id_of(bytes: &[u8]) -> StoreResult<&str> {
    std::str::from_utf8(bytes)
        .map_err(|e| StoreError::caused_by(StoreErrorKind::Corrupt, format!("an agent id: {e}"), e))
}

/// The number after the last of `agent`'s rows of `kind` keyed by [`seq_key`] (0 if none).
fn next_row_seq(
    rows: &impl ReadableTable<RowKey, &'static [u8]>,
    agent: &str,
    kind: u8,
) -> StoreResult<u64> {
    match rows.range(kind_range(agent, kind)).map_err(be)?.next_back() {
        Some(item) => Ok(seq_of(item.map_err(be)?.0.value().2)? + 1),
        None => Ok(0),
    }
}

/// `agent`'s rows of `kind`, keys and values, in key order.
fn scan_rows<T>(
    rows: &impl ReadableTable<RowKey, &'static [u8]>,
    agent: &str,
    kind: u8,
    mut f: impl FnMut(&[u8], &[u8]) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let mut out = Vec::new();
    for item in rows.range(kind_range(agent, kind)).map_err(be)? {
        let (k, v) = item.map_err(be)?;
        out.push(f(k.value().2, v.value())?);
    }
    Ok(out)
}

/// Removes `agent`'s rows of `kind` for which `remove` says so.
fn remove_rows(
    rows: &mut RowTable<'_>,
    agent: &str,
    kind: u8,
    mut remove: impl FnMut(&[u8], &[u8]) -> bool,
) -> StoreResult<()> {
    rows.retain_in(kind_range(agent, kind), |k, v| !remove(k.2, v))
        .map_err(be)
}

fn be(e: impl Into<redb::Error>) -> StoreError {
    let e = e.into();
    StoreError::caused_by(StoreErrorKind::Transient, e.to_string(), e)
}

fn de(e: agentd_proto::AgentdError) -> StoreError {
    StoreError::caused_by(StoreErrorKind::Corrupt, e.message.clone(), e)
}

/// At most this many writes share one transaction (bounds a batch's latency).
const MAX_BATCH: usize = 1024;

/// One write waiting for the writer thread: applied inside a shared transaction, answered
/// once that transaction is committed (or has failed).
trait WriteJob: Send {
    /// Applies the write to the transaction's tables; on error the caller rolls the
    /// transaction back.
    fn apply(&mut self, tables: &mut Tables<'_>) -> StoreResult<()>;
    /// Answers the caller with the write's outcome and the commit's.
    fn finish(self: Box<Self>, outcome: StoreResult<()>);
}

/// A [`WriteJob`] running `f` and keeping its value until the commit is known.
struct Job<T, F> {
    f: F,
    value: Option<T>,
    reply: tokio::sync::oneshot::Sender<StoreResult<T>>,
}

impl<T, F> WriteJob for Job<T, F>
where
    T: Send,
    F: FnMut(&mut Tables<'_>) -> StoreResult<T> + Send,
{
    fn apply(&mut self, tables: &mut Tables<'_>) -> StoreResult<()> {
        self.value = Some((self.f)(tables)?);
        Ok(())
    }

    fn finish(self: Box<Self>, outcome: StoreResult<()>) {
        let Job { value, reply, .. } = *self;
        let answer = outcome
            .and_then(|()| value.ok_or_else(|| StoreError::transient("write was not applied")));
        let _ = reply.send(answer);
    }
}

/// Runs on the writer thread: takes every write queued so far, applies them in one
/// transaction, commits once, answers them all; until the store is dropped.
fn writer_loop(db: &Database, jobs: &mpsc::Receiver<Box<dyn WriteJob>>) {
    let mut seqs = NextSeqs::default();
    while let Ok(first) = jobs.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        commit_batch(db, batch, &mut seqs);
    }
}

/// Applies `batch` in one transaction. If one write fails, the transaction is rolled back and
/// every write of the batch runs alone, so only the failing one sees its error.
fn commit_batch(db: &Database, mut batch: Vec<Box<dyn WriteJob>>, seqs: &mut NextSeqs) {
    let tx = match db.begin_write() {
        Ok(tx) => tx,
        Err(e) => {
            let e = be(e);
            for job in batch {
                job.finish(Err(StoreError::transient(e.to_string())));
            }
            return;
        }
    };
    let failed = match Tables::open_with(&tx, std::mem::take(seqs)) {
        Ok(mut tables) => {
            let mut failed = None;
            for job in batch.iter_mut() {
                if let Err(e) = job.apply(&mut tables) {
                    failed = Some(e);
                    break;
                }
            }
            *seqs = std::mem::take(&mut tables.seqs);
            failed
        }
        Err(e) => Some(e),
    };
    if failed.is_some() {
        *seqs = NextSeqs::default(); // what it learned is rolled back with the transaction
    }
    match failed {
        Some(e) if batch.len() == 1 => {
            drop(tx); // rolls back
            if let Some(job) = batch.pop() {
                job.finish(Err(e));
            }
        }
        Some(_) => {
            drop(tx); // rolls back
            for job in batch {
                commit_batch(db, vec![job], seqs);
            }
        }
        None => {
            let outcome = tx.commit().map_err(be);
            if outcome.is_err() {
                *seqs = NextSeqs::default();
            }
            for job in batch {
                let outcome = match &outcome {
                    Ok(()) => Ok(()),
                    Err(e) => Err(StoreError::transient(e.to_string())),
                };
                job.finish(outcome);
            }
        }
    }
}

/// The writer thread and its queue. Dropping it (with the last store handle) stops the thread
/// and waits for it, so the file is closed when the store is gone and can be opened again.
struct Writer {
    queue: Option<mpsc::Sender<Box<dyn WriteJob>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A `ThreadStore` in a redb file.
#[derive(Clone)]
pub struct RedbStore {
    writer: Arc<Writer>,
    db: Arc<Database>,
    /// The seq of the next output kept in [`OUTBOX`].
    outbox_seq: Arc<std::sync::atomic::AtomicU64>,
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
        let (writer, jobs) = mpsc::channel::<Box<dyn WriteJob>>();
        let wdb = db.clone();
        let thread = std::thread::Builder::new()
            .name("agentd-redb-writer".into())
            .spawn(move || writer_loop(&wdb, &jobs))
            .map_err(|e| {
                StoreError::caused_by(
                    StoreErrorKind::Transient,
                    format!("starting the writer thread: {e}"),
                    e,
                )
            })?;
        let writer = Arc::new(Writer {
            queue: Some(writer),
            thread: Some(thread),
        });
        Ok(RedbStore {
            writer,
            db,
            outbox_seq: Arc::new(outbox_seq.into()),
        })
    }

    /// Runs `f` in a write transaction shared with the other writes queued meanwhile, and
    /// answers once that transaction is committed. `f` may run twice (the second time alone)
    /// if another write of its batch fails, so it only reads what it captured.
    async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnMut(&mut Tables<'_>) -> StoreResult<T> + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job: Box<dyn WriteJob> = Box::new(Job {
            f,
            value: None,
            reply,
        });
        let stopped = || StoreError::transient("the store's writer thread has stopped");
        self.writer
            .queue
            .as_ref()
            .ok_or_else(stopped)?
            .send(job)
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

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
}

impl RedbStore {
    /// How many rows of any table still mention `id` (as a key, or as a child/alias value).
    /// Deletion tests use it to prove nothing is left behind.
    pub async fn rows_mentioning(&self, id: &str) -> StoreResult<usize> {
        let id = id.to_string();
        self.run(move |db| {
            let tx = db.begin_read().map_err(be)?;
            let mut n = 0;
            for item in tx.open_table(ROWS).map_err(be)?.iter().map_err(be)? {
                let (k, v) = item.map_err(be)?;
                let (agent, kind, _) = k.value();
                let names_it =
                    matches!(kind, row::CHILD | row::ALIAS) && v.value() == id.as_bytes();
                n += usize::from(agent == id || names_it);
            }
            for item in tx.open_table(SEEN).map_err(be)?.iter().map_err(be)? {
                n += usize::from(item.map_err(be)?.0.value().1 == id);
            }
            for table in [THREADS, INBOX, CHECKPOINTS] {
                for item in tx.open_table(table).map_err(be)?.iter().map_err(be)? {
                    n += usize::from(item.map_err(be)?.0.value().0 == id);
                }
            }
            Ok(n)
        })
        .await
    }
}

impl RedbStore {
    /// The decoded values of `table` under `(id, seq)` keys, in sequence order.
    async fn read_sequence<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        table: TableDefinition<'static, (&'static str, u64), &'static [u8]>,
        id: &str,
    ) -> StoreResult<Vec<T>> {
        let id = id.to_string();
        self.run(move |db| {
            let tx = db.begin_read().map_err(be)?;
            let t = tx.open_table(table).map_err(be)?;
            scan(&t, &id, |_, v| decode(v).map_err(de))
        })
        .await
    }
}

fn alias_key(title: &str, alias: &str) -> String {
    format!("{title}{SEP}{alias}")
}

/// Keys of `table` whose first element is `id`, with their values.
fn scan<V: redb::Value + 'static, T>(
    table: &impl ReadableTable<(&'static str, u64), V>,
    id: &str,
    mut f: impl FnMut(u64, V::SelfType<'_>) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let mut out = Vec::new();
    for item in table.range((id, 0u64)..=(id, u64::MAX)).map_err(be)? {
        let (k, v) = item.map_err(be)?;
        out.push(f(k.value().1, v.value())?);
    }
    Ok(out)
}

fn next_seq<V: redb::Value + 'static>(
    table: &impl ReadableTable<(&'static str, u64), V>,
    id: &str,
) -> StoreResult<u64> {
    let last = table
        .range((id, 0u64)..=(id, u64::MAX))
        .map_err(be)?
        .next_back();
    Ok(match last {
        Some(item) => item.map_err(be)?.0.value().1 + 1,
        None => 0,
    })
}

#[async_trait]
impl ThreadStore for RedbStore {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    async fn put_agent(&self, record: &AgentRecord) -> StoreResult<()> {
        let bytes = encode(record).map_err(de)?;
        let id = record.id.clone();
        self.write(move |t| put_agent_in(t, &id, &bytes)).await
    }

    async fn get_agent(&self, agent_id: &str) -> StoreResult<Option<AgentRecord>> {
        let id = agent_id.to_string();
        self.run(move |db| {
            let tx = db.begin_read().map_err(be)?;
            let rows = tx.open_table(ROWS).map_err(be)?;
            match rows.get((id.as_str(), row::RECORD, NO_KEY)).map_err(be)? {
                Some(v) => Ok(Some(decode(v.value()).map_err(de)?)),
                None => Ok(None),
            }
        })
        .await
    }

    async fn agent_exists(&self, agent_id: &str) -> StoreResult<bool> {
        let id = agent_id.to_string();
        self.run(move |db| {
            let tx = db.begin_read().map_err(be)?;
            let rows = tx.open_table(ROWS).map_err(be)?;
            Ok(rows
                .get((id.as_str(), row::RECORD, NO_KEY))
                .map_err(be)?
                .is_some())
        })
        .await
    }

    async fn list_roots(&self) -> StoreResult<Vec<AgentRecord>> {
        self.run(|db| {
            let tx = db.begin_read().map_err(be)?;
            let rows = tx.open_table(ROWS).map_err(be)?;
            let mut roots = Vec::new();
            // One seek per agent: its first row is its record (kind 0), if it has one.
            let mut from = String::new();
            loop {
                let next = rows
                    .range((from.as_str(), row::RECORD, NO_KEY)..)
                    .map_err(be)?
                    .next();
                let Some(item) = next else { break };
                let (k, v) = item.map_err(be)?;
                let (agent, kind, _) = k.value();
                if kind == row::RECORD {
                    let rec: AgentRecord = decode(v.value()).map_err(de)?;
                    if rec.parent_id.is_none() {
                        roots.push(rec);
                    }
                }
                from = after(agent);
            }
            roots.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
            Ok(roots)
        })
        .await
    }

    async fn append(&self, agent_id: &str, entry: &ThreadEntry) -> StoreResult<bool> {
        let bytes = encode(entry).map_err(de)?;
        let id = agent_id.to_string();
        let entry_id = entry.id;
        self.write(move |t| append_in(t, &id, &entry_id, &bytes))
            .await
    }

    async fn thread(&self, agent_id: &str) -> StoreResult<Vec<ThreadEntry>> {
        self.read_sequence(THREADS, agent_id).await
    }

    async fn replace_thread(&self, agent_id: &str, entries: &[ThreadEntry]) -> StoreResult<()> {
        let encoded = entries
            .iter()
            .map(|e| Ok((e.id, encode(e).map_err(de)?)))
            .collect::<StoreResult<Vec<_>>>()?;
        let id = agent_id.to_string();
        self.write(move |t| {
            let a = id.as_str();
            t.seqs.forget(a);
            t.threads
                .retain_in((a, 0u64)..=(a, u64::MAX), |_, _| false)
                .map_err(be)?;
            remove_rows(&mut t.rows, a, row::THREAD_ID, |_, _| true)?;
            for (seq, (entry_id, bytes)) in encoded.iter().enumerate() {
                let seq = seq as u64;
                t.threads.insert((a, seq), bytes.as_slice()).map_err(be)?;
                t.rows
                    .insert(
                        (a, row::THREAD_ID, uuid_key(entry_id).as_slice()),
                        seq_key(seq).as_slice(),
                    )
                    .map_err(be)?;
            }
            Ok(())
        })
        .await
    }

    async fn add_child(&self, parent_id: &str, child_id: &str) -> StoreResult<()> {
        let (parent, child) = (parent_id.to_string(), child_id.to_string());
        self.write(move |t| {
            let p = parent.as_str();
            let existing = scan_rows(&t.rows, p, row::CHILD, |_, v| Ok(v == child.as_bytes()))?;
            if !existing.contains(&true) {
                let seq = next_row_seq(&t.rows, p, row::CHILD)?;
                t.rows
                    .insert((p, row::CHILD, seq_key(seq).as_slice()), child.as_bytes())
                    .map_err(be)?;
            }
            Ok(())
        })
        .await
    }

    async fn children(&self, parent_id: &str) -> StoreResult<Vec<String>> {
        let parent = parent_id.to_string();
        self.run(move |db| {
            let tx = db.begin_read().map_err(be)?;
            let rows = tx.open_table(ROWS).map_err(be)?;
            scan_rows(&rows, &parent, row::CHILD, |_, v| {
                Ok(agent_id_of(v)?.to_string())
            })
        })
        .await
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
        self.write(move |t| {
            // Writes are applied one after another: the check and the insert are atomic.
            let row_key = (parent.as_str(), row::ALIAS, key.as_bytes());
            let existing = match t.rows.get(row_key).map_err(be)? {
                Some(v) => Some(agent_id_of(v.value())?.to_string()),
                None => None,
            };
            Ok(match existing {
                Some(child) => (child, false),
                None => {
                    t.rows.insert(row_key, candidate.as_bytes()).map_err(be)?;
                    (candidate.clone(), true)
                }
            })
        })
        .await
    }

    async fn aliases(&self, parent_id: &str) -> StoreResult<Vec<WorkerAlias>> {
        let parent = parent_id.to_string();
        self.run(move |db| {
            let tx = db.begin_read().map_err(be)?;
            let rows = tx.open_table(ROWS).map_err(be)?;
            scan_rows(&rows, &parent, row::ALIAS, |k, v| {
                let key = String::from_utf8_lossy(k);
                let (title, alias) = key.split_once(SEP).unwrap_or((&key, ""));
                Ok(WorkerAlias {
                    worker_title: title.to_string(),
                    alias: alias.to_string(),
                    child_id: agent_id_of(v)?.to_string(),
                })
            })
        })
        .await
    }

    async fn delete_agent(&self, agent_id: &str) -> StoreResult<()> {
        let id = agent_id.to_string();
        self.write(move |t| {
            let a = id.as_str();
            t.seqs.forget(a);
            let parent = match t.rows.get((a, row::RECORD, NO_KEY)).map_err(be)? {
                Some(v) => decode::<AgentRecord>(v.value()).map_err(de)?.parent_id,
                None => None,
            };
            let window = scan_rows(&t.rows, a, row::WINDOW, |_, env_id| Ok(env_id.to_vec()))?;
            for env_id in window {
                t.seen.remove((env_id.as_slice(), a)).map_err(be)?;
            }
            let end = after(a);
            t.rows
                .retain_in((a, 0u8, NO_KEY)..(end.as_str(), 0u8, NO_KEY), |_, _| false)
                .map_err(be)?;
            for table in [&mut t.threads, &mut t.inbox, &mut t.checkpoints] {
                table
                    .retain_in((a, 0u64)..=(a, u64::MAX), |_, _| false)
                    .map_err(be)?;
            }
            if let Some(parent) = parent {
                let p = parent.as_str();
                for kind in [row::CHILD, row::ALIAS] {
                    remove_rows(&mut t.rows, p, kind, |_, child| child == a.as_bytes())?;
                }
            }
            Ok(())
        })
        .await
    }

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
        let then = self.encode_writes(then)?;
        self.write(move |t| {
            let fresh = inbox_push_in(t, &id, &env_id, &bytes)?;
            if fresh {
                apply_writes(t, &then)?;
            }
            Ok(Pushed {
                fresh,
                then_applied: fresh,
            })
        })
        .await
    }

    async fn inbox_pending(&self, agent_id: &str) -> StoreResult<Vec<Envelope>> {
        self.read_sequence(INBOX, agent_id).await
    }

    async fn inbox_done(&self, agent_id: &str, env_id: Uuid) -> StoreResult<()> {
        let id = agent_id.to_string();
        self.write(move |t| inbox_done_in(t, &id, &env_id)).await
    }

    async fn checkpoint_put(&self, checkpoint: &Checkpoint, keep: usize) -> StoreResult<()> {
        let bytes = encode(checkpoint).map_err(de)?;
        let id = checkpoint.agent_id.clone();
        self.write(move |t| {
            let a = id.as_str();
            let seq = next_seq(&t.checkpoints, a)?;
            t.checkpoints
                .insert((a, seq), bytes.as_slice())
                .map_err(be)?;
            if keep > 0 && seq >= keep as u64 {
                // Sequences are dense from 0, so everything below seq - keep + 1 goes.
                let first_kept = seq + 1 - keep as u64;
                t.checkpoints
                    .retain_in((a, 0u64)..(a, first_kept), |_, _| false)
                    .map_err(be)?;
            }
            Ok(())
        })
        .await
    }

    async fn checkpoints(&self, agent_id: &str) -> StoreResult<Vec<Checkpoint>> {
        let mut list: Vec<Checkpoint> = self.read_sequence(CHECKPOINTS, agent_id).await?;
        list.reverse();
        Ok(list)
    }

    async fn write_batch(&self, writes: &[StoreWrite]) -> StoreResult<()> {
        let encoded = self.encode_writes(writes)?;
        self.write(move |t| apply_writes(t, &encoded)).await
    }

    fn keeps_outbox(&self) -> bool {
        true
    }

    async fn outbox_pending(&self) -> StoreResult<Vec<Envelope>> {
        self.run(|db| {
            let tx = db.begin_read().map_err(be)?;
            let table = tx.open_table(OUTBOX).map_err(be)?;
            let mut kept = Vec::new();
            for item in table.iter().map_err(be)? {
                let (_, v) = item.map_err(be)?;
                let (seq, bytes) = v.value();
                kept.push((seq, decode::<Envelope>(bytes).map_err(de)?));
            }
            kept.sort_by_key(|(seq, _)| *seq);
            Ok(kept.into_iter().map(|(_, env)| env).collect())
        })
        .await
    }

    async fn outbox_done(&self, env_id: Uuid) -> StoreResult<()> {
        let id = env_id.to_string();
        self.write(move |t| {
            t.outbox.remove(id.as_str()).map_err(be)?;
            Ok(())
        })
        .await
    }
}

/// A [`StoreWrite`], encoded before it reaches the writer thread.
enum Encoded {
    Put(String, Vec<u8>),
    Append(String, Uuid, Vec<u8>),
    Done(String, Uuid),
    /// An output kept in the outbox: its envelope id, seq and bytes.
    Keep(String, u64, Vec<u8>),
}

impl RedbStore {
    /// `writes`, encoded for the writer thread.
    fn encode_writes(&self, writes: &[StoreWrite]) -> StoreResult<Vec<Encoded>> {
        writes.iter().map(|w| self.encode_write(w)).collect()
    }

    fn encode_write(&self, w: &StoreWrite) -> StoreResult<Encoded> {
        Ok(match w {
            StoreWrite::PutAgent(rec) => Encoded::Put(rec.id.clone(), encode(&**rec).map_err(de)?),
            StoreWrite::Append { agent_id, entry } => Encoded::Append(
                agent_id.to_string(),
                entry.id,
                encode(&**entry).map_err(de)?,
            ),
            StoreWrite::InboxDone { agent_id, env_id } => {
                Encoded::Done(agent_id.to_string(), *env_id)
            }
            StoreWrite::Outbox { env } => Encoded::Keep(
                env.id.to_string(),
                self.outbox_seq
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                encode(&**env).map_err(de)?,
            ),
            StoreWrite::Forward { .. } => {
                return Err(agentd_actors::ports::forwards_not_taken("embedded"));
            }
        })
    }
}

fn apply_writes(t: &mut Tables<'_>, writes: &[Encoded]) -> StoreResult<()> {
    for w in writes {
        match w {
            Encoded::Put(id, bytes) => put_agent_in(t, id, bytes)?,
            Encoded::Append(id, entry_id, bytes) => {
                append_in(t, id, entry_id, bytes)?;
            }
            Encoded::Done(id, env_id) => inbox_done_in(t, id, env_id)?,
            // Kept once: a repeat (a batch written again) keeps its first place.
            Encoded::Keep(env_id, seq, bytes) => {
                if t.outbox.get(env_id.as_str()).map_err(be)?.is_none() {
                    t.outbox
                        .insert(env_id.as_str(), (*seq, bytes.as_slice()))
                        .map_err(be)?;
                }
            }
        }
    }
    Ok(())
}

/// Queues `bytes` (envelope `env_id`) in the agent's inbox unless the id is in its
/// de-duplication window; answers whether it was new.
fn inbox_push_in(t: &mut Tables<'_>, a: &str, env_id: &Uuid, bytes: &[u8]) -> StoreResult<bool> {
    let id = uuid_key(env_id);
    let cached = t.seqs.seen.get(a).copied();
    let Some(seq) = put_new(
        t,
        cached,
        |t, seq| {
            Ok(t.seen
                .insert((id.as_slice(), a), seq)
                .map_err(be)?
                .map(|v| v.value().to_vec()))
        },
        |t| next_row_seq(&t.rows, a, row::WINDOW),
        |t, seq| {
            Ok(t.rows
                .insert((a, row::WINDOW, seq_key(seq).as_slice()), id.as_slice())
                .map_err(be)?
                .map(|v| v.value().to_vec()))
        },
        |t, seq, taken| {
            t.rows
                .insert((a, row::WINDOW, seq_key(seq).as_slice()), taken.as_slice())
                .map(|_| ())
                .map_err(be)
        },
    )?
    else {
        return Ok(false);
    };
    NextSeqs::note(&mut t.seqs.seen, a, seq + 1);
    if seq >= DEDUP_WINDOW as u64 {
        let old = seq_key(seq - DEDUP_WINDOW as u64);
        let gone = t
            .rows
            .remove((a, row::WINDOW, old.as_slice()))
            .map_err(be)?
            .map(|v| v.value().to_vec());
        if let Some(gone) = gone {
            t.seen.remove((gone.as_slice(), a)).map_err(be)?;
        }
    }
    t.inbox.insert((a, seq), bytes).map_err(be)?;
    Ok(true)
}

fn put_agent_in(t: &mut Tables<'_>, id: &str, bytes: &[u8]) -> StoreResult<()> {
    t.rows
        .insert((id, row::RECORD, NO_KEY), bytes)
        .map_err(be)?;
    Ok(())
}

/// Appends unless the entry id is already in the thread; answers whether it appended.
fn append_in(t: &mut Tables<'_>, a: &str, entry_id: &Uuid, bytes: &[u8]) -> StoreResult<bool> {
    let cached = t.seqs.threads.get(a).copied();
    let id = uuid_key(entry_id);
    let appended = put_new(
        t,
        cached,
        |t, seq| {
            Ok(t.rows
                .insert((a, row::THREAD_ID, id.as_slice()), seq)
                .map_err(be)?
                .map(|v| v.value().to_vec()))
        },
        |t| next_seq(&t.threads, a),
        |t, seq| {
            Ok(t.threads
                .insert((a, seq), bytes)
                .map_err(be)?
                .map(|v| v.value().to_vec()))
        },
        |t, seq, taken| {
            t.threads
                .insert((a, seq), taken.as_slice())
                .map(|_| ())
                .map_err(be)
        },
    )?;
    if let Some(seq) = appended {
        NextSeqs::note(&mut t.seqs.threads, a, seq + 1);
    }
    Ok(appended.is_some())
}

/// Puts a value under its agent's next sequence number unless its id is in an index of such
/// ids already (`None`). The id is claimed through `index` (which sets the id's [`seq_key`] and
/// answers what it displaced) at a guess of that number: the writer's `cached` one, else the
/// number after the last entry (`last_next`); the value is inserted there (`insert` answers
/// what it displaced). A stale guess finds its key taken: what was there is put back
/// (`restore`), the value goes after the last entry, and the index is corrected. Answers the
/// number used.
fn put_new<Old>(
    t: &mut Tables<'_>,
    cached: Option<u64>,
    index: impl Fn(&mut Tables<'_>, &[u8]) -> StoreResult<Option<Vec<u8>>>,
    last_next: impl Fn(&Tables<'_>) -> StoreResult<u64>,
    insert: impl Fn(&mut Tables<'_>, u64) -> StoreResult<Option<Old>>,
    restore: impl Fn(&mut Tables<'_>, u64, Old) -> StoreResult<()>,
) -> StoreResult<Option<u64>> {
    let guess = match cached {
        Some(n) => n,
        None => last_next(t)?,
    };
    // One insert where a look-up and an insert were, for what is nearly always a new id; a
    // duplicate gets the value it had back.
    if let Some(had) = index(t, &seq_key(guess))? {
        index(t, &had)?;
        return Ok(None);
    }
    let Some(taken) = insert(t, guess)? else {
        return Ok(Some(guess));
    };
    restore(t, guess, taken)?;
    let seq = last_next(t)?;
    insert(t, seq)?;
    index(t, &seq_key(seq))?;
    Ok(Some(seq))
}

fn inbox_done_in(t: &mut Tables<'_>, a: &str, env_id: &Uuid) -> StoreResult<()> {
    let seq = match t.seen.get((uuid_key(env_id).as_slice(), a)).map_err(be)? {
        Some(v) => Some(seq_of(v.value())?),
        None => None,
    };
    if let Some(seq) = seq
        && t.inbox.remove((a, seq)).map_err(be)?.is_some()
    {
        return Ok(());
    }
    // Not where the window says (an envelope that waited while more than a window of newer
    // ones arrived, or one already done): look for it among the agent's pending envelopes.
    let mut found = None;
    for item in t.inbox.range((a, 0u64)..=(a, u64::MAX)).map_err(be)? {
        let (k, v) = item.map_err(be)?;
        if envelope_id(v.value()) == Some(*env_id) {
            found = Some(k.value().1);
            break;
        }
    }
    if let Some(seq) = found {
        t.inbox.remove((a, seq)).map_err(be)?;
    }
    Ok(())
}

/// The id of a stored envelope (`None` if it does not decode).
fn envelope_id(bytes: &[u8]) -> Option<Uuid> {
    decode::<Envelope>(bytes).ok().map(|e| e.id)
}

/// Whether `tx`'s file has a table named `name`.
fn has_table(tx: &WriteTransaction, name: &str) -> StoreResult<bool> {
    Ok(tx.list_tables().map_err(be)?.any(|h| h.name() == name))
}

/// Moves what a file written by an earlier version holds into the current layout, in the same
/// transaction as opening it: per-agent rows from their tables of their own into [`ROWS`],
/// then an inbox of the layout before `inbox_by_seen` into [`INBOX`]. Each earlier table is
/// deleted once moved, so nothing is moved twice.
fn migrate(tx: &WriteTransaction, t: &mut Tables<'_>) -> StoreResult<()> {
    let put = |t: &mut Tables<'_>, agent: &str, kind: u8, key: &[u8], value: &[u8]| {
        t.rows
            .insert((agent, kind, key), value)
            .map(|_| ())
            .map_err(be)
    };
    let mut moved = 0;
    moved += move_table(tx, t, earlier::AGENTS, |t, id, rec| {
        put(t, id, row::RECORD, NO_KEY, rec)
    })?;
    moved += move_table(tx, t, earlier::THREAD_IDS, |t, (agent, id), seq| {
        put(t, agent, row::THREAD_ID, &text_id_key(id), &seq_key(seq))
    })?;
    moved += move_table(tx, t, earlier::SEEN, |t, (agent, id), seq| {
        let id = text_id_key(id);
        t.seen
            .insert((id.as_slice(), agent), seq_key(seq).as_slice())
            .map(|_| ())
            .map_err(be)
    })?;
    moved += move_table(tx, t, earlier::SEEN_SEQ, |t, (agent, seq), id| {
        put(t, agent, row::WINDOW, &seq_key(seq), &text_id_key(id))
    })?;
    moved += move_table(tx, t, earlier::CHILDREN, |t, (parent, seq), child| {
        put(t, parent, row::CHILD, &seq_key(seq), child.as_bytes())
    })?;
    moved += move_table(tx, t, earlier::ALIASES, |t, (parent, key), child| {
        put(t, parent, row::ALIAS, key.as_bytes(), child.as_bytes())
    })?;
    if moved > 0 {
        tracing::info!(
            rows = moved,
            "embedded store: agents' rows moved to their current layout"
        );
    }
    migrate_legacy_inbox(tx, t)
}

/// If `tx`'s file has table `table` (of an earlier layout), hands each of its rows to `put`
/// and deletes it; answers how many rows it moved.
fn move_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    tx: &WriteTransaction,
    t: &mut Tables<'_>,
    table: TableDefinition<'static, K, V>,
    mut put: impl FnMut(&mut Tables<'_>, K::SelfType<'_>, V::SelfType<'_>) -> StoreResult<()>,
) -> StoreResult<usize> {
    if !has_table(tx, table.name())? {
        return Ok(0);
    }
    let mut moved = 0;
    for item in tx.open_table(table).map_err(be)?.iter().map_err(be)? {
        let (k, v) = item.map_err(be)?;
        put(t, k.value(), v.value())?;
        moved += 1;
    }
    tx.delete_table(table).map_err(be)?;
    Ok(moved)
}

/// Moves the inbox of a file written before `inbox_by_seen` into [`INBOX`]. An envelope keeps
/// its place: it is keyed by its seq in the de-duplication window, or (evicted from the window
/// since) by its old slot, which is lower than the seqs of everything that arrived after it
/// (each arrival took one seq, and a slot never ran ahead of the seq).
fn migrate_legacy_inbox(tx: &WriteTransaction, t: &mut Tables<'_>) -> StoreResult<()> {
    if !has_table(tx, earlier::INBOX.name())? {
        return Ok(());
    }
    let mut moved = 0usize;
    {
        let legacy = tx.open_table(earlier::INBOX).map_err(be)?;
        for item in legacy.iter().map_err(be)? {
            let (k, v) = item.map_err(be)?;
            let (agent, slot) = k.value();
            let seen = match envelope_id(v.value()) {
                Some(env_id) => t
                    .seen
                    .get((uuid_key(&env_id).as_slice(), agent))
                    .map_err(be)?
                    .map(|s| seq_of(s.value()))
                    .transpose()?,
                None => None,
            };
            t.inbox
                .insert((agent, seen.unwrap_or(slot)), v.value())
                .map_err(be)?;
            moved += 1;
        }
    }
    tx.delete_table(earlier::INBOX).map_err(be)?;
    if has_table(tx, earlier::INBOX_IDS.name())? {
        tx.delete_table(earlier::INBOX_IDS).map_err(be)?;
    }
    tracing::info!(
        envelopes = moved,
        "embedded store: inbox moved to its current layout"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_bytes(text: &str) -> Vec<u8> {
        text.as_bytes().to_vec()
    }

    fn thread_seq(t: &Tables<'_>, agent: &str, id: &Uuid) -> StoreResult<Option<u64>> {
        let got = t.rows.get((agent, row::THREAD_ID, uuid_key(id).as_slice()));
        got.map_err(be)?.map(|v| seq_of(v.value())).transpose()
    }

    fn seen_seq(t: &Tables<'_>, agent: &str, id: &Uuid) -> StoreResult<Option<u64>> {
        let got = t.seen.get((uuid_key(id).as_slice(), agent));
        got.map_err(be)?.map(|v| seq_of(v.value())).transpose()
    }

    /// A cached next sequence number that is behind the B-tree (the cache outlived a write it
    /// did not see) must not overwrite an entry: the insert notices, puts the old value back
    /// and appends after the last entry.
    #[test]
    fn a_stale_next_sequence_number_never_overwrites_an_entry() -> StoreResult<()> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::transient(e.to_string()))?;
        let db = Database::create(dir.path().join("t.redb")).map_err(be)?;
        let tx = db.begin_write().map_err(be)?;
        let [e0, e1, e2, m0, m1, m2] = [(); 6].map(|()| Uuid::now_v7());
        {
            let mut t = Tables::open(&tx)?;
            assert!(append_in(&mut t, "a", &e0, &entry_bytes("zero"))?);
            assert!(append_in(&mut t, "a", &e1, &entry_bytes("one"))?);
            assert!(inbox_push_in(&mut t, "a", &m0, b"m0")?);
            assert!(inbox_push_in(&mut t, "a", &m1, b"m1")?);
            // Stale: both numbers point at taken keys.
            t.seqs.threads.insert("a".into(), 0);
            t.seqs.seen.insert("a".into(), 1);
            assert!(append_in(&mut t, "a", &e2, &entry_bytes("two"))?);
            assert!(inbox_push_in(&mut t, "a", &m2, b"m2")?);
            let thread = scan(&t.threads, "a", |seq, v| Ok((seq, v.to_vec())))?;
            assert_eq!(
                thread,
                vec![
                    (0, entry_bytes("zero")),
                    (1, entry_bytes("one")),
                    (2, entry_bytes("two"))
                ]
            );
            let inbox = scan(&t.inbox, "a", |seq, v| Ok((seq, v.to_vec())))?;
            assert_eq!(
                inbox,
                vec![
                    (0, b"m0".to_vec()),
                    (1, b"m1".to_vec()),
                    (2, b"m2".to_vec())
                ]
            );
            let window = scan_rows(&t.rows, "a", row::WINDOW, |k, v| {
                Ok((seq_of(k)?, v.to_vec()))
            })?;
            assert_eq!(
                window,
                vec![
                    (0, uuid_key(&m0).to_vec()),
                    (1, uuid_key(&m1).to_vec()),
                    (2, uuid_key(&m2).to_vec())
                ]
            );
            // And the cache learned the right numbers.
            assert_eq!(t.seqs.threads.get("a"), Some(&3));
            assert_eq!(t.seqs.seen.get("a"), Some(&3));
            // A repeated id is refused and keeps its place in the index.
            assert!(!append_in(&mut t, "a", &e0, &entry_bytes("zero again"))?);
            assert!(!inbox_push_in(&mut t, "a", &m1, b"m1 again")?);
            assert_eq!(thread_seq(&t, "a", &e0)?, Some(0));
            assert_eq!(thread_seq(&t, "a", &e2)?, Some(2));
            assert_eq!(seen_seq(&t, "a", &m1)?, Some(1));
            assert_eq!(seen_seq(&t, "a", &m2)?, Some(2));
            assert_eq!(scan(&t.threads, "a", |_, _| Ok(()))?.len(), 3);
            assert_eq!(scan(&t.inbox, "a", |_, _| Ok(()))?.len(), 3);
        }
        tx.commit().map_err(be)?;
        Ok(())
    }
}
