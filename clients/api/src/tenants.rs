//! Signup and tokens: `POST /v1/signup`, `POST /v1/tokens`, `DELETE /v1/tokens/{token_id}`.

use core::fmt;
use core::num::NonZeroU64;

use serde::{Deserialize, Deserializer, Serialize};

use crate::names::{JournalName, TenantName};

crate::object::objects_only!(SignupRequest, SignupAnswer, MintTokenRequest, TokenAnswer);

/// Why an opaque id or token is refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("an id or token is a non-empty string of printable ASCII")]
pub struct InvalidOpaque;

fn check_opaque(raw: &str) -> Result<(), InvalidOpaque> {
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(InvalidOpaque);
    }
    Ok(())
}

macro_rules! opaque {
    ($(#[$doc:meta])* $name:ident, $debug:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        // `is_ascii_graphic`: `!` to `~`, at least one.
        #[cfg_attr(feature = "openapi", schema(value_type = String, pattern = "^[!-~]+$"))]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Wraps `raw`, which must be non-empty printable ASCII.
            ///
            /// # Errors
            /// [`InvalidOpaque`] for an empty string, a space or a control or non-ASCII character.
            pub fn parse(raw: &str) -> Result<Self, InvalidOpaque> {
                check_opaque(raw)?;
                Ok(Self(raw.to_owned()))
            }

            /// The text as it travels.
            #[must_use]
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<&str> for $name {
            type Error = InvalidOpaque;
            fn try_from(raw: &str) -> Result<Self, InvalidOpaque> {
                Self::parse(raw)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let show: fn(&str, &mut fmt::Formatter<'_>) -> fmt::Result = $debug;
                write!(f, "{}(", stringify!($name))?;
                show(&self.0, f)?;
                f.write_str(")")
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                check_opaque(&raw).map_err(serde::de::Error::custom)?;
                Ok(Self(raw))
            }
        }
    };
}

opaque!(
    /// A tenant's id, as signup reports it. Opaque: clients compare it, never parse it.
    TenantId,
    |s, f| write!(f, "{s:?}")
);

opaque!(
    /// A token's id (its JWT `jti`): what `DELETE /v1/tokens/{token_id}` names.
    TokenId,
    |s, f| write!(f, "{s:?}")
);

opaque!(
    /// A bearer token (a JWT), sent as `Authorization: Bearer <token>`.
    ///
    /// A secret: `Debug` shows its length only, so it never lands in a log by accident.
    Token,
    |s, f| write!(f, "{} bytes", s.len())
);

/// `POST /v1/signup` request: `{"name": "acme"}`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
#[serde(deny_unknown_fields)]
pub struct SignupRequest {
    pub name: TenantName,
}

/// `POST /v1/signup` → 200: the new tenant and its first token, scope `owner`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
pub struct SignupAnswer {
    pub tenant: TenantId,
    pub name: TenantName,
    pub token: Token,
    pub token_id: TokenId,
    /// Unix seconds.
    pub expires_at: u64,
}

/// What a tenant token may do; each scope includes the ones after it.
///
/// `admin` is the cell operator's scope and no tenant's: a mint request naming it is refused
/// like any other unknown value.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Everything in the tenant: journals and tokens.
    Owner,
    /// Write, Truncate, SetLeader, and everything `read` allows.
    Write,
    /// Read, tail, list and show journals.
    Read,
}

impl Scope {
    /// Whether a token of this scope may do everything `other` allows.
    #[must_use]
    pub fn includes(self, other: Scope) -> bool {
        self <= other
    }
}

/// `POST /v1/tokens` request: `{"scope", "journal"?, "expires_in_s"?}`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
#[serde(deny_unknown_fields)]
pub struct MintTokenRequest {
    pub scope: Scope,
    /// Restricts the token to one journal (which need not exist yet).
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(default, deserialize_with = "crate::optional::present", skip_serializing_if = "Option::is_none")]
    pub journal: Option<JournalName>,
    /// Lifetime in seconds, at least 1; omitted: the server's default, capped by the minting token.
    #[cfg_attr(feature = "openapi", schema(nullable = false, value_type = u64, minimum = 1))]
    #[serde(default, deserialize_with = "crate::optional::present", skip_serializing_if = "Option::is_none")]
    pub expires_in_s: Option<NonZeroU64>,
}

/// `POST /v1/tokens` → 200: `{"token", "token_id", "expires_at"}`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
pub struct TokenAnswer {
    pub token: Token,
    pub token_id: TokenId,
    /// Unix seconds.
    pub expires_at: u64,
}

#[cfg(test)]
mod tests {
    use super::{Scope, Token};

    #[test]
    fn owner_includes_write_includes_read_and_not_the_other_way() {
        assert!(Scope::Owner.includes(Scope::Write) && Scope::Write.includes(Scope::Read));
        assert!(Scope::Read.includes(Scope::Read));
        assert!(!Scope::Read.includes(Scope::Write) && !Scope::Write.includes(Scope::Owner));
    }

    #[test]
    fn a_tokens_debug_shows_its_length_not_its_text() {
        let t = Token::parse("eyJhbGciOiJFZERTQSJ9.e30.sig").expect("printable ASCII");
        assert_eq!(format!("{t:?}"), "Token(28 bytes)");
    }
}
