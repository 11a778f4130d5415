//! The `ThreadStore` calls on records, threads, children, aliases, inboxes and checkpoints;
//! pushes are in [`super::push`], batches in [`super::batch`].

use super::{RedisStore, be, de};
use crate::redis_keys::assert_one_slot;
use agentd_ports::{
    AgentRecords, AgentValues, Batches, Checkpoints, Claim, ClaimEnd, ExternalClaim, ExternalIds,
    ExternalKey, IdempotencyClaims, Inboxes, Pushed, Retention, Runs, StoreError, StoreKind,
    StoreResult, StoreWrite, Threads, ToolCalls, Tree, WorkerAlias,
};
use agentd_proto::codec::{decode, encode};
use agentd_proto::{AgentRecord, Checkpoint, Envelope, ThreadEntry};
use async_trait::async_trait;
use redis::cmd;
use uuid::Uuid;

impl StoreKind for RedisStore {
    fn kind(&self) -> &'static str {
        "redis"
    }
}

#[async_trait]
impl AgentRecords for RedisStore {
    async fn put_agent(&self, record: &AgentRecord) -> StoreResult<()> {
        let mut pipe = redis::pipe();
        self.pipe_put_agent(&mut pipe, record)?;
        assert_one_slot(&pipe);
        pipe.query_async::<()>(&mut self.con.clone())
            .await
            .map_err(be)
    }

    async fn get_agent(&self, agent_id: &str) -> StoreResult<Option<AgentRecord>> {
        let mut con = self.con.clone();
        let bytes: Option<Vec<u8>> = cmd("GET")
            .arg(self.keys.agent(agent_id))
            .query_async(&mut con)
            .await
            .map_err(be)?;
        bytes.map(|b| decode(&b).map_err(de)).transpose()
    }

    async fn agent_exists(&self, agent_id: &str) -> StoreResult<bool> {
        let mut con = self.con.clone();
        cmd("EXISTS")
            .arg(self.keys.agent(agent_id))
            .query_async(&mut con)
            .await
            .map_err(be)
    }

    async fn list_roots(&self) -> StoreResult<Vec<AgentRecord>> {
        let mut con = self.con.clone();
        // One roots index per partition, in its slot: the reads fan out, one per partition, in
        // one pipeline on one Redis; on a cluster, where a pipeline reaches one node, as
        // commands of their own, all at once.
        let ids: Vec<Vec<String>> = if con.is_cluster() {
            let reads = (0..self.keys.partitions()).map(|k| {
                let mut con = con.clone();
                let key = self.keys.roots(k);
                async move {
                    cmd("ZRANGE")
                        .arg(key)
                        .arg(0)
                        .arg(-1)
                        .query_async::<Vec<String>>(&mut con)
                        .await
                }
            });
            futures::future::try_join_all(reads).await.map_err(be)?
        } else {
            let mut pipe = redis::pipe();
            for k in 0..self.keys.partitions() {
                pipe.cmd("ZRANGE").arg(self.keys.roots(k)).arg(0).arg(-1);
            }
            pipe.query_async(&mut con).await.map_err(be)?
        };
        let mut out = Vec::new();
        for id in ids.into_iter().flatten() {
            if let Some(rec) = self.get_agent(&id).await? {
                out.push(rec);
            }
        }
        out.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
        Ok(out)
    }

    async fn delete_agent(&self, agent_id: &str) -> StoreResult<()> {
        let parent = self.get_agent(agent_id).await?.and_then(|r| r.parent_id);
        // The outside ids that map to it first (other slots): cut off after them, the agent
        // is still whole, only no longer found by those ids.
        self.release_external_ids_of(agent_id).await?;
        let mut con = self.con.clone();
        // The agent's keys and its roots entry (its partition's slot) first, then its parent's
        // references to it (the parent's): cut off between the two, a parent lists a child
        // whose record is gone (listings skip it), never an agent that no parent lists.
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("DEL")
            .arg(self.keys.all_of_agent(agent_id))
            .ignore()
            .cmd("ZREM")
            .arg(self.keys.roots(self.keys.partition_of(agent_id)))
            .arg(agent_id)
            .ignore();
        assert_one_slot(&pipe);
        pipe.query_async::<()>(&mut con).await.map_err(be)?;
        if let Some(parent) = parent {
            cmd("ZREM")
                .arg(self.keys.agent_part(&parent, "children"))
                .arg(agent_id)
                .query_async::<()>(&mut con)
                .await
                .map_err(be)?;
            let key = self.keys.agent_part(&parent, "workers");
            let pairs: Vec<(String, String)> = cmd("HGETALL")
                .arg(&key)
                .query_async(&mut con)
                .await
                .map_err(be)?;
            let fields: Vec<&String> = pairs
                .iter()
                .filter(|(_, c)| c == agent_id)
                .map(|(f, _)| f)
                .collect();
            if !fields.is_empty() {
                cmd("HDEL")
                    .arg(&key)
                    .arg(fields)
                    .query_async::<()>(&mut con)
                    .await
                    .map_err(be)?;
            }
        }
        Ok(())
    }
}

impl Runs for RedisStore {}

#[async_trait]
impl Threads for RedisStore {
    async fn append(&self, agent_id: &str, entry: &ThreadEntry) -> StoreResult<bool> {
        let bytes = encode(entry).map_err(de)?;
        let mut con = self.con.clone();
        let n: i64 = self
            .append
            .key(self.keys.agent_part(agent_id, "thread"))
            .arg(entry.id.as_bytes().as_slice())
            .arg(bytes)
            .invoke_async(&mut con)
            .await
            .map_err(be)?;
        Ok(n == 1)
    }

    async fn append_new(&self, agent_id: &str, entry: &ThreadEntry) -> StoreResult<()> {
        let (lease, token) = self.lease_and_token(agent_id);
        let mut con = self.con.clone();
        let n: i64 = self
            .append_new
            .key(self.keys.agent_part(agent_id, "thread"))
            .key(lease)
            .arg(token)
            .arg(entry.id.as_bytes().as_slice())
            .arg(encode(entry).map_err(de)?)
            .invoke_async(&mut con)
            .await
            .map_err(be)?;
        super::fenced(n, agent_id)
    }

    async fn thread(&self, agent_id: &str) -> StoreResult<Vec<ThreadEntry>> {
        let mut con = self.con.clone();
        let key = self.keys.agent_part(agent_id, "thread");
        let items: Vec<Vec<u8>> = cmd("LRANGE")
            .arg(&key)
            .arg(0)
            .arg(-1)
            .query_async(&mut con)
            .await
            .map_err(be)?;
        thread_entries(&key, &items)
    }

    async fn replace_thread(&self, agent_id: &str, entries: &[ThreadEntry]) -> StoreResult<()> {
        let mut con = self.con.clone();
        let mut inv = self.replace.prepare_invoke();
        inv.key(self.keys.agent_part(agent_id, "thread"));
        for e in entries {
            inv.arg(e.id.as_bytes().as_slice())
                .arg(encode(e).map_err(de)?);
        }
        inv.invoke_async::<i64>(&mut con).await.map_err(be)?;
        Ok(())
    }
}

#[async_trait]
impl Tree for RedisStore {
    async fn add_child(&self, parent_id: &str, child_id: &str) -> StoreResult<()> {
        let mut con = self.con.clone();
        self.add_child
            .key(self.keys.agent_part(parent_id, "children"))
            .key(self.keys.agent_part(parent_id, "childseq"))
            .arg(child_id)
            .invoke_async::<i64>(&mut con)
            .await
            .map_err(be)?;
        Ok(())
    }

    async fn add_dependent(&self, dependency: &str, dependent: &str) -> StoreResult<()> {
        let mut con = self.con.clone();
        cmd("SADD")
            .arg(self.keys.agent_part(dependency, "dependents"))
            .arg(dependent)
            .query_async::<i64>(&mut con)
            .await
            .map_err(be)?;
        Ok(())
    }

    async fn remove_dependent(&self, dependency: &str, dependent: &str) -> StoreResult<()> {
        let mut con = self.con.clone();
        cmd("SREM")
            .arg(self.keys.agent_part(dependency, "dependents"))
            .arg(dependent)
            .query_async::<i64>(&mut con)
            .await
            .map_err(be)?;
        Ok(())
    }

    async fn dependents(&self, dependency: &str) -> StoreResult<Vec<String>> {
        let mut con = self.con.clone();
        cmd("SMEMBERS")
            .arg(self.keys.agent_part(dependency, "dependents"))
            .query_async(&mut con)
            .await
            .map_err(be)
    }

    async fn children(&self, parent_id: &str) -> StoreResult<Vec<String>> {
        let mut con = self.con.clone();
        cmd("ZRANGE")
            .arg(self.keys.agent_part(parent_id, "children"))
            .arg(0)
            .arg(-1)
            .query_async(&mut con)
            .await
            .map_err(be)
    }

    async fn child_count(&self, parent_id: &str) -> StoreResult<usize> {
        let mut con = self.con.clone();
        cmd("ZCARD")
            .arg(self.keys.agent_part(parent_id, "children"))
            .query_async(&mut con)
            .await
            .map_err(be)
    }

    async fn alias_get_or_create(
        &self,
        parent_id: &str,
        worker_title: &str,
        alias: &str,
        candidate: &str,
    ) -> StoreResult<(String, bool)> {
        let mut con = self.con.clone();
        let key = self.keys.agent_part(parent_id, "workers");
        let field = format!("{worker_title}\x1f{alias}");
        let (child, created): (String, bool) = self
            .alias_get_or_create
            .key(&key)
            .arg(&field)
            .arg(candidate)
            .invoke_async(&mut con)
            .await
            .map_err(be)?;
        Ok((child, created))
    }

    async fn aliases(&self, parent_id: &str) -> StoreResult<Vec<WorkerAlias>> {
        let mut con = self.con.clone();
        let pairs: Vec<(String, String)> = cmd("HGETALL")
            .arg(self.keys.agent_part(parent_id, "workers"))
            .query_async(&mut con)
            .await
            .map_err(be)?;
        Ok(pairs
            .into_iter()
            .map(|(field, child_id)| {
                let (title, alias) = field.split_once('\x1f').unwrap_or((field.as_str(), ""));
                WorkerAlias {
                    worker_title: title.to_string(),
                    alias: alias.to_string(),
                    child_id,
                }
            })
            .collect())
    }
}

#[async_trait]
impl Inboxes for RedisStore {
    async fn inbox_push(&self, agent_id: &str, env: &Envelope) -> StoreResult<bool> {
        self.push(agent_id, env).await
    }

    async fn inbox_push_then(
        &self,
        agent_id: &str,
        env: &Envelope,
        then: &[StoreWrite],
    ) -> StoreResult<Pushed> {
        self.push_then(agent_id, env, then).await
    }

    async fn inbox_pending(&self, agent_id: &str) -> StoreResult<Vec<Envelope>> {
        let mut con = self.con.clone();
        let ids: Vec<String> = cmd("ZRANGE")
            .arg(self.keys.agent_part(agent_id, "inbox"))
            .arg(0)
            .arg(-1)
            .query_async(&mut con)
            .await
            .map_err(be)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let data: Vec<Option<Vec<u8>>> = cmd("HMGET")
            .arg(self.keys.agent_part(agent_id, "inboxdata"))
            .arg(&ids)
            .query_async(&mut con)
            .await
            .map_err(be)?;
        data.into_iter()
            .flatten()
            .map(|b| decode(&b).map_err(de))
            .collect()
    }

    async fn inbox_done(&self, agent_id: &str, env_id: Uuid) -> StoreResult<()> {
        let mut pipe = redis::pipe();
        self.pipe_inbox_done(pipe.atomic(), agent_id, env_id);
        assert_one_slot(&pipe);
        pipe.query_async::<()>(&mut self.con.clone())
            .await
            .map_err(be)
    }
}

#[async_trait]
impl Checkpoints for RedisStore {
    async fn checkpoint_put(&self, checkpoint: &Checkpoint, keep: usize) -> StoreResult<()> {
        let bytes = encode(checkpoint).map_err(de)?;
        let key = self.keys.agent_part(&checkpoint.agent_id, "checkpoints");
        let mut con = self.con.clone();
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("LPUSH").arg(&key).arg(bytes).ignore();
        if keep > 0 {
            pipe.cmd("LTRIM").arg(&key).arg(0).arg(keep - 1).ignore();
        }
        assert_one_slot(&pipe);
        pipe.query_async::<()>(&mut con).await.map_err(be)
    }

    async fn checkpoints(&self, agent_id: &str) -> StoreResult<Vec<Checkpoint>> {
        let mut con = self.con.clone();
        let items: Vec<Vec<u8>> = cmd("LRANGE")
            .arg(self.keys.agent_part(agent_id, "checkpoints"))
            .arg(0)
            .arg(-1)
            .query_async(&mut con)
            .await
            .map_err(be)?;
        items.iter().map(|b| decode(b).map_err(de)).collect()
    }
}

#[async_trait]
impl Batches for RedisStore {
    fn takes_forwards(&self) -> bool {
        true
    }

    async fn write_batch(&self, writes: &[StoreWrite]) -> StoreResult<()> {
        self.write_batch_fenced(writes, None).await
    }

    async fn write_own_batch(&self, agent_id: &str, writes: &[StoreWrite]) -> StoreResult<()> {
        self.write_batch_fenced(writes, Some(agent_id)).await
    }

    async fn replicated(&self, agent_id: &str) -> StoreResult<()> {
        self.wait_replicas_of(agent_id).await
    }
}

#[async_trait]
impl IdempotencyClaims for RedisStore {
    async fn idempotency_claim(
        &self,
        home: &str,
        key: &str,
        fingerprint: &str,
        ttl_ms: u64,
    ) -> StoreResult<Option<Claim>> {
        self.claim(home, key, fingerprint, ttl_ms).await
    }

    async fn idempotency_claim_end(&self, home: &str, key: &str, end: ClaimEnd) -> StoreResult<()> {
        self.end_claim(home, key, end).await
    }
}

#[async_trait]
impl ToolCalls for RedisStore {
    async fn tool_call_put(&self, call: &agentd_proto::ToolCallRecord) -> StoreResult<()> {
        let json = serde_json::to_vec(call).map_err(|e| StoreError::corrupt(e.to_string()))?;
        self.tool_call_put
            .key(self.keys.tool_calls())
            .key(self.keys.tool_call_status())
            .arg(call.call_id.to_string())
            .arg(json)
            .arg(call.status.as_str())
            .invoke_async::<u8>(&mut self.con.clone())
            .await
            .map_err(be)?;
        Ok(())
    }

    async fn tool_call_get(
        &self,
        call_id: Uuid,
    ) -> StoreResult<Option<agentd_proto::ToolCallRecord>> {
        let got: Option<Vec<u8>> = cmd("HGET")
            .arg(self.keys.tool_calls())
            .arg(call_id.to_string())
            .query_async(&mut self.con.clone())
            .await
            .map_err(be)?;
        got.map(|b| decode_tool_call(&b)).transpose()
    }

    async fn tool_call_close(
        &self,
        call_id: Uuid,
        closing: &agentd_ports::ToolCallClosing,
    ) -> StoreResult<agentd_proto::ToolCallClose> {
        use agentd_proto::{ToolCallClose, ToolCallStatus};
        let Some(mut call) = self.tool_call_get(call_id).await? else {
            return Ok(ToolCallClose::NotFound);
        };
        let allowed: String = [
            ToolCallStatus::AwaitingApproval,
            ToolCallStatus::Pending,
            ToolCallStatus::Answered,
            ToolCallStatus::TimedOut,
            ToolCallStatus::Cancelled,
            ToolCallStatus::Rejected,
        ]
        .into_iter()
        .filter(|s| closing.applies_to(*s))
        .map(|s| format!(",{s},"))
        .collect();
        closing.apply(&mut call);
        let json = serde_json::to_vec(&call).map_err(|e| StoreError::corrupt(e.to_string()))?;
        // The status is checked and both fields written in one script: of two closings, the
        // second finds the first's status.
        let (outcome, stored): (u8, Option<Vec<u8>>) = self
            .tool_call_close
            .key(self.keys.tool_calls())
            .key(self.keys.tool_call_status())
            .arg(call_id.to_string())
            .arg(allowed)
            .arg(json)
            .arg(closing.status.as_str())
            .invoke_async(&mut self.con.clone())
            .await
            .map_err(be)?;
        match (outcome, stored) {
            (1, _) => Ok(ToolCallClose::Closed(call)),
            (2, Some(b)) => Ok(ToolCallClose::AlreadyClosed(decode_tool_call(&b)?)),
            _ => Ok(ToolCallClose::NotFound),
        }
    }

    async fn tool_calls_open(&self) -> StoreResult<Vec<agentd_proto::ToolCallRecord>> {
        let mut con = self.con.clone();
        let statuses: Vec<(String, String)> = cmd("HGETALL")
            .arg(self.keys.tool_call_status())
            .query_async(&mut con)
            .await
            .map_err(be)?;
        let open: Vec<String> = statuses
            .into_iter()
            .filter(|(_, s)| s == "pending" || s == "awaiting_approval")
            .map(|(id, _)| id)
            .collect();
        if open.is_empty() {
            return Ok(Vec::new());
        }
        let records: Vec<Option<Vec<u8>>> = cmd("HMGET")
            .arg(self.keys.tool_calls())
            .arg(&open)
            .query_async(&mut con)
            .await
            .map_err(be)?;
        let mut calls = records
            .into_iter()
            .flatten()
            .map(|b| decode_tool_call(&b))
            .collect::<StoreResult<Vec<_>>>()?;
        calls.retain(|c| c.status.is_open());
        calls.sort_by_key(|c| (c.requested_at_ms, c.call_id));
        Ok(calls)
    }
}

#[async_trait]
impl AgentValues for RedisStore {
    async fn agent_value_put(
        &self,
        agent_id: &str,
        task_id: &str,
        value: &[u8],
    ) -> StoreResult<()> {
        let mut con = self.con.clone();
        cmd("HSET")
            .arg(self.keys.a2a_tasks(agent_id))
            .arg(task_id)
            .arg(value)
            .query_async::<()>(&mut con)
            .await
            .map_err(be)
    }

    async fn agent_value_put_new(
        &self,
        agent_id: &str,
        task_id: &str,
        value: &[u8],
    ) -> StoreResult<bool> {
        let mut con = self.con.clone();
        cmd("HSETNX")
            .arg(self.keys.a2a_tasks(agent_id))
            .arg(task_id)
            .arg(value)
            .query_async(&mut con)
            .await
            .map_err(be)
    }

    async fn agent_value_get(&self, agent_id: &str, task_id: &str) -> StoreResult<Option<Vec<u8>>> {
        let mut con = self.con.clone();
        cmd("HGET")
            .arg(self.keys.a2a_tasks(agent_id))
            .arg(task_id)
            .query_async(&mut con)
            .await
            .map_err(be)
    }

    async fn agent_values(&self, agent_id: &str) -> StoreResult<Vec<(String, Vec<u8>)>> {
        let mut con = self.con.clone();
        cmd("HGETALL")
            .arg(self.keys.a2a_tasks(agent_id))
            .query_async(&mut con)
            .await
            .map_err(be)
    }
}

#[async_trait]
impl ExternalIds for RedisStore {
    async fn external_id_claim(
        &self,
        key: &ExternalKey,
        claim: &ExternalClaim,
        keep: Retention,
    ) -> StoreResult<Option<ExternalClaim>> {
        self.claim_external_id(key, claim, keep).await
    }

    async fn external_id_settle(
        &self,
        key: &ExternalKey,
        agent_id: &str,
        keep: Retention,
    ) -> StoreResult<()> {
        self.settle_external_id(key, agent_id, keep).await
    }

    async fn external_id_get(&self, key: &ExternalKey) -> StoreResult<Option<ExternalClaim>> {
        self.get_external_id(key).await
    }

    async fn external_id_release(
        &self,
        key: &ExternalKey,
        claim: &ExternalClaim,
    ) -> StoreResult<()> {
        self.release_external_id(key, claim).await
    }
}

impl RedisStore {
    /// How many keys of the namespace mention `id` (deletion tests prove none is left): keys
    /// named after it, and its places in roots indexes, children sets and alias hashes.
    pub async fn keys_mentioning(&self, id: &str) -> StoreResult<usize> {
        let mut con = self.con.clone();
        let ns = self.keys.ns();
        let mut n = 0;
        for pattern in [format!("{ns}:*{id}*"), format!("{{{ns}:*{id}*")] {
            n += super::layout::scan(&mut con, &pattern, None).await?.len();
        }
        for k in 0..self.keys.partitions() {
            let score: Option<f64> = cmd("ZSCORE")
                .arg(self.keys.roots(k))
                .arg(id)
                .query_async(&mut con)
                .await
                .map_err(be)?;
            n += usize::from(score.is_some());
        }
        let all = super::layout::scan(&mut con, &format!("{{{ns}:p*:a:*"), None).await?;
        for k in all {
            if k.ends_with(":children") {
                let score: Option<f64> = cmd("ZSCORE")
                    .arg(&k)
                    .arg(id)
                    .query_async(&mut con)
                    .await
                    .map_err(be)?;
                n += usize::from(score.is_some());
            } else if k.ends_with(":workers") {
                let vals: Vec<String> = cmd("HVALS")
                    .arg(&k)
                    .query_async(&mut con)
                    .await
                    .map_err(be)?;
                n += vals.iter().filter(|v| *v == id).count();
            }
        }
        Ok(n)
    }
}

/// The entries of thread list `key`, read whole (`<id> <entry>` pairs, see
/// [`super::scripts`]): the entries in order.
fn thread_entries(key: &str, items: &[Vec<u8>]) -> StoreResult<Vec<ThreadEntry>> {
    if !items.len().is_multiple_of(2) {
        return Err(StoreError::corrupt(format!(
            "thread `{key}` holds {} elements, not pairs of an id and an entry",
            items.len()
        )));
    }
    items
        .chunks_exact(2)
        .map(|pair| decode(&pair[1]).map_err(de))
        .collect()
}

/// Decodes a stored tool call record (JSON).
fn decode_tool_call(bytes: &[u8]) -> StoreResult<agentd_proto::ToolCallRecord> {
    serde_json::from_slice(bytes)
        .map_err(|e| StoreError::corrupt(format!("a tool call record: {e}")))
}
