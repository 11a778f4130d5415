//! Redis key names, in one place, and the Redis Cluster slot of a key.
//!
//! `{…}` is a Redis Cluster hash tag: a key's slot is CRC16 of its first `{…}`'s content (or of
//! the whole key without one), mod 16,384. Every key of partition `k` — its stream, its lease,
//! its roots index, its outbox and every key of every agent in it — carries the tag
//! `{<ns>:p<k>}`, so any script or pipeline that touches one agent and its partition stays in
//! one slot. Process-wide keys have tags of their own; the streams other services and workers
//! use (`<ns>:commands`, `<ns>:events`, …) keep their names, whole keys hashed as they are.
//!
//! An agent's partition is `fnv1a64(agent id) % partitions`, so the number of partitions is
//! part of every agent key's name: it is fixed for a namespace's life, written in
//! [`Keys::layout`] when the namespace is first used and checked at every start.

use agentd_ports::fnv1a64;
use std::borrow::Cow;
use std::sync::Arc;

/// The version of the key layout this code writes (see [`Keys::layout`]): threads as lists of
/// `<id> <entry>` pairs, records as one string each, no set of a thread's entry ids beside it.
/// `agentd migrate` moves the earlier ones: version 1 (no layout key), the per-agent-tag
/// layout; version 2, these key names with threads in streams and records in hashes; and
/// version 3, this layout with a set of entry ids (`…:eids`) beside each long thread, which its
/// appends kept up to date (an agentd of version 3 on a namespace this code wrote would read
/// stale sets, so the version says they differ).
pub const LAYOUT_VERSION: u32 = 4;

/// The consumer group every agentd process reads the partition streams (and the other streams
/// it consumes) with; the store acknowledges the entries agents held in it.
pub const GROUP: &str = "agentd";

/// Builds the keys of one namespace with a given number of partitions.
///
/// Every partition's hash tag, stream and lease are named once, here: the reader, the pushes
/// and the flushes name them for every read and every message, and an agent key is then a
/// single allocation of its exact length.
#[derive(Debug, Clone)]
pub struct Keys {
    ns: String,
    partitions: u32,
    /// The names of each partition's keys, by partition, shared by the clones.
    named: Arc<[PartitionKeys]>,
}

/// The names of one partition's keys that are used all the time.
#[derive(Debug)]
struct PartitionKeys {
    /// `{<ns>:p<k>}`.
    tag: String,
    /// See [`Keys::partition`].
    stream: String,
    /// See [`Keys::lease`].
    lease: String,
}

impl Keys {
    /// Keys under namespace `ns` (default `agentd`) with `partitions` partitions (at least 1).
    pub fn new(ns: &str, partitions: u32) -> Self {
        let partitions = partitions.max(1);
        Keys {
            ns: ns.to_string(),
            partitions,
            named: (0..partitions)
                .map(|k| {
                    let tag = format!("{{{ns}:p{k}}}");
                    PartitionKeys {
                        stream: format!("{tag}:stream"),
                        lease: format!("{tag}:lease"),
                        tag,
                    }
                })
                .collect(),
        }
    }

    /// The namespace.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// The number of partitions.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// The partition of `agent_id`: `fnv1a64(id) % partitions`.
    pub fn partition_of(&self, agent_id: &str) -> u32 {
        partition_index(agent_id, self.partitions)
    }

    /// The hash tag of partition `k`, braces included (made afresh for a `k` past the
    /// partitions, which no agent of this namespace is in).
    fn tag(&self, k: u32) -> Cow<'_, str> {
        match self.named.get(k as usize) {
            Some(named) => Cow::Borrowed(&named.tag),
            None => Cow::Owned(format!("{{{}:p{k}}}", self.ns)),
        }
    }

    /// `<tag of id's partition>:a:<id>`, with room for `extra` more bytes.
    fn agent_key(&self, id: &str, extra: usize) -> String {
        let tag = self.tag(self.partition_of(id));
        let mut key = String::with_capacity(tag.len() + 3 + id.len() + extra);
        key.push_str(&tag);
        key.push_str(":a:");
        key.push_str(id);
        key
    }

    /// The agent record (a string: its MessagePack), in its partition's slot.
    pub fn agent(&self, id: &str) -> String {
        self.agent_key(id, 0)
    }

    /// A per-agent key `{<ns>:p<k>}:a:<id>:<suffix>`.
    pub fn agent_part(&self, id: &str, suffix: &str) -> String {
        let mut key = self.agent_key(id, 1 + suffix.len());
        key.push(':');
        key.push_str(suffix);
        key
    }

    /// The A2A tasks of a context agent (hash: task id → the A2A layer's encoding).
    pub fn a2a_tasks(&self, id: &str) -> String {
        self.agent_part(id, "a2atasks")
    }

    /// Outside ids mapped to agents and kept with them (hash: `ExternalKey::encoded` →
    /// `ExternalClaim::encode`, the bare agent id for a settled claim without a fingerprint),
    /// spread over the partitions' slots by the encoded key: `{<ns>:p<k>}:extids`, `k` the key's partition.
    /// Each agent's own `…:a:<id>:extids` (a set) lists the keys that map to it, for its
    /// deletion.
    pub fn external_ids(&self, encoded: &str) -> String {
        format!("{}:extids", self.tag(self.partition_of(encoded)))
    }

    /// A timed mapping of an outside id (string: `ExternalClaim::encode`, with its expiry),
    /// `{<ns>:p<k>}:extid:<encoded key>`, in the slot of [`Self::external_ids`] for that key.
    pub fn external_id_timed(&self, encoded: &str) -> String {
        format!("{}:extid:{encoded}", self.tag(self.partition_of(encoded)))
    }

    /// Every per-agent key, for deletion (all in the agent's partition's slot).
    pub fn all_of_agent(&self, id: &str) -> Vec<String> {
        let mut keys = vec![self.agent(id)];
        for s in AGENT_PARTS {
            keys.push(self.agent_part(id, s));
        }
        keys
    }

    /// What every per-agent key of partition `k` starts with (for scans).
    pub fn agent_prefix(&self, k: u32) -> String {
        format!("{}:a:", self.tag(k))
    }

    /// The roots of partition `k` by creation time (sorted set).
    pub fn roots(&self, k: u32) -> String {
        format!("{}:roots", self.tag(k))
    }

    /// The inbox stream of partition `k`.
    pub fn partition(&self, k: u32) -> String {
        self.partition_key(k).into_owned()
    }

    /// [`Self::partition`], borrowed when `k` is one of the namespace's partitions.
    pub fn partition_key(&self, k: u32) -> Cow<'_, str> {
        match self.named.get(k as usize) {
            Some(named) => Cow::Borrowed(&named.stream),
            None => Cow::Owned(format!("{}:stream", self.tag(k))),
        }
    }

    /// The lease of partition `k`.
    pub fn lease(&self, k: u32) -> String {
        match self.named.get(k as usize) {
            Some(named) => named.lease.clone(),
            None => format!("{}:lease", self.tag(k)),
        }
    }

    /// Child outputs of partition `k`'s agents written with the flush they came from and not
    /// yet appended to their parents' partitions (hash: envelope id → envelope). The flush
    /// writes them in its own slot; the parent's stream is in another one, so the append is a
    /// command of its own after it, and whoever owns partition `k` next appends what is left.
    pub fn outbox(&self, k: u32) -> String {
        format!("{}:outbox", self.tag(k))
    }

    /// The namespace's layout (hash: `version`, `partitions`, `state`), checked at every start.
    pub fn layout(&self) -> String {
        format!("{{{}:layout}}", self.ns)
    }

    /// Live processes (sorted set: process id → heartbeat ms, by the Redis clock).
    pub fn members(&self) -> String {
        format!("{{{}:members}}", self.ns)
    }

    /// The client id of each live process's heartbeat connection, on the node of
    /// [`Self::members`] (hash: process id → `CLIENT ID`): a process whose connection is gone
    /// from that node died, or lost Redis, and has fenced itself.
    pub fn members_clients(&self) -> String {
        format!("{}:clients", self.members())
    }

    /// Where the answers to the calls process `process_id` hands to other processes arrive
    /// (see `Transport::call`).
    pub fn replies(&self, process_id: &str) -> String {
        format!("{}{process_id}}}", self.replies_prefix())
    }

    /// What every process's reply stream key starts with.
    pub fn replies_prefix(&self) -> String {
        format!("{{{}:replies:", self.ns)
    }

    /// The rate-limit gate of model provider `provider`: when it opens (ms since the epoch),
    /// expiring then.
    pub fn provider_gate(&self, provider: &str) -> String {
        format!("{{{}:ratelimit:{provider}}}", self.ns)
    }

    /// Tool calls of service tools by call id (hash: id → JSON record).
    pub fn tool_calls(&self) -> String {
        format!("{{{}:tool_calls}}", self.ns)
    }

    /// The status of each tool call (hash: id → status), beside [`Self::tool_calls`] in one
    /// slot, so one script checks and closes a call.
    pub fn tool_call_status(&self) -> String {
        format!("{{{}:tool_calls}}:status", self.ns)
    }

    /// The command stream other services write to.
    pub fn commands(&self) -> String {
        format!("{}:commands", self.ns)
    }

    /// The event stream.
    pub fn events(&self) -> String {
        format!("{}:events", self.ns)
    }

    /// The stream of text deltas (answers being streamed), short and apart from the events.
    pub fn deltas(&self) -> String {
        format!("{}:deltas", self.ns)
    }

    /// The dead-letter stream.
    pub fn dead(&self) -> String {
        format!("{}:dead", self.ns)
    }

    /// The stream workers of service tool `tool` read its calls from (consumer group
    /// `workers`).
    pub fn tool_stream(&self, tool: &str) -> String {
        format!("{}:tools:{tool}", self.ns)
    }

    /// The stream workers answer service calls on, read by every process.
    pub fn tool_replies(&self) -> String {
        format!("{}:tool_replies", self.ns)
    }
}

/// The partition of `agent_id` among `partitions`: `fnv1a64(id) % partitions`.
pub fn partition_index(agent_id: &str, partitions: u32) -> u32 {
    (fnv1a64(agent_id.as_bytes()) % u64::from(partitions.max(1))) as u32
}

/// Suffixes of the per-agent keys besides the record.
pub const AGENT_PARTS: [&str; 12] = [
    "thread",
    "children",
    "dependents",
    "childseq",
    "workers",
    "inbox",
    "inboxdata",
    "seen",
    "seenseq",
    "checkpoints",
    "a2atasks",
    "extids",
];

/// Number of Redis Cluster hash slots.
const SLOTS: u16 = 16_384;

/// The Redis Cluster slot of `key`: CRC16 (XMODEM) of its hash tag — the content of its first
/// `{…}` when that is not empty — or of the whole key, mod 16,384 (the Cluster specification's
/// `HASH_SLOT`).
pub fn slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|b| *b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter()
            .position(|b| *b == b'}')
            .filter(|close| *close > 0)
            .map(|close| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % SLOTS
}

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as Redis Cluster uses.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for b in bytes {
        crc ^= u16::from(*b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The keys command `cmd` touches, for the commands agentd sends (the key positions of the
/// Redis command table): scripts their declared keys, `DEL`/`EXISTS` every argument,
/// `XREADGROUP`/`XREAD` their streams, `XINFO` its third argument, the rest their second.
pub fn keys_of(cmd: &redis::Cmd) -> Vec<Vec<u8>> {
    let args: Vec<&[u8]> = cmd
        .args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => b,
            _ => &b""[..],
        })
        .collect();
    let name = args
        .first()
        .map(|n| n.to_ascii_uppercase())
        .unwrap_or_default();
    let owned = |s: &[&[u8]]| s.iter().map(|k| k.to_vec()).collect();
    match name.as_slice() {
        b"EVAL" | b"EVALSHA" | b"FCALL" => {
            let n = args
                .get(2)
                .and_then(|n| std::str::from_utf8(n).ok())
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            owned(args.get(3..3 + n).unwrap_or(&[]))
        }
        b"DEL" | b"UNLINK" | b"EXISTS" | b"TOUCH" => owned(args.get(1..).unwrap_or(&[])),
        b"XREADGROUP" | b"XREAD" => {
            let Some(at) = args.iter().position(|a| a.eq_ignore_ascii_case(b"STREAMS")) else {
                return Vec::new();
            };
            let streams = &args[at + 1..];
            owned(&streams[..streams.len() / 2])
        }
        b"XINFO" => owned(args.get(2..3).unwrap_or(&[])),
        b"PING" | b"INFO" | b"MULTI" | b"EXEC" | b"SCRIPT" | b"WAIT" => Vec::new(),
        _ => owned(args.get(1..2).unwrap_or(&[])),
    }
}

/// The slots the commands of `pipe` touch. A pipeline agentd sends touches one slot: in a
/// Redis Cluster, only then do its commands reach one node, in order (see
/// [`assert_one_slot`]).
pub fn pipeline_slots(pipe: &redis::Pipeline) -> std::collections::BTreeSet<u16> {
    pipe.cmd_iter()
        .flat_map(keys_of)
        .map(|k| slot(&k))
        .collect()
}

/// Checks, in debug builds (every test), that `pipe` touches at most one slot; a release
/// build does not spend the hashing.
pub fn assert_one_slot(pipe: &redis::Pipeline) {
    if cfg!(debug_assertions) {
        let slots = pipeline_slots(pipe);
        assert!(
            slots.len() <= 1,
            "a pipeline touches {} slots: {:?}",
            slots.len(),
            pipe.cmd_iter()
                .flat_map(keys_of)
                .map(|k| String::from_utf8_lossy(&k).into_owned())
                .collect::<Vec<_>>()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_the_cluster_specifications() {
        // The examples of the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"{user1000}.followers"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"));
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
        assert_eq!(slot(b"foo{bar}{zap}"), slot(b"bar"));
    }

    #[test]
    fn agent_keys_are_spelled_as_the_layout_says() {
        let keys = Keys::new("ns", 16);
        let id = "0192f3c4-1111-7000-8000-000000000000";
        let k = keys.partition_of(id);
        assert_eq!(keys.agent(id), format!("{{ns:p{k}}}:a:{id}"));
        assert_eq!(
            keys.agent_part(id, "thread"),
            format!("{{ns:p{k}}}:a:{id}:thread")
        );
        assert_eq!(keys.partition(3), "{ns:p3}:stream");
        assert_eq!(keys.lease(3), "{ns:p3}:lease");
        assert_eq!(keys.partition(20), "{ns:p20}:stream");
        // A partition past the namespace's count is named all the same (no agent is in one).
        assert_eq!(keys.lease(20), "{ns:p20}:lease");
    }

    #[test]
    fn every_key_of_an_agent_is_in_its_partitions_slot() {
        let keys = Keys::new("ns", 16);
        for id in ["a", "0192f3c4-1111-7000-8000-000000000000", "lead-7"] {
            let k = keys.partition_of(id);
            let want = slot(keys.partition(k).as_bytes());
            for key in keys.all_of_agent(id).into_iter().chain([
                keys.lease(k),
                keys.roots(k),
                keys.outbox(k),
            ]) {
                assert_eq!(slot(key.as_bytes()), want, "{key}");
            }
        }
        assert_eq!(
            slot(keys.tool_calls().as_bytes()),
            slot(keys.tool_call_status().as_bytes())
        );
    }

    #[test]
    fn the_keys_of_a_command_are_found() {
        let mut c = redis::cmd("EVALSHA");
        c.arg("abc").arg(2).arg("k1").arg("k2").arg("v");
        assert_eq!(keys_of(&c), vec![b"k1".to_vec(), b"k2".to_vec()]);
        let mut c = redis::cmd("XREADGROUP");
        c.arg("GROUP")
            .arg("g")
            .arg("c")
            .arg("STREAMS")
            .arg("s1")
            .arg("s2")
            .arg(">")
            .arg(">");
        assert_eq!(keys_of(&c), vec![b"s1".to_vec(), b"s2".to_vec()]);
        let mut c = redis::cmd("HSET");
        c.arg("h").arg("f").arg("v");
        assert_eq!(keys_of(&c), vec![b"h".to_vec()]);
        let mut p = redis::pipe();
        p.cmd("HSET").arg("{x}a").arg("f").arg(1);
        p.cmd("XADD").arg("{x}b").arg("*").arg("m").arg(1);
        assert_eq!(pipeline_slots(&p).len(), 1);
        p.cmd("XADD").arg("{y}b").arg("*").arg("m").arg(1);
        assert_eq!(pipeline_slots(&p).len(), 2);
    }
}
