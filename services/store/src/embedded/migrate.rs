//! Moving a file written in an earlier layout into the current one ([`super::layout`]), in the
//! transaction that opens it: the earlier layouts' tables, and how their rows are moved.

use super::be;
use super::inbox::envelope_id;
use super::layout::{NO_KEY, row, seq_key, seq_of, uuid_key};
use super::tables::Tables;
use agentd_ports::StoreResult;
use redb::{ReadableTable, TableDefinition, TableHandle, WriteTransaction};
use uuid::Uuid;

/// Tables of earlier layouts, moved into the current ones when such a file is opened
/// ([`migrate`]).
mod earlier {
    use redb::TableDefinition;
    /// id → record: now [`row::RECORD`](super::row::RECORD).
    pub const AGENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("agents");
    /// (agent, entry id) → seq: now [`row::THREAD_ID`](super::row::THREAD_ID).
    pub const THREAD_IDS: TableDefinition<(&str, &str), u64> = TableDefinition::new("thread_ids");
    /// (parent, seq) → child: now [`row::CHILD`](super::row::CHILD).
    pub const CHILDREN: TableDefinition<(&str, u64), &str> = TableDefinition::new("children");
    /// (parent, "title\x1falias") → child: now [`row::ALIAS`](super::row::ALIAS).
    pub const ALIASES: TableDefinition<(&str, &str), &str> = TableDefinition::new("aliases");
    /// (agent, envelope id) → seen seq: now [`SEEN`](super::super::layout::SEEN).
    pub const SEEN: TableDefinition<(&str, &str), u64> = TableDefinition::new("seen");
    /// (agent, seen seq) → envelope id: now [`row::WINDOW`](super::row::WINDOW).
    pub const SEEN_SEQ: TableDefinition<(&str, u64), &str> = TableDefinition::new("seen_seq");
    /// The inbox before `inbox_by_seen` (its own slot numbers, and an id index in
    /// [`INBOX_IDS`]): now [`INBOX`](super::super::layout::INBOX).
    pub const INBOX: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("inbox");
    /// (agent, envelope id) → slot in [`INBOX`].
    pub const INBOX_IDS: TableDefinition<(&str, &str), u64> = TableDefinition::new("inbox_ids");
}

/// An id written as text by an earlier layout, as a row key: its 16 bytes if it is a UUID
/// (all of agentd's are), else its text.
fn text_id_key(id: &str) -> Vec<u8> {
    match Uuid::parse_str(id) {
        Ok(uuid) => uuid.as_bytes().to_vec(),
        Err(_) => id.as_bytes().to_vec(),
    }
}

/// Whether `tx`'s file has a table named `name`.
fn has_table(tx: &WriteTransaction, name: &str) -> StoreResult<bool> {
    Ok(tx.list_tables().map_err(be)?.any(|h| h.name() == name))
}

/// Moves what a file written by an earlier version holds into the current layout, in the same
/// transaction as opening it: per-agent rows from their tables of their own into
/// [`ROWS`](super::layout::ROWS), then an inbox of the layout before `inbox_by_seen` into
/// [`INBOX`](super::layout::INBOX). Each earlier table is deleted once moved, so nothing is
/// moved twice.
pub(super) fn migrate(tx: &WriteTransaction, t: &mut Tables<'_>) -> StoreResult<()> {
    let put = |t: &mut Tables<'_>, agent: &str, kind: u8, key: &[u8], value: &[u8]| {
        t.rows
            .insert((agent, kind, key), value)
            .map(|_| ())
            .map_err(be)
    };
    let mut moved = 0;
    moved += move_table(tx, t, earlier::AGENTS, |t, id, rec| {
        put(t, id, row::RECORD, NO_KEY, rec)
    })?;
    moved += move_table(tx, t, earlier::THREAD_IDS, |t, (agent, id), seq| {
        put(t, agent, row::THREAD_ID, &text_id_key(id), &seq_key(seq))
    })?;
    moved += move_table(tx, t, earlier::SEEN, |t, (agent, id), seq| {
        let id = text_id_key(id);
        t.seen
            .insert((id.as_slice(), agent), seq_key(seq).as_slice())
            .map(|_| ())
            .map_err(be)
    })?;
    moved += move_table(tx, t, earlier::SEEN_SEQ, |t, (agent, seq), id| {
        put(t, agent, row::WINDOW, &seq_key(seq), &text_id_key(id))
    })?;
    moved += move_table(tx, t, earlier::CHILDREN, |t, (parent, seq), child| {
        put(t, parent, row::CHILD, &seq_key(seq), child.as_bytes())
    })?;
    moved += move_table(tx, t, earlier::ALIASES, |t, (parent, key), child| {
        put(t, parent, row::ALIAS, key.as_bytes(), child.as_bytes())
    })?;
    if moved > 0 {
        tracing::info!(
            rows = moved,
            "embedded store: agents' rows moved to their current layout"
        );
    }
    migrate_legacy_inbox(tx, t)
}

/// If `tx`'s file has table `table` (of an earlier layout), hands each of its rows to `put`
/// and deletes it; answers how many rows it moved.
fn move_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    tx: &WriteTransaction,
    t: &mut Tables<'_>,
    table: TableDefinition<'static, K, V>,
    mut put: impl FnMut(&mut Tables<'_>, K::SelfType<'_>, V::SelfType<'_>) -> StoreResult<()>,
) -> StoreResult<usize> {
    if !has_table(tx, table.name())? {
        return Ok(0);
    }
    let mut moved = 0;
    for item in tx.open_table(table).map_err(be)?.iter().map_err(be)? {
        let (k, v) = item.map_err(be)?;
        put(t, k.value(), v.value())?;
        moved += 1;
    }
    tx.delete_table(table).map_err(be)?;
    Ok(moved)
}

/// Moves the inbox of a file written before `inbox_by_seen` into
/// [`INBOX`](super::layout::INBOX). An envelope keeps its place: it is keyed by its seq in the
/// de-duplication window, or (evicted from the window since) by its old slot, which is lower
/// than the seqs of everything that arrived after it (each arrival took one seq, and a slot
/// never ran ahead of the seq).
fn migrate_legacy_inbox(tx: &WriteTransaction, t: &mut Tables<'_>) -> StoreResult<()> {
    if !has_table(tx, earlier::INBOX.name())? {
        return Ok(());
    }
    let mut moved = 0usize;
    {
        let legacy = tx.open_table(earlier::INBOX).map_err(be)?;
        for item in legacy.iter().map_err(be)? {
            let (k, v) = item.map_err(be)?;
            let (agent, slot) = k.value();
            let seen = match envelope_id(v.value()) {
                Some(env_id) => t
                    .seen
                    .get((uuid_key(&env_id).as_slice(), agent))
                    .map_err(be)?
                    .map(|s| seq_of(s.value()))
                    .transpose()?,
                None => None,
            };
            t.inbox
                .insert((agent, seen.unwrap_or(slot)), v.value())
                .map_err(be)?;
            moved += 1;
        }
    }
    tx.delete_table(earlier::INBOX).map_err(be)?;
    if has_table(tx, earlier::INBOX_IDS.name())? {
        tx.delete_table(earlier::INBOX_IDS).map_err(be)?;
    }
    tracing::info!(
        envelopes = moved,
        "embedded store: inbox moved to its current layout"
    );
    Ok(())
}
