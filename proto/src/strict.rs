//! Reading requests strictly.
//!
//! A nested object of a request is read only from a JSON (or MessagePack) map. serde's derive
//! also reads a struct from a sequence of its fields (`"budget": [null, null]`) and an
//! internally tagged enum from a sequence whose first element is the tag (`"control":
//! ["pause"]`): shapes no client means and the API document rules out. The fields of requests
//! that hold such values read them through [`object`] or [`optional_object`].
//!
//! A key is given once in an object. serde's derive refuses a field given twice (in either
//! spelling of an alias pair), but a free-form JSON value keeps the last of two, silently:
//! `{"text":"a","text":"b"}` read as a value first, as the HTTP doors read bodies, became
//! `{"text":"b"}`. [`UniqueKeys`] reads a value refusing a key given twice at any depth; the
//! doors read bodies with it, and the free-form fields of commands (a tool's arguments, a
//! result) with [`unique_value`] or [`optional_unique_value`], in JSON and MessagePack alike.

use serde::de::{Error as _, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use std::fmt;

/// A JSON value whose objects have no key twice (any depth); one that has is refused with
/// `duplicate key `<key>``.
#[derive(Debug, Clone, PartialEq)]
pub struct UniqueKeys(pub Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueKeysVisitor).map(UniqueKeys)
    }
}

/// A free-form value read with [`UniqueKeys`] (for `deserialize_with`).
pub fn unique_value<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    UniqueKeys::deserialize(d).map(|v| v.0)
}

/// An optional free-form value read with [`UniqueKeys`]: `null` is `None`.
pub fn optional_unique_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Ok(Option::<UniqueKeys>::deserialize(d)?.map(|v| v.0))
}

/// serde_json's own value visitor, but for maps, which refuse a key given twice.
struct UniqueKeysVisitor;

impl<'de> Visitor<'de> for UniqueKeysVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<Value, E> {
        serde_json::Number::deserialize(serde::de::value::I128Deserializer::new(v))
            .map(Value::Number)
    }

    fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<Value, E> {
        serde_json::Number::deserialize(serde::de::value::U128Deserializer::new(v))
            .map(Value::Number)
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        unique_value(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(UniqueKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if fields.contains_key(&key) {
                return Err(A::Error::custom(format_args!("duplicate key `{key}`")));
            }
            let UniqueKeys(value) = map.next_value()?;
            fields.insert(key, value);
        }
        Ok(Value::Object(fields))
    }
}

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
    use super::UniqueKeys;
    use crate::command::Command;
    use serde_json::json;

    #[test]
    fn a_key_given_twice_is_refused_at_any_depth_in_json_and_messagepack() {
        for text in [
            r#"{"text":"a","text":"b"}"#,
            r#"{"args":{"x":1,"x":2}}"#,
            r#"[{"a":[{"k":1,"k":1}]}]"#,
        ] {
            let got = serde_json::from_str::<UniqueKeys>(text).map_err(|e| e.to_string());
            assert!(
                got.as_ref().is_err_and(|e| e.contains("duplicate key")),
                "{text}: {got:?}"
            );
        }
        let fine = r#"{"a":{"k":1},"b":{"k":[1,2.5,"x",null,true]}}"#;
        let read = serde_json::from_str::<UniqueKeys>(fine).map(|v| v.0).ok();
        assert_eq!(read, serde_json::from_str(fine).ok());
        // A MessagePack command whose tool arguments hold a key twice.
        struct Args;
        impl serde::Serialize for Args {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut map = s.serialize_map(Some(2))?;
                map.serialize_entry("tz", "a")?;
                map.serialize_entry("tz", "b")?;
                map.end()
            }
        }
        let fields = vec![
            ("type".to_string(), json!("invoke_tool")),
            ("tool".to_string(), json!("current_time")),
        ];
        struct Fields(Vec<(String, serde_json::Value)>);
        impl serde::Serialize for Fields {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut map = s.serialize_map(Some(self.0.len() + 1))?;
                for (k, v) in &self.0 {
                    map.serialize_entry(k, v)?;
                }
                map.serialize_entry("args", &Args)?;
                map.end()
            }
        }
        let bytes = rmp_serde::to_vec_named(&Fields(fields)).unwrap_or_default();
        let got = rmp_serde::from_slice::<Command>(&bytes).map_err(|e| e.to_string());
        assert!(
            got.as_ref()
                .is_err_and(|e| e.contains("duplicate key `tz`")),
            "{got:?}"
        );
    }

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
