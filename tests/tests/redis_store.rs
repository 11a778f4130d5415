//! The Redis store passes the same conformance suite as the memory and embedded stores, on a
//! private redis-server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_store::RedisStore;
use agentd_store::conformance;
use agentd_tests::RedisServer;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_conforms() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), "conf").await.unwrap();
    conformance::run_all(Arc::new(store.clone())).await;
    // Deleted agents leave no key behind.
    assert_eq!(store.keys_mentioning("d-child").await.unwrap(), 0);
    assert_eq!(store.keys_mentioning("i-agent").await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_is_a_clear_error() {
    let server = RedisServer::start();
    let url = server.url();
    drop(server);
    let err = RedisStore::connect(&url, "x")
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("redis"), "{err}");
}
