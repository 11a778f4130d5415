//! Outside ids (`ExternalIds`) in the file: a [`row::EXTERNAL_ID`] row under
//! [`EXTERNAL_IDS_OWNER`] per key (`ExternalKey::encoded` → its mapping), the same key under
//! the agent it maps to (what the agent's deletion drops), and for a timed mapping a
//! [`row::EXTERNAL_ID_EXPIRY`] row, so the expired ones are dropped by a scan from the start.
//!
//! A mapping kept with its agent is `ExternalClaim::encode`d as it is (a settled claim without
//! a fingerprint is its bare agent id: the rows written before claims had more read the same);
//! a timed one is a zero byte, its expiry (ms since the epoch, 8 bytes big-endian), then the
//! encoded claim. Agent ids never start with a zero byte.

use super::be;
use super::layout::{EXTERNAL_IDS_OWNER, NO_KEY, ROWS, RowTable, row, seq_key, seq_of};
use super::tables::Tables;
use agentd_ports::{ExternalClaim, Retention, StoreError, StoreResult};
use redb::{Database, ReadableDatabase, ReadableTable};

/// A mapping as stored: its claim, and when it expires (ms; `None`: kept with its agent).
struct Mapping {
    claim: ExternalClaim,
    until: Option<u64>,
}

impl Mapping {
    fn encode(&self) -> Vec<u8> {
        let text = self.claim.encode();
        match self.until {
            None => text.into_bytes(),
            Some(until) => {
                let mut v = Vec::with_capacity(9 + text.len());
                v.push(0);
                v.extend_from_slice(&seq_key(until));
                v.extend_from_slice(text.as_bytes());
                v
            }
        }
    }

    fn decode(bytes: &[u8]) -> StoreResult<Mapping> {
        let text = |b: &[u8]| {
            std::str::from_utf8(b)
                .map(ExternalClaim::decode)
                .map_err(|e| StoreError::corrupt(format!("an outside id's mapping: {e}")))
        };
        match bytes.split_first() {
            Some((0, rest)) if rest.len() >= 8 => Ok(Mapping {
                until: Some(seq_of(&rest[..8])?),
                claim: text(&rest[8..])?,
            }),
            Some((0, _)) => Err(StoreError::corrupt(format!(
                "an outside id's mapping of {} bytes",
                bytes.len()
            ))),
            _ => Ok(Mapping {
                claim: text(bytes)?,
                until: None,
            }),
        }
    }

    /// Whether it still maps at `now_ms`.
    fn live(&self, now_ms: u64) -> bool {
        self.until.is_none_or(|until| until > now_ms)
    }
}

/// The [`row::EXTERNAL_ID_EXPIRY`] key of key `key` expiring at `until`.
fn expiry_key(until: u64, key: &[u8]) -> Vec<u8> {
    let mut k = seq_key(until).to_vec();
    k.extend_from_slice(key);
    k
}

/// The mapping of `key` as stored, expired or not.
fn stored(
    rows: &impl ReadableTable<super::layout::RowKey, &'static [u8]>,
    key: &[u8],
) -> StoreResult<Option<Mapping>> {
    rows.get((EXTERNAL_IDS_OWNER, row::EXTERNAL_ID, key))
        .map_err(be)?
        .map(|v| Mapping::decode(v.value()))
        .transpose()
}

/// Removes the mapping of `key`, `m`, with its expiry row and its row under its agent.
fn remove(rows: &mut RowTable<'_>, key: &[u8], m: &Mapping) -> StoreResult<()> {
    rows.remove((EXTERNAL_IDS_OWNER, row::EXTERNAL_ID, key))
        .map_err(be)?;
    if let Some(until) = m.until {
        rows.remove((
            EXTERNAL_IDS_OWNER,
            row::EXTERNAL_ID_EXPIRY,
            &expiry_key(until, key)[..],
        ))
        .map_err(be)?;
    }
    rows.remove((m.claim.agent_id.as_str(), row::EXTERNAL_ID, key))
        .map_err(be)?;
    Ok(())
}

/// Writes mapping `m` of `key` (one it replaces removed first).
fn put(rows: &mut RowTable<'_>, key: &[u8], m: &Mapping) -> StoreResult<()> {
    if let Some(old) = stored(rows, key)? {
        remove(rows, key, &old)?;
    }
    rows.insert((EXTERNAL_IDS_OWNER, row::EXTERNAL_ID, key), &m.encode()[..])
        .map_err(be)?;
    if let Some(until) = m.until {
        rows.insert(
            (
                EXTERNAL_IDS_OWNER,
                row::EXTERNAL_ID_EXPIRY,
                &expiry_key(until, key)[..],
            ),
            NO_KEY,
        )
        .map_err(be)?;
    }
    rows.insert((m.claim.agent_id.as_str(), row::EXTERNAL_ID, key), NO_KEY)
        .map_err(be)?;
    Ok(())
}

/// Drops the mappings expired by `now_ms` (the first rows of [`row::EXTERNAL_ID_EXPIRY`]).
fn drop_expired(rows: &mut RowTable<'_>, now_ms: u64) -> StoreResult<()> {
    let high = seq_key(now_ms.saturating_add(1));
    let expired: Vec<Vec<u8>> = rows
        .range(
            (EXTERNAL_IDS_OWNER, row::EXTERNAL_ID_EXPIRY, NO_KEY)
                ..(EXTERNAL_IDS_OWNER, row::EXTERNAL_ID_EXPIRY, &high[..]),
        )
        .map_err(be)?
        .map(|r| r.map(|(k, _)| k.value().2.to_vec()).map_err(be))
        .collect::<StoreResult<_>>()?;
    for expiry in expired {
        rows.remove((EXTERNAL_IDS_OWNER, row::EXTERNAL_ID_EXPIRY, &expiry[..]))
            .map_err(be)?;
        let key = &expiry[8..];
        if let Some(m) = stored(rows, key)?.filter(|m| !m.live(now_ms)) {
            remove(rows, key, &m)?;
        }
    }
    Ok(())
}

/// The live mapping of `key` at `now_ms`, the expired ones dropped first.
fn live(rows: &mut RowTable<'_>, key: &[u8], now_ms: u64) -> StoreResult<Option<Mapping>> {
    drop_expired(rows, now_ms)?;
    Ok(stored(rows, key)?.filter(|m| m.live(now_ms)))
}

fn until(keep: Retention, now_ms: u64) -> Option<u64> {
    match keep {
        Retention::WithAgent => None,
        Retention::For { ms } => Some(now_ms.saturating_add(ms)),
    }
}

/// See `ExternalIds::external_id_claim`; `key` encoded.
pub(super) fn claim_in(
    t: &mut Tables<'_>,
    key: &str,
    claim: &ExternalClaim,
    keep: Retention,
    now_ms: u64,
) -> StoreResult<Option<ExternalClaim>> {
    let key = key.as_bytes();
    if let Some(first) = live(&mut t.rows, key, now_ms)? {
        return Ok(Some(first.claim));
    }
    let m = Mapping {
        claim: claim.clone(),
        until: until(keep, now_ms),
    };
    put(&mut t.rows, key, &m)?;
    Ok(None)
}

/// See `ExternalIds::external_id_settle`; `key` encoded.
pub(super) fn settle_in(
    t: &mut Tables<'_>,
    key: &str,
    agent_id: &str,
    keep: Retention,
    now_ms: u64,
) -> StoreResult<()> {
    let key = key.as_bytes();
    let Some(mut m) = live(&mut t.rows, key, now_ms)?.filter(|m| m.claim.agent_id == agent_id)
    else {
        return Ok(());
    };
    m.claim.settled = true;
    m.until = until(keep, now_ms);
    put(&mut t.rows, key, &m)
}

/// See `ExternalIds::external_id_release`; `key` encoded.
pub(super) fn release_in(
    t: &mut Tables<'_>,
    key: &str,
    claim: &ExternalClaim,
    now_ms: u64,
) -> StoreResult<()> {
    let key = key.as_bytes();
    match live(&mut t.rows, key, now_ms)? {
        Some(m) if m.claim == *claim => remove(&mut t.rows, key, &m),
        _ => Ok(()),
    }
}

/// Drops the mapping of `key` (encoded) if it maps to agent `a`, and `a`'s row of it (its
/// deletion).
pub(super) fn drop_of_agent(t: &mut Tables<'_>, key: &[u8], a: &str) -> StoreResult<()> {
    match stored(&t.rows, key)? {
        Some(m) if m.claim.agent_id == a => remove(&mut t.rows, key, &m),
        _ => {
            t.rows.remove((a, row::EXTERNAL_ID, key)).map_err(be)?;
            Ok(())
        }
    }
}

/// What outside id `key` (encoded) maps to at `now_ms`.
pub(super) fn get(db: &Database, key: &str, now_ms: u64) -> StoreResult<Option<ExternalClaim>> {
    let tx = db.begin_read().map_err(be)?;
    let rows = tx.open_table(ROWS).map_err(be)?;
    Ok(stored(&rows, key.as_bytes())?
        .filter(|m| m.live(now_ms))
        .map(|m| m.claim))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_reads_back_and_a_bare_agent_id_is_a_settled_claim() -> StoreResult<()> {
        let bare = Mapping::decode(b"0192f3c4-1111-7000-8000-000000000000")?;
        assert_eq!(
            bare.claim,
            ExternalClaim::settled("0192f3c4-1111-7000-8000-000000000000")
        );
        assert_eq!(bare.until, None);
        for m in [
            Mapping {
                claim: ExternalClaim::settled("a"),
                until: None,
            },
            Mapping {
                claim: ExternalClaim {
                    agent_id: "a".into(),
                    fingerprint: "f\u{1f}x".into(),
                    settled: false,
                },
                until: Some(42),
            },
        ] {
            let back = Mapping::decode(&m.encode())?;
            assert_eq!((back.claim, back.until), (m.claim, m.until));
        }
        Ok(())
    }
}
