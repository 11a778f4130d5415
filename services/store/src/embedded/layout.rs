//! The file's layout: its tables, the kinds of an agent's rows, how keys are encoded, and the
//! range scans over an agent's keys. Tables of earlier layouts live in `migrate.rs`.

use super::be;
use agentd_ports::{StoreError, StoreErrorKind, StoreResult};
use redb::{ReadableTable, TableDefinition};
use uuid::Uuid;

/// (agent, kind, key) → value: every small row of an agent side by side, of the kinds in
/// [`row`]: its record, the id index of its thread, the order of its de-duplication window,
/// its children and its worker aliases. A message writes several of them; keyed by the agent
/// first in one table, they share the agent's leaf page while its rows fit one (a few dozen),
/// so a message dirties one page for the agent rather than one per kind — and nearly all of
/// the writer's cost (copying, checksumming, writing and syncing pages) is per page. Past a
/// leaf, rows of different kinds land on different pages again.
pub(super) const ROWS: TableDefinition<(&str, u8, &[u8]), &[u8]> =
    TableDefinition::new("agent_rows");

/// The kinds of [`ROWS`], in key order.
pub(super) mod row {
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
    /// dependent id → nothing: the agents waiting for this one to complete.
    pub const DEPENDENT: u8 = 5;
    /// Under [`super::TOOL_CALLS_OWNER`] only: call id (16 bytes) → JSON tool call record.
    pub const TOOL_CALL: u8 = 6;
    /// A2A task id → the A2A layer's encoding of the task (the agent is its context).
    pub const A2A_TASK: u8 = 7;
    /// Under [`super::EXTERNAL_IDS_OWNER`]: an outside id (`ExternalKey::encoded`) → its
    /// mapping (the agent, the claim's fingerprint and settledness, a timed one's expiry:
    /// `external_ids.rs`). Under that agent: the same key → nothing (the mappings its deletion
    /// drops).
    pub const EXTERNAL_ID: u8 = 8;
    /// Under [`super::CLAIMS_OWNER`]: an idempotency claim's `home \x1f key` → until (ms, 8
    /// bytes big-endian), settled (1 byte), the first request's fingerprint.
    pub const CLAIM: u8 = 9;
    /// Under [`super::CLAIMS_OWNER`]: until (ms, 8 bytes big-endian) and a claim's
    /// `home \x1f key` → nothing: the claims in the order they expire, so the expired ones are
    /// dropped by a scan from the start.
    pub const CLAIM_EXPIRY: u8 = 10;
    /// Under [`super::EXTERNAL_IDS_OWNER`]: until (ms, 8 bytes big-endian) and an outside id
    /// (`ExternalKey::encoded`) → nothing: the timed mappings in the order they expire, so the
    /// expired ones are dropped by a scan from the start.
    pub const EXTERNAL_ID_EXPIRY: u8 = 11;
}

/// The (empty, so no agent's) owner of the [`row::CLAIM`] and [`row::CLAIM_EXPIRY`] rows:
/// claims are looked up by their home and key, and expire across agents.
pub(super) const CLAIMS_OWNER: &str = "";

/// The (empty, so no agent's) owner of the [`row::TOOL_CALL`] rows: tool calls are looked up
/// by their own id and listed across agents.
pub(super) const TOOL_CALLS_OWNER: &str = "";

/// The (empty, so no agent's) owner of the [`row::EXTERNAL_ID`] rows that map outside ids to
/// agents and of their [`row::EXTERNAL_ID_EXPIRY`] rows: they are looked up by the outside id,
/// and expire across agents.
pub(super) const EXTERNAL_IDS_OWNER: &str = "";

/// (envelope id, agent) → seen seq (8 bytes, big-endian): the de-duplication window. Keyed by
/// the id first: new ids are mostly v7, ordered by time, so a commit's pushes all land in the
/// last leaf or two instead of one leaf per agent.
pub(super) const SEEN: TableDefinition<(&[u8], &str), &[u8]> = TableDefinition::new("seen_by_id");

/// (agent, seq) → MessagePack entry.
pub(super) const THREADS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("threads");

/// (agent, seen seq) → MessagePack envelope: the durable inbox, in arrival order. Keyed by the
/// envelope's seq in the de-duplication window, so marking it done finds it through the
/// window ([`SEEN`]). Only pending envelopes are here, so it stays small and a
/// commit's pushes and done marks share a few pages.
pub(super) const INBOX: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("inbox_by_seen");

/// envelope id → (seq, MessagePack envelope): child outputs kept until their parent's router
/// has handled them ([`StoreWrite::Outbox`](agentd_ports::StoreWrite::Outbox)), the seq
/// keeping their order.
pub(super) const OUTBOX: TableDefinition<&str, (u64, &[u8])> = TableDefinition::new("outbox");

/// (agent, seq) → MessagePack checkpoint, oldest first.
pub(super) const CHECKPOINTS: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("checkpoints");

/// Between a worker's title and its alias in an [`row::ALIAS`] key.
pub(super) const SEP: char = '\x1f';

/// A row key with nothing after its kind (a record's), and the low end of a kind's range.
pub(super) const NO_KEY: &[u8] = &[];

/// The type of [`ROWS`]' keys.
pub(super) type RowKey = (&'static str, u8, &'static [u8]);
/// [`ROWS`], open in a write transaction.
pub(super) type RowTable<'t> = redb::Table<'t, RowKey, &'static [u8]>;

/// The [`row::ALIAS`] key of a worker's alias.
pub(super) fn alias_key(title: &str, alias: &str) -> String {
    format!("{title}{SEP}{alias}")
}

/// The keys of `agent`'s rows of `kind`.
pub(super) fn kind_range(agent: &str, kind: u8) -> std::ops::Range<(&str, u8, &'static [u8])> {
    (agent, kind, NO_KEY)..(agent, kind + 1, NO_KEY)
}

/// The smallest id above `agent`: every row of `agent` sorts below `(after(agent), 0, [])`,
/// every row of an agent after it at or above.
pub(super) fn after(agent: &str) -> String {
    format!("{agent}\0")
}

/// A sequence number as a row key (big-endian, so keys sort by number).
pub(super) fn seq_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// The sequence number of a [`seq_key`] (or of a row value written as one).
pub(super) fn seq_of(bytes: &[u8]) -> StoreResult<u64> {
    <[u8; 8]>::try_from(bytes)
        .map(u64::from_be_bytes)
        .map_err(|_| StoreError::corrupt(format!("a sequence number of {} bytes", bytes.len())))
}

/// A UUID as a row key: its 16 bytes.
pub(super) fn uuid_key(id: &Uuid) -> [u8; 16] {
    *id.as_bytes()
}

/// A row value that holds an agent id.
pub(super) fn agent_id_of(bytes: &[u8]) -> StoreResult<&str> {
    std::str::from_utf8(bytes)
        .map_err(|e| StoreError::caused_by(StoreErrorKind::Corrupt, format!("an agent id: {e}"), e))
}

/// The number after the last of `agent`'s rows of `kind` keyed by [`seq_key`] (0 if none).
pub(super) fn next_row_seq(
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
pub(super) fn scan_rows<T>(
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
pub(super) fn remove_rows(
    rows: &mut RowTable<'_>,
    agent: &str,
    kind: u8,
    mut remove: impl FnMut(&[u8], &[u8]) -> bool,
) -> StoreResult<()> {
    rows.retain_in(kind_range(agent, kind), |k, v| !remove(k.2, v))
        .map_err(be)
}

/// Keys of `table` whose first element is `id`, with their values.
pub(super) fn scan<V: redb::Value + 'static, T>(
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

/// The number after the last of `id`'s keys in `table` (0 if none).
pub(super) fn next_seq<V: redb::Value + 'static>(
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
