//! The Lua scripts of the bus: each checks and changes in one step what two commands would
//! leave a window between. Each touches one slot (one key, or a partition's keys).

use redis::Script;

/// Renews a lease only while it names this process. KEYS: the lease; ARGV: the process id,
/// the lease time (ms). Answers 1 if renewed, 0 if the lease is gone or someone else's.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
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
            release: Script::new(RELEASE),
            forward: Script::new(FORWARD),
            ack_trim: Script::new(ACK_TRIM),
            trim: Script::new(TRIM),
        }
    }
}
