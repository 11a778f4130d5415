//! What callers hand agentd is checked alike at every door — the HTTP API, the Redis command
//! stream and tool arguments: titles trimmed, one line, bounded; prompts and messages bounded;
//! budgets positive. An unknown agent's event stream is refused, not empty. A command naming a
//! field it does not take is refused naming it: on the command stream it is dead-lettered,
//! acknowledged and answered with the refusal, while the envelope stays open to new fields.

use agentd_proto::codec::{decode_envelope, encode_envelope};
use agentd_proto::{Address, Budget, Command, Envelope, Item, SpawnRequest};
use agentd_tests::{AgentdProcess, RedisServer, eventually_blocking};
use serde_json::{Value, json};
use std::time::Duration;

/// Small limits, so the tests' inputs stay small.
fn limits() -> Vec<(&'static str, String)> {
    vec![
        ("AGENTD__LIMITS__MAX_TITLE_CHARS", "10".to_string()),
        ("AGENTD__LIMITS__MAX_PROMPT_BYTES", "100".to_string()),
        ("AGENTD__LIMITS__MAX_MESSAGE_BYTES", "50".to_string()),
    ]
}

fn err(r: Result<Value, (u16, Value)>) -> (u16, String) {
    let (status, body) = r.expect_err("refused");
    (status, body["code"].as_str().unwrap_or("").to_string())
}

fn bad(status: u16, code: &str) -> (u16, String) {
    (status, code.to_string())
}

#[test]
fn the_http_api_and_tool_arguments_check_titles_sizes_and_budgets() {
    let mut env = limits();
    env.push(("AGENTD__STORE__KIND", "memory".to_string()));
    let p = AgentdProcess::start(&env);

    // Titles: trimmed; empty, blank, multi-line, control characters or too long are refused.
    let v = p
        .post(
            "/v1/agents",
            json!({"agent_type": "lead", "title": "  Lead A \t"}),
        )
        .unwrap();
    assert_eq!(v["title"], "Lead A");
    let lead = v["agent_id"].as_str().unwrap().to_string();
    for title in ["", "   ", "two\nlines", "bell\u{7}", "eleven char"] {
        assert_eq!(
            err(p.post("/v1/agents", json!({"agent_type": "lead", "title": title}))),
            bad(400, "invalid_argument"),
            "{title:?}"
        );
    }
    // Sizes: a prompt over max_prompt_bytes, messages over max_message_bytes.
    let long = "x".repeat(101);
    assert_eq!(
        err(p.post("/v1/agents", json!({"agent_type": "lead", "prompt": long}))),
        bad(413, "payload_too_large")
    );
    let msg = "y".repeat(51);
    for (route, body) in [
        ("messages", json!({"text": msg})),
        ("reset", json!({"message": msg})),
        ("dependency", json!({"value": msg})),
        ("answer", json!({"answer": msg})),
    ] {
        assert_eq!(
            err(p.post(&format!("/v1/agents/{lead}/{route}"), body)),
            bad(413, "payload_too_large"),
            "{route}"
        );
    }
    // Budgets are positive, at spawn and when replaced.
    for budget in [
        json!({"max_tokens": 0}),
        json!({"max_cost_usd": -1.0}),
        json!({"max_cost_usd": 0.0}),
    ] {
        assert_eq!(
            err(p.post(
                "/v1/agents",
                json!({"agent_type": "lead", "budget": budget})
            )),
            bad(400, "invalid_argument"),
            "{budget}"
        );
        assert_eq!(
            err(p.post(&format!("/v1/agents/{lead}/budget"), budget.clone())),
            bad(400, "invalid_argument"),
            "{budget}"
        );
    }
    assert_eq!(p.get(&format!("/v1/agents/{lead}"))["budget"], Value::Null);

    // Tool arguments: the same checks.
    let tool = |name: &str, args: Value| p.post(&format!("/v1/agents/{lead}/tools/{name}"), args);
    assert_eq!(
        err(tool(
            "spawn_agent",
            json!({"prompt": "go", "title": "far too long a title"})
        )),
        bad(400, "invalid_argument")
    );
    assert_eq!(
        err(tool(
            "spawn_agent",
            json!({"prompt": "go", "budget": {"max_cost_usd": 0.0}})
        )),
        bad(400, "invalid_argument")
    );
    assert_eq!(
        err(tool("spawn_agent", json!({"prompt": long}))),
        bad(413, "payload_too_large")
    );
    let child = tool("spawn_agent", json!({"prompt": "go", "title": " Kid "})).unwrap();
    assert_eq!(child["title"], "Kid");
    let child = child["agent_id"].as_str().unwrap().to_string();
    assert_eq!(
        err(tool(
            "send_agent_followup",
            json!({"agent_id": child, "message": msg})
        )),
        bad(413, "payload_too_large")
    );
    assert_eq!(
        err(tool(
            "Manage",
            json!({"command": "send_message", "worker": "Researcher", "message": msg, "threadAlias": "r"})
        )),
        bad(413, "payload_too_large")
    );
    // Nothing of it was stored: the lead has one spawned child and no worker on alias `r`
    // (the demo script's own Manage call may have made the Researcher on `research`).
    let kids = p.get(&format!("/v1/agents/{lead}/children"));
    let kids = kids["agents"].as_array().unwrap();
    let spawned = kids.iter().filter(|k| k["channel"]["type"] == "spawn");
    assert_eq!(spawned.count(), 1, "{kids:?}");
    assert!(
        kids.iter().all(|k| k["channel"]["alias"] != "r"),
        "{kids:?}"
    );
    let roots = p.get("/v1/agents");
    assert_eq!(roots["agents"].as_array().unwrap().len(), 1, "{roots}");

    // The event stream of an agent that does not exist is a 404, not an empty stream; of
    // something that is no agent id at all, a 400.
    let unknown = "0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162";
    let (status, body) = p.get_status(&format!("/v1/events?agent_id={unknown}"), None);
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("agent_not_found"))
    );
    let (status, body) = p.get_status(&format!("/v1/events?root_id={unknown}"), None);
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("agent_not_found"))
    );
    let (status, body) = p.get_status("/v1/events?agent_id=no-such-agent", None);
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_argument"))
    );
    p.stop();
}

/// Writes `cmd` to `t:commands` with replies to `svc:replies` and waits for its reply.
fn call(con: &mut redis::Connection, cmd: Command) -> Result<Value, agentd_proto::AgentdError> {
    let mut env = Envelope::new(
        Address::External { name: "svc".into() },
        Address::System,
        Item::Command(cmd),
        1,
    );
    env.reply_to = Some("svc:replies".into());
    let bytes = send_command(con, encode_envelope(&env).unwrap(), &env.id.to_string());
    let Item::Reply(r) = decode_envelope(&bytes, 1 << 20).unwrap().item else {
        panic!("not a reply")
    };
    r.into_result()
}

/// Writes the MessagePack envelope `bytes` (id `id`, replies to `svc:replies`) to
/// `t:commands` and waits for its reply: the reply's envelope, as written.
fn send_command(con: &mut redis::Connection, bytes: Vec<u8>, id: &str) -> Vec<u8> {
    let _: String = redis::cmd("XADD")
        .arg("t:commands")
        .arg("*")
        .arg("m")
        .arg(bytes)
        .query(con)
        .unwrap();
    eventually_blocking(Duration::from_secs(15), "a reply", || {
        let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg("svc:replies")
            .arg("-")
            .arg("+")
            .query(con)
            .unwrap();
        reply.ids.iter().find_map(|entry| {
            let bytes: Vec<u8> = entry.get("m").unwrap();
            let reply: Value = rmp_serde::from_slice(&bytes).unwrap();
            (reply["causation_id"] == id).then_some(bytes)
        })
    })
}

fn code(r: Result<Value, agentd_proto::AgentdError>) -> String {
    r.expect_err("refused").code.as_str().to_string()
}

#[test]
fn the_redis_command_stream_checks_the_same() {
    let redis = RedisServer::start();
    let mut env = limits();
    env.push(("AGENTD__REDIS__URL", redis.url()));
    env.push(("AGENTD__REDIS__NAMESPACE", "t".to_string()));
    env.push(("AGENTD__REDIS__PARTITIONS", "4".to_string()));
    let p = AgentdProcess::start(&env);
    let mut con = redis.client();
    let spawn = |title: Option<&str>, prompt: Option<String>, budget: Option<Budget>| {
        Command::Spawn(Box::new(SpawnRequest {
            agent_type: Some("lead".into()),
            title: title.map(str::to_string),
            prompt,
            budget,
            ..Default::default()
        }))
    };
    let lead = call(&mut con, spawn(Some(" Lead "), None, None)).unwrap();
    assert_eq!(lead["title"], "Lead");
    let lead = lead["agent_id"].as_str().unwrap().to_string();
    assert_eq!(
        code(call(&mut con, spawn(Some("a\u{0}b"), None, None))),
        "invalid_argument"
    );
    assert_eq!(
        code(call(&mut con, spawn(Some("eleven char"), None, None))),
        "invalid_argument"
    );
    assert_eq!(
        code(call(&mut con, spawn(None, Some("x".repeat(101)), None))),
        "payload_too_large"
    );
    let negative = Budget {
        max_cost_usd: Some(-0.5),
        ..Budget::default()
    };
    assert_eq!(
        code(call(&mut con, spawn(None, None, Some(negative)))),
        "invalid_argument"
    );
    assert_eq!(
        code(call(
            &mut con,
            Command::SetBudget {
                agent_id: lead.clone(),
                budget: Budget {
                    max_tokens: Some(0),
                    ..Budget::default()
                },
            }
        )),
        "invalid_argument"
    );
    let msg = "y".repeat(51);
    assert_eq!(
        code(call(
            &mut con,
            Command::Send {
                agent_id: lead.clone(),
                text: msg.clone(),
                interrupt: false,
                idempotency_key: None,
            }
        )),
        "payload_too_large"
    );
    assert_eq!(
        code(call(
            &mut con,
            Command::InvokeTool {
                agent_id: Some(lead.clone()),
                tool: "spawn_agent".into(),
                args: json!({"prompt": "go", "title": "   "}),
            }
        )),
        "invalid_argument"
    );
    assert_eq!(
        p.get("/v1/agents")["agents"].as_array().unwrap().len(),
        1,
        "only the first spawn stored an agent"
    );
    p.stop();
}

/// Writes `item` to `t:commands` as a plain MessagePack map (as a service in any language
/// would), with `extra` fields on the envelope, and answers its reply's item.
fn call_map(con: &mut redis::Connection, item: Value, extra: Value) -> Value {
    let id = uuid::Uuid::now_v7().to_string();
    let mut envelope = json!({
        "v": 1, "id": id, "from": {"type": "external", "name": "svc"}, "to": {"type": "system"},
        "reply_to": "svc:replies", "sent_at": 1, "item": item,
    });
    for (k, v) in extra.as_object().unwrap() {
        envelope[k] = v.clone();
    }
    let bytes = send_command(con, rmp_serde::to_vec_named(&envelope).unwrap(), &id);
    let reply: Value = rmp_serde::from_slice(&bytes).unwrap();
    reply["item"].clone()
}

#[test]
fn a_command_naming_a_field_it_does_not_take_is_refused_dead_lettered_and_acknowledged() {
    let redis = RedisServer::start();
    let env = vec![
        ("AGENTD__REDIS__URL", redis.url()),
        ("AGENTD__REDIS__NAMESPACE", "t".to_string()),
        ("AGENTD__REDIS__PARTITIONS", "4".to_string()),
    ];
    let p = AgentdProcess::start(&env);
    let mut con = redis.client();

    let typo = json!({"kind": "command", "type": "spawn", "agent_type": "lead", "promt": "hi"});
    let reply = call_map(&mut con, typo, json!({}));
    assert_eq!(reply["error"]["code"], "invalid_argument", "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("`promt`"), "{message}");
    let nested = json!({"kind": "command", "type": "set_budget", "agent_id": "a",
                        "budget": {"max_token": 5}});
    let reply = call_map(&mut con, nested, json!({}));
    assert_eq!(reply["error"]["code"], "invalid_argument", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`max_token`"),
        "{reply}"
    );
    assert_eq!(p.get("/v1/agents")["agents"], json!([]), "nothing spawned");

    // Both are dead letters with the reason and the entry as written, and acknowledged.
    let dead: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg("t:dead")
        .arg("-")
        .arg("+")
        .query(&mut con)
        .unwrap();
    assert_eq!(dead.ids.len(), 2);
    for entry in &dead.ids {
        assert_eq!(entry.get::<String>("code").unwrap(), "invalid_argument");
        assert_eq!(entry.get::<String>("stream").unwrap(), "t:commands");
        let raw: Vec<u8> = entry.get("m").unwrap();
        assert!(!raw.is_empty());
    }
    let reason: String = dead.ids[0].get("reason").unwrap();
    assert!(reason.contains("`promt`"), "{reason}");
    let pending: Vec<redis::Value> = redis::cmd("XPENDING")
        .arg("t:commands")
        .arg("agentd")
        .query(&mut con)
        .unwrap();
    assert_eq!(pending.first(), Some(&redis::Value::Int(0)));

    // The envelope around a command stays open to fields of later versions.
    let spawn = json!({"kind": "command", "type": "spawn", "agentType": "lead", "title": "Open"});
    let reply = call_map(&mut con, spawn, json!({"trace": {"span": 7}}));
    assert_eq!(reply["result"]["title"], "Open", "{reply}");
    p.stop();
}

/// A JSON object or MessagePack map written with its entries in order, a key twice if asked
/// (what a careless client in another language sends).
struct Entries(Vec<(&'static str, Field)>);

/// A value of [`Entries`]: plain, or entries of its own.
enum Field {
    Plain(Value),
    Entries(Entries),
}

impl serde::Serialize for Entries {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl serde::Serialize for Field {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Plain(v) => v.serialize(s),
            Field::Entries(e) => e.serialize(s),
        }
    }
}

/// Entries of plain values.
fn entries(fields: &[(&'static str, Value)]) -> Entries {
    Entries(
        fields
            .iter()
            .map(|(k, v)| (*k, Field::Plain(v.clone())))
            .collect(),
    )
}

/// `POST path` with the raw JSON `body`: the status and the answer.
fn post_raw(p: &AgentdProcess, path: &str, body: &str) -> (u16, Value) {
    let res = ureq::post(&format!("{}{path}", p.url))
        .set("content-type", "application/json")
        .send_string(body);
    match res {
        Ok(r) => (r.status(), r.into_json().unwrap_or(Value::Null)),
        Err(ureq::Error::Status(s, r)) => (s, r.into_json().unwrap_or(Value::Null)),
        Err(e) => panic!("POST {path}: {e}"),
    }
}

/// A key given twice (`{"text":"a","text":"b"}`) is refused as the alias pair is, at any
/// depth, on every body and command (HTTP routes, `/v1/commands`, the Redis command stream, A2A),
/// never read as its last value; and a command's agent id that is no uuid is
/// `invalid_argument`, as in a path, on both doors.
#[test]
fn a_key_given_twice_or_an_agent_id_that_is_no_uuid_is_refused_at_every_door() {
    let redis = RedisServer::start();
    let env = vec![
        ("AGENTD__REDIS__URL", redis.url()),
        ("AGENTD__REDIS__NAMESPACE", "t".to_string()),
        ("AGENTD__REDIS__PARTITIONS", "4".to_string()),
        ("AGENTD__A2A__EXPOSE", "lead".to_string()),
    ];
    let p = AgentdProcess::start(&env);
    let lead = p.spawn("lead", "hello");
    p.wait_for("the lead's first answer", |p| p.status(&lead) == "idle");
    // What reached the lead's thread from outside: user messages and tool results.
    let reached = |p: &AgentdProcess| -> Vec<Value> {
        p.get(&format!("/v1/agents/{lead}/thread"))["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| {
                (e["role"] == "user" && ["a", "b"].contains(&e["text"].as_str().unwrap_or("")))
                    || e["text"].as_str().is_some_and(|t| t.contains("now_ms"))
            })
            .cloned()
            .collect()
    };
    let json_of = |e: &Entries| serde_json::to_string(e).unwrap();
    let twice = |k: &'static str, a: Value, b: Value| Field::Entries(entries(&[(k, a), (k, b)]));
    let messages = format!("/v1/agents/{lead}/messages");
    let tools = format!("/v1/agents/{lead}/tools/current_time");
    let reset = format!("/v1/agents/{lead}/reset");
    for (path, body) in [
        (
            messages.as_str(),
            entries(&[("text", json!("a")), ("text", json!("b"))]),
        ),
        (
            "/v1/agents",
            entries(&[("agent_type", json!("lead")), ("agent_type", json!("lead"))]),
        ),
        (
            "/v1/commands",
            entries(&[
                ("type", json!("send")),
                ("agent_id", json!(lead)),
                ("text", json!("a")),
                ("text", json!("b")),
            ]),
        ),
        (
            "/v1/commands",
            Entries(vec![
                ("type", Field::Plain(json!("invoke_tool"))),
                ("agent_id", Field::Plain(json!(lead))),
                ("tool", Field::Plain(json!("current_time"))),
                ("args", twice("x", json!(1), json!(2))),
            ]),
        ),
        (
            tools.as_str(),
            Entries(vec![("a", twice("k", json!(1), json!(2)))]),
        ),
        (
            reset.as_str(),
            entries(&[("message", json!("a")), ("message", json!("b"))]),
        ),
    ] {
        let body = json_of(&body);
        let (status, answer) = post_raw(&p, path, &body);
        assert_eq!(
            (status, answer["code"].as_str()),
            (400, Some("invalid_argument")),
            "{path} {body}: {answer}"
        );
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.contains("duplicate"), "{path} {body}: {message}");
    }
    // A2A's JSON-RPC door: a parse error.
    let (_, answer) = post_raw(
        &p,
        "/a2a/lead",
        r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a","id":"b"}}"#,
    );
    assert_eq!(answer["error"]["code"], -32700, "{answer}");

    // The command stream: a key twice in a command, or in its free-form arguments.
    let mut con = redis.client();
    let mut send_entries = |item: Entries| {
        let id = uuid::Uuid::now_v7().to_string();
        let mut envelope = entries(&[
            ("v", json!(1)),
            ("id", json!(id)),
            ("from", json!({"type": "external", "name": "svc"})),
            ("to", json!({"type": "system"})),
            ("reply_to", json!("svc:replies")),
            ("sent_at", json!(1)),
        ]);
        envelope.0.push(("item", Field::Entries(item)));
        let bytes = rmp_serde::to_vec_named(&envelope).unwrap();
        let reply: Value = rmp_serde::from_slice(&send_command(&mut con, bytes, &id)).unwrap();
        reply["item"].clone()
    };
    for item in [
        entries(&[
            ("kind", json!("command")),
            ("type", json!("send")),
            ("agent_id", json!(lead)),
            ("text", json!("a")),
            ("text", json!("b")),
        ]),
        Entries(vec![
            ("kind", Field::Plain(json!("command"))),
            ("type", Field::Plain(json!("invoke_tool"))),
            ("agent_id", Field::Plain(json!(lead))),
            ("tool", Field::Plain(json!("current_time"))),
            ("args", twice("x", json!(1), json!(2))),
        ]),
    ] {
        let reply = send_entries(item);
        assert_eq!(reply["error"]["code"], "invalid_argument", "{reply}");
        assert!(
            reply["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("duplicate")),
            "{reply}"
        );
    }
    let reply = call_map(
        &mut con,
        json!({"kind": "command", "type": "inspect", "agent_id": "zzz"}),
        json!({}),
    );
    assert_eq!(reply["error"]["code"], "invalid_argument", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not an agent id")),
        "{reply}"
    );
    // The same over HTTP; a well-formed id of no agent is still agent_not_found.
    for (agent_id, status, code) in [
        ("zzz", 400, "invalid_argument"),
        (
            "0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162",
            404,
            "agent_not_found",
        ),
    ] {
        for command in [
            json!({"type": "inspect", "agent_id": agent_id}),
            json!({"type": "send", "agent_id": agent_id, "text": "hi"}),
            json!({"type": "spawn", "agent_type": "lead", "parent_id": agent_id}),
        ] {
            let (got, answer) = post_raw(&p, "/v1/commands", &command.to_string());
            assert_eq!(
                (got, answer["code"].as_str()),
                (status, Some(code)),
                "{command}: {answer}"
            );
        }
    }
    let (got, answer) = post_raw(
        &p,
        "/v1/commands",
        &json!({"type": "spawn", "agent_type": "lead", "depends_on": ["nope"]}).to_string(),
    );
    assert_eq!(
        (got, answer["code"].as_str()),
        (400, Some("invalid_argument")),
        "{answer}"
    );
    assert_eq!(reached(&p), Vec::<Value>::new(), "nothing reached the lead");
    assert_eq!(
        p.get("/v1/agents")["agents"].as_array().unwrap().len(),
        1,
        "nothing was spawned"
    );
    p.stop();
}
