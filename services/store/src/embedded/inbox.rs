//! The durable inbox and its de-duplication window. A pushed envelope takes the next seq of its
//! agent's window: the window's index ([`SEEN`](super::layout::SEEN)) maps its id to that seq,
//! the window's order ([`row::WINDOW`]) maps the seq back to the id so the oldest id can be
//! dropped once the window is full, and the inbox ([`INBOX`](super::layout::INBOX)) keeps the
//! envelope under the same seq until it is done.

use super::be;
use super::layout::{next_row_seq, row, seq_key, seq_of, uuid_key};
use super::tables::{NextSeqs, Tables, put_new};
use agentd_ports::{DEDUP_WINDOW, StoreResult};
use agentd_proto::Envelope;
use agentd_proto::codec::decode;
use redb::ReadableTable;
use uuid::Uuid;

/// Queues `bytes` (envelope `env_id`) in the agent's inbox unless the id is in its
/// de-duplication window; answers whether it was new.
pub(super) fn inbox_push_in(
    t: &mut Tables<'_>,
    a: &str,
    env_id: &Uuid,
    bytes: &[u8],
) -> StoreResult<bool> {
    let id = uuid_key(env_id);
    let cached = t.seqs.seen.get(a).copied();
    let Some(seq) = put_new(
        t,
        cached,
        |t, seq| {
            Ok(t.seen
                .insert((id.as_slice(), a), seq)
                .map_err(be)?
                .map(|v| v.value().to_vec()))
        },
        |t| next_row_seq(&t.rows, a, row::WINDOW),
        |t, seq| {
            Ok(t.rows
                .insert((a, row::WINDOW, seq_key(seq).as_slice()), id.as_slice())
                .map_err(be)?
                .map(|v| v.value().to_vec()))
        },
        |t, seq, taken| {
            t.rows
                .insert((a, row::WINDOW, seq_key(seq).as_slice()), taken.as_slice())
                .map(|_| ())
                .map_err(be)
        },
    )?
    else {
        return Ok(false);
    };
    NextSeqs::note(&mut t.seqs.seen, a, seq + 1);
    if seq >= DEDUP_WINDOW as u64 {
        let old = seq_key(seq - DEDUP_WINDOW as u64);
        let gone = t
            .rows
            .remove((a, row::WINDOW, old.as_slice()))
            .map_err(be)?
            .map(|v| v.value().to_vec());
        if let Some(gone) = gone {
            t.seen.remove((gone.as_slice(), a)).map_err(be)?;
        }
    }
    t.inbox.insert((a, seq), bytes).map_err(be)?;
    Ok(true)
}

/// Removes envelope `env_id` from the agent's inbox (nothing if it is not there).
pub(super) fn inbox_done_in(t: &mut Tables<'_>, a: &str, env_id: &Uuid) -> StoreResult<()> {
    let seq = match t.seen.get((uuid_key(env_id).as_slice(), a)).map_err(be)? {
        Some(v) => Some(seq_of(v.value())?),
        None => None,
    };
    if let Some(seq) = seq
        && t.inbox.remove((a, seq)).map_err(be)?.is_some()
    {
        return Ok(());
    }
    // Not where the window says (an envelope that waited while more than a window of newer
    // ones arrived, or one already done): look for it among the agent's pending envelopes.
    let mut found = None;
    for item in t.inbox.range((a, 0u64)..=(a, u64::MAX)).map_err(be)? {
        let (k, v) = item.map_err(be)?;
        if envelope_id(v.value()) == Some(*env_id) {
            found = Some(k.value().1);
            break;
        }
    }
    if let Some(seq) = found {
        t.inbox.remove((a, seq)).map_err(be)?;
    }
    Ok(())
}

/// The id of a stored envelope (`None` if it does not decode).
pub(super) fn envelope_id(bytes: &[u8]) -> Option<Uuid> {
    decode::<Envelope>(bytes).ok().map(|e| e.id)
}
