//! Serde for positions as plain `u64`s.
//!
//! The client's `Seq` carries no serde impls (and is about to become paros-core's, which does);
//! going through the inner `u64` keeps the checkpoint format the same either way.

use paros_client::Seq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub fn serialize<S: Serializer>(seq: &Seq, s: S) -> Result<S::Ok, S::Error> {
    seq.0.serialize(s)
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Seq, D::Error> {
    u64::deserialize(d).map(Seq)
}

pub mod option {
    use super::*;

    pub fn serialize<S: Serializer>(seq: &Option<Seq>, s: S) -> Result<S::Ok, S::Error> {
        seq.map(|q| q.0).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Seq>, D::Error> {
        Option::<u64>::deserialize(d).map(|o| o.map(Seq))
    }
}
