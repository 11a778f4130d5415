//! The Lua scripts of the Redis store. Each runs atomically in Redis; the keys a script takes
//! are one agent's and its partition's (the fence's lease, the stream, the outbox), so they
//! share the partition's hash-tag slot.
//!
//! A thread is a list of pairs, `<entry id> <entry>`: the id as its 16 bytes, the entry as
//! MessagePack. Every script that appends to it does so through [`APPEND_ONCE`], which keeps an
//! entry id from being appended twice.

use redis::Script;

/// A thread shorter than this (in entries) has its ids checked in the list itself (`LPOS`: at
/// most a few dozen elements compared in C, and no key of its own); one of this length or
/// more keeps them in a set, `…:eids`, made from the list by the first append that finds it
/// this long.
pub const SHORT_THREAD: usize = 32;

/// `append_once(thread, eids, id, entry)`: appends `id` and `entry` to `thread` unless `id` is
/// one of its entry ids; answers 1 if it did, 0 if not. Below [`SHORT_THREAD`] entries the list
/// is searched (`LPOS`; an entry element is never 16 bytes long — it holds its own id and
/// more — so only an id element can match one); from there on, set `eids`, made from the
/// list's ids the first time it is needed, is asked and filled (`SADD`). Prepended to the
/// scripts that append ([`with_append_once`]).
const APPEND_ONCE: &str = r"
local function append_once(thread, eids, id, e)
  local n = redis.call('LLEN', thread)
  if n < 2 * SHORT_THREAD then
    if redis.call('LPOS', thread, id) then return 0 end
  else
    if redis.call('EXISTS', eids) == 0 then
      local all = redis.call('LRANGE', thread, 0, -1)
      for j = 1, #all, 2 do redis.call('SADD', eids, all[j]) end
    end
    if redis.call('SADD', eids, id) == 0 then return 0 end
  end
  redis.call('RPUSH', thread, id, e)
  return 1
end
";

/// `script` after the [`APPEND_ONCE`] function, with [`SHORT_THREAD`] filled in.
fn with_append_once(script: &str) -> String {
    format!(
        "{}{script}",
        APPEND_ONCE.replace("SHORT_THREAD", &SHORT_THREAD.to_string())
    )
}

/// Appends an entry unless its id is one of the thread's (`return 0`). KEYS: thread, eids;
/// ARGV: entry id (16 bytes), entry bytes.
const APPEND: &str = r"
return append_once(KEYS[1], KEYS[2], ARGV[1], ARGV[2])";

/// [`APPEND`], ready to call.
pub(super) fn append() -> Script {
    Script::new(&with_append_once(APPEND))
}

/// Replaces a thread, and drops its id set (the next append past [`SHORT_THREAD`] entries
/// makes it again from the list). KEYS: thread, eids; ARGV: entry ids (16 bytes each) and
/// bytes, in pairs.
pub(super) const REPLACE: &str = r"
redis.call('DEL', KEYS[1], KEYS[2])
for i = 1, #ARGV, 2 do
  redis.call('RPUSH', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 1";

/// Adds a child after the others unless it is one of them (`return 0`). KEYS: children,
/// childseq; ARGV: child id.
pub(super) const ADD_CHILD: &str = r"
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local n = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], n, ARGV[1])
return 1";

/// Stores a tool call unless the stored one is closed. KEYS: records hash, statuses hash;
/// ARGV: call id, record, status.
pub(super) const TOOL_CALL_PUT: &str = r"
local s = redis.call('HGET', KEYS[2], ARGV[1])
if s and s ~= 'pending' and s ~= 'awaiting_approval' then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1";

/// Closes a tool call if its status allows it. KEYS: records hash, statuses hash; ARGV: call
/// id, the allowed statuses as `,a,,b,`, the new record, the new status. Answers `{1}` when
/// closed, `{2, record}` when its status did not allow it, `{0}` for an unknown call.
pub(super) const TOOL_CALL_CLOSE: &str = r"
local s = redis.call('HGET', KEYS[2], ARGV[1])
if not s then return {0, false} end
if string.find(ARGV[2], ',' .. s .. ',', 1, true) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
  return {1, false}
end
return {2, redis.call('HGET', KEYS[1], ARGV[1])}";

/// KEYS: the parent's workers hash; ARGV: field, candidate. Answers `{child, created}` in
/// one round trip, for an alias that exists (the common case) as for one it makes.
pub(super) const ALIAS_GET_OR_CREATE: &str = r"
local child = redis.call('HGET', KEYS[1], ARGV[1])
if child then return {child, 0} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {ARGV[2], 1}";

/// The durable pushes of envelopes into the inboxes of agents of one partition, each once, in
/// one call (see `push`): its answer is one result per envelope, `1` fresh (queued), `0` a
/// duplicate (in its agent's de-duplication window; nothing changed), `-1` fenced (the
/// partition's lease does not hold the token: nothing is written at all), or the error text
/// of a push that failed (a key of the wrong type): one agent's broken key fails its own push
/// only, not those of the other agents in the call. An envelope that
/// starts its turn also brings the turn's first writes, applied only if it was fresh: its input
/// entry appended once (as [`APPEND`]) and its agent's record set.
///
/// KEYS: the partition's lease, then per envelope its agent's seen, seenseq, inbox, inboxdata
/// and, for one that starts a turn, thread, eids and record. ARGV: the token ('' for no
/// fence), the window, the number of envelopes, then per envelope a flag (`1`: it starts a
/// turn), its id and bytes, and with the flag the entry id and bytes and the record.
///
/// `ZADD NX` both checks the window and adds to it (a duplicate only uses up a sequence
/// number), and the window is counted and cut back to its size only every [`TRIM_EVERY`]th
/// push, so it holds between `window` and `window + TRIM_EVERY - 1` ids.
const PUSH_MANY: &str = r"
local n = tonumber(ARGV[3])
local out = {}
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then
  for j = 1, n do out[j] = -1 end
  return out
end
local window = tonumber(ARGV[2])
local function push(a, k, starts)
  local id = ARGV[a + 1]
  local seq = redis.call('INCR', KEYS[k + 1])
  local fresh = redis.call('ZADD', KEYS[k], 'NX', seq, id)
  if seq % TRIM_EVERY == 0 then
    local size = redis.call('ZCARD', KEYS[k])
    if size > window then
      redis.call('ZREMRANGEBYRANK', KEYS[k], 0, size - window - 1)
    end
  end
  if fresh == 0 then return 0 end
  redis.call('ZADD', KEYS[k + 2], seq, id)
  redis.call('HSET', KEYS[k + 3], id, ARGV[a + 2])
  if starts then
    local e = a + 3
    append_once(KEYS[k + 4], KEYS[k + 5], ARGV[e], ARGV[e + 1])
    redis.call('SET', KEYS[k + 6], ARGV[e + 2])
  end
  return 1
end
local a, k = 4, 2
for j = 1, n do
  local starts = ARGV[a] == '1'
  local ok, res = pcall(push, a, k, starts)
  if ok then
    out[j] = res
  elseif type(res) == 'table' then
    out[j] = res.err
  else
    out[j] = tostring(res)
  end
  if starts then
    a = a + 6
    k = k + 7
  else
    a = a + 3
    k = k + 4
  end
end
return out";

/// How often (in pushes, by sequence number) [`PUSH_MANY`] cuts the de-duplication window back
/// to its size.
const TRIM_EVERY: u64 = 64;

/// [`PUSH_MANY`] with [`TRIM_EVERY`] filled in.
pub(super) fn push_many() -> Script {
    Script::new(&with_append_once(
        &PUSH_MANY.replace("TRIM_EVERY", &TRIM_EVERY.to_string()),
    ))
}

/// A live agent's writes of its own state from one flush, in one call: its thread's new
/// entries (each once, as [`APPEND`]), then its handled inbox items' done marks, then the
/// outputs of its children-to-parent forwards (onto its partition's stream when the parent is
/// in the same partition, else into the partition's outbox, see `batch`), then its record, the
/// record only while the partition's lease holds this process's token (`return -1` with the
/// rest written: they are idempotent, and an answer lands together with its done mark or not
/// at all). KEYS: thread, eids, inbox, inboxdata, record, the partition's lease, stream and
/// outbox; ARGV: the token ('' for no fence), the number of entries, their ids and bytes, the
/// number of done marks, their envelope ids, the number of outputs for the stream, their
/// bytes, the number for the outbox, their ids and bytes, then the record (none: no record).
const FLUSH_OWN: &str = r"
local i = 3
for _ = 1, tonumber(ARGV[2]) do
  append_once(KEYS[1], KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
local n = tonumber(ARGV[i])
i = i + 1
for _ = 1, n do
  redis.call('ZREM', KEYS[3], ARGV[i])
  redis.call('HDEL', KEYS[4], ARGV[i])
  i = i + 1
end
n = tonumber(ARGV[i])
i = i + 1
for _ = 1, n do
  redis.call('XADD', KEYS[7], '*', 'm', ARGV[i])
  i = i + 1
end
n = tonumber(ARGV[i])
i = i + 1
for _ = 1, n do
  redis.call('HSET', KEYS[8], ARGV[i], ARGV[i + 1])
  i = i + 2
end
if i > #ARGV then return 1 end
if ARGV[1] ~= '' and redis.call('GET', KEYS[6]) ~= ARGV[1] then return -1 end
redis.call('SET', KEYS[5], ARGV[i])
return 1";

/// [`FLUSH_OWN`], ready to call.
pub(super) fn flush_own() -> Script {
    Script::new(&with_append_once(FLUSH_OWN))
}
