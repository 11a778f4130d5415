//! Property tests of the codec: encode→decode is the identity for every item kind, and random
//! bytes never panic the decoder.

use agentd_proto::codec::{decode_envelope, encode_envelope};
use agentd_proto::*;
use proptest::prelude::*;
use serde_json::json;

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 _\\-{}:\u{e9}\u{4e2d}]{0,40}"
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        text().prop_map(serde_json::Value::String),
        any::<i64>().prop_map(|n| json!(n)),
        any::<bool>().prop_map(|b| json!(b)),
        (text(), any::<u32>()).prop_map(|(k, n)| json!({ k: n, "list": [n, "x"] })),
    ]
}

fn status() -> impl Strategy<Value = AgentStatus> {
    proptest::sample::select(AgentStatus::ALL.to_vec())
}

fn control() -> impl Strategy<Value = Control> {
    proptest::sample::select(vec![
        Control::Pause,
        Control::Resume,
        Control::Cancel,
        Control::Terminate,
        Control::Close,
        Control::Delete,
    ])
}

fn usage() -> impl Strategy<Value = Usage> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<bool>(),
    )
        .prop_map(|(a, b, c, d, estimated)| Usage {
            input: a as u64,
            output: b as u64,
            cache_write: c as u64,
            cache_read: d as u64,
            estimated,
        })
}

fn inbox() -> impl Strategy<Value = InboxItem> {
    prop_oneof![
        (
            text(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            proptest::option::of(text())
        )
            .prop_map(|(t, i, u, a, from)| InboxItem::Message {
                text: t,
                interrupt: i,
                urgent: u,
                role: if a { Role::Assistant } else { Role::User },
                from_agent: from,
                relay: false,
            }),
        proptest::option::of(text()).prop_map(|message| InboxItem::Reset { message }),
        Just(InboxItem::Compact),
        json_value().prop_map(|result| InboxItem::Yield { result }),
        text().prop_map(|dependent| InboxItem::Watch { dependent }),
    ]
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        (
            proptest::option::of(text()),
            proptest::option::of(text()),
            any::<bool>()
        )
            .prop_map(|(t, p, m)| Command::Spawn(Box::new(SpawnRequest {
                agent_type: t,
                prompt: p,
                context_files: vec!["a.txt".into()],
                manage: m.then(ManageOptions::default),
                ..Default::default()
            }))),
        (text(), text(), any::<bool>(), proptest::option::of(text())).prop_map(|(a, t, i, k)| {
            Command::Send {
                agent_id: a,
                text: t,
                interrupt: i,
                idempotency_key: k,
            }
        }),
        (text(), control()).prop_map(|(a, c)| Command::Control {
            agent_id: a,
            control: c
        }),
        (text(), proptest::option::of(text())).prop_map(|(a, m)| Command::Reset {
            agent_id: a,
            message: m
        }),
        text().prop_map(|a| Command::Compact { agent_id: a }),
        text().prop_map(|a| Command::Inspect { agent_id: a }),
        proptest::option::of(text()).prop_map(|p| Command::List { parent_id: p }),
        text().prop_map(|a| Command::Thread { agent_id: a }),
        (proptest::option::of(text()), text(), json_value()).prop_map(|(a, t, v)| {
            Command::InvokeTool {
                agent_id: a,
                tool: t,
                args: v,
            }
        }),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (text(), status(), status(), proptest::option::of(text())).prop_map(|(a, f, t, r)| {
            Event::StatusChanged {
                agent_id: a,
                from: f,
                to: t,
                reason: r,
            }
        }),
        (text(), text(), json_value()).prop_map(|(a, p, r)| Event::Yielded {
            agent_id: a,
            parent_id: p,
            result: r
        }),
        (text(), text(), text()).prop_map(|(p, c, t)| Event::Forwarded {
            parent_id: p,
            child_id: c,
            text: t
        }),
        (text(), usage(), 0u32..1000).prop_map(|(a, u, c)| Event::TokenUsage {
            agent_id: a,
            usage: u,
            cost_usd: c as f64 / 8.0
        }),
        (text(), text()).prop_map(|(a, m)| Event::DeliveryFailed {
            agent_id: a,
            code: ErrorCode::ManageMissingParent,
            message: m
        }),
        text().prop_map(|a| Event::Deleted { agent_id: a }),
        (text(), 0usize..5).prop_map(|(a, o)| Event::DependencySettled {
            agent_id: a,
            outcome: [
                DependencyOutcome::Met,
                DependencyOutcome::Failed,
                DependencyOutcome::Cancelled,
                DependencyOutcome::Terminated,
                DependencyOutcome::Deleted,
            ][o],
        }),
    ]
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        command().prop_map(Item::Command),
        inbox().prop_map(Item::Inbox),
        control().prop_map(Item::Control),
        event().prop_map(Item::Event),
        json_value().prop_map(|v| Item::Reply(Reply::from(Ok(v)))),
        text().prop_map(|text| Item::Output(Output::Reply { text })),
        json_value().prop_map(|result| Item::Output(Output::Yield { result })),
        text().prop_map(|m| Item::Reply(Reply::from(Err(AgentdError::new(
            ErrorCode::UnknownWorker,
            m
        ))))),
    ]
}

fn address() -> impl Strategy<Value = Address> {
    prop_oneof![
        text().prop_map(Address::agent),
        text().prop_map(|name| Address::External { name }),
        Just(Address::System),
    ]
}

proptest! {
    #[test]
    fn encode_then_decode_is_identity(item in item(), from in address(), to in address(),
                                      reply in proptest::option::of(text()), at in any::<u64>(),
                                      attempt in 1u32..10) {
        let mut env = Envelope::new(from, to, item, at);
        env.reply_to = reply;
        env.attempt = attempt;
        env.correlation_id = Some(ids::new_id());
        let bytes = encode_envelope(&env).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back = decode_envelope(&bytes, DEFAULT_MAX_ENVELOPE_BYTES)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back, env);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_envelope(&bytes, DEFAULT_MAX_ENVELOPE_BYTES);
    }

    #[test]
    fn mutated_envelopes_never_panic(item in item(), flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let env = Envelope::new(Address::System, Address::agent("a"), item, 1);
        let mut bytes = encode_envelope(&env).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let _ = decode_envelope(&bytes, DEFAULT_MAX_ENVELOPE_BYTES);
    }
}

#[test]
fn oversize_is_payload_too_large() {
    let env = Envelope::new(
        Address::System,
        Address::agent("a"),
        Item::Inbox(InboxItem::message("x".repeat(2048))),
        1,
    );
    let bytes = encode_envelope(&env).unwrap_or_default();
    let err = decode_envelope(&bytes, 1024).err().map(|e| e.code);
    assert_eq!(err, Some(ErrorCode::PayloadTooLarge));
}

#[test]
fn unknown_version_is_bad_envelope() {
    let mut env = Envelope::new(
        Address::System,
        Address::agent("a"),
        Item::Inbox(InboxItem::Compact),
        1,
    );
    env.v = 99;
    let bytes = encode_envelope(&env).unwrap_or_default();
    let err = decode_envelope(&bytes, DEFAULT_MAX_ENVELOPE_BYTES).err();
    assert_eq!(err.as_ref().map(|e| e.code), Some(ErrorCode::BadEnvelope));
    assert!(err.map(|e| e.message.contains("99")).unwrap_or(false));
}

#[test]
fn a_plain_map_from_another_language_decodes() {
    // What a Python client writes with msgpack.packb({...}): uuids as strings, enums as maps.
    let map = json!({
        "v": 1, "id": "0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162",
        "from": {"type": "external", "name": "py"}, "to": {"type": "agent", "agent_id": "abc"},
        "sent_at": 5, "item": {"kind": "inbox", "type": "reset", "message": "start over"}
    });
    let bytes = rmp_serde::to_vec_named(&map).unwrap_or_default();
    let env = decode_envelope(&bytes, DEFAULT_MAX_ENVELOPE_BYTES).map_err(|e| e.to_string());
    let env = match env {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(env.attempt, 1);
    assert_eq!(
        env.item,
        Item::Inbox(InboxItem::Reset {
            message: Some("start over".into())
        })
    );
}
