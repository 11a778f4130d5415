//! The Redis `ThreadStore`: records in hashes, threads in streams, the parent→child map in
//! sorted sets, worker aliases in hashes (a get-or-create script: race-free across processes),
//! the durable inbox in a sorted set + hash, checkpoints in a list (newest first). Multi-key changes of one agent run as one Lua
//! script in that agent's hash-tag slot.

use crate::redis_keys::Keys;
use agentd_actors::{
    DEDUP_WINDOW, Pushed, StoreError, StoreErrorKind, StoreResult, StoreWrite, ThreadStore,
    WorkerAlias,
};
use agentd_proto::codec::{decode, encode, encode_envelope};
use agentd_proto::{AgentRecord, Checkpoint, Envelope, ThreadEntry};
use async_trait::async_trait;
use redis::aio::ConnectionManager;
use redis::streams::StreamRangeReply;
use redis::{Script, cmd};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

fn be(e: redis::RedisError) -> StoreError {
    StoreError::caused_by(StoreErrorKind::Transient, format!("redis: {e}"), e)
}

fn de(e: agentd_proto::AgentdError) -> StoreError {
    StoreError::caused_by(StoreErrorKind::Corrupt, e.message.clone(), e)
}

const APPEND: &str = r"
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('XADD', KEYS[1], '*', 'id', ARGV[1], 'e', ARGV[2])
return 1";

const REPLACE: &str = r"
redis.call('DEL', KEYS[1], KEYS[2])
for i = 1, #ARGV, 2 do
  redis.call('XADD', KEYS[1], '*', 'id', ARGV[i], 'e', ARGV[i + 1])
  redis.call('SADD', KEYS[2], ARGV[i])
end
return 1";

const ADD_CHILD: &str = r"
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local n = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], n, ARGV[1])
return 1";

/// KEYS: the parent's workers hash; ARGV: field, candidate. Answers `{child, created}` in
/// one round trip (an existing alias is the common case: `HSETNX` then `HGET` took two).
const ALIAS_GET_OR_CREATE: &str = r"
local child = redis.call('HGET', KEYS[1], ARGV[1])
if child then return {child, 0} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {ARGV[2], 1}";

/// The durable push of an envelope, once (`return 0` for a duplicate); the scripts below end
/// with it. KEYS: seen, seenseq, inbox, inboxdata; ARGV: env id, bytes, window.
///
/// `ZADD NX` both checks the window and adds to it (a duplicate only uses up a sequence
/// number), and the window is cut back to its size every [`TRIM_EVERY`]th push, so it holds
/// between `window` and `window + TRIM_EVERY - 1` ids: two commands where a check, an add and
/// a count took four on every push.
const PUSH: &str = r"
local n = redis.call('INCR', KEYS[2])
local fresh = redis.call('ZADD', KEYS[1], 'NX', n, ARGV[1])
if n % TRIM_EVERY == 0 then
  local size = redis.call('ZCARD', KEYS[1])
  if size > tonumber(ARGV[3]) then
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, size - tonumber(ARGV[3]) - 1)
  end
end
if fresh == 0 then return 0 end
redis.call('ZADD', KEYS[3], n, ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])";

/// How often (in pushes, by sequence number) [`PUSH`] cuts the de-duplication window back to
/// its size.
const TRIM_EVERY: u64 = 64;

/// [`PUSH`] with [`TRIM_EVERY`] filled in, behind the fence in front of it; `rest` follows.
fn push_script(fence: String, rest: &str) -> Script {
    let push = PUSH.replace("TRIM_EVERY", &TRIM_EVERY.to_string());
    Script::new(&format!("{fence}\n{push}\n{rest}return 1"))
}

/// After [`PUSH`] of a new envelope, the start of its turn: the input entry appended once (as
/// [`APPEND`]) and the record's hash set. KEYS after the push's: thread, eids, record (then the
/// fence's lease); ARGV after the push's: entry id, entry bytes, the fence's token, then the
/// record's hash fields and values. The agent's keys share one slot.
const START: &str = r"
if redis.call('SADD', KEYS[6], ARGV[4]) == 1 then
  redis.call('XADD', KEYS[5], '*', 'id', ARGV[4], 'e', ARGV[5])
end
redis.call('HSET', KEYS[7], unpack(ARGV, 7))";

/// A live agent's writes of its own state from one flush, in one call: its thread's new
/// entries (each once, as [`APPEND`]), then its handled inbox items' done marks, then its
/// record, the record only while the partition's lease holds this process's token (`return
/// -1` with the rest written: they are idempotent, and an answer lands together with its done
/// mark or not at all). KEYS: thread, eids, inbox, inboxdata, record (then the lease); ARGV:
/// the token ('' for no fence), the number of entries, their ids and bytes, the number of done
/// marks, their envelope ids, then the record's hash fields and values (none: no record).
const FLUSH_OWN: &str = r"
local i = 3
for _ = 1, tonumber(ARGV[2]) do
  if redis.call('SADD', KEYS[2], ARGV[i]) == 1 then
    redis.call('XADD', KEYS[1], '*', 'id', ARGV[i], 'e', ARGV[i + 1])
  end
  i = i + 2
end
local dones = tonumber(ARGV[i])
i = i + 1
for _ = 1, dones do
  redis.call('ZREM', KEYS[3], ARGV[i])
  redis.call('HDEL', KEYS[4], ARGV[i])
  i = i + 1
end
if i > #ARGV then return 1 end
if ARGV[1] ~= '' and redis.call('GET', KEYS[6]) ~= ARGV[1] then return -1 end
redis.call('HSET', KEYS[5], unpack(ARGV, i))
return 1";

/// The fence in front of a push (`return -1`): with a token in `ARGV[a]`, the push lands only
/// while the lease `KEYS[k]` holds that token. A process that stalled past its lease may still
/// have a push in its socket's buffer when it wakes; without this it would land in an inbox
/// that the partition's next owner has already read, behind that owner's back (and out of
/// order). The lease key is the partition's, not the agent's: this script is not for Redis
/// Cluster, which agentd does not use.
fn fence(k: usize, a: usize) -> String {
    format!("if ARGV[{a}] ~= '' and redis.call('GET', KEYS[{k}]) ~= ARGV[{a}] then return -1 end")
}

/// For an agent, the lease (key) and the token a push for it must find there, if pushes are
/// fenced (see [`RedisStore::fence_pushes_with`]).
pub type PushFence = Arc<dyn Fn(&str) -> Option<(String, String)> + Send + Sync>;

/// Adds a push's fence to `call`: the token as the next argument ('' for none) and, with a
/// token, the lease as the last key.
fn fence_args(call: &mut redis::ScriptInvocation<'_>, fence: Option<(String, String)>) {
    match fence {
        Some((lease, token)) => {
            call.arg(token).key(lease);
        }
        None => {
            call.arg("");
        }
    }
}

/// A push's answer `-1`: the fence refused it.
fn fenced(n: i64, agent_id: &str) -> StoreResult<()> {
    if n == -1 {
        return Err(StoreError::fenced(format!(
            "the lease of agent `{agent_id}`'s partition is no longer this process's"
        )));
    }
    Ok(())
}

/// A `ThreadStore` in Redis.
#[derive(Clone)]
pub struct RedisStore {
    con: ConnectionManager,
    keys: Keys,
    append: Script,
    replace: Script,
    add_child: Script,
    inbox_push: Script,
    alias_get_or_create: Script,
    inbox_push_then_start: Script,
    /// Scripts of the flush pipeline (with [`Self::append`]), sent by their SHA-1 (an `EVAL`
    /// made Redis hash the script's text on every call); loaded again if Redis answers
    /// `NOSCRIPT` (a restart).
    flush_own: Script,
    /// Whether the flush scripts were loaded (once before the first flush, and again after a
    /// `NOSCRIPT`): a pipeline cut by `NOSCRIPT` has run its other commands, so a retry would
    /// send its outputs twice (harmless, de-duplicated, but avoidable).
    flush_scripts_loaded: Arc<std::sync::atomic::AtomicBool>,
    dedup_window: usize,
    /// Set once the bus is up (shared by the clones of this store).
    fence: Arc<std::sync::OnceLock<PushFence>>,
}

impl RedisStore {
    /// Connects to `url` (`redis://` or `rediss://`, with user and password if needed); fails
    /// at once if Redis cannot be reached. The connection reconnects by itself afterwards.
    pub async fn connect(url: &str, namespace: &str) -> StoreResult<Self> {
        let client = redis::Client::open(url).map_err(be)?;
        // One plain connection and a PING first: an unreachable Redis is a clear error at once,
        // not a series of reconnect attempts.
        let probe = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(3)));
        let mut first = client
            .get_multiplexed_async_connection_with_config(&probe)
            .await
            .map_err(be)?;
        cmd("PING")
            .query_async::<String>(&mut first)
            .await
            .map_err(be)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_secs(10)))
            .set_connection_timeout(Some(Duration::from_secs(3)))
            .set_max_delay(Duration::from_secs(2))
            .set_number_of_retries(6);
        let con = client
            .get_connection_manager_with_config(config)
            .await
            .map_err(be)?;
        Ok(Self::with_connection(con, namespace))
    }

    /// A store over an existing connection.
    pub fn with_connection(con: ConnectionManager, namespace: &str) -> Self {
        RedisStore {
            con,
            keys: Keys::new(namespace),
            append: Script::new(APPEND),
            replace: Script::new(REPLACE),
            add_child: Script::new(ADD_CHILD),
            inbox_push: push_script(fence(5, 4), ""),
            alias_get_or_create: Script::new(ALIAS_GET_OR_CREATE),
            inbox_push_then_start: push_script(fence(8, 6), &format!("{START}\n")),
            flush_own: Script::new(FLUSH_OWN),
            flush_scripts_loaded: Arc::default(),
            dedup_window: DEDUP_WINDOW,
            fence: Arc::default(),
        }
    }

    /// Fences every durable push from now on: a push for an agent lands only while the lease
    /// `fence` names for it holds the token it names, else it fails with
    /// [`StoreErrorKind::Fenced`]. The Redis bus sets its partition leases and its process id; a
    /// second call changes nothing.
    pub fn fence_pushes_with(&self, fence: PushFence) {
        let _ = self.fence.set(fence);
    }

    /// The lease and token the push for `agent_id` must find, if pushes are fenced.
    fn fence_for(&self, agent_id: &str) -> Option<(String, String)> {
        self.fence.get().and_then(|f| f(agent_id))
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
    pub fn connection(&self) -> ConnectionManager {
        self.con.clone()
    }

    /// How many keys of the namespace mention `id` (deletion tests prove none is left).
    pub async fn keys_mentioning(&self, id: &str) -> StoreResult<usize> {
        let mut con = self.con.clone();
        let pattern = format!("{}:*{id}*", self.keys.ns());
        let keys: Vec<String> = cmd("KEYS")
            .arg(&pattern)
            .query_async(&mut con)
            .await
            .map_err(be)?;
        let mut n = keys.len();
        // Membership of `id` in other agents' children sets and alias hashes.
        let all: Vec<String> = cmd("KEYS")
            .arg(format!("{}:agent:*", self.keys.ns()))
            .query_async(&mut con)
            .await
            .map_err(be)?;
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

#[async_trait]
impl ThreadStore for RedisStore {
    fn kind(&self) -> &'static str {
        "redis"
    }

    fn takes_forwards(&self) -> bool {
        true
    }

    async fn put_agent(&self, record: &AgentRecord) -> StoreResult<()> {
        let mut pipe = redis::pipe();
        self.pipe_put_agent(&mut pipe, record)?;
        pipe.query_async::<()>(&mut self.con.clone())
            .await
            .map_err(be)
    }

    async fn get_agent(&self, agent_id: &str) -> StoreResult<Option<AgentRecord>> {
        let mut con = self.con.clone();
        let bytes: Option<Vec<u8>> = cmd("HGET")
            .arg(self.keys.agent(agent_id))
            .arg("rec")
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
        let ids: Vec<String> = cmd("ZRANGE")
            .arg(self.keys.roots())
            .arg(0)
            .arg(-1)
            .query_async(&mut con)
            .await
            .map_err(be)?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(rec) = self.get_agent(&id).await? {
                out.push(rec);
            }
        }
        out.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
        Ok(out)
    }

    async fn append(&self, agent_id: &str, entry: &ThreadEntry) -> StoreResult<bool> {
        let bytes = encode(entry).map_err(de)?;
        let mut con = self.con.clone();
        let n: i64 = self
            .append
            .key(self.keys.agent_part(agent_id, "thread"))
            .key(self.keys.agent_part(agent_id, "eids"))
            .arg(entry.id.to_string())
            .arg(bytes)
            .invoke_async(&mut con)
            .await
            .map_err(be)?;
        Ok(n == 1)
    }

    async fn thread(&self, agent_id: &str) -> StoreResult<Vec<ThreadEntry>> {
        let mut con = self.con.clone();
        let reply: StreamRangeReply = cmd("XRANGE")
            .arg(self.keys.agent_part(agent_id, "thread"))
            .arg("-")
            .arg("+")
            .query_async(&mut con)
            .await
            .map_err(be)?;
        reply
            .ids
            .iter()
            .map(|sid| {
                let bytes: Vec<u8> = sid.get("e").ok_or_else(|| {
                    StoreError::corrupt(format!("thread entry {} has no `e` field", sid.id))
                })?;
                decode(&bytes).map_err(de)
            })
            .collect()
    }

    async fn replace_thread(&self, agent_id: &str, entries: &[ThreadEntry]) -> StoreResult<()> {
        let mut con = self.con.clone();
        let mut inv = self.replace.prepare_invoke();
        inv.key(self.keys.agent_part(agent_id, "thread"))
            .key(self.keys.agent_part(agent_id, "eids"));
        for e in entries {
            inv.arg(e.id.to_string()).arg(encode(e).map_err(de)?);
        }
        inv.invoke_async::<i64>(&mut con).await.map_err(be)?;
        Ok(())
    }

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

    async fn delete_agent(&self, agent_id: &str) -> StoreResult<()> {
        let parent = self.get_agent(agent_id).await?.and_then(|r| r.parent_id);
        let mut con = self.con.clone();
        let mut pipe = redis::pipe();
        pipe.cmd("DEL")
            .arg(self.keys.all_of_agent(agent_id))
            .ignore();
        pipe.cmd("ZREM")
            .arg(self.keys.roots())
            .arg(agent_id)
            .ignore();
        if let Some(parent) = &parent {
            pipe.cmd("ZREM")
                .arg(self.keys.agent_part(parent, "children"))
                .arg(agent_id)
                .ignore();
        }
        pipe.query_async::<()>(&mut con).await.map_err(be)?;
        if let Some(parent) = parent {
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

    async fn inbox_push(&self, agent_id: &str, env: &Envelope) -> StoreResult<bool> {
        let bytes = encode(env).map_err(de)?;
        let mut con = self.con.clone();
        let fence = self.fence_for(agent_id);
        let mut call = self.inbox_push.prepare_invoke();
        call.key(self.keys.agent_part(agent_id, "seen"))
            .key(self.keys.agent_part(agent_id, "seenseq"))
            .key(self.keys.agent_part(agent_id, "inbox"))
            .key(self.keys.agent_part(agent_id, "inboxdata"))
            .arg(env.id.to_string())
            .arg(bytes)
            .arg(self.dedup_window);
        fence_args(&mut call, fence);
        let n: i64 = call.invoke_async(&mut con).await.map_err(be)?;
        fenced(n, agent_id)?;
        Ok(n == 1)
    }

    async fn inbox_push_then(
        &self,
        agent_id: &str,
        env: &Envelope,
        then: &[StoreWrite],
    ) -> StoreResult<Pushed> {
        // The shape an item starting a turn brings (its input entry, then the agent's own
        // record, an existing one: its roots index entry is there already) runs as one
        // script; with anything else only the push runs (the caller writes the rest).
        let (entry, rec) = match then {
            [
                StoreWrite::Append { agent_id: a, entry },
                StoreWrite::PutAgent(rec),
            ] if &**a == agent_id && rec.id == agent_id => (entry, rec),
            _ => {
                return Ok(Pushed {
                    fresh: self.inbox_push(agent_id, env).await?,
                    then_applied: false,
                });
            }
        };
        let mut con = self.con.clone();
        let mut call = self.inbox_push_then_start.prepare_invoke();
        call.key(self.keys.agent_part(agent_id, "seen"))
            .key(self.keys.agent_part(agent_id, "seenseq"))
            .key(self.keys.agent_part(agent_id, "inbox"))
            .key(self.keys.agent_part(agent_id, "inboxdata"))
            .key(self.keys.agent_part(agent_id, "thread"))
            .key(self.keys.agent_part(agent_id, "eids"))
            .key(self.keys.agent(agent_id))
            .arg(env.id.to_string())
            .arg(encode(env).map_err(de)?)
            .arg(self.dedup_window)
            .arg(entry.id.to_string())
            .arg(encode(&**entry).map_err(de)?);
        fence_args(&mut call, self.fence_for(agent_id));
        for (field, value) in record_fields(rec)? {
            call.arg(field).arg(value);
        }
        let n: i64 = call.invoke_async(&mut con).await.map_err(be)?;
        fenced(n, agent_id)?;
        Ok(Pushed {
            fresh: n == 1,
            then_applied: n == 1,
        })
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
        pipe.query_async::<()>(&mut self.con.clone())
            .await
            .map_err(be)
    }

    async fn checkpoint_put(&self, checkpoint: &Checkpoint, keep: usize) -> StoreResult<()> {
        let bytes = encode(checkpoint).map_err(de)?;
        let key = self.keys.agent_part(&checkpoint.agent_id, "checkpoints");
        let mut con = self.con.clone();
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("LPUSH").arg(&key).arg(bytes).ignore();
        if keep > 0 {
            pipe.cmd("LTRIM").arg(&key).arg(0).arg(keep - 1).ignore();
        }
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

    async fn write_batch(&self, writes: &[StoreWrite]) -> StoreResult<()> {
        self.write_batch_fenced(writes, None).await
    }

    async fn write_own_batch(&self, agent_id: &str, writes: &[StoreWrite]) -> StoreResult<()> {
        self.write_batch_fenced(writes, Some(agent_id)).await
    }
}

impl RedisStore {
    /// Writes `writes` in one round trip; with `owner`, each run of that agent's own writes
    /// as one [`FLUSH_OWN`] call, its record only through its partition's fence (if pushes are
    /// fenced).
    async fn write_batch_fenced(
        &self,
        writes: &[StoreWrite],
        owner: Option<&str>,
    ) -> StoreResult<()> {
        if writes.is_empty() {
            return Ok(());
        }
        // One round trip; the commands run in order on the one connection. Not MULTI: the
        // writes may touch several agents' slots, and each is idempotent on its own.
        let mut pipe = redis::pipe();
        // The owner's record goes through its partition's fence (if pushes are fenced). Only
        // the record: the batch's other writes are idempotent, and must land or not together
        // with one another, not with the record (an inbox item marked done whose answer the
        // fence refused would be lost, where an answer and its done mark written by a stale
        // owner are only a repeat the new owner's run de-duplicates).
        let fence = owner.and_then(|o| self.fence_for(o));
        let mut rest = writes;
        while let Some((first, after)) = rest.split_first() {
            if let Some(owner) = owner.filter(|o| is_own(first, o)) {
                let run = 1 + after.iter().take_while(|w| is_own(w, owner)).count();
                self.pipe_flush_own(&mut pipe, owner, &rest[..run], fence.clone())?;
                rest = &rest[run..];
                continue;
            }
            match first {
                StoreWrite::PutAgent(rec) => self.pipe_put_agent(&mut pipe, rec)?,
                StoreWrite::Append { agent_id, entry } => {
                    pipe.cmd("EVALSHA")
                        .arg(self.append.get_hash())
                        .arg(2)
                        .arg(self.keys.agent_part(agent_id, "thread"))
                        .arg(self.keys.agent_part(agent_id, "eids"))
                        .arg(entry.id.to_string())
                        .arg(encode(&**entry).map_err(de)?)
                        .ignore();
                }
                StoreWrite::InboxDone { agent_id, env_id } => {
                    self.pipe_inbox_done(&mut pipe, agent_id, *env_id)
                }
                // In the pipeline's order after what it was made from: Redis runs one
                // connection's commands in order, and the batch is answered (and retried as a
                // whole; a repeat carries the same derived id) only after all of them. Only an
                // earlier command answered with an error (a key of the wrong type) lets it out
                // before the batch is written.
                StoreWrite::Forward { stream, env } => {
                    pipe.cmd("XADD")
                        .arg(stream)
                        .arg("*")
                        .arg("m")
                        .arg(encode_envelope(env).map_err(de)?)
                        .ignore();
                }
                // Outputs travel through the partition streams here; refused before anything
                // is sent.
                StoreWrite::Outbox { .. } => {
                    return Err(agentd_actors::ports::outbox_not_kept(self.kind()));
                }
            }
            rest = after;
        }
        // Only the owner's runs answer (`-1`: its record refused by the fence).
        let mut con = self.con.clone();
        use std::sync::atomic::Ordering::Relaxed;
        if !self.flush_scripts_loaded.load(Relaxed) {
            self.load_flush_scripts(&mut con).await?;
        }
        let answers: Vec<i64> = match pipe.query_async(&mut con).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                // Redis lost its script cache (a restart): load them and write the batch
                // again (its writes are idempotent).
                self.load_flush_scripts(&mut con).await?;
                pipe.query_async(&mut con).await.map_err(be)?
            }
            other => other.map_err(be)?,
        };
        match owner {
            Some(agent_id) if answers.contains(&-1) => fenced(-1, agent_id),
            _ => Ok(()),
        }
    }

    /// Adds one [`FLUSH_OWN`] call for `run` (writes of `owner`'s own state, see [`is_own`]) to
    /// `pipe`: its entries in order, its done marks, and its last record (the call is atomic,
    /// so the record a run ends with is the one that counts). The roots index is not touched:
    /// a live agent's record was indexed when it was created.
    fn pipe_flush_own(
        &self,
        pipe: &mut redis::Pipeline,
        owner: &str,
        run: &[StoreWrite],
        fence: Option<(String, String)>,
    ) -> StoreResult<()> {
        let call = pipe
            .cmd("EVALSHA")
            .arg(self.flush_own.get_hash())
            .arg(if fence.is_some() { 6 } else { 5 })
            .arg(self.keys.agent_part(owner, "thread"))
            .arg(self.keys.agent_part(owner, "eids"))
            .arg(self.keys.agent_part(owner, "inbox"))
            .arg(self.keys.agent_part(owner, "inboxdata"))
            .arg(self.keys.agent(owner));
        match fence {
            Some((lease, token)) => call.arg(lease).arg(token),
            None => call.arg(""),
        };
        let entries = run.iter().filter_map(|w| match w {
            StoreWrite::Append { entry, .. } => Some(entry),
            _ => None,
        });
        call.arg(entries.clone().count());
        for entry in entries {
            call.arg(entry.id.to_string())
                .arg(encode(&**entry).map_err(de)?);
        }
        let dones = run.iter().filter_map(|w| match w {
            StoreWrite::InboxDone { env_id, .. } => Some(env_id),
            _ => None,
        });
        call.arg(dones.clone().count());
        for env_id in dones {
            call.arg(env_id.to_string());
        }
        let record = run.iter().rev().find_map(|w| match w {
            StoreWrite::PutAgent(rec) => Some(rec),
            _ => None,
        });
        if let Some(rec) = record {
            for (field, value) in record_fields(rec)? {
                call.arg(field).arg(value);
            }
        }
        Ok(())
    }
}

/// Whether `write` is of `owner`'s own state (its thread, inbox or record), which its flush
/// writes through [`FLUSH_OWN`].
fn is_own(write: &StoreWrite, owner: &str) -> bool {
    match write {
        StoreWrite::PutAgent(rec) => rec.id == owner,
        StoreWrite::Append { agent_id, .. } | StoreWrite::InboxDone { agent_id, .. } => {
            &**agent_id == owner
        }
        StoreWrite::Forward { .. } | StoreWrite::Outbox { .. } => false,
    }
}

/// The fields of an agent's record hash: the encoded record, and the fields that listings
/// read without decoding it.
fn record_fields(record: &AgentRecord) -> StoreResult<[(&'static str, Vec<u8>); 5]> {
    Ok([
        ("rec", encode(record).map_err(de)?),
        ("status", record.status.as_str().as_bytes().to_vec()),
        ("title", record.title.as_bytes().to_vec()),
        ("type", record.agent_type.as_bytes().to_vec()),
        (
            "parent",
            record
                .parent_id
                .as_deref()
                .unwrap_or("")
                .as_bytes()
                .to_vec(),
        ),
    ])
}

impl RedisStore {
    /// Adds the writes of [`ThreadStore::put_agent`] to `pipe`: the record hash, then (for a
    /// root) the roots index, which lives in another slot.
    fn pipe_put_agent(&self, pipe: &mut redis::Pipeline, record: &AgentRecord) -> StoreResult<()> {
        let set = pipe.cmd("HSET").arg(self.keys.agent(&record.id)).ignore();
        for (field, value) in record_fields(record)? {
            set.arg(field).arg(value);
        }
        if record.parent_id.is_none() {
            pipe.cmd("ZADD")
                .arg(self.keys.roots())
                .arg(record.created_at_ms)
                .arg(&record.id)
                .ignore();
        }
        Ok(())
    }

    /// Loads the scripts the flush pipeline calls by their SHA-1.
    async fn load_flush_scripts(&self, con: &mut ConnectionManager) -> StoreResult<()> {
        for script in [&self.append, &self.flush_own] {
            script.load_async(con).await.map_err(be)?;
        }
        self.flush_scripts_loaded
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Adds the writes of [`ThreadStore::inbox_done`] to `pipe`.
    fn pipe_inbox_done(&self, pipe: &mut redis::Pipeline, agent_id: &str, env_id: Uuid) {
        let id = env_id.to_string();
        pipe.cmd("ZREM")
            .arg(self.keys.agent_part(agent_id, "inbox"))
            .arg(&id)
            .ignore()
            .cmd("HDEL")
            .arg(self.keys.agent_part(agent_id, "inboxdata"))
            .arg(&id)
            .ignore();
    }
}
