//! `/v1/events` of the real `agentd` binary with an agent whose provider streams its answer:
//! `text_delta` events arrive with the lifecycle events, every event has an `id:`, a client that
//! reconnects with `Last-Event-ID` first gets exactly what came after that id, and an id that is
//! no longer kept gets `event: lagged`. In one process (the ring of recent events) and with Redis
//! (entry ids of `<ns>:events` and `<ns>:deltas`; deltas never go to `<ns>:events`; a client
//! resumes on another process from the streams themselves). On an idle service the response
//! starts at once: its headers and first bytes never wait for an event or the 15 s keep-alive.
//! Without a filter a stream carries every tree's events, except to a caller scoped to a root.

use agentd_tests::process::wait_balanced;
use agentd_tests::streaming_provider::{StreamingProvider, openai_text};
use agentd_tests::{AgentdProcess, TestConnection, TestRedis};
use serde_json::{Value, json};
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One SSE frame.
#[derive(Debug, Clone, PartialEq)]
struct Frame {
    id: Option<String>,
    event: String,
    data: Value,
}

/// Follows `/v1/events` of `p` (resuming after `last_id`) on a thread; frames arrive on the
/// channel. Answers once the response has started.
fn follow(p: &AgentdProcess, last_id: Option<&str>) -> mpsc::Receiver<Frame> {
    let headers: Vec<(&str, &str)> = last_id
        .map(|id| ("Last-Event-ID", id))
        .into_iter()
        .collect();
    follow_with(p, &headers)
}

/// [`follow`] with request headers `headers`.
fn follow_with(p: &AgentdProcess, headers: &[(&str, &str)]) -> mpsc::Receiver<Frame> {
    let (tx, rx) = mpsc::channel();
    let (started_tx, started) = mpsc::channel();
    let mut req = ureq::get(&format!("{}/v1/events", p.url));
    for (name, value) in headers {
        req = req.set(name, value);
    }
    std::thread::spawn(move || {
        let resp = req.call().unwrap();
        let _ = started_tx.send(());
        let (mut id, mut event, mut data) = (None, String::new(), String::new());
        for line in std::io::BufReader::new(resp.into_reader()).lines() {
            let Ok(line) = line else { return };
            if line.is_empty() {
                if !data.is_empty() {
                    let frame = Frame {
                        id: id.take(),
                        event: std::mem::take(&mut event),
                        data: serde_json::from_str(&data).unwrap(),
                    };
                    if tx.send(frame).is_err() {
                        return;
                    }
                }
                data.clear();
                continue;
            }
            if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("event: ") {
                event = v.to_string();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = v.to_string();
            }
        }
    });
    started
        .recv_timeout(Duration::from_secs(10))
        .expect("the event stream started");
    rx
}

/// Frames until one satisfies `until` (included).
fn frames_until(rx: &mpsc::Receiver<Frame>, mut until: impl FnMut(&Frame) -> bool) -> Vec<Frame> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let frame = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("timed out; frames so far: {out:#?}"));
        let done = until(&frame);
        out.push(frame);
        if done {
            return out;
        }
    }
}

/// A provider streaming "piece0 … piece11" a piece every 120 ms (more than the 100 ms the
/// deltas are coalesced to), so each piece is its own `text_delta`.
fn provider() -> (StreamingProvider, String) {
    let pieces: Vec<String> = (0..12).map(|i| format!("piece{i} ")).collect();
    let text = pieces.concat();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let provider = StreamingProvider::start(vec![
        openai_text(&refs, "stop", Some((20, 12))).paced(1, Duration::from_millis(120)),
    ]);
    (provider, text)
}

fn model_env(provider: &StreamingProvider) -> Vec<(&'static str, String)> {
    vec![
        ("AGENTD__MODEL__BACKEND", "openai".to_string()),
        ("AGENTD__MODEL__BASE_URL", provider.url.clone()),
        ("AGENTD__MODEL__MODEL", "stream-test".to_string()),
    ]
}

/// Spawns an agent that answers once, and reads the stream until its answer is complete:
/// answers the frames and the text of its deltas.
/// The frames of one streamed answer, up to the later of its agent going idle and its last
/// delta: with Redis the deltas travel on a stream of their own, so the two streams' entries
/// may reach a follower in either order around the end of the turn.
fn one_streamed_answer(
    p: &AgentdProcess,
    rx: &mpsc::Receiver<Frame>,
    text: &str,
) -> (String, Vec<Frame>) {
    let agent = p.spawn("subagent", "tell me");
    let (mut idle, mut streamed) = (false, String::new());
    let frames = frames_until(rx, |f| {
        if f.data["agent_id"] == agent {
            match f.event.as_str() {
                "status_changed" if f.data["to"] == "idle" => idle = true,
                "text_delta" => streamed.push_str(f.data["text"].as_str().unwrap_or_default()),
                _ => {}
            }
        }
        idle && streamed == text
    });
    (agent, frames)
}

/// What every deployment must show: ids on every event, the deltas' text, a resume after a
/// frame in the middle getting exactly the frames after it.
fn check_ids_deltas_and_resume(
    p: &AgentdProcess,
    resume_at: &AgentdProcess,
    text: &str,
) -> Vec<Frame> {
    let rx = follow(p, None);
    let (agent, frames) = one_streamed_answer(p, &rx, text);
    assert!(
        frames.iter().all(|f| f.id.is_some()),
        "every event has an id: {frames:#?}"
    );
    let deltas: Vec<&Frame> = frames
        .iter()
        .filter(|f| f.event == "text_delta" && f.data["agent_id"] == agent)
        .collect();
    assert!(deltas.len() >= 6, "the text arrived in pieces: {deltas:#?}");
    let joined: String = deltas
        .iter()
        .map(|f| f.data["text"].as_str().unwrap())
        .collect();
    assert_eq!(joined, text, "{frames:#?} {:?}", p.texts(&agent));
    let seqs: Vec<u64> = deltas
        .iter()
        .map(|f| f.data["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (0..deltas.len() as u64).collect::<Vec<_>>());
    let answer = p.texts(&agent);
    assert!(answer.iter().any(|t| t == text), "stored whole: {answer:?}");

    // A client that saw up to the third delta reconnects: it gets exactly what followed.
    let at = frames.iter().position(|f| f.id == deltas[2].id).unwrap();
    let expected: Vec<Frame> = frames[at + 1..].to_vec();
    let last = expected.last().unwrap().clone();
    let resumed = follow(resume_at, deltas[2].id.as_deref());
    let replayed = frames_until(&resumed, |f| f.id == last.id);
    assert_eq!(
        replayed, expected,
        "the resumed stream repeats nothing and misses nothing"
    );
    frames
}

/// A client or proxy with a read timeout shorter than the keep-alive's 15 s sees a stream on an
/// idle service, not a hang: the status line, the headers and a first comment arrive at once.
#[test]
fn an_idle_service_starts_the_event_stream_at_once() {
    let p = AgentdProcess::start(&[("AGENTD__STORE__KIND", "memory".to_string())]);
    let addr = p.url.strip_prefix("http://").unwrap();
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    write!(
        conn,
        "GET /v1/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let asked = Instant::now();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            got => panic!(
                "no response head within 3 s ({got:?}; read so far: {:?})",
                String::from_utf8_lossy(&head)
            ),
        }
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    // The body starts at once too, with a comment (one chunk), so a client that waits for the
    // first bytes of the stream (or a proxy that buffers until the body starts) goes on.
    let mut body = Vec::new();
    while !body.ends_with(b"\n\n") {
        match conn.read(&mut byte) {
            Ok(1) => body.push(byte[0]),
            got => panic!(
                "no first piece of the stream within 3 s ({got:?}; read so far: {:?})",
                String::from_utf8_lossy(&body)
            ),
        }
    }
    let body = String::from_utf8_lossy(&body);
    assert!(body.ends_with(": connected\n\n"), "{body:?}");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
}

/// Without a filter the stream is every tree's events; a caller scoped to a root by
/// `X-Agentd-Root` gets that root's tree only, as with `?root_id=`, and a filter outside it is
/// `403 not_ancestor`.
#[test]
fn an_unfiltered_stream_is_every_tree_s_and_a_scoped_caller_s_is_its_tree() {
    let p = AgentdProcess::start(&[("AGENTD__STORE__KIND", "memory".to_string())]);
    let mine = p.spawn("subagent", "first");
    let other = p.spawn("subagent", "first");
    p.wait_for("both idle", |p| {
        p.status(&mine) == "idle" && p.status(&other) == "idle"
    });
    let everything = follow(&p, None);
    let scoped = follow_with(&p, &[("X-Agentd-Root", &mine)]);
    for id in [&other, &mine] {
        p.post(
            &format!("/v1/agents/{id}/messages"),
            json!({"text": "again"}),
        )
        .unwrap();
    }
    let idle_again = |id: &str| {
        let id = id.to_string();
        move |f: &Frame| f.data["agent_id"] == id.as_str() && f.data["to"] == "idle"
    };
    let seen = frames_until(&scoped, idle_again(&mine));
    assert!(
        seen.iter().all(|f| f.data["agent_id"] == mine.as_str()),
        "the scoped stream shows its tree only: {seen:#?}"
    );
    let all = frames_until(&everything, |f| {
        f.data["agent_id"] == mine.as_str() && f.data["to"] == "idle"
    });
    assert!(
        all.iter().any(|f| f.data["agent_id"] == other.as_str()),
        "the unfiltered stream shows every tree: {all:#?}"
    );
    let outside = ureq::get(&format!("{}/v1/events?agent_id={other}", p.url))
        .set("X-Agentd-Root", &mine)
        .call();
    match outside {
        Err(ureq::Error::Status(403, r)) => {
            assert_eq!(r.into_json::<Value>().unwrap()["code"], "not_ancestor");
        }
        Err(e) => panic!("a filter outside the scope: {e}"),
        Ok(r) => panic!("a filter outside the scope answered {}", r.status()),
    }
}

#[test]
fn one_process_names_every_event_and_resumes_from_its_ring() {
    let (provider, text) = provider();
    let mut env = model_env(&provider);
    env.push(("AGENTD__STORE__KIND", "memory".to_string()));
    let p = AgentdProcess::start(&env);
    check_ids_deltas_and_resume(&p, &p, &text);

    // An id the process does not hold (another run's) is told so, then the live events come.
    let rx = follow(&p, Some("1-1"));
    let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(first.event, "lagged");
    assert_eq!(first.data, json!({"missed": null}));
    assert_eq!(first.id, None);
    p.post("/v1/agents", json!({"agent_type": "subagent"}))
        .unwrap();
    let next = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(next.event, "spawned");
}

#[test]
fn with_redis_deltas_have_their_own_stream_and_any_process_resumes() {
    let redis = TestRedis::from_env();
    let (provider, text) = provider();
    let mut env = model_env(&provider);
    env.extend(redis.env());
    env.extend([
        ("AGENTD__REDIS__NAMESPACE", "resume".to_string()),
        ("AGENTD__REDIS__PARTITIONS", "4".to_string()),
    ]);
    let a = AgentdProcess::start(&env);
    let b = AgentdProcess::start(&env);
    // A partition that moves while the agent answers would have its turn aborted and answered
    // again by the new owner: the answer is followed once the partitions stay where they are.
    wait_balanced(&a, &b, 4);
    // b has never seen these events: the resume reads them from Redis.
    let frames = check_ids_deltas_and_resume(&a, &b, &text);
    let id = frames[0].id.clone().unwrap();
    let (events_id, deltas_id) = id.split_once(',').expect("an id names both streams");
    for part in [events_id, deltas_id] {
        let (ms, seq) = part.split_once('-').expect("a Redis entry id");
        assert!(
            ms.parse::<u64>().is_ok() && seq.parse::<u64>().is_ok(),
            "{id}"
        );
    }

    let mut con = redis.client();
    let types = |key: &str, con: &mut TestConnection| -> Vec<String> {
        let range: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(key)
            .arg("-")
            .arg("+")
            .query(con)
            .unwrap();
        range
            .ids
            .iter()
            .map(|e| e.get::<String>("type").unwrap_or_default())
            .collect()
    };
    let events = types("resume:events", &mut con);
    let deltas = types("resume:deltas", &mut con);
    assert!(
        !events.is_empty() && !events.iter().any(|t| t == "text_delta"),
        "{events:?}"
    );
    assert!(
        deltas.len() >= 6 && deltas.iter().all(|t| t == "text_delta"),
        "{deltas:?}"
    );

    // Once the event stream no longer holds the id, a resume is told it lagged.
    let _: i64 = redis::cmd("XTRIM")
        .arg("resume:events")
        .arg("MAXLEN")
        .arg(0)
        .query(&mut con)
        .unwrap();
    let _: String = redis::cmd("XADD")
        .arg("resume:events")
        .arg("*")
        .arg("type")
        .arg("filler")
        .query(&mut con)
        .unwrap();
    let rx = follow(&b, Some(&id));
    let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(first.event, "lagged", "{first:?}");
}
