//! What each write does to the tables of the writer's transaction, and batches of
//! [`StoreWrite`]s: encoded on the caller's task, applied on the writer thread. What the writer
//! applies may run twice (see [`Writer::write`](super::writer::Writer::write)), so it changes
//! nothing outside the transaction's [`Tables`].

use super::inbox::inbox_done_in;
use super::layout::{
    CLAIMS_OWNER, NO_KEY, after, agent_id_of, next_row_seq, next_seq, remove_rows, row,
};
use super::layout::{scan_rows, seq_key, uuid_key};
use super::tables::{NextSeqs, Tables, put_new};
use super::{be, de};
use agentd_ports::{StoreResult, StoreWrite};
use agentd_proto::AgentRecord;
use agentd_proto::codec::{decode, encode};
use redb::ReadableTable;
use std::sync::atomic::{AtomicU64, Ordering};
use uuid::Uuid;

/// Writes agent `id`'s record.
pub(super) fn put_agent_in(t: &mut Tables<'_>, id: &str, bytes: &[u8]) -> StoreResult<()> {
    t.rows
        .insert((id, row::RECORD, NO_KEY), bytes)
        .map_err(be)?;
    Ok(())
}

/// Appends unless the entry id is already in the thread; answers whether it appended.
pub(super) fn append_in(
    t: &mut Tables<'_>,
    a: &str,
    entry_id: &Uuid,
    bytes: &[u8],
) -> StoreResult<bool> {
    let cached = t.seqs.threads.get(a).copied();
    let id = uuid_key(entry_id);
    let appended = put_new(
        t,
        cached,
        |t, seq| {
            Ok(t.rows
                .insert((a, row::THREAD_ID, id.as_slice()), seq)
                .map_err(be)?
                .map(|v| v.value().to_vec()))
        },
        |t| next_seq(&t.threads, a),
        |t, seq| {
            Ok(t.threads
                .insert((a, seq), bytes)
                .map_err(be)?
                .map(|v| v.value().to_vec()))
        },
        |t, seq, taken| {
            t.threads
                .insert((a, seq), taken.as_slice())
                .map(|_| ())
                .map_err(be)
        },
    )?;
    if let Some(seq) = appended {
        NextSeqs::note(&mut t.seqs.threads, a, seq + 1);
    }
    Ok(appended.is_some())
}

/// Replaces agent `a`'s thread (and its id index) with `entries`: (entry id, bytes) in order.
pub(super) fn replace_thread_in(
    t: &mut Tables<'_>,
    a: &str,
    entries: &[(Uuid, Vec<u8>)],
) -> StoreResult<()> {
    t.seqs.forget(a);
    t.threads
        .retain_in((a, 0u64)..=(a, u64::MAX), |_, _| false)
        .map_err(be)?;
    remove_rows(&mut t.rows, a, row::THREAD_ID, |_, _| true)?;
    for (seq, (entry_id, bytes)) in entries.iter().enumerate() {
        let seq = seq as u64;
        t.threads.insert((a, seq), bytes.as_slice()).map_err(be)?;
        t.rows
            .insert(
                (a, row::THREAD_ID, uuid_key(entry_id).as_slice()),
                seq_key(seq).as_slice(),
            )
            .map_err(be)?;
    }
    Ok(())
}

/// Adds `child` after `p`'s children unless it is one of them already.
pub(super) fn add_child_in(t: &mut Tables<'_>, p: &str, child: &str) -> StoreResult<()> {
    let existing = scan_rows(&t.rows, p, row::CHILD, |_, v| Ok(v == child.as_bytes()))?;
    if !existing.contains(&true) {
        let seq = next_row_seq(&t.rows, p, row::CHILD)?;
        t.rows
            .insert((p, row::CHILD, seq_key(seq).as_slice()), child.as_bytes())
            .map_err(be)?;
    }
    Ok(())
}

/// Records that `dependent` waits for `dependency` (a row per dependent: idempotent).
pub(super) fn add_dependent_in(
    t: &mut Tables<'_>,
    dependency: &str,
    dependent: &str,
) -> StoreResult<()> {
    t.rows
        .insert((dependency, row::DEPENDENT, dependent.as_bytes()), NO_KEY)
        .map_err(be)?;
    Ok(())
}

/// Forgets that `dependent` waits for `dependency` (a missing row changes nothing).
pub(super) fn remove_dependent_in(
    t: &mut Tables<'_>,
    dependency: &str,
    dependent: &str,
) -> StoreResult<()> {
    t.rows
        .remove((dependency, row::DEPENDENT, dependent.as_bytes()))
        .map_err(be)?;
    Ok(())
}

/// The child under `parent`'s alias `key`, made `candidate` if there is none; answers the child
/// and whether it was made.
pub(super) fn alias_get_or_create_in(
    t: &mut Tables<'_>,
    parent: &str,
    key: &str,
    candidate: &str,
) -> StoreResult<(String, bool)> {
    // Writes are applied one after another: the check and the insert are atomic.
    let row_key = (parent, row::ALIAS, key.as_bytes());
    let existing = match t.rows.get(row_key).map_err(be)? {
        Some(v) => Some(agent_id_of(v.value())?.to_string()),
        None => None,
    };
    Ok(match existing {
        Some(child) => (child, false),
        None => {
            t.rows.insert(row_key, candidate.as_bytes()).map_err(be)?;
            (candidate.to_string(), true)
        }
    })
}

/// Removes every row of agent `a` (its window's ids included) and its place among its parent's
/// children and aliases.
pub(super) fn delete_agent_in(t: &mut Tables<'_>, a: &str) -> StoreResult<()> {
    t.seqs.forget(a);
    let parent = match t.rows.get((a, row::RECORD, NO_KEY)).map_err(be)? {
        Some(v) => decode::<AgentRecord>(v.value()).map_err(de)?.parent_id,
        None => None,
    };
    let window = scan_rows(&t.rows, a, row::WINDOW, |_, env_id| Ok(env_id.to_vec()))?;
    for env_id in window {
        t.seen.remove((env_id.as_slice(), a)).map_err(be)?;
    }
    let external = scan_rows(&t.rows, a, row::EXTERNAL_ID, |key, _| Ok(key.to_vec()))?;
    for key in external {
        super::external_ids::drop_of_agent(t, &key, a)?;
    }
    let end = after(a);
    t.rows
        .retain_in((a, 0u8, NO_KEY)..(end.as_str(), 0u8, NO_KEY), |_, _| false)
        .map_err(be)?;
    for table in [&mut t.threads, &mut t.inbox, &mut t.checkpoints] {
        table
            .retain_in((a, 0u64)..=(a, u64::MAX), |_, _| false)
            .map_err(be)?;
    }
    if let Some(parent) = parent {
        let p = &*parent;
        for kind in [row::CHILD, row::ALIAS] {
            remove_rows(&mut t.rows, p, kind, |_, child| child == a.as_bytes())?;
        }
    }
    Ok(())
}

/// Adds a checkpoint of agent `a` and keeps its newest `keep` (all of them for 0).
pub(super) fn checkpoint_put_in(
    t: &mut Tables<'_>,
    a: &str,
    bytes: &[u8],
    keep: usize,
) -> StoreResult<()> {
    let seq = next_seq(&t.checkpoints, a)?;
    t.checkpoints.insert((a, seq), bytes).map_err(be)?;
    if keep > 0 && seq >= keep as u64 {
        // Sequences are dense from 0, so everything below seq - keep + 1 goes.
        let first_kept = seq + 1 - keep as u64;
        t.checkpoints
            .retain_in((a, 0u64)..(a, first_kept), |_, _| false)
            .map_err(be)?;
    }
    Ok(())
}

/// Forgets the kept output `env_id` (nothing if it is not kept).
pub(super) fn outbox_done_in(t: &mut Tables<'_>, env_id: &str) -> StoreResult<()> {
    t.outbox.remove(env_id).map_err(be)?;
    Ok(())
}

/// A [`StoreWrite`], encoded before it reaches the writer thread.
pub(super) enum Encoded {
    Put(String, Vec<u8>),
    Append(String, Uuid, Vec<u8>),
    Done(String, Uuid),
    /// An output kept in the outbox: its envelope id, seq and bytes.
    Keep(String, u64, Vec<u8>),
}

/// `writes`, encoded for the writer thread; an output kept in the outbox takes the next of
/// `outbox_seq`.
pub(super) fn encode_writes(
    writes: &[StoreWrite],
    outbox_seq: &AtomicU64,
) -> StoreResult<Vec<Encoded>> {
    writes.iter().map(|w| encode_write(w, outbox_seq)).collect()
}

fn encode_write(w: &StoreWrite, outbox_seq: &AtomicU64) -> StoreResult<Encoded> {
    Ok(match w {
        StoreWrite::PutAgent(rec) => Encoded::Put(rec.id.clone(), encode(&**rec).map_err(de)?),
        StoreWrite::Append { agent_id, entry } | StoreWrite::AppendNew { agent_id, entry } => {
            Encoded::Append(
                agent_id.to_string(),
                entry.id,
                encode(&**entry).map_err(de)?,
            )
        }
        StoreWrite::InboxDone { agent_id, env_id } => Encoded::Done(agent_id.to_string(), *env_id),
        StoreWrite::Outbox { env } => Encoded::Keep(
            env.id.to_string(),
            outbox_seq.fetch_add(1, Ordering::Relaxed),
            encode(&**env).map_err(de)?,
        ),
        StoreWrite::Forward { .. } | StoreWrite::Acknowledge { .. } => {
            return Err(agentd_ports::forwards_not_taken("embedded"));
        }
    })
}

/// Applies encoded `writes` in order.
pub(super) fn apply_writes(t: &mut Tables<'_>, writes: &[Encoded]) -> StoreResult<()> {
    for w in writes {
        match w {
            Encoded::Put(id, bytes) => put_agent_in(t, id, bytes)?,
            Encoded::Append(id, entry_id, bytes) => {
                append_in(t, id, entry_id, bytes)?;
            }
            Encoded::Done(id, env_id) => inbox_done_in(t, id, env_id)?,
            // Kept once: a repeat (a batch written again) keeps its first place.
            Encoded::Keep(env_id, seq, bytes) => {
                if t.outbox.get(env_id.as_str()).map_err(be)?.is_none() {
                    t.outbox
                        .insert(env_id.as_str(), (*seq, bytes.as_slice()))
                        .map_err(be)?;
                }
            }
        }
    }
    Ok(())
}

/// Decodes a stored tool call record (JSON).
pub(super) fn decode_tool_call(bytes: &[u8]) -> StoreResult<agentd_proto::ToolCallRecord> {
    serde_json::from_slice(bytes)
        .map_err(|e| agentd_ports::StoreError::corrupt(format!("a tool call record: {e}")))
}

/// Closes tool call `call_id` if `closing` applies to it, in the writer's transaction (so two
/// closings are ordered and the second finds the first's).
pub(super) fn tool_call_close_in(
    t: &mut Tables<'_>,
    call_id: &uuid::Uuid,
    closing: &agentd_ports::ToolCallClosing,
) -> StoreResult<agentd_proto::ToolCallClose> {
    use agentd_proto::ToolCallClose;
    let key = super::layout::uuid_key(call_id);
    let row_key = (
        super::layout::TOOL_CALLS_OWNER,
        super::layout::row::TOOL_CALL,
        key.as_slice(),
    );
    let stored = t.rows.get(row_key).map_err(be)?.map(|v| v.value().to_vec());
    let Some(bytes) = stored else {
        return Ok(ToolCallClose::NotFound);
    };
    let mut call = decode_tool_call(&bytes)?;
    if !closing.applies_to(call.status) {
        return Ok(ToolCallClose::AlreadyClosed(call));
    }
    closing.apply(&mut call);
    let bytes =
        serde_json::to_vec(&call).map_err(|e| agentd_ports::StoreError::corrupt(e.to_string()))?;
    t.rows.insert(row_key, bytes.as_slice()).map_err(be)?;
    Ok(ToolCallClose::Closed(call))
}

/// Stores a tool call record (`bytes`, JSON) under `key` unless the stored one is closed.
pub(super) fn tool_call_put_in(
    t: &mut Tables<'_>,
    key: &[u8; 16],
    bytes: &[u8],
) -> StoreResult<()> {
    let row_key = (
        super::layout::TOOL_CALLS_OWNER,
        super::layout::row::TOOL_CALL,
        key.as_slice(),
    );
    let stored = t.rows.get(row_key).map_err(be)?.map(|v| v.value().to_vec());
    if let Some(old) = stored
        && !decode_tool_call(&old)?.status.is_open()
    {
        return Ok(());
    }
    t.rows.insert(row_key, bytes).map_err(be)?;
    Ok(())
}

/// Stores A2A task `task` of context agent `a`, replacing what was stored under its id.
pub(super) fn a2a_task_put_in(
    t: &mut Tables<'_>,
    a: &str,
    task: &str,
    bytes: &[u8],
) -> StoreResult<()> {
    t.rows
        .insert((a, super::layout::row::A2A_TASK, task.as_bytes()), bytes)
        .map_err(be)?;
    Ok(())
}

/// Stores A2A task `task` of context agent `a` unless something is stored under its id;
/// answers whether it did.
pub(super) fn a2a_task_put_new_in(
    t: &mut Tables<'_>,
    a: &str,
    task: &str,
    bytes: &[u8],
) -> StoreResult<bool> {
    let key = (a, row::A2A_TASK, task.as_bytes());
    if t.rows.get(key).map_err(be)?.is_some() {
        return Ok(false);
    }
    t.rows.insert(key, bytes).map_err(be)?;
    Ok(true)
}

/// The [`row::CLAIM`] key of claim `key` of `home`.
fn claim_id(home: &str, key: &str) -> Vec<u8> {
    format!("{home}\x1f{key}").into_bytes()
}

/// The [`row::CLAIM_EXPIRY`] key of claim `id` expiring at `until`.
fn claim_expiry(until: u64, id: &[u8]) -> Vec<u8> {
    let mut k = seq_key(until).to_vec();
    k.extend_from_slice(id);
    k
}

/// A [`row::CLAIM`] value: until, settled, fingerprint.
fn claim_value(until: u64, claim: &agentd_ports::Claim) -> Vec<u8> {
    let mut v = seq_key(until).to_vec();
    v.push(u8::from(claim.settled));
    v.extend_from_slice(claim.fingerprint.as_bytes());
    v
}

/// A [`row::CLAIM`] value read back: until and the claim.
fn claim_of(bytes: &[u8]) -> StoreResult<(u64, agentd_ports::Claim)> {
    if bytes.len() < 9 {
        return Err(agentd_ports::StoreError::corrupt(format!(
            "a claim of {} bytes",
            bytes.len()
        )));
    }
    let until = super::layout::seq_of(&bytes[..8])?;
    let fingerprint = std::str::from_utf8(&bytes[9..])
        .map_err(|e| agentd_ports::StoreError::corrupt(format!("a claim's fingerprint: {e}")))?;
    Ok((
        until,
        agentd_ports::Claim {
            fingerprint: fingerprint.to_string(),
            settled: bytes[8] == 1,
        },
    ))
}

/// Drops the claims expired by `now_ms` (the first rows of [`row::CLAIM_EXPIRY`]).
fn drop_expired_claims(t: &mut Tables<'_>, now_ms: u64) -> StoreResult<()> {
    let low = (CLAIMS_OWNER, row::CLAIM_EXPIRY, NO_KEY);
    let high = seq_key(now_ms.saturating_add(1));
    let expired: Vec<Vec<u8>> = t
        .rows
        .range(low..(CLAIMS_OWNER, row::CLAIM_EXPIRY, &high[..]))
        .map_err(be)?
        .map(|r| r.map(|(k, _)| k.value().2.to_vec()).map_err(be))
        .collect::<StoreResult<_>>()?;
    for key in expired {
        t.rows
            .remove((CLAIMS_OWNER, row::CLAIM_EXPIRY, &key[..]))
            .map_err(be)?;
        t.rows
            .remove((CLAIMS_OWNER, row::CLAIM, &key[8..]))
            .map_err(be)?;
    }
    Ok(())
}

/// Claims `key` of `home` for `fingerprint` until `now_ms + ttl_ms` (see
/// `IdempotencyClaims::idempotency_claim`), dropping the claims expired by `now_ms` first.
pub(super) fn claim_in(
    t: &mut Tables<'_>,
    home: &str,
    key: &str,
    fingerprint: &str,
    ttl_ms: u64,
    now_ms: u64,
) -> StoreResult<Option<agentd_ports::Claim>> {
    drop_expired_claims(t, now_ms)?;
    let id = claim_id(home, key);
    if let Some(v) = t
        .rows
        .get((CLAIMS_OWNER, row::CLAIM, &id[..]))
        .map_err(be)?
    {
        return Ok(Some(claim_of(v.value())?.1));
    }
    let until = now_ms.saturating_add(ttl_ms);
    let claim = agentd_ports::Claim {
        fingerprint: fingerprint.to_string(),
        settled: false,
    };
    t.rows
        .insert(
            (CLAIMS_OWNER, row::CLAIM, &id[..]),
            &claim_value(until, &claim)[..],
        )
        .map_err(be)?;
    t.rows
        .insert(
            (
                CLAIMS_OWNER,
                row::CLAIM_EXPIRY,
                &claim_expiry(until, &id)[..],
            ),
            NO_KEY,
        )
        .map_err(be)?;
    Ok(None)
}

/// Ends claim `key` of `home` as `end` says, at `now_ms`.
pub(super) fn claim_end_in(
    t: &mut Tables<'_>,
    home: &str,
    key: &str,
    end: agentd_ports::ClaimEnd,
    now_ms: u64,
) -> StoreResult<()> {
    let id = claim_id(home, key);
    let Some(v) = t
        .rows
        .get((CLAIMS_OWNER, row::CLAIM, &id[..]))
        .map_err(be)?
    else {
        return Ok(());
    };
    let (until, mut claim) = claim_of(v.value())?;
    drop(v);
    t.rows
        .remove((
            CLAIMS_OWNER,
            row::CLAIM_EXPIRY,
            &claim_expiry(until, &id)[..],
        ))
        .map_err(be)?;
    match end {
        agentd_ports::ClaimEnd::Released => {
            t.rows
                .remove((CLAIMS_OWNER, row::CLAIM, &id[..]))
                .map_err(be)?;
        }
        agentd_ports::ClaimEnd::Settled { keep_ms } => {
            let until = now_ms.saturating_add(keep_ms);
            claim.settled = true;
            t.rows
                .insert(
                    (CLAIMS_OWNER, row::CLAIM, &id[..]),
                    &claim_value(until, &claim)[..],
                )
                .map_err(be)?;
            t.rows
                .insert(
                    (
                        CLAIMS_OWNER,
                        row::CLAIM_EXPIRY,
                        &claim_expiry(until, &id)[..],
                    ),
                    NO_KEY,
                )
                .map_err(be)?;
        }
    }
    Ok(())
}
