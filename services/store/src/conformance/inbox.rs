//! The durable inbox: each message once, in order.

use super::*;

pub(super) async fn inbox_is_durable_once_and_ordered(store: &dyn ThreadStore) {
    let (a, b, c) = (envelope("a"), envelope("b"), envelope("c"));
    assert!(store.inbox_push("i-agent", &a).await.unwrap());
    assert!(store.inbox_push("i-agent", &b).await.unwrap());
    assert!(
        !store.inbox_push("i-agent", &a).await.unwrap(),
        "a redelivered envelope is queued once"
    );
    assert!(store.inbox_push("i-agent", &c).await.unwrap());
    assert_eq!(
        store.inbox_pending("i-agent").await.unwrap(),
        vec![a.clone(), b.clone(), c.clone()]
    );
    store.inbox_done("i-agent", b.id).await.unwrap();
    assert_eq!(
        store.inbox_pending("i-agent").await.unwrap(),
        vec![a.clone(), c.clone()]
    );
    assert!(
        !store.inbox_push("i-agent", &b).await.unwrap(),
        "done envelopes are still remembered"
    );
    store.inbox_done("i-agent", a.id).await.unwrap();
    store.inbox_done("i-agent", c.id).await.unwrap();
    assert!(store.inbox_pending("i-agent").await.unwrap().is_empty());
    store.inbox_push("i-agent", &envelope("d")).await.unwrap();
    store.put_agent(&record("i-agent", None, 50)).await.unwrap();
    store.delete_agent("i-agent").await.unwrap();
    assert!(store.inbox_pending("i-agent").await.unwrap().is_empty());
    assert!(
        store.inbox_push("i-agent", &a).await.unwrap(),
        "delete forgets the window too"
    );
    store.delete_agent("i-agent").await.unwrap();
}
