//! The tables of one write transaction, opened once for all the writes of a batch, and the
//! writer's guesses of each agent's next sequence numbers, checked by [`put_new`].

use super::be;
use super::layout::{CHECKPOINTS, INBOX, OUTBOX, ROWS, RowTable, SEEN, THREADS, seq_key};
use agentd_ports::{FastHashMap, StoreResult};
use redb::WriteTransaction;

/// The tables of one write transaction, each opened once for all the writes of a batch
/// (opening a table costs a table-tree lookup, and closing it a root update).
pub(super) struct Tables<'t> {
    pub(super) rows: RowTable<'t>,
    pub(super) seen: redb::Table<'t, (&'static [u8], &'static str), &'static [u8]>,
    pub(super) threads: redb::Table<'t, (&'static str, u64), &'static [u8]>,
    pub(super) inbox: redb::Table<'t, (&'static str, u64), &'static [u8]>,
    pub(super) checkpoints: redb::Table<'t, (&'static str, u64), &'static [u8]>,
    pub(super) outbox: redb::Table<'t, &'static str, (u64, &'static [u8])>,
    /// The writer's cache of next sequence numbers (empty outside the writer thread).
    pub(super) seqs: NextSeqs,
}

impl<'t> Tables<'t> {
    /// Opens (and on a new file creates) every table in `tx`.
    pub(super) fn open(tx: &'t WriteTransaction) -> StoreResult<Self> {
        Self::open_with(tx, NextSeqs::default())
    }

    /// [`Self::open`], with the writer's cache of next sequence numbers.
    pub(super) fn open_with(tx: &'t WriteTransaction, seqs: NextSeqs) -> StoreResult<Self> {
        Ok(Tables {
            seqs,
            rows: tx.open_table(ROWS).map_err(be)?,
            seen: tx.open_table(SEEN).map_err(be)?,
            threads: tx.open_table(THREADS).map_err(be)?,
            inbox: tx.open_table(INBOX).map_err(be)?,
            checkpoints: tx.open_table(CHECKPOINTS).map_err(be)?,
            outbox: tx.open_table(OUTBOX).map_err(be)?,
        })
    }
}

/// The next sequence number of each agent's thread and of its de-duplication window, as the
/// writer thread last wrote them, so that an append or a push need not find it with a range
/// look-up in the B-tree. Kept across transactions, dropped whenever one is rolled back. A
/// number from here is only a guess checked by the insert itself: an insert that finds the
/// key taken puts the old value back and takes the number from the B-tree, so a stale guess
/// can never overwrite an entry (a guess that is too high leaves a gap, which ordered scans do
/// not mind).
#[derive(Default)]
pub(super) struct NextSeqs {
    pub(super) threads: FastHashMap<String, u64>,
    pub(super) seen: FastHashMap<String, u64>,
}

/// Past this many agents the cache starts over (it holds no state of its own).
const NEXT_SEQS_MAX: usize = 100_000;

impl NextSeqs {
    /// Remembers that `id`'s next number in `map` is `next`.
    pub(super) fn note(map: &mut FastHashMap<String, u64>, id: &str, next: u64) {
        if let Some(n) = map.get_mut(id) {
            *n = next;
            return;
        }
        if map.len() >= NEXT_SEQS_MAX {
            map.clear();
        }
        map.insert(id.to_string(), next);
    }

    /// Forgets `id` (its thread was replaced, or it was deleted).
    pub(super) fn forget(&mut self, id: &str) {
        self.threads.remove(id);
        self.seen.remove(id);
    }
}

/// Puts a value under its agent's next sequence number unless its id is in an index of such
/// ids already (`None`). The id is claimed through `index` (which sets the id's [`seq_key`] and
/// answers what it displaced) at a guess of that number: the writer's `cached` one, else the
/// number after the last entry (`last_next`); the value is inserted there (`insert` answers
/// what it displaced). A stale guess finds its key taken: what was there is put back
/// (`restore`), the value goes after the last entry, and the index is corrected. Answers the
/// number used.
pub(super) fn put_new<Old>(
    t: &mut Tables<'_>,
    cached: Option<u64>,
    index: impl Fn(&mut Tables<'_>, &[u8]) -> StoreResult<Option<Vec<u8>>>,
    last_next: impl Fn(&Tables<'_>) -> StoreResult<u64>,
    insert: impl Fn(&mut Tables<'_>, u64) -> StoreResult<Option<Old>>,
    restore: impl Fn(&mut Tables<'_>, u64, Old) -> StoreResult<()>,
) -> StoreResult<Option<u64>> {
    let guess = match cached {
        Some(n) => n,
        None => last_next(t)?,
    };
    // The index's insert is also the duplicate check (one B-tree operation for what is nearly
    // always a new id); a duplicate gets the value it had back.
    if let Some(had) = index(t, &seq_key(guess))? {
        index(t, &had)?;
        return Ok(None);
    }
    let Some(taken) = insert(t, guess)? else {
        return Ok(Some(guess));
    };
    restore(t, guess, taken)?;
    let seq = last_next(t)?;
    insert(t, seq)?;
    index(t, &seq_key(seq))?;
    Ok(Some(seq))
}

#[cfg(test)]
mod tests {
    use super::super::inbox::inbox_push_in;
    use super::super::layout::{row, scan, scan_rows, seq_of, uuid_key};
    use super::super::writes::append_in;
    use super::*;
    use agentd_ports::StoreError;
    use redb::{Database, ReadableTable};
    use uuid::Uuid;

    fn entry_bytes(text: &str) -> Vec<u8> {
        text.as_bytes().to_vec()
    }

    fn thread_seq(t: &Tables<'_>, agent: &str, id: &Uuid) -> StoreResult<Option<u64>> {
        let got = t.rows.get((agent, row::THREAD_ID, uuid_key(id).as_slice()));
        got.map_err(be)?.map(|v| seq_of(v.value())).transpose()
    }

    fn seen_seq(t: &Tables<'_>, agent: &str, id: &Uuid) -> StoreResult<Option<u64>> {
        let got = t.seen.get((uuid_key(id).as_slice(), agent));
        got.map_err(be)?.map(|v| seq_of(v.value())).transpose()
    }

    /// A cached next sequence number that is behind the B-tree (the cache outlived a write it
    /// did not see) must not overwrite an entry: the insert notices, puts the old value back
    /// and appends after the last entry.
    #[test]
    fn a_stale_next_sequence_number_never_overwrites_an_entry() -> StoreResult<()> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::transient(e.to_string()))?;
        let db = Database::create(dir.path().join("t.redb")).map_err(be)?;
        let tx = db.begin_write().map_err(be)?;
        let [e0, e1, e2, m0, m1, m2] = [(); 6].map(|()| Uuid::now_v7());
        {
            let mut t = Tables::open(&tx)?;
            assert!(append_in(&mut t, "a", &e0, &entry_bytes("zero"))?);
            assert!(append_in(&mut t, "a", &e1, &entry_bytes("one"))?);
            assert!(inbox_push_in(&mut t, "a", &m0, b"m0")?);
            assert!(inbox_push_in(&mut t, "a", &m1, b"m1")?);
            // Stale: both numbers point at taken keys.
            t.seqs.threads.insert("a".into(), 0);
            t.seqs.seen.insert("a".into(), 1);
            assert!(append_in(&mut t, "a", &e2, &entry_bytes("two"))?);
            assert!(inbox_push_in(&mut t, "a", &m2, b"m2")?);
            let thread = scan(&t.threads, "a", |seq, v| Ok((seq, v.to_vec())))?;
            assert_eq!(
                thread,
                vec![
                    (0, entry_bytes("zero")),
                    (1, entry_bytes("one")),
                    (2, entry_bytes("two"))
                ]
            );
            let inbox = scan(&t.inbox, "a", |seq, v| Ok((seq, v.to_vec())))?;
            assert_eq!(
                inbox,
                vec![
                    (0, b"m0".to_vec()),
                    (1, b"m1".to_vec()),
                    (2, b"m2".to_vec())
                ]
            );
            let window = scan_rows(&t.rows, "a", row::WINDOW, |k, v| {
                Ok((seq_of(k)?, v.to_vec()))
            })?;
            assert_eq!(
                window,
                vec![
                    (0, uuid_key(&m0).to_vec()),
                    (1, uuid_key(&m1).to_vec()),
                    (2, uuid_key(&m2).to_vec())
                ]
            );
            // And the cache learned the right numbers.
            assert_eq!(t.seqs.threads.get("a"), Some(&3));
            assert_eq!(t.seqs.seen.get("a"), Some(&3));
            // A repeated id is refused and keeps its place in the index.
            assert!(!append_in(&mut t, "a", &e0, &entry_bytes("zero again"))?);
            assert!(!inbox_push_in(&mut t, "a", &m1, b"m1 again")?);
            assert_eq!(thread_seq(&t, "a", &e0)?, Some(0));
            assert_eq!(thread_seq(&t, "a", &e2)?, Some(2));
            assert_eq!(seen_seq(&t, "a", &m1)?, Some(1));
            assert_eq!(seen_seq(&t, "a", &m2)?, Some(2));
            assert_eq!(scan(&t.threads, "a", |_, _| Ok(()))?.len(), 3);
            assert_eq!(scan(&t.inbox, "a", |_, _| Ok(()))?.len(), 3);
        }
        tx.commit().map_err(be)?;
        Ok(())
    }
}
