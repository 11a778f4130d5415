//! Threads: order and de-duplication, on short and long threads.

use super::*;

pub(super) async fn threads_keep_order_and_deduplicate(store: &dyn ThreadStore) {
    let a = entry("one");
    let b = entry("two");
    assert!(store.append("t1", &a).await.unwrap());
    assert!(store.append("t1", &b).await.unwrap());
    assert!(
        !store.append("t1", &a).await.unwrap(),
        "a replayed entry is not appended twice"
    );
    assert!(
        store.append("t2", &a).await.unwrap(),
        "ids de-duplicate per thread"
    );
    let t = store.thread("t1").await.unwrap();
    assert_eq!(t, vec![a.clone(), b.clone()]);
    assert!(store.thread("empty").await.unwrap().is_empty());
    let c = entry("three");
    store
        .replace_thread("t1", &[b.clone(), c.clone()])
        .await
        .unwrap();
    assert_eq!(
        texts(&store.thread("t1").await.unwrap()),
        vec!["two", "three"]
    );
    assert!(
        store.append("t1", &a).await.unwrap(),
        "an entry removed by replace can come back"
    );
    assert!(!store.append("t1", &c).await.unwrap());
    assert_eq!(
        texts(&store.thread("t1").await.unwrap()),
        vec!["two", "three", "one"]
    );
    store.replace_thread("t1", &[]).await.unwrap();
    assert!(store.thread("t1").await.unwrap().is_empty());
}

/// A thread of [`LONG_THREAD`] entries, written one by one, in batches and with turn starts,
/// each replayed at once and again later (before and after the thread grew long), holds each
/// entry once, in order; replaced by a long thread or a short one, it still refuses the new
/// entries again and takes back one it no longer holds.
pub(super) async fn long_threads_keep_order_and_deduplicate(store: &dyn ThreadStore) {
    use agentd_ports::StoreWrite;
    let id = "t-long";
    let entries: Vec<ThreadEntry> = (0..LONG_THREAD).map(|i| entry(&format!("e{i}"))).collect();
    store.put_agent(&record(id, None, 1)).await.unwrap();
    // Each entry written one of the ways agents write them: looked up first, or (a first run's)
    // known new; alone, in an own flush, or with a push that starts a turn.
    for (i, e) in entries.iter().enumerate() {
        let checked = StoreWrite::Append {
            agent_id: id.into(),
            entry: Arc::new(e.clone()),
        };
        let new = StoreWrite::AppendNew {
            agent_id: id.into(),
            entry: Arc::new(e.clone()),
        };
        match i % 6 {
            0 => assert!(store.append(id, e).await.unwrap(), "entry {i} is new"),
            1 => store.append_new(id, e).await.unwrap(),
            2 => store.write_own_batch(id, &[checked]).await.unwrap(),
            3 => store.write_own_batch(id, &[new]).await.unwrap(),
            _ => {
                let env = envelope(&format!("input {i}"));
                let append = if i % 6 == 4 { checked } else { new };
                let start = [append, StoreWrite::PutAgent(Arc::new(record(id, None, 1)))];
                let pushed = store.inbox_push_then(id, &env, &start).await.unwrap();
                assert!(pushed.fresh, "push {i} is new");
                if !pushed.then_applied {
                    store.write_batch(&start).await.unwrap();
                }
                store.inbox_done(id, env.id).await.unwrap();
            }
        }
        // The entry again at once, and the first, the middle one so far and the previous.
        for again in [i, 0, i / 2, i.saturating_sub(1)] {
            assert!(
                !store.append(id, &entries[again]).await.unwrap(),
                "entry {again} replayed after entry {i}"
            );
        }
        store
            .write_own_batch(
                id,
                &[StoreWrite::Append {
                    agent_id: id.into(),
                    entry: Arc::new(entries[i / 3].clone()),
                }],
            )
            .await
            .unwrap();
    }
    assert_eq!(
        store.thread(id).await.unwrap(),
        entries,
        "each once, in order"
    );
    let (first, rest) = entries.split_at(1);
    store.replace_thread(id, rest).await.unwrap();
    for e in rest.iter().step_by(7) {
        assert!(!store.append(id, e).await.unwrap(), "kept by the replace");
    }
    assert!(store.append(id, &first[0]).await.unwrap(), "dropped by it");
    let mut expected = rest.to_vec();
    expected.push(first[0].clone());
    assert_eq!(store.thread(id).await.unwrap(), expected);
    store.replace_thread(id, &entries[..2]).await.unwrap();
    assert!(!store.append(id, &entries[1]).await.unwrap());
    assert!(store.append(id, &entries[LONG_THREAD - 1]).await.unwrap());
    assert_eq!(
        texts(&store.thread(id).await.unwrap()),
        vec!["e0", "e1", &format!("e{}", LONG_THREAD - 1)]
    );
}

/// Runs every property of threads against `store`, which must be empty of the ids they use.
pub async fn run(store: Arc<dyn ThreadStore>) {
    threads_keep_order_and_deduplicate(store.as_ref()).await;
    long_threads_keep_order_and_deduplicate(store.as_ref()).await;
}
