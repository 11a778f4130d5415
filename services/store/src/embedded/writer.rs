//! The writer thread: every write of the store goes through it. It takes the writes queued
//! while it was committing, applies them in one transaction and commits once for all of them
//! (group commit); a write that fails in a shared transaction sends the batch's writes back
//! through a transaction each, so only the failing one sees its error.

use super::be;
use super::tables::{NextSeqs, Tables};
use agentd_ports::{StoreError, StoreErrorKind, StoreResult};
use redb::Database;
use std::sync::{Arc, mpsc};

/// At most this many writes share one transaction (bounds a batch's latency).
const MAX_BATCH: usize = 1024;

/// One write waiting for the writer thread: applied inside a shared transaction, answered
/// once that transaction is committed (or has failed).
trait WriteJob: Send {
    /// Applies the write to the transaction's tables; on error the caller rolls the
    /// transaction back.
    fn apply(&mut self, tables: &mut Tables<'_>) -> StoreResult<()>;
    /// Answers the caller with the write's outcome and the commit's.
    fn finish(self: Box<Self>, outcome: StoreResult<()>);
}

/// A [`WriteJob`] running `f` and keeping its value until the commit is known.
struct Job<T, F> {
    f: F,
    value: Option<T>,
    reply: tokio::sync::oneshot::Sender<StoreResult<T>>,
}

impl<T, F> WriteJob for Job<T, F>
where
    T: Send,
    F: FnMut(&mut Tables<'_>) -> StoreResult<T> + Send,
{
    fn apply(&mut self, tables: &mut Tables<'_>) -> StoreResult<()> {
        self.value = Some((self.f)(tables)?);
        Ok(())
    }

    fn finish(self: Box<Self>, outcome: StoreResult<()>) {
        let Job { value, reply, .. } = *self;
        let answer = outcome
            .and_then(|()| value.ok_or_else(|| StoreError::transient("write was not applied")));
        let _ = reply.send(answer);
    }
}

/// The writer thread and its queue. Dropping it (with the last store handle) stops the thread
/// and waits for it, so the file is closed when the store is gone and can be opened again.
pub(super) struct Writer {
    queue: Option<mpsc::Sender<Box<dyn WriteJob>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    /// Starts the writer thread of `db`.
    pub(super) fn start(db: Arc<Database>) -> StoreResult<Self> {
        let (queue, jobs) = mpsc::channel::<Box<dyn WriteJob>>();
        let thread = std::thread::Builder::new()
            .name("agentd-redb-writer".into())
            .spawn(move || writer_loop(&db, &jobs))
            .map_err(|e| {
                StoreError::caused_by(
                    StoreErrorKind::Transient,
                    format!("starting the writer thread: {e}"),
                    e,
                )
            })?;
        Ok(Writer {
            queue: Some(queue),
            thread: Some(thread),
        })
    }

    /// Runs `f` in a write transaction shared with the other writes queued meanwhile, and
    /// answers once that transaction is committed. `f` may run twice (the second time alone)
    /// if another write of its batch fails, so it only reads what it captured.
    pub(super) async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnMut(&mut Tables<'_>) -> StoreResult<T> + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job: Box<dyn WriteJob> = Box::new(Job {
            f,
            value: None,
            reply,
        });
        let stopped = || StoreError::transient("the store's writer thread has stopped");
        self.queue
            .as_ref()
            .ok_or_else(stopped)?
            .send(job)
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Runs on the writer thread: takes every write queued so far, applies them in one
/// transaction, commits once, answers them all; until the store is dropped.
fn writer_loop(db: &Database, jobs: &mpsc::Receiver<Box<dyn WriteJob>>) {
    let mut seqs = NextSeqs::default();
    while let Ok(first) = jobs.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        commit_batch(db, batch, &mut seqs);
    }
}

/// Applies `batch` in one transaction. If one write fails, the transaction is rolled back and
/// every write of the batch runs alone, so only the failing one sees its error.
fn commit_batch(db: &Database, mut batch: Vec<Box<dyn WriteJob>>, seqs: &mut NextSeqs) {
    let tx = match db.begin_write() {
        Ok(tx) => tx,
        Err(e) => {
            let e = be(e);
            for job in batch {
                job.finish(Err(StoreError::transient(e.to_string())));
            }
            return;
        }
    };
    let failed = match Tables::open_with(&tx, std::mem::take(seqs)) {
        Ok(mut tables) => {
            let mut failed = None;
            for job in batch.iter_mut() {
                if let Err(e) = job.apply(&mut tables) {
                    failed = Some(e);
                    break;
                }
            }
            *seqs = std::mem::take(&mut tables.seqs);
            failed
        }
        Err(e) => Some(e),
    };
    if failed.is_some() {
        *seqs = NextSeqs::default(); // what it learned is rolled back with the transaction
    }
    match failed {
        Some(e) if batch.len() == 1 => {
            drop(tx); // rolls back
            if let Some(job) = batch.pop() {
                job.finish(Err(e));
            }
        }
        Some(_) => {
            drop(tx); // rolls back
            for job in batch {
                commit_batch(db, vec![job], seqs);
            }
        }
        None => {
            let outcome = tx.commit().map_err(be);
            if outcome.is_err() {
                *seqs = NextSeqs::default();
            }
            for job in batch {
                let outcome = match &outcome {
                    Ok(()) => Ok(()),
                    Err(e) => Err(StoreError::transient(e.to_string())),
                };
                job.finish(outcome);
            }
        }
    }
}
