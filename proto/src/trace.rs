//! W3C trace context (<https://www.w3.org/TR/trace-context/>): which trace, and which span in
//! it, a piece of work belongs to. Envelopes carry one (`trace`), an agent's record keeps its
//! turn's, and the HTTP API reads and answers it as a `traceparent` header.
//!
//! agentd decides the ids itself, with OpenTelemetry export on or off: a turn's span id derives
//! from its inbox item's id and attempt ([`TraceContext::for_turn`]), and a turn that nothing
//! traced before starts a trace whose id is its item's id. Log lines then carry the trace id
//! with export off, and a turn re-run after a crash knows the span id of the run it follows.
//!
//! On the wire it is the `traceparent` text, `00-<32 hex trace id>-<16 hex span id>-<2 hex
//! flags>`, so a client in any language reads and writes it as a string.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

/// A trace id, a parent span id and the sampled flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceContext {
    /// The trace's id; never 0.
    pub trace_id: u128,
    /// The span's id; never 0.
    pub span_id: u64,
    /// Whether the caller records this trace (the `sampled` trace flag).
    pub sampled: bool,
}

/// Length of a version-00 `traceparent`.
const LEN: usize = 55;

impl TraceContext {
    /// A context from its parts; `None` if an id is 0 (invalid in W3C trace context).
    pub fn new(trace_id: u128, span_id: u64, sampled: bool) -> Option<Self> {
        (trace_id != 0 && span_id != 0).then_some(TraceContext {
            trace_id,
            span_id,
            sampled,
        })
    }

    /// Reads a `traceparent` header value. Version `00` exactly; a later version is read by
    /// its first four fields, as the specification asks. `None` for anything invalid.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let b = text.as_bytes();
        if b.len() < LEN || b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        let version = u8::from_str_radix(text.get(0..2)?, 16).ok()?;
        if version == 0xff || (version == 0 && b.len() != LEN) || (b.len() > LEN && b[LEN] != b'-')
        {
            return None;
        }
        let hex = |s: &str| s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
        let (t, s, f) = (text.get(3..35)?, text.get(36..52)?, text.get(53..55)?);
        if !(hex(t) && hex(s) && hex(f)) {
            return None;
        }
        let trace_id = u128::from_str_radix(t, 16).ok()?;
        let span_id = u64::from_str_radix(s, 16).ok()?;
        let flags = u8::from_str_radix(f, 16).ok()?;
        TraceContext::new(trace_id, span_id, flags & 1 == 1)
    }

    /// A new trace, sampled, with a random span id (a request no caller traced).
    pub fn new_root() -> Self {
        TraceContext {
            trace_id: nonzero(Uuid::new_v4().as_u128()),
            span_id: Uuid::new_v4().as_u128() as u64 | 1,
            sampled: true,
        }
    }

    /// A span of this trace under this one, with a random id (a request a caller traced).
    pub fn new_child(&self) -> Self {
        TraceContext {
            span_id: Uuid::new_v4().as_u128() as u64 | 1,
            ..*self
        }
    }

    /// The context of a turn on inbox item `item`, attempt `attempt`: in the trace of `parent`
    /// (the context the item arrived with), or in a new trace whose id is the item's id. The
    /// span id derives from the item and the attempt, so the writes that start a turn and the
    /// turn itself agree on it without passing it along, and each attempt gets its own.
    pub fn for_turn(parent: Option<&TraceContext>, item: Uuid, attempt: u32) -> Self {
        let span_id = derived_span_id(item, attempt);
        match parent {
            Some(p) => TraceContext {
                trace_id: p.trace_id,
                span_id,
                sampled: p.sampled,
            },
            None => TraceContext {
                trace_id: nonzero(item.as_u128()),
                span_id,
                sampled: true,
            },
        }
    }

    /// The trace id as 32 lowercase hex digits (as tracing back ends show it).
    pub fn trace_id_hex(&self) -> TraceIdHex {
        TraceIdHex(self.trace_id)
    }

    /// Writes the `traceparent` text into `buf` (no allocation) and answers it.
    pub fn write<'b>(&self, buf: &'b mut [u8; LEN]) -> &'b str {
        use std::io::Write as _;
        let mut cursor = std::io::Cursor::new(&mut buf[..]);
        // 55 bytes exactly: the write cannot fail.
        let _ = write!(
            cursor,
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id,
            self.span_id,
            u8::from(self.sampled)
        );
        std::str::from_utf8(&buf[..]).unwrap_or_default()
    }
}

/// A span id derived from an inbox item's id and an attempt (XXH3 of both; never 0).
fn derived_span_id(item: Uuid, attempt: u32) -> u64 {
    let mut bytes = [0u8; 20];
    bytes[..16].copy_from_slice(item.as_bytes());
    bytes[16..].copy_from_slice(&attempt.to_le_bytes());
    let id = xxhash_rust::xxh3::xxh3_64(&bytes);
    if id == 0 { 1 } else { id }
}

fn nonzero(id: u128) -> u128 {
    if id == 0 { 1 } else { id }
}

/// A trace id shown as 32 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceIdHex(pub u128);

impl std::fmt::Display for TraceIdHex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl std::fmt::Display for TraceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut buf = [0u8; LEN];
        f.write_str(self.write(&mut buf))
    }
}

impl std::str::FromStr for TraceContext {
    type Err = InvalidTraceparent;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TraceContext::parse(s).ok_or(InvalidTraceparent)
    }
}

/// A `traceparent` that is not W3C trace context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, ids not all zero)")]
pub struct InvalidTraceparent;

impl Serialize for TraceContext {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; LEN];
        serializer.serialize_str(self.write(&mut buf))
    }
}

impl<'de> Deserialize<'de> for TraceContext {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = TraceContext;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a W3C traceparent string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<TraceContext, E> {
                TraceContext::parse(v).ok_or_else(|| E::custom(InvalidTraceparent))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// Reads an optional trace context leniently, as W3C trace context asks of a receiver: a
/// value that is not a valid `traceparent` (another shape, a later writer's) is ignored, and
/// the work starts a trace of its own, instead of the whole envelope being refused.
pub fn lenient<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TraceContext>, D::Error> {
    use serde::de::{IgnoredAny, MapAccess, SeqAccess};
    struct Lenient;
    impl<'de> serde::de::Visitor<'de> for Lenient {
        type Value = Option<TraceContext>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a W3C traceparent string, or anything (ignored)")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(TraceContext::parse(v))
        }
        fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
            Ok(std::str::from_utf8(v).ok().and_then(TraceContext::parse))
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(Lenient)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    d.deserialize_any(Lenient)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_specification_s_example_reads_and_writes_back() {
        let c = TraceContext::parse(EXAMPLE).unwrap();
        assert_eq!(c.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(c.span_id, 0x00f067aa0ba902b7);
        assert!(c.sampled);
        assert_eq!(c.to_string(), EXAMPLE);
        assert_eq!(
            c.trace_id_hex().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
    }

    #[test]
    fn invalid_values_are_refused() {
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad}");
        }
        // A later version: its first four fields, when a `-` follows them.
        assert!(
            TraceContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-x")
                .is_some()
        );
    }

    #[test]
    fn a_turn_s_span_id_follows_its_item_and_attempt() {
        let item = crate::ids::new_id();
        let root = TraceContext::for_turn(None, item, 1);
        assert_eq!(root.trace_id, item.as_u128());
        assert_eq!(root, TraceContext::for_turn(None, item, 1));
        let again = TraceContext::for_turn(None, item, 2);
        assert_eq!(again.trace_id, root.trace_id);
        assert_ne!(again.span_id, root.span_id);
        let parent = TraceContext::parse(EXAMPLE).unwrap();
        let child = TraceContext::for_turn(Some(&parent), item, 1);
        assert_eq!(child.trace_id, parent.trace_id);
        assert_eq!(child.span_id, root.span_id);
    }

    #[test]
    fn an_envelope_s_unreadable_trace_is_ignored_not_refused() {
        #[derive(serde::Deserialize)]
        struct Carrier {
            #[serde(default, deserialize_with = "lenient")]
            trace: Option<TraceContext>,
        }
        for (json, want) in [
            (
                serde_json::json!({"trace": EXAMPLE}),
                TraceContext::parse(EXAMPLE),
            ),
            (serde_json::json!({"trace": {"span": 7}}), None),
            (serde_json::json!({"trace": "00-zz"}), None),
            (serde_json::json!({"trace": null}), None),
            (serde_json::json!({}), None),
        ] {
            let c: Carrier = serde_json::from_value(json.clone()).unwrap();
            assert_eq!(c.trace, want, "{json}");
            let bytes = crate::codec::encode(&json).unwrap();
            let c: Carrier = crate::codec::decode(&bytes).unwrap();
            assert_eq!(c.trace, want, "{json} as MessagePack");
        }
    }

    #[test]
    fn it_travels_as_a_string_in_messagepack_and_json() {
        let c = TraceContext::parse(EXAMPLE).unwrap();
        let bytes = crate::codec::encode(&c).unwrap();
        assert_eq!(crate::codec::decode::<TraceContext>(&bytes).unwrap(), c);
        assert_eq!(serde_json::to_value(c).unwrap(), serde_json::json!(EXAMPLE));
    }
}
