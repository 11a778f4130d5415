//! The Lua scripts of the Redis store. Each runs atomically in Redis; the keys a script takes
//! are one agent's and its partition's (the fence's lease, the stream, the outbox), so they
//! share the partition's hash-tag slot.

use redis::Script;

/// Appends an entry unless its id is in the thread's id set (`return 0`). KEYS: thread, eids;
/// ARGV: entry id, entry bytes.
pub(super) const APPEND: &str = r"
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('XADD', KEYS[1], '*', 'id', ARGV[1], 'e', ARGV[2])
return 1";

/// Replaces a thread and its id set. KEYS: thread, eids; ARGV: entry ids and bytes, in pairs.
pub(super) const REPLACE: &str = r"
redis.call('DEL', KEYS[1], KEYS[2])
for i = 1, #ARGV, 2 do
  redis.call('XADD', KEYS[1], '*', 'id', ARGV[i], 'e', ARGV[i + 1])
  redis.call('SADD', KEYS[2], ARGV[i])
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

/// The durable push of an envelope, once (`return 0` for a duplicate); the scripts below end
/// with it. KEYS: seen, seenseq, inbox, inboxdata; ARGV: env id, bytes, window.
///
/// `ZADD NX` both checks the window and adds to it (a duplicate only uses up a sequence
/// number), and the window is counted and cut back to its size only every [`TRIM_EVERY`]th
/// push, so it holds between `window` and `window + TRIM_EVERY - 1` ids.
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

/// [`PUSH`] behind its fence: the token is `ARGV[4]`, the lease `KEYS[5]`.
pub(super) fn inbox_push() -> Script {
    push_script(fence(5, 4), "")
}

/// [`PUSH`] then, for a new envelope, [`START`], behind the fence: the token is `ARGV[6]`, the
/// lease `KEYS[8]`.
pub(super) fn inbox_push_then_start() -> Script {
    push_script(fence(8, 6), &format!("{START}\n"))
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
/// bytes, the number for the outbox, their ids and bytes, then the record's hash fields and
/// values (none: no record).
pub(super) const FLUSH_OWN: &str = r"
local i = 3
for _ = 1, tonumber(ARGV[2]) do
  if redis.call('SADD', KEYS[2], ARGV[i]) == 1 then
    redis.call('XADD', KEYS[1], '*', 'id', ARGV[i], 'e', ARGV[i + 1])
  end
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
redis.call('HSET', KEYS[5], unpack(ARGV, i))
return 1";

/// The fence in front of a push (`return -1`): with a token in `ARGV[a]`, the push lands only
/// while the lease `KEYS[k]` holds that token. A process that stalled past its lease may still
/// have a push in its socket's buffer when it wakes; without this it would land in an inbox
/// that the partition's next owner has already read, behind that owner's back (and out of
/// order). The lease is the agent's partition's, in the same slot as the agent's keys.
fn fence(k: usize, a: usize) -> String {
    format!("if ARGV[{a}] ~= '' and redis.call('GET', KEYS[{k}]) ~= ARGV[{a}] then return -1 end")
}
