//! Bodies are JSON objects: serde's derive also reads a struct from an array of its fields in
//! order (`["acme"]` as a signup), which the contract does not allow.
//!
//! Each body derives with `#[serde(remote = "Self")]`, which turns the derived code into
//! inherent `Self::serialize`/`Self::deserialize` functions; [`objects_only!`] then writes the
//! trait impls, deserializing through [`ObjectOnly`], a deserializer whose struct visitor takes
//! a map and nothing else.

use core::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};

/// Wraps a deserializer so that a struct is read from a map only.
pub(crate) struct ObjectOnly<D>(pub(crate) D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for ObjectOnly<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(v)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct(name, fields, MapOnly(v))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
        unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// A struct visitor that refuses everything but a map (every other `visit_*` keeps serde's
/// default: an invalid-type error).
struct MapOnly<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for MapOnly<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(map)
    }
}

/// Writes `Serialize` and `Deserialize` for bodies derived with `#[serde(remote = "Self")]`.
macro_rules! objects_only {
    ($($body:ty),* $(,)?) => {$(
        impl serde::Serialize for $body {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                <$body>::serialize(self, s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $body {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <$body>::deserialize(crate::object::ObjectOnly(d))
            }
        }
    )*};
}

pub(crate) use objects_only;
