//! The contract's optional-field rule: an optional field is omitted or holds a value, never `null`.
//!
//! serde's derive reads `null` into an `Option` field as `None`; the rule needs the two apart.
//! Fields use `#[serde(default, deserialize_with = "optional::present")]`: a missing field
//! takes the default (`None`) without reaching this code, a present one must not be `null`.
//! SetLeader's `old` is the one field that is required and nullable: [`nullable`].

use core::fmt;
use core::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// Deserializes a present optional field: its value, or an error for `null`.
///
/// # Errors
/// The deserializer's error for `null`, or for a value `T` refuses.
pub fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct NotNull<T>(PhantomData<T>);

    impl<'de, T: Deserialize<'de>> Visitor<'de> for NotNull<T> {
        type Value = Option<T>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a value (an optional field is omitted, never null)")
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Err(E::custom("null is not a value: omit an optional field instead"))
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            self.visit_none()
        }

        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            T::deserialize(d).map(Some)
        }
    }

    d.deserialize_option(NotNull(PhantomData))
}

/// Deserializes a required field that may be `null`.
///
/// Naming a `deserialize_with` function is what makes serde's derive report a missing
/// `Option` field as missing instead of reading it as `None`.
///
/// # Errors
/// The deserializer's error for a value `T` refuses.
pub fn nullable<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}
