//! Bodies are JSON objects: serde's derive also reads a struct from an array of its fields in
//! order (`["acme"]` as a signup), which the contract does not allow.
//!
//! Each body derives with `#[serde(remote = "Self")]`, which turns the derived code into
//! inherent `Self::serialize`/`Self::deserialize` functions; [`objects_only!`] then writes the
//! trait impls, deserializing through paros-core's [`ObjectOnly`], a deserializer whose struct
//! visitor takes a map and nothing else.

pub(crate) use paros_core::object::ObjectOnly;

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
