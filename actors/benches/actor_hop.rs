//! Criterion micro-benchmark of one actor hop: a typed message sent to an actor on the same
//! Arbiter and its answer awaited. Every envelope crosses a few of these (router, agent), so
//! this is the floor under the in-process round trip.
//! `cargo bench -p agentd-actors --bench actor_hop`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use actix::prelude::*;
use criterion::{Criterion, criterion_group, criterion_main};
use std::time::{Duration, Instant};

/// An actor that answers at once.
struct Echo;

impl Actor for Echo {
    type Context = Context<Self>;
}

/// A request carrying a number.
#[derive(Message)]
#[rtype(result = "u64")]
struct Ping(u64);

impl Handler<Ping> for Echo {
    type Result = u64;

    fn handle(&mut self, Ping(n): Ping, _: &mut Self::Context) -> u64 {
        n + 1
    }
}

fn actor_hop(c: &mut Criterion) {
    let system = actix_rt::System::new();
    let addr = system.block_on(async { Echo.start() });
    c.bench_function("actor_hop_send_and_answer", |b| {
        b.iter_custom(|iters| {
            system.block_on(async {
                let start = Instant::now();
                for i in 0..iters {
                    let _ = addr.send(Ping(i)).await.unwrap();
                }
                start.elapsed()
            })
        })
    });
    c.bench_function("actor_hop_do_send", |b| {
        b.iter_custom(|iters| {
            system.block_on(async {
                let start = Instant::now();
                for i in 0..iters {
                    addr.do_send(Ping(i));
                }
                // The last one answered: all were handled.
                let _ = addr.send(Ping(0)).await.unwrap();
                start.elapsed().max(Duration::from_nanos(1))
            })
        })
    });
}

criterion_group!(benches, actor_hop);
criterion_main!(benches);
