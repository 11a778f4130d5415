//! The model path under load: `n` agents on the OpenAI-compatible backend each make one call to
//! a local endpoint that answers after a fixed delay. It measures how many calls agentd keeps in
//! flight at once (all of them, if nothing but the endpoint holds a call up) and agentd's own
//! overhead per call: from a message's send to its agent being idle again, minus the time the
//! endpoint held that call (its delay, its timer's resolution and its own work), in a second
//! round of calls (the first touches the memory the calls need).

use agentd_actors::{AgentSystem, AgentType, AgentTypes};
use agentd_bus::InProcessBus;
use agentd_models::{HttpSettings, OpenAiModel};
use agentd_proto::{AgentStatus, Event, SpawnRequest};
use agentd_store::MemoryStore;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ANSWER: &str = r#"{"choices":[{"message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#;

/// The same answer streamed (`stream: true` with `stream_options.include_usage`): a text delta,
/// the finish reason, the usage, the end.
const STREAMED_ANSWER: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"}}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n",
    "data: [DONE]\n\n",
);

/// What the endpoint saw.
struct Endpoint {
    url: String,
    peak: Arc<AtomicUsize>,
    /// Per calling agent (named in its message, `go <agent id>`), how long the endpoint held
    /// its last call, from reading the request to writing the answer: the delay, plus the
    /// endpoint's timer resolution and its own work, which are not agentd's to count.
    holds: Holds,
}

/// A chat-completions endpoint on its own thread (so it takes nothing from agentd's): each
/// request is answered `delay` after it arrived; the most requests it held at once is `peak`.
/// With `keep_alive` a connection serves one request after another, as providers' do;
/// without, it closes after each answer, so every call opens a connection.
fn endpoint(backlog: u32, delay: Duration, keep_alive: bool) -> anyhow::Result<Endpoint> {
    let socket = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = socket.local_addr()?;
    drop(socket);
    let peak = Arc::new(AtomicUsize::new(0));
    let seen = peak.clone();
    let holds: Holds = Arc::default();
    let held = holds.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready_tx.send(Err(e.to_string()));
                return;
            }
        };
        rt.block_on(async move {
            let listener = match tokio::net::TcpSocket::new_v4()
                .and_then(|s| s.bind(addr).map(|()| s))
                .and_then(|s| s.listen(backlog))
            {
                Ok(l) => l,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return;
                }
            };
            let _ = ready_tx.send(Ok(()));
            let in_flight = Arc::new(AtomicUsize::new(0));
            while let Ok((mut conn, _)) = listener.accept().await {
                let (in_flight, seen, held) = (in_flight.clone(), seen.clone(), held.clone());
                tokio::spawn(async move {
                    // One request after another on the connection while the client keeps it.
                    while let Ok(body) = read_request(&mut conn).await {
                        let arrived = Instant::now();
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        seen.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(delay).await;
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        let (content_type, answer) = if asks_stream(&body) {
                            ("text/event-stream", STREAMED_ANSWER)
                        } else {
                            ("application/json", ANSWER)
                        };
                        let connection = if keep_alive { "keep-alive" } else { "close" };
                        let reply = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: {connection}\r\n\r\n{answer}",
                            answer.len()
                        );
                        let written = conn.write_all(reply.as_bytes()).await;
                        if let (Some(agent), Ok(mut holds)) = (caller_of(&body), held.lock()) {
                            holds.insert(agent, arrived.elapsed());
                        }
                        if written.is_err() || !keep_alive {
                            return;
                        }
                    }
                });
            }
        });
    });
    ready_rx
        .recv()?
        .map_err(|e| anyhow::anyhow!("starting the endpoint: {e}"))?;
    Ok(Endpoint {
        url: format!("http://{addr}"),
        peak,
        holds,
    })
}

/// How long the endpoint held each agent's last call.
type Holds = Arc<std::sync::Mutex<HashMap<String, Duration>>>;

/// Whether a request asks for a streamed answer.
fn asks_stream(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .is_ok_and(|request| request["stream"] == serde_json::Value::Bool(true))
}

/// The agent a request's message names (`go <agent id>`).
fn caller_of(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let at = text.find("go ")? + 3;
    text.get(at..at + 36).map(str::to_string)
}

/// Reads one request's head and answers its body.
async fn read_request(conn: &mut tokio::net::TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = conn.read(&mut chunk).await?;
                if n == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Ok(buf.split_off(end + 4));
        }
    }
}

/// Sends each of `ids` one message and answers, per agent, the time from the send to the agent
/// idle again.
async fn round(
    sys: &AgentSystem,
    bus: &InProcessBus,
    ids: &[String],
    delay: Duration,
) -> anyhow::Result<HashMap<String, Duration>> {
    let n = ids.len();
    let mut events = bus.subscribe();
    let mut sent: HashMap<String, Instant> = HashMap::with_capacity(n);
    for id in ids {
        sent.insert(id.clone(), Instant::now());
        sys.send(id, &format!("go {id}"), false)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let mut took = HashMap::with_capacity(n);
    let deadline = tokio::time::Instant::now() + delay + Duration::from_secs(60);
    while took.len() < n {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .map_err(|_| anyhow::anyhow!("{} of {n} calls answered in time", took.len()))?;
        if let Ok(Event::StatusChanged {
            agent_id,
            to: AgentStatus::Idle,
            ..
        }) = event
            && let Some(at) = sent.remove(&agent_id)
        {
            took.insert(agent_id, at.elapsed());
        }
    }
    Ok(took)
}

/// What [`model_io`] measured.
pub struct ModelIo {
    /// `model_calls_in_flight_peak`.
    pub peak: f64,
    /// `model_overhead_p50_us`.
    pub overhead_p50_us: f64,
    /// How much longer than its delay the endpoint itself held the measured round's calls, p50
    /// (a diagnostic: what the endpoint's timer and work add, taken out of the overhead).
    pub endpoint_excess_p50_us: f64,
}

/// How the endpoint of [`model_io`] answers.
#[derive(Debug, Clone, Copy)]
pub struct Answers {
    /// Streamed (SSE) rather than whole.
    pub stream: bool,
    /// On connections kept alive rather than one connection per call.
    pub keep_alive: bool,
}

/// [`ModelIo`] for `n` agents and an endpoint that answers after `delay`, as `answers` says.
pub async fn model_io(n: usize, delay: Duration, answers: Answers) -> anyhow::Result<ModelIo> {
    let backlog = u32::try_from(n + 64).unwrap_or(u32::MAX);
    let endpoint = endpoint(backlog, delay, answers.keep_alive)?;
    let model = OpenAiModel::new(
        HttpSettings {
            base_url: endpoint.url.clone(),
            api_key: "bench".into(),
            timeout: Duration::from_secs(60),
            stream: answers.stream,
            idle_timeout: Duration::from_secs(60),
            max_retries: 0,
            backoff: Duration::from_millis(10),
        },
        "bench".into(),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let caller = AgentType {
        name: "caller".into(),
        title: "Caller".into(),
        ..Default::default()
    };
    let types = AgentTypes::new([caller]).map_err(|e| anyhow::anyhow!("{e}"))?;
    let service = agentd::Builder::new(agentd::Settings::from_overrides("")?)
        .store(Arc::new(MemoryStore::new()))
        .model(Arc::new(model))
        .types(types)
        .event_buffer(4 * n + 64)
        .config(|config| {
            config.arbiters = 1;
            config.limits.max_live_agents = 1_000_000;
        })
        .build()
        .await?;
    let (sys, bus) = (service.system, service.bus);
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        let rec = sys
            .spawn(SpawnRequest {
                agent_type: Some("caller".into()),
                ..Default::default()
            })
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        ids.push(rec.id);
    }
    // A first round touches the memory every call needs (connections, buffers, tasks) for the
    // first time; the second, measured, round reuses it as a running service does.
    round(&sys, &bus, &ids, delay).await?;
    let took = round(&sys, &bus, &ids, delay).await?;
    let holds = endpoint.holds.lock().map(|h| h.clone()).unwrap_or_default();
    let mut overheads = Vec::with_capacity(n);
    let mut excess = Vec::with_capacity(n);
    for (agent, took) in &took {
        let hold = holds.get(agent).copied().unwrap_or(delay);
        overheads.push(took.saturating_sub(hold).as_secs_f64() * 1e6);
        excess.push(hold.saturating_sub(delay).as_secs_f64() * 1e6);
    }
    sys.shutdown().await;
    Ok(ModelIo {
        peak: endpoint.peak.load(Ordering::SeqCst) as f64,
        overhead_p50_us: crate::percentile(&mut overheads, 0.5),
        endpoint_excess_p50_us: crate::percentile(&mut excess, 0.5),
    })
}
