//! The Lua scripts of the Redis store. Each runs atomically in Redis; the keys a script takes
//! are one agent's and its partition's (the fence's lease, the stream, the outbox), so they
//! share the partition's hash-tag slot.
//!
//! A thread is a list of pairs, `<entry id> <entry>`: the id as its 16 bytes, the entry as
//! MessagePack. An entry its writer knows is new (a first run's) is appended as it is (one
//! `RPUSH` for all of a flush's); any other goes through [`APPEND_ONCE`], which keeps an entry
//! id from being appended twice by looking for it in the list. That look-up reads the whole
//! list when the id is not there, so it is kept for what may really be there already: a
//! re-run's entries, a batch written again, an interruption's closings.

use redis::Script;

/// `append_once(thread, id, entry)`: appends `id` and `entry` to `thread` unless `id` is one
/// of its entry ids; answers 1 if it did, 0 if not. `LPOS` from the end, where a re-run's
/// entries are; an entry element is never 16 bytes long (it holds its own id and more), so only
/// an id element can match one. Prepended to the scripts that append ([`with_append_once`]).
const APPEND_ONCE: &str = r"
local function append_once(thread, id, e)
  if redis.call('LPOS', thread, id, 'RANK', -1) then return 0 end
  redis.call('RPUSH', thread, id, e)
  return 1
end
";

/// `script` after the [`APPEND_ONCE`] function.
fn with_append_once(script: &str) -> String {
    format!("{APPEND_ONCE}{script}")
}

/// Appends an entry unless its id is one of the thread's (`return 0`). KEYS: thread; ARGV:
/// entry id (16 bytes), entry bytes.
const APPEND: &str = r"
return append_once(KEYS[1], ARGV[1], ARGV[2])";

/// [`APPEND`], ready to call.
pub(super) fn append() -> Script {
    Script::new(&with_append_once(APPEND))
}

/// Appends an entry its writer knows is new (see `Threads::append_new`) while the agent's
/// partition's lease holds this process's token (`return -1`: nothing written): appended
/// without a look-up, an entry written twice would be doubled, so a process that stalled past
/// its lease must not write one behind the partition's next owner, which may be running the
/// same turn again. KEYS: thread, the partition's lease; ARGV: the token ('' for no fence),
/// entry id (16 bytes), entry bytes.
pub(super) const APPEND_NEW: &str = r"
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end
redis.call('RPUSH', KEYS[1], ARGV[2], ARGV[3])
return 1";

/// Replaces a thread. KEYS: thread; ARGV: entry ids (16 bytes each) and bytes, in pairs.
pub(super) const REPLACE: &str = r"
redis.call('DEL', KEYS[1])
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
/// entry appended (once, as [`APPEND`], unless its turn is a first run, whose input is new)
/// and its agent's record set.
///
/// KEYS: the partition's lease, then per envelope its agent's seen, seenseq, inbox, inboxdata
/// and, for one that starts a turn, thread and record. ARGV: the token ('' for no fence), the
/// window, the number of envelopes, then per envelope a flag (`1`: it starts a turn, `2`: it
/// starts a turn whose input is new), its id and bytes, and with the flag the entry id and
/// bytes and the record.
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
    if ARGV[a] == '2' then
      redis.call('RPUSH', KEYS[k + 4], ARGV[e], ARGV[e + 1])
    else
      append_once(KEYS[k + 4], ARGV[e], ARGV[e + 1])
    end
    redis.call('SET', KEYS[k + 5], ARGV[e + 2])
  end
  return 1
end
local a, k = 4, 2
for j = 1, n do
  local starts = ARGV[a] ~= '0'
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
    k = k + 6
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

/// The flushes of live agents of one partition (their writes of their own state), in one
/// call, each only while the partition's lease holds this process's token (the lease is read
/// once): for each agent, its thread's new entries in order (runs of those known new in one
/// `RPUSH`, any other once, as [`APPEND`]), its handled inbox items' done marks, the outputs of
/// its children-to-parent forwards (onto the partition's stream when the parent is in the same
/// partition, else into the partition's outbox, see `batch`), its record and the
/// acknowledgements of the partition stream entries it held (see
/// `agentd_ports::StreamEntry`). A fenced flush writes nothing: entries known new are
/// appended without a look-up, and the partition's next owner may be running the same turn
/// again. The entries held are acknowledged with one `XACK` at the end, so an entry and the end
/// of the item it carried are durable together or not at all.
///
/// Answers one result per agent: `1` written, `-1` fenced (nothing written), or the error text
/// of a write that failed (a key of the wrong type): one agent's broken key fails its own flush
/// only.
///
/// KEYS: the partition's lease, stream and outbox, then per agent its thread, inbox, inboxdata
/// and record. ARGV: the token ('' for no fence), the number of agents, then per agent the
/// number of entries and per entry a flag (`1`: known new), its id and its bytes; the number
/// of done marks and their envelope ids; the number of outputs for the stream and their bytes;
/// the number for the outbox and their ids and bytes; the number of held entries to
/// acknowledge and their stream ids; `1` and the record, or `0` for no record.
const FLUSH_MANY: &str = r"
local fenced = nil
local acks = {}
local out = {}
local new = {}
-- An agent's write failed (a key of the wrong type): its own flush stops there.
local function failed(n, r)
  if type(r) == 'table' and r.err then
    out[n] = r.err
    return true
  end
  return false
end
local i, k = 3, 4
for n = 1, tonumber(ARGV[2]) do
  local ne = tonumber(ARGV[i]); local e0 = i + 1; i = e0 + 3 * ne
  local nd = tonumber(ARGV[i]); local d0 = i + 1; i = d0 + nd
  local nh = tonumber(ARGV[i]); local h0 = i + 1; i = h0 + nh
  local na = tonumber(ARGV[i]); local a0 = i + 1; i = a0 + 2 * na
  local nk = tonumber(ARGV[i]); local k0 = i + 1; i = k0 + nk
  local rec = nil
  if ARGV[i] == '1' then
    rec = i + 1
    i = i + 2
  else
    i = i + 1
  end
  if fenced == nil then
    fenced = ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1]
  end
  if fenced then
    out[n] = -1
  else
    out[n] = 1
    local nn = 0
    for j = e0, e0 + 3 * (ne - 1), 3 do
      if ARGV[j] == '1' then
        new[nn + 1] = ARGV[j + 1]
        new[nn + 2] = ARGV[j + 2]
        nn = nn + 2
      end
      if nn > 0 and (ARGV[j] ~= '1' or nn >= 1000) then
        if failed(n, redis.pcall('RPUSH', KEYS[k], unpack(new, 1, nn))) then break end
        nn = 0
      end
      if ARGV[j] ~= '1' then
        local ok, r = pcall(append_once, KEYS[k], ARGV[j + 1], ARGV[j + 2])
        if not ok and failed(n, type(r) == 'table' and r or {err = tostring(r)}) then break end
      end
    end
    if nn > 0 and out[n] == 1 then failed(n, redis.pcall('RPUSH', KEYS[k], unpack(new, 1, nn))) end
    if out[n] == 1 then
      for j = d0, d0 + nd - 1 do
        redis.call('ZREM', KEYS[k + 1], ARGV[j])
        redis.call('HDEL', KEYS[k + 2], ARGV[j])
      end
      for j = h0, h0 + nh - 1 do
        redis.call('XADD', KEYS[2], '*', 'm', ARGV[j])
      end
      for j = a0, a0 + 2 * (na - 1), 2 do
        redis.call('HSET', KEYS[3], ARGV[j], ARGV[j + 1])
      end
      if rec then redis.call('SET', KEYS[k + 3], ARGV[rec]) end
      for j = k0, k0 + nk - 1 do
        acks[#acks + 1] = ARGV[j]
      end
    end
  end
  k = k + 4
end
for j = 1, #acks, 1000 do
  redis.call('XACK', KEYS[2], 'GROUP', unpack(acks, j, math.min(j + 999, #acks)))
end
return out";

/// [`FLUSH_MANY`], ready to call.
pub(super) fn flush_many() -> Script {
    Script::new(&with_append_once(
        &FLUSH_MANY.replace("'GROUP'", &format!("'{}'", crate::GROUP)),
    ))
}
