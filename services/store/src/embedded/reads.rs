//! Reads, each in a read transaction of its own, on a blocking thread: the
//! [`RedbStore`](super::RedbStore) runs them on tokio's blocking pool.

use super::layout::{
    CHECKPOINTS, INBOX, NO_KEY, OUTBOX, ROWS, SEEN, SEP, THREADS, after, agent_id_of, row, scan,
    scan_rows,
};
use super::{be, de};
use agentd_ports::{StoreError, StoreErrorKind, StoreResult, WorkerAlias};
use agentd_proto::codec::decode;
use agentd_proto::{AgentRecord, Envelope};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

/// Agent `id`'s record, if it has one.
pub(super) fn get_agent(db: &Database, id: &str) -> StoreResult<Option<AgentRecord>> {
    let tx = db.begin_read().map_err(be)?;
    let rows = tx.open_table(ROWS).map_err(be)?;
    match rows.get((id, row::RECORD, NO_KEY)).map_err(be)? {
        Some(v) => Ok(Some(decode(v.value()).map_err(de)?)),
        None => Ok(None),
    }
}

/// Whether agent `id` has a record.
pub(super) fn agent_exists(db: &Database, id: &str) -> StoreResult<bool> {
    let tx = db.begin_read().map_err(be)?;
    let rows = tx.open_table(ROWS).map_err(be)?;
    Ok(rows.get((id, row::RECORD, NO_KEY)).map_err(be)?.is_some())
}

/// The records without a parent, oldest first.
pub(super) fn list_roots(db: &Database) -> StoreResult<Vec<AgentRecord>> {
    let tx = db.begin_read().map_err(be)?;
    let rows = tx.open_table(ROWS).map_err(be)?;
    let mut roots = Vec::new();
    // One seek per agent: its first row is its record (kind 0), if it has one.
    let mut from = String::new();
    loop {
        let next = rows
            .range((from.as_str(), row::RECORD, NO_KEY)..)
            .map_err(be)?
            .next();
        let Some(item) = next else { break };
        let (k, v) = item.map_err(be)?;
        let (agent, kind, _) = k.value();
        if kind == row::RECORD {
            let rec: AgentRecord = decode(v.value()).map_err(de)?;
            if rec.parent_id.is_none() {
                roots.push(rec);
            }
        }
        from = after(agent);
    }
    roots.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
    Ok(roots)
}

/// `parent`'s children, in the order they were added.
pub(super) fn children(db: &Database, parent: &str) -> StoreResult<Vec<String>> {
    let tx = db.begin_read().map_err(be)?;
    let rows = tx.open_table(ROWS).map_err(be)?;
    scan_rows(&rows, parent, row::CHILD, |_, v| {
        Ok(agent_id_of(v)?.to_string())
    })
}

/// The agents waiting for `dependency`.
pub(super) fn dependents(db: &Database, dependency: &str) -> StoreResult<Vec<String>> {
    let tx = db.begin_read().map_err(be)?;
    let rows = tx.open_table(ROWS).map_err(be)?;
    scan_rows(&rows, dependency, row::DEPENDENT, |k, _| {
        Ok(String::from_utf8_lossy(k).into_owned())
    })
}

/// `parent`'s worker aliases.
pub(super) fn aliases(db: &Database, parent: &str) -> StoreResult<Vec<WorkerAlias>> {
    let tx = db.begin_read().map_err(be)?;
    let rows = tx.open_table(ROWS).map_err(be)?;
    scan_rows(&rows, parent, row::ALIAS, |k, v| {
        let key = String::from_utf8_lossy(k);
        let (title, alias) = key.split_once(SEP).unwrap_or((&key, ""));
        Ok(WorkerAlias {
            worker_title: title.to_string(),
            alias: alias.to_string(),
            child_id: agent_id_of(v)?.to_string(),
        })
    })
}

/// The decoded values of `table` under `(id, seq)` keys, in sequence order.
pub(super) fn read_sequence<T: serde::de::DeserializeOwned>(
    db: &Database,
    table: TableDefinition<'static, (&'static str, u64), &'static [u8]>,
    id: &str,
) -> StoreResult<Vec<T>> {
    let tx = db.begin_read().map_err(be)?;
    let t = tx.open_table(table).map_err(be)?;
    scan(&t, id, |_, v| decode(v).map_err(de))
}

/// The outputs kept in the outbox, in the order they were kept.
pub(super) fn outbox_pending(db: &Database) -> StoreResult<Vec<Envelope>> {
    let tx = db.begin_read().map_err(be)?;
    let table = tx.open_table(OUTBOX).map_err(be)?;
    let mut kept = Vec::new();
    for item in table.iter().map_err(be)? {
        let (_, v) = item.map_err(be)?;
        let (seq, bytes) = v.value();
        kept.push((seq, decode::<Envelope>(bytes).map_err(de)?));
    }
    kept.sort_by_key(|(seq, _)| *seq);
    Ok(kept.into_iter().map(|(_, env)| env).collect())
}

/// How many rows of any table mention `id` (as a key, or as a child/alias value).
pub(super) fn rows_mentioning(db: &Database, id: &str) -> StoreResult<usize> {
    let tx = db.begin_read().map_err(be)?;
    let mut n = 0;
    for item in tx.open_table(ROWS).map_err(be)?.iter().map_err(be)? {
        let (k, v) = item.map_err(be)?;
        let (agent, kind, _) = k.value();
        let names_it = matches!(kind, row::CHILD | row::ALIAS) && v.value() == id.as_bytes();
        n += usize::from(agent == id || names_it);
    }
    for item in tx.open_table(SEEN).map_err(be)?.iter().map_err(be)? {
        n += usize::from(item.map_err(be)?.0.value().1 == id);
    }
    for table in [THREADS, INBOX, CHECKPOINTS] {
        for item in tx.open_table(table).map_err(be)?.iter().map_err(be)? {
            n += usize::from(item.map_err(be)?.0.value().0 == id);
        }
    }
    Ok(n)
}

/// Tool call `call_id`, if stored.
pub(super) fn tool_call(
    db: &Database,
    call_id: &uuid::Uuid,
) -> StoreResult<Option<agentd_proto::ToolCallRecord>> {
    let tx = db.begin_read().map_err(be)?;
    let rows = tx.open_table(ROWS).map_err(be)?;
    let key = super::layout::uuid_key(call_id);
    let got = rows
        .get((
            super::layout::TOOL_CALLS_OWNER,
            row::TOOL_CALL,
            key.as_slice(),
        ))
        .map_err(be)?;
    got.map(|v| super::writes::decode_tool_call(v.value()))
        .transpose()
}

/// The open tool calls, oldest first.
pub(super) fn tool_calls_open(db: &Database) -> StoreResult<Vec<agentd_proto::ToolCallRecord>> {
    let tx = db.begin_read().map_err(be)?;
    let rows = tx.open_table(ROWS).map_err(be)?;
    let all = super::layout::scan_rows(
        &rows,
        super::layout::TOOL_CALLS_OWNER,
        row::TOOL_CALL,
        |_, v| super::writes::decode_tool_call(v),
    )?;
    let mut open: Vec<_> = all.into_iter().filter(|c| c.status.is_open()).collect();
    open.sort_by_key(|c| (c.requested_at_ms, c.call_id));
    Ok(open)
}

/// A2A task `task` of context agent `agent`, if stored.
pub(super) fn a2a_task(db: &Database, agent: &str, task: &str) -> StoreResult<Option<Vec<u8>>> {
    let tx = db.begin_read().map_err(be)?;
    let rows = tx.open_table(ROWS).map_err(be)?;
    let got = rows
        .get((agent, row::A2A_TASK, task.as_bytes()))
        .map_err(be)?;
    Ok(got.map(|v| v.value().to_vec()))
}

/// Every value of agent `agent` (`AgentValues`), with its key.
pub(super) fn a2a_tasks(db: &Database, agent: &str) -> StoreResult<Vec<(String, Vec<u8>)>> {
    let tx = db.begin_read().map_err(be)?;
    let rows = tx.open_table(ROWS).map_err(be)?;
    super::layout::scan_rows(&rows, agent, row::A2A_TASK, |k, v| {
        let key = std::str::from_utf8(k)
            .map_err(|e| StoreError::caused_by(StoreErrorKind::Corrupt, "a value's key", e))?;
        Ok((key.to_string(), v.to_vec()))
    })
}
