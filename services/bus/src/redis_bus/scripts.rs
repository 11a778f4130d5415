//! The Lua scripts of the bus: each checks and changes in one step what two commands would
//! leave a window between. Each touches one slot (one key, a partition's keys, or the member
//! set and its connections).

use redis::Script;

/// Renews a lease only while it names this process. KEYS: the lease; ARGV: the process id,
/// the lease time (ms). Answers 1 if renewed, 0 if the lease is gone or someone else's.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0";

/// Takes a lease: a free one, or one held by a process found gone (its heartbeat connection
/// absent, its heartbeat late: it died, or lost Redis and has fenced itself), once its holder
/// has not renewed it for the fence time and the takeover margin — by the Redis clock, from
/// what the lease has left of the lease time every process renews it to. KEYS: the lease;
/// ARGV: this process's id, the lease time (ms), the age (ms) a gone holder's lease must have,
/// then the processes found gone. Answers 1 if taken free, 2 if taken from a gone holder, 0
/// otherwise.
const TAKE: &str = r"
local holder = redis.call('GET', KEYS[1])
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
for i = 4, #ARGV do
  if holder == ARGV[i] then
    if redis.call('PTTL', KEYS[1]) <= tonumber(ARGV[2]) - tonumber(ARGV[3]) then
      redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
      return 2
    end
    return 0
  end
end
return 0";

/// A heartbeat: notes this process live now (by the Redis clock) with the id of the connection
/// it heartbeats on, drops the members silent for longer than the given time, and answers the
/// time, the members with their last heartbeats and their connections. KEYS: the member set,
/// the members' connections; ARGV: this process's id, its connection's client id, the silence
/// after which a member is dropped (ms).
const HEARTBEAT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))) do
  redis.call('ZREM', KEYS[1], m)
  redis.call('HDEL', KEYS[2], m)
end
return {now, redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES'), redis.call('HGETALL', KEYS[2])}";

/// Drops a member found gone, unless it heartbeat since it was found so. KEYS: the member set,
/// the members' connections; ARGV: the member, the heartbeat it was judged by. Answers 1 if
/// dropped.
const FORGET: &str = r"
local beat = redis.call('ZSCORE', KEYS[1], ARGV[1])
if beat and tonumber(beat) <= tonumber(ARGV[2]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 1
end
return 0";

/// Deletes a lease only while it names this process. KEYS: the lease; ARGV: the process id.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

/// A forward: the envelope is appended to its receiver's partition only while the receiver's
/// record exists (`return 0`: it does not). One round trip, and no window between the look-up
/// and the append for a deletion. KEYS: the partition stream, the receiver's record; ARGV: the
/// envelope.
const FORWARD: &str = r"
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('XADD', KEYS[1], '*', 'm', ARGV[1])
return 1";

/// Acknowledges entries of a partition stream and trims the stream to what is still needed (the
/// reader's acknowledgements when agents hold nothing, `redis.hold_ms = 0`; otherwise the
/// reader acknowledges with a plain `XACK` and trims with [`TRIM`] every batch it reads):
/// `XTRIM MINID ~` below the oldest entry pending in the group, or, with none pending, below
/// the last entry acknowledged here (the ids come in stream order, and the group reads in
/// order, so every older entry was read, and with none pending, acknowledged; what comes after
/// it may be unread). So a partition stream holds what is pending or unread, plus at most about
/// one node of the stream's listpacks (`~` drops whole nodes only, which costs next to
/// nothing). KEYS: the stream; ARGV: the group, the ids in stream order. Answers how many were
/// acknowledged.
const ACK_TRIM: &str = r"
local n = redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
local floor = redis.call('XPENDING', KEYS[1], ARGV[1])[2] or ARGV[#ARGV]
redis.call('XTRIM', KEYS[1], 'MINID', '~', floor)
return n";

/// Trims a partition stream to what is still needed, as [`ACK_TRIM`] does after the reader's
/// acknowledgements: below the oldest entry pending in the group (entries agents hold are
/// acknowledged by their flushes, not the reader), or, with none pending, below the group's
/// last delivered entry. KEYS: the stream; ARGV: the group.
const TRIM: &str = r"
local floor = redis.call('XPENDING', KEYS[1], ARGV[1])[2]
if not floor then
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local name, last
    for j = 1, #g, 2 do
      if g[j] == 'name' then name = g[j + 1] elseif g[j] == 'last-delivered-id' then last = g[j + 1] end
    end
    if name == ARGV[1] then floor = last end
  end
end
if floor then return redis.call('XTRIM', KEYS[1], 'MINID', '~', floor) end
return 0";

/// The scripts of one bus (a [`Script`] runs by its hash, and is loaded where Redis does not
/// know it).
pub(super) struct Scripts {
    pub(super) renew: Script,
    pub(super) take: Script,
    pub(super) heartbeat: Script,
    pub(super) forget: Script,
    pub(super) release: Script,
    pub(super) forward: Script,
    pub(super) ack_trim: Script,
    pub(super) trim: Script,
}

impl Scripts {
    /// Loads every script into Redis (on a cluster, every master), so that the first calls,
    /// often many at once, find them: a call Redis answers `NOSCRIPT` is sent again after a
    /// load of its own. A Redis that forgets them later (a restart, a new master) is taught
    /// again that way.
    pub(super) async fn load(
        &self,
        con: &mut agentd_store::RedisConnection,
    ) -> redis::RedisResult<()> {
        for script in [
            &self.renew,
            &self.take,
            &self.heartbeat,
            &self.forget,
            &self.release,
            &self.forward,
            &self.ack_trim,
            &self.trim,
        ] {
            script.load_async(con).await?;
        }
        Ok(())
    }

    pub(super) fn new() -> Self {
        Scripts {
            renew: Script::new(RENEW),
            take: Script::new(TAKE),
            heartbeat: Script::new(HEARTBEAT),
            forget: Script::new(FORGET),
            release: Script::new(RELEASE),
            forward: Script::new(FORWARD),
            ack_trim: Script::new(ACK_TRIM),
            trim: Script::new(TRIM),
        }
    }
}
