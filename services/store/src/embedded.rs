//! The embedded durable `ThreadStore`: one redb file (`agentd.redb`) under the data directory.
//! Every mutating call is one write transaction (atomic and fsynced on commit), so a crash
//! leaves either the whole change or none of it. redb is blocking; calls run on tokio's
//! blocking pool so they never stall an actor's Arbiter.

use agentd_actors::{DEDUP_WINDOW, StoreError, StoreResult, ThreadStore, WorkerAlias};
use agentd_proto::codec::{decode, encode};
use agentd_proto::{AgentRecord, Checkpoint, Envelope, ThreadEntry};
use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use std::path::Path;
use std::sync::Arc;
use uuid::Uuid;

/// id → MessagePack record.
const AGENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("agents");
/// (agent, seq) → MessagePack entry.
const THREADS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("threads");
/// (agent, entry id) → seq: de-duplication of appends.
const THREAD_IDS: TableDefinition<(&str, &str), u64> = TableDefinition::new("thread_ids");
/// (parent, seq) → child, in insertion order.
const CHILDREN: TableDefinition<(&str, u64), &str> = TableDefinition::new("children");
/// (parent, "title\x1falias") → child.
const ALIASES: TableDefinition<(&str, &str), &str> = TableDefinition::new("aliases");

/// (agent, seq) → MessagePack envelope: the durable inbox.
const INBOX: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("inbox");
/// (agent, envelope id) → inbox seq.
const INBOX_IDS: TableDefinition<(&str, &str), u64> = TableDefinition::new("inbox_ids");
/// (agent, envelope id) → seen seq: the de-duplication window.
const SEEN: TableDefinition<(&str, &str), u64> = TableDefinition::new("seen");
/// (agent, seen seq) → envelope id, to drop the oldest id when the window is full.
const SEEN_SEQ: TableDefinition<(&str, u64), &str> = TableDefinition::new("seen_seq");

/// (agent, seq) → MessagePack checkpoint, oldest first.
const CHECKPOINTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("checkpoints");

const SEP: char = '\x1f';

fn be(e: impl Into<redb::Error>) -> StoreError {
    StoreError::Backend(e.into().to_string())
}

fn de(e: agentd_proto::AgentdError) -> StoreError {
    StoreError::Decode(e.message)
}

/// A `ThreadStore` in a redb file.
#[derive(Clone)]
pub struct RedbStore {
    db: Arc<Database>,
}

impl RedbStore {
    /// Opens (or creates) `<data_dir>/agentd.redb`, creating the directory if needed.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| StoreError::Backend(format!("creating {}: {e}", data_dir.display())))?;
        let db = Database::create(data_dir.join("agentd.redb")).map_err(be)?;
        let tx = db.begin_write().map_err(be)?;
        {
            tx.open_table(AGENTS).map_err(be)?;
            tx.open_table(THREADS).map_err(be)?;
            tx.open_table(THREAD_IDS).map_err(be)?;
            tx.open_table(CHILDREN).map_err(be)?;
            tx.open_table(ALIASES).map_err(be)?;
            tx.open_table(INBOX).map_err(be)?;
            tx.open_table(INBOX_IDS).map_err(be)?;
            tx.open_table(SEEN).map_err(be)?;
            tx.open_table(SEEN_SEQ).map_err(be)?;
            tx.open_table(CHECKPOINTS).map_err(be)?;
        }
        tx.commit().map_err(be)?;
        Ok(RedbStore { db: Arc::new(db) })
    }

    async fn run<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Database) -> StoreResult<T> + Send + 'static,
    {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| StoreError::Backend(format!("store task: {e}")))?
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
            n += usize::from(
                tx.open_table(AGENTS)
                    .map_err(be)?
                    .get(id.as_str())
                    .map_err(be)?
                    .is_some(),
            );
            for item in tx.open_table(THREADS).map_err(be)?.iter().map_err(be)? {
                n += usize::from(item.map_err(be)?.0.value().0 == id);
            }
            for item in tx.open_table(THREAD_IDS).map_err(be)?.iter().map_err(be)? {
                n += usize::from(item.map_err(be)?.0.value().0 == id);
            }
            for item in tx.open_table(CHILDREN).map_err(be)?.iter().map_err(be)? {
                let (k, v) = item.map_err(be)?;
                n += usize::from(k.value().0 == id || v.value() == id);
            }
            for item in tx.open_table(ALIASES).map_err(be)?.iter().map_err(be)? {
                let (k, v) = item.map_err(be)?;
                n += usize::from(k.value().0 == id || v.value() == id);
            }
            for item in tx.open_table(INBOX).map_err(be)?.iter().map_err(be)? {
                n += usize::from(item.map_err(be)?.0.value().0 == id);
            }
            for item in tx.open_table(SEEN).map_err(be)?.iter().map_err(be)? {
                n += usize::from(item.map_err(be)?.0.value().0 == id);
            }
            for item in tx.open_table(CHECKPOINTS).map_err(be)?.iter().map_err(be)? {
                n += usize::from(item.map_err(be)?.0.value().0 == id);
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
        self.run(move |db| {
            let tx = db.begin_write().map_err(be)?;
            tx.open_table(AGENTS)
                .map_err(be)?
                .insert(id.as_str(), bytes.as_slice())
                .map_err(be)?;
            tx.commit().map_err(be)
        })
        .await
    }

    async fn get_agent(&self, agent_id: &str) -> StoreResult<Option<AgentRecord>> {
        let id = agent_id.to_string();
        self.run(move |db| {
            let tx = db.begin_read().map_err(be)?;
            let table = tx.open_table(AGENTS).map_err(be)?;
            match table.get(id.as_str()).map_err(be)? {
                Some(v) => Ok(Some(decode(v.value()).map_err(de)?)),
                None => Ok(None),
            }
        })
        .await
    }

    async fn list_roots(&self) -> StoreResult<Vec<AgentRecord>> {
        self.run(|db| {
            let tx = db.begin_read().map_err(be)?;
            let table = tx.open_table(AGENTS).map_err(be)?;
            let mut roots = Vec::new();
            for item in table.iter().map_err(be)? {
                let (_, v) = item.map_err(be)?;
                let rec: AgentRecord = decode(v.value()).map_err(de)?;
                if rec.parent_id.is_none() {
                    roots.push(rec);
                }
            }
            roots.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
            Ok(roots)
        })
        .await
    }

    async fn append(&self, agent_id: &str, entry: &ThreadEntry) -> StoreResult<bool> {
        let bytes = encode(entry).map_err(de)?;
        let id = agent_id.to_string();
        let entry_id = entry.id.to_string();
        self.run(move |db| {
            let tx = db.begin_write().map_err(be)?;
            {
                let mut ids = tx.open_table(THREAD_IDS).map_err(be)?;
                if ids
                    .get((id.as_str(), entry_id.as_str()))
                    .map_err(be)?
                    .is_some()
                {
                    return Ok(false);
                }
                let mut threads = tx.open_table(THREADS).map_err(be)?;
                let seq = next_seq(&threads, &id)?;
                threads
                    .insert((id.as_str(), seq), bytes.as_slice())
                    .map_err(be)?;
                ids.insert((id.as_str(), entry_id.as_str()), seq)
                    .map_err(be)?;
            }
            tx.commit().map_err(be)?;
            Ok(true)
        })
        .await
    }

    async fn thread(&self, agent_id: &str) -> StoreResult<Vec<ThreadEntry>> {
        self.read_sequence(THREADS, agent_id).await
    }

    async fn replace_thread(&self, agent_id: &str, entries: &[ThreadEntry]) -> StoreResult<()> {
        let encoded = entries
            .iter()
            .map(|e| Ok((e.id.to_string(), encode(e).map_err(de)?)))
            .collect::<StoreResult<Vec<_>>>()?;
        let id = agent_id.to_string();
        self.run(move |db| {
            let tx = db.begin_write().map_err(be)?;
            {
                let mut threads = tx.open_table(THREADS).map_err(be)?;
                threads
                    .retain_in((id.as_str(), 0u64)..=(id.as_str(), u64::MAX), |_, _| false)
                    .map_err(be)?;
                let mut ids = tx.open_table(THREAD_IDS).map_err(be)?;
                remove_prefix_str(&mut ids, &id)?;
                for (seq, (entry_id, bytes)) in encoded.iter().enumerate() {
                    threads
                        .insert((id.as_str(), seq as u64), bytes.as_slice())
                        .map_err(be)?;
                    ids.insert((id.as_str(), entry_id.as_str()), seq as u64)
                        .map_err(be)?;
                }
            }
            tx.commit().map_err(be)
        })
        .await
    }

    async fn add_child(&self, parent_id: &str, child_id: &str) -> StoreResult<()> {
        let (parent, child) = (parent_id.to_string(), child_id.to_string());
        self.run(move |db| {
            let tx = db.begin_write().map_err(be)?;
            {
                let mut table = tx.open_table(CHILDREN).map_err(be)?;
                let existing = scan(&table, &parent, |_, v| Ok(v == child.as_str()))?;
                if !existing.contains(&true) {
                    let seq = next_seq(&table, &parent)?;
                    table
                        .insert((parent.as_str(), seq), child.as_str())
                        .map_err(be)?;
                }
            }
            tx.commit().map_err(be)
        })
        .await
    }

    async fn children(&self, parent_id: &str) -> StoreResult<Vec<String>> {
        let parent = parent_id.to_string();
        self.run(move |db| {
            let tx = db.begin_read().map_err(be)?;
            let table = tx.open_table(CHILDREN).map_err(be)?;
            scan(&table, &parent, |_, v| Ok(v.to_string()))
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
        self.run(move |db| {
            // redb allows one write transaction at a time: the check and the insert are atomic.
            let tx = db.begin_write().map_err(be)?;
            let out = {
                let mut table = tx.open_table(ALIASES).map_err(be)?;
                let existing = table
                    .get((parent.as_str(), key.as_str()))
                    .map_err(be)?
                    .map(|v| v.value().to_string());
                match existing {
                    Some(child) => (child, false),
                    None => {
                        table
                            .insert((parent.as_str(), key.as_str()), candidate.as_str())
                            .map_err(be)?;
                        (candidate, true)
                    }
                }
            };
            tx.commit().map_err(be)?;
            Ok(out)
        })
        .await
    }

    async fn aliases(&self, parent_id: &str) -> StoreResult<Vec<WorkerAlias>> {
        let parent = parent_id.to_string();
        self.run(move |db| {
            let tx = db.begin_read().map_err(be)?;
            let table = tx.open_table(ALIASES).map_err(be)?;
            let mut out = Vec::new();
            for item in table.range((parent.as_str(), "")..).map_err(be)? {
                let (k, v) = item.map_err(be)?;
                let (p, key) = k.value();
                if p != parent {
                    break;
                }
                let (title, alias) = key.split_once(SEP).unwrap_or((key, ""));
                out.push(WorkerAlias {
                    worker_title: title.to_string(),
                    alias: alias.to_string(),
                    child_id: v.value().to_string(),
                });
            }
            Ok(out)
        })
        .await
    }

    async fn delete_agent(&self, agent_id: &str) -> StoreResult<()> {
        let id = agent_id.to_string();
        self.run(move |db| {
            let tx = db.begin_write().map_err(be)?;
            {
                let mut agents = tx.open_table(AGENTS).map_err(be)?;
                let parent = match agents.remove(id.as_str()).map_err(be)? {
                    Some(v) => decode::<AgentRecord>(v.value()).map_err(de)?.parent_id,
                    None => None,
                };
                let mut threads = tx.open_table(THREADS).map_err(be)?;
                threads
                    .retain_in((id.as_str(), 0u64)..=(id.as_str(), u64::MAX), |_, _| false)
                    .map_err(be)?;
                let mut ids = tx.open_table(THREAD_IDS).map_err(be)?;
                remove_prefix_str(&mut ids, &id)?;
                let mut children = tx.open_table(CHILDREN).map_err(be)?;
                children
                    .retain_in((id.as_str(), 0u64)..=(id.as_str(), u64::MAX), |_, _| false)
                    .map_err(be)?;
                let mut aliases = tx.open_table(ALIASES).map_err(be)?;
                remove_prefix_str(&mut aliases, &id)?;
                let a = id.as_str();
                tx.open_table(INBOX)
                    .map_err(be)?
                    .retain_in((a, 0u64)..=(a, u64::MAX), |_, _| false)
                    .map_err(be)?;
                tx.open_table(SEEN_SEQ)
                    .map_err(be)?
                    .retain_in((a, 0u64)..=(a, u64::MAX), |_, _| false)
                    .map_err(be)?;
                tx.open_table(CHECKPOINTS)
                    .map_err(be)?
                    .retain_in((a, 0u64)..=(a, u64::MAX), |_, _| false)
                    .map_err(be)?;
                remove_prefix_str(&mut tx.open_table(INBOX_IDS).map_err(be)?, a)?;
                remove_prefix_str(&mut tx.open_table(SEEN).map_err(be)?, a)?;
                if let Some(parent) = parent {
                    let p = parent.as_str();
                    children
                        .retain_in((p, 0u64)..=(p, u64::MAX), |_, child| child != id.as_str())
                        .map_err(be)?;
                    let keys: Vec<String> = {
                        let mut keys = Vec::new();
                        for item in aliases.range((p, "")..).map_err(be)? {
                            let (k, v) = item.map_err(be)?;
                            if k.value().0 != p {
                                break;
                            }
                            if v.value() == id.as_str() {
                                keys.push(k.value().1.to_string());
                            }
                        }
                        keys
                    };
                    for k in keys {
                        aliases.remove((p, k.as_str())).map_err(be)?;
                    }
                }
            }
            tx.commit().map_err(be)
        })
        .await
    }

    async fn inbox_push(&self, agent_id: &str, env: &Envelope) -> StoreResult<bool> {
        let bytes = encode(env).map_err(de)?;
        let id = agent_id.to_string();
        let env_id = env.id.to_string();
        self.run(move |db| {
            let tx = db.begin_write().map_err(be)?;
            {
                let a = id.as_str();
                let mut seen = tx.open_table(SEEN).map_err(be)?;
                if seen.get((a, env_id.as_str())).map_err(be)?.is_some() {
                    return Ok(false);
                }
                let mut order = tx.open_table(SEEN_SEQ).map_err(be)?;
                let seq = next_seq(&order, a)?;
                seen.insert((a, env_id.as_str()), seq).map_err(be)?;
                order.insert((a, seq), env_id.as_str()).map_err(be)?;
                if seq >= DEDUP_WINDOW as u64 {
                    let old = seq - DEDUP_WINDOW as u64;
                    let gone = order
                        .remove((a, old))
                        .map_err(be)?
                        .map(|v| v.value().to_string());
                    if let Some(gone) = gone {
                        seen.remove((a, gone.as_str())).map_err(be)?;
                    }
                }
                let mut inbox = tx.open_table(INBOX).map_err(be)?;
                let slot = next_seq(&inbox, a)?;
                inbox.insert((a, slot), bytes.as_slice()).map_err(be)?;
                tx.open_table(INBOX_IDS)
                    .map_err(be)?
                    .insert((a, env_id.as_str()), slot)
                    .map_err(be)?;
            }
            tx.commit().map_err(be)?;
            Ok(true)
        })
        .await
    }

    async fn inbox_pending(&self, agent_id: &str) -> StoreResult<Vec<Envelope>> {
        self.read_sequence(INBOX, agent_id).await
    }

    async fn inbox_done(&self, agent_id: &str, env_id: Uuid) -> StoreResult<()> {
        let id = agent_id.to_string();
        let env_id = env_id.to_string();
        self.run(move |db| {
            let tx = db.begin_write().map_err(be)?;
            {
                let a = id.as_str();
                let slot = tx
                    .open_table(INBOX_IDS)
                    .map_err(be)?
                    .remove((a, env_id.as_str()))
                    .map_err(be)?
                    .map(|v| v.value());
                if let Some(slot) = slot {
                    tx.open_table(INBOX)
                        .map_err(be)?
                        .remove((a, slot))
                        .map_err(be)?;
                }
            }
            tx.commit().map_err(be)
        })
        .await
    }

    async fn checkpoint_put(&self, checkpoint: &Checkpoint, keep: usize) -> StoreResult<()> {
        let bytes = encode(checkpoint).map_err(de)?;
        let id = checkpoint.agent_id.clone();
        self.run(move |db| {
            let tx = db.begin_write().map_err(be)?;
            {
                let a = id.as_str();
                let mut table = tx.open_table(CHECKPOINTS).map_err(be)?;
                let seq = next_seq(&table, a)?;
                table.insert((a, seq), bytes.as_slice()).map_err(be)?;
                if keep > 0 && seq >= keep as u64 {
                    // Sequences are dense from 0, so everything below seq - keep + 1 goes.
                    let first_kept = seq + 1 - keep as u64;
                    table
                        .retain_in((a, 0u64)..(a, first_kept), |_, _| false)
                        .map_err(be)?;
                }
            }
            tx.commit().map_err(be)
        })
        .await
    }

    async fn checkpoints(&self, agent_id: &str) -> StoreResult<Vec<Checkpoint>> {
        let mut list: Vec<Checkpoint> = self.read_sequence(CHECKPOINTS, agent_id).await?;
        list.reverse();
        Ok(list)
    }
}

/// Removes every `(id, _)` key of a `(&str, &str)`-keyed table.
fn remove_prefix_str<V: redb::Value + 'static>(
    table: &mut redb::Table<'_, (&'static str, &'static str), V>,
    id: &str,
) -> StoreResult<()> {
    let mut keys = Vec::new();
    for item in table.range((id, "")..).map_err(be)? {
        let (k, _) = item.map_err(be)?;
        let (p, rest) = k.value();
        if p != id {
            break;
        }
        keys.push(rest.to_string());
    }
    for k in keys {
        table.remove((id, k.as_str())).map_err(be)?;
    }
    Ok(())
}
