//! Reading a nested object of a request only from a JSON (or MessagePack) map. serde's derive
//! also reads a struct from a sequence of its fields (`"budget": [null, null]`) and an
//! internally tagged enum from a sequence whose first element is the tag (`"control":
//! ["pause"]`): shapes no client means and the API document rules out. The fields of requests
//! that hold such values read them through [`object`] or [`optional_object`].

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::fmt;

/// A `T` read from a map; anything else is refused as the wrong type.
pub fn object<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(MapOnly(d))
}

/// A `T` read from a map, or `None` for `null`; anything else is refused as the wrong type.
pub fn optional_object<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<FromMap<T>>::deserialize(d)?.map(|m| m.0))
}

/// A `T` that [`object`] read.
struct FromMap<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for FromMap<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        object(d).map(FromMap)
    }
}

/// A deserializer whose structs and tagged enums take maps only. A struct's or an internally
/// tagged enum's derived `Deserialize` asks for `deserialize_struct` or `deserialize_any`; the
/// other requests never come and go to `deserialize_any`.
struct MapOnly<D>(D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for MapOnly<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(MapVisitor(visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct(name, fields, MapVisitor(visitor))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// Passes a map on to the visitor it wraps; every other shape is the wrong type ("expected an
/// object"), which is what each `visit_*` it leaves to its default answers.
struct MapVisitor<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for MapVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(map)
    }
}

#[cfg(test)]
mod tests {
    use crate::command::Command;
    use serde_json::json;

    #[test]
    fn nested_objects_are_read_from_maps_only() {
        for (command, why) in [
            (
                json!({"type": "spawn", "budget": [null, null]}),
                "invalid type: sequence, expected an object",
            ),
            (
                json!({"type": "spawn", "manage": ["sync"]}),
                "invalid type: sequence, expected an object",
            ),
            (
                json!({"type": "set_budget", "agent_id": "a", "budget": [5]}),
                "invalid type: sequence, expected an object",
            ),
            (
                json!({"type": "control", "agent_id": "a", "control": ["pause"]}),
                "invalid type: sequence, expected an object",
            ),
            (
                json!({"type": "tool_result", "agent_id": "a",
                       "call_id": "0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162", "error": ["no"]}),
                "invalid type: sequence, expected an object",
            ),
            (
                json!({"type": "spawn", "budget": {"max_token": 1}}),
                "unknown field `max_token`",
            ),
        ] {
            let got = serde_json::from_value::<Command>(command.clone())
                .map(|c| format!("accepted: {c:?}"))
                .unwrap_or_else(|e| e.to_string());
            assert!(got.contains(why), "{command}: {got}");
        }
        // Maps and nulls read as before.
        let ok = json!({"type": "spawn", "budget": {"max_tokens": 5}, "manage": null});
        assert!(serde_json::from_value::<Command>(ok).is_ok());
        let ok = json!({"type": "control", "agent_id": "a", "control": {"type": "pause"}});
        assert!(serde_json::from_value::<Command>(ok).is_ok());
    }
}
