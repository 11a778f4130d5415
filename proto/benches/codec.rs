//! Criterion micro-benchmarks of the wire codec: every envelope crossing Redis is encoded once
//! and decoded once, so these bound what the bus can do per core.
//! `cargo bench -p agentd-proto --bench codec`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_proto::codec::{decode_envelope, encode_envelope};
use agentd_proto::{Address, Envelope, InboxItem, Item};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

/// An inbox message with a 200-byte text, the payload size of the bench's Redis scenarios.
fn envelope() -> Envelope {
    Envelope::new(
        Address::System,
        Address::agent("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"),
        Item::Inbox(InboxItem::message("x".repeat(200))),
        1_700_000_000_000,
    )
}

fn codec(c: &mut Criterion) {
    let env = envelope();
    let bytes = encode_envelope(&env).unwrap();
    c.bench_function("encode_envelope_200b", |b| {
        b.iter(|| encode_envelope(black_box(&env)).unwrap())
    });
    c.bench_function("decode_envelope_200b", |b| {
        b.iter(|| decode_envelope(black_box(&bytes), 1 << 20).unwrap())
    });
}

criterion_group!(benches, codec);
criterion_main!(benches);
