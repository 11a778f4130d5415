//! Raw Redis, the baseline the Redis scenarios are compared with: a private redis-server, and
//! what a plain client gets from it (one-way `XADD`/`XREADGROUP` throughput, a round trip).

use crate::percentile;
use anyhow::{Context as _, bail};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private redis-server (killed on drop; its directory removed with it).
pub(crate) struct Redis(Child, pub(crate) u16, #[allow(dead_code)] tempfile::TempDir);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn start_redis() -> anyhow::Result<Redis> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let dir = tempfile::tempdir()?;
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .spawn()
        .context("redis-server must be installed")?;
    let url = format!("redis://127.0.0.1:{port}/");
    let t = Instant::now();
    while redis::Client::open(url.as_str())?.get_connection().is_err() {
        if t.elapsed() > Duration::from_secs(10) {
            bail!("redis-server did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Redis(child, port, dir))
}

/// Raw XADD → XREADGROUP → XACK of `payload`-byte entries, 100 per pipeline / COUNT 100.
pub(crate) fn redis_raw_msgs_per_s(url: &str, n: usize, payload: usize) -> anyhow::Result<f64> {
    let mut con = redis::Client::open(url)?.get_connection()?;
    let _: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("raw")
        .arg("g")
        .arg("0")
        .arg("MKSTREAM")
        .query(&mut con);
    let body = vec![b'x'; payload];
    let t = Instant::now();
    let mut sent = 0;
    let mut got = 0;
    while got < n {
        if sent < n {
            let mut p = redis::pipe();
            for _ in 0..100 {
                p.cmd("XADD")
                    .arg("raw")
                    .arg("*")
                    .arg("m")
                    .arg(&body)
                    .ignore();
            }
            p.query::<()>(&mut con)?;
            sent += 100;
        }
        let reply: Option<redis::streams::StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("g")
            .arg("c")
            .arg("COUNT")
            .arg(100)
            .arg("STREAMS")
            .arg("raw")
            .arg(">")
            .query(&mut con)?;
        let ids: Vec<String> = reply
            .map(|r| r.keys)
            .unwrap_or_default()
            .into_iter()
            .flat_map(|k| k.ids)
            .map(|i| i.id)
            .collect();
        if !ids.is_empty() {
            redis::cmd("XACK")
                .arg("raw")
                .arg("g")
                .arg(&ids)
                .query::<i64>(&mut con)?;
            got += ids.len();
        }
    }
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

/// Raw ping-pong through two streams (XADD, blocking XREAD on the other side).
pub(crate) fn redis_raw_roundtrip_p50_us(
    url: &str,
    n: usize,
    payload: usize,
) -> anyhow::Result<f64> {
    let client = redis::Client::open(url)?;
    let mut echo = client.get_connection()?;
    let mut con = client.get_connection()?;
    let body = vec![b'x'; payload];
    let echoer = std::thread::spawn(move || -> anyhow::Result<()> {
        let mut last = "0".to_string();
        for _ in 0..n {
            let reply: redis::streams::StreamReadReply = redis::cmd("XREAD")
                .arg("BLOCK")
                .arg(0)
                .arg("STREAMS")
                .arg("ping")
                .arg(&last)
                .query(&mut echo)?;
            for k in reply.keys {
                for id in k.ids {
                    last = id.id.clone();
                    let m: Vec<u8> = id.get("m").unwrap_or_default();
                    redis::cmd("XADD")
                        .arg("pong")
                        .arg("*")
                        .arg("m")
                        .arg(m)
                        .query::<String>(&mut echo)?;
                }
            }
        }
        Ok(())
    });
    let mut last = "0".to_string();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        redis::cmd("XADD")
            .arg("ping")
            .arg("*")
            .arg("m")
            .arg(&body)
            .query::<String>(&mut con)?;
        let reply: redis::streams::StreamReadReply = redis::cmd("XREAD")
            .arg("BLOCK")
            .arg(0)
            .arg("STREAMS")
            .arg("pong")
            .arg(&last)
            .query(&mut con)?;
        if let Some(id) = reply.keys.first().and_then(|k| k.ids.last()) {
            last = id.id.clone();
        }
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    echoer
        .join()
        .map_err(|_| anyhow::anyhow!("echo thread"))??;
    Ok(percentile(&mut samples, 0.5))
}
