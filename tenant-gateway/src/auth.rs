//! Tokens: EdDSA JWTs signed with the cell's keys, verified against the directory.
//!
//! - The algorithm is fixed here (`EdDSA`); a token's own `alg` is never trusted, so `none`,
//!   HS256 and any other algorithm are refused before a key is looked at.
//! - `kid` names the signing key; the public halves live in the registry (`AddSigningKey`,
//!   scope `Cell`), the private halves are configuration ([`KeyPair`], a key file).
//! - `jti` is the token id. It is minted as `t<nonce>.<sig>`: the nonce and an Ed25519
//!   signature over (tenant, nonce) with the minting key, so a gateway can tell a token id
//!   this tenant minted from one it never did without storing every minted id.
//! - Revocation is `RevokeToken` in the registry; a token whose `jti` the directory lists as
//!   revoked is refused.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::{Signer as _, Verifier as _};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use paros_api::{JournalName, Scope};
use paros_core::TenantId;
use paros_registry::{Directory, KeyId, KeyScope, TokenId};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// Unix seconds now.
#[must_use]
pub fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Fills `buf` from the OS's generator.
///
/// # Panics
/// When the OS has no generator (nothing secure can be minted then).
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).expect("the OS random generator is available");
    buf
}

/// A token's scope claim: a tenant scope, or the operator's `admin`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeClaim {
    Owner,
    Write,
    Read,
    Admin,
}

impl From<Scope> for ScopeClaim {
    fn from(s: Scope) -> ScopeClaim {
        match s {
            Scope::Owner => ScopeClaim::Owner,
            Scope::Write => ScopeClaim::Write,
            Scope::Read => ScopeClaim::Read,
        }
    }
}

/// The claims of a paros token.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claims {
    /// The tenant id (16 lowercase hex digits), or `admin`.
    pub sub: String,
    pub scope: ScopeClaim,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<String>,
    pub exp: u64,
    pub iat: u64,
    pub jti: String,
}

/// Who a verified token speaks for.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Principal {
    /// The cell operator.
    Admin { exp: u64 },
    /// A tenant token.
    Tenant(TenantToken),
}

/// A verified tenant token.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TenantToken {
    pub tenant: TenantId,
    pub scope: Scope,
    pub journal: Option<JournalName>,
    pub exp: u64,
    pub jti: TokenId,
}

/// The text of a tenant id, as it travels (`tenant` in signup, `sub` in tokens).
#[must_use]
pub fn tenant_text(t: TenantId) -> String {
    format!("{:016x}", t.0)
}

fn parse_tenant(raw: &str) -> Option<TenantId> {
    if raw.len() != 16 || !raw.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    u64::from_str_radix(raw, 16).ok().map(TenantId)
}

/// An Ed25519 signing key and its key id: the private half of a cell signing key.
#[derive(Clone)]
pub struct KeyPair {
    kid: KeyId,
    key: ed25519_dalek::SigningKey,
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPair").field("kid", &self.kid).finish_non_exhaustive()
    }
}

/// A key file: `{"kid": "...", "private_key": "<standard base64 of the 32-byte seed>"}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    kid: String,
    private_key: String,
}

/// Why a key could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("reading the key file: {0}")]
    Io(#[from] std::io::Error),
    #[error("the key file is not a paros key file: {0}")]
    Format(String),
}

/// The fixed PKCS#8 v1 prefix of an Ed25519 private key (RFC 8410), before the 32-byte seed.
const PKCS8_ED25519_PREFIX: [u8; 16] =
    [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];

impl KeyPair {
    /// A fresh key named `kid`.
    #[must_use]
    pub fn generate(kid: KeyId) -> KeyPair {
        KeyPair::from_seed(kid, random_bytes::<32>())
    }

    /// The key with the 32-byte Ed25519 seed `seed`.
    #[must_use]
    pub fn from_seed(kid: KeyId, seed: [u8; 32]) -> KeyPair {
        KeyPair { kid, key: ed25519_dalek::SigningKey::from_bytes(&seed) }
    }

    /// Reads a key file written by [`write_key_file`](Self::write_key_file).
    ///
    /// # Errors
    /// [`KeyError`] for an unreadable or malformed file.
    pub fn load(path: &Path) -> Result<KeyPair, KeyError> {
        KeyPair::from_json(&std::fs::read(path)?)
    }

    /// Reads a key file's bytes.
    ///
    /// # Errors
    /// [`KeyError::Format`] for anything but a key file.
    pub fn from_json(bytes: &[u8]) -> Result<KeyPair, KeyError> {
        let f: KeyFile = serde_json::from_slice(bytes).map_err(|e| KeyError::Format(e.to_string()))?;
        let kid = KeyId::new(f.kid).map_err(|e| KeyError::Format(e.to_string()))?;
        let seed = STANDARD.decode(f.private_key).map_err(|e| KeyError::Format(e.to_string()))?;
        let seed: [u8; 32] = seed.try_into().map_err(|_| KeyError::Format("the private key is 32 bytes".into()))?;
        Ok(KeyPair::from_seed(kid, seed))
    }

    /// The key file's bytes.
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        let f = KeyFile { kid: self.kid.as_str().to_owned(), private_key: STANDARD.encode(self.key.to_bytes()) };
        serde_json::to_vec_pretty(&f).expect("a key file serializes")
    }

    /// Writes the key file to `path` (created new: an existing file is never overwritten).
    ///
    /// # Errors
    /// [`KeyError::Io`].
    pub fn write_key_file(&self, path: &Path) -> Result<(), KeyError> {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
        f.write_all(&self.to_json())?;
        Ok(())
    }

    #[must_use]
    pub fn kid(&self) -> &KeyId {
        &self.kid
    }

    /// The raw 32-byte public key, what `AddSigningKey` records.
    #[must_use]
    pub fn public_key(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    fn encoding_key(&self) -> EncodingKey {
        let mut der = PKCS8_ED25519_PREFIX.to_vec();
        der.extend_from_slice(&self.key.to_bytes());
        EncodingKey::from_ed_der(&der)
    }

    /// Signs `claims` as an EdDSA JWT with this key's `kid`.
    ///
    /// # Panics
    /// Never: the key is a valid Ed25519 key and the claims serialize.
    #[must_use]
    pub fn sign(&self, claims: &Claims) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(self.kid.as_str().to_owned());
        jsonwebtoken::encode(&header, claims, &self.encoding_key()).expect("an Ed25519 key signs")
    }

    /// A fresh token id for `tenant`, provably minted with this key.
    #[must_use]
    pub fn mint_jti(&self, tenant: TenantId) -> TokenId {
        let nonce = random_bytes::<16>();
        let sig = self.key.sign(&jti_message(tenant, &nonce));
        let text = format!("t{}.{}", URL_SAFE_NO_PAD.encode(nonce), URL_SAFE_NO_PAD.encode(sig.to_bytes()));
        TokenId::new(text).expect("a minted token id follows the grammar")
    }
}

fn jti_message(tenant: TenantId, nonce: &[u8]) -> Vec<u8> {
    let mut m = b"paros-jti\0".to_vec();
    m.extend_from_slice(&tenant.0.to_be_bytes());
    m.extend_from_slice(nonce);
    m
}

/// Whether `jti` is a token id minted for `tenant` with one of the cell's live keys.
#[must_use]
pub fn jti_minted_for(directory: &Directory, tenant: TenantId, jti: &TokenId) -> bool {
    let Some((nonce, sig)) = jti.as_str().strip_prefix('t').and_then(|r| r.split_once('.')) else { return false };
    let (Ok(nonce), Ok(sig)) = (URL_SAFE_NO_PAD.decode(nonce), URL_SAFE_NO_PAD.decode(sig)) else { return false };
    let Ok(sig) = ed25519_dalek::Signature::from_slice(&sig) else { return false };
    let message = jti_message(tenant, &nonce);
    directory.signing_keys(KeyScope::Cell).filter(|k| !k.retired).any(|k| {
        <[u8; 32]>::try_from(&k.public_key[..])
            .ok()
            .and_then(|b| ed25519_dalek::VerifyingKey::from_bytes(&b).ok())
            .is_some_and(|vk| vk.verify(&message, &sig).is_ok())
    })
}

/// Mints a token for `tenant` with `key`, expiring at `exp`.
#[must_use]
pub fn mint_tenant_token(
    key: &KeyPair,
    tenant: TenantId,
    scope: Scope,
    journal: Option<&JournalName>,
    exp: u64,
) -> (String, TokenId) {
    let jti = key.mint_jti(tenant);
    let claims = Claims {
        sub: tenant_text(tenant),
        scope: scope.into(),
        journal: journal.map(|j| j.as_str().to_owned()),
        exp,
        iat: now_s(),
        jti: jti.as_str().to_owned(),
    };
    (key.sign(&claims), jti)
}

/// Mints an `admin` token (the cell operator's, for `paros dev` to print) valid for
/// `valid_for_s` seconds.
#[must_use]
pub fn mint_admin_token(key: &KeyPair, valid_for_s: u64) -> String {
    let nonce = URL_SAFE_NO_PAD.encode(random_bytes::<16>());
    let claims = Claims {
        sub: "admin".into(),
        scope: ScopeClaim::Admin,
        journal: None,
        exp: now_s().saturating_add(valid_for_s),
        iat: now_s(),
        jti: format!("a{nonce}"),
    };
    key.sign(&claims)
}

fn validation() -> Validation {
    let mut v = Validation::new(Algorithm::EdDSA);
    // The contract: a request at or after `exp + 1 s` is refused; jsonwebtoken refuses `exp < now - leeway`.
    v.leeway = 0;
    v.validate_aud = false;
    v.set_required_spec_claims(&["exp", "sub"]);
    v
}

/// Why a request's token was refused (401), as `/metrics` counts it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Refusal {
    /// No `Authorization` header.
    Missing,
    /// An `Authorization` header that is not `Bearer <token>`.
    MalformedHeader,
    /// A bearer token that is not a JWT.
    NotJwt,
    /// A JWT of another algorithm than EdDSA (`none`, HS256, ...).
    WrongAlgorithm,
    /// A JWT without `kid`.
    NoKid,
    /// A `kid` the directory does not list as a live cell key.
    UnknownKey,
    /// A signature that does not verify under the key `kid` names (forged or tampered).
    BadSignature,
    /// Past `exp`.
    Expired,
    /// Claims that are not a paros token's.
    BadClaims,
    /// A tenant the directory does not know.
    UnknownTenant,
    /// A token id the tenant revoked.
    Revoked,
}

impl Refusal {
    /// Every reason, in the order `/metrics` lists them.
    pub const ALL: [Refusal; 11] = [
        Refusal::Missing,
        Refusal::MalformedHeader,
        Refusal::NotJwt,
        Refusal::WrongAlgorithm,
        Refusal::NoKid,
        Refusal::UnknownKey,
        Refusal::BadSignature,
        Refusal::Expired,
        Refusal::BadClaims,
        Refusal::UnknownTenant,
        Refusal::Revoked,
    ];

    /// The `reason` label.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::MalformedHeader => "malformed_header",
            Refusal::NotJwt => "not_jwt",
            Refusal::WrongAlgorithm => "wrong_algorithm",
            Refusal::NoKid => "no_kid",
            Refusal::UnknownKey => "unknown_key",
            Refusal::BadSignature => "bad_signature",
            Refusal::Expired => "expired",
            Refusal::BadClaims => "bad_claims",
            Refusal::UnknownTenant => "unknown_tenant",
            Refusal::Revoked => "revoked",
        }
    }
}

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> ApiError {
        let message = match r {
            Refusal::Missing => "no bearer token".to_owned(),
            Refusal::MalformedHeader => "the Authorization header is `Bearer <token>`".to_owned(),
            other => format!("invalid token: {}", other.as_str().replace('_', " ")),
        };
        ApiError::unauthorized(message)
    }
}

/// Why a header jsonwebtoken cannot read is refused: a JOSE header naming an algorithm it
/// does not know (`none`, say) is the wrong algorithm; anything else is no JWT.
fn unreadable_header(token: &str) -> Refusal {
    let header = token.split('.').next().and_then(|h| URL_SAFE_NO_PAD.decode(h).ok());
    let alg =
        header.and_then(|h| serde_json::from_slice::<serde_json::Value>(&h).ok()).is_some_and(|h| h["alg"].is_string());
    if alg { Refusal::WrongAlgorithm } else { Refusal::NotJwt }
}

/// A token whose signature verified: what can be remembered about it. Whether it is still
/// good (key live, not expired, tenant known, not revoked) is checked on every use.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Verified {
    kid: KeyId,
    /// Shared: a cached token's principal is handed to each request without a copy.
    principal: Arc<Principal>,
}

impl Verified {
    fn exp(&self) -> u64 {
        match &*self.principal {
            Principal::Admin { exp } => *exp,
            Principal::Tenant(t) => t.exp,
        }
    }
}

/// Checks a token's signature and claims against the directory's keys (the expensive part:
/// an Ed25519 verification), without the checks [`admit`] makes on every use.
///
/// # Errors
/// The [`Refusal`].
pub fn verify_signature(directory: &Directory, token: &str) -> Result<Verified, Refusal> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| unreadable_header(token))?;
    if header.alg != Algorithm::EdDSA {
        return Err(Refusal::WrongAlgorithm);
    }
    let kid = header.kid.ok_or(Refusal::NoKid)?;
    let kid = KeyId::new(kid).map_err(|_| Refusal::UnknownKey)?;
    let key =
        directory.signing_key(&kid).filter(|k| !k.retired && k.scope == KeyScope::Cell).ok_or(Refusal::UnknownKey)?;
    let decoding = DecodingKey::from_ed_der(&key.public_key);
    let data = jsonwebtoken::decode::<Claims>(token, &decoding, &validation()).map_err(|e| match e.kind() {
        jsonwebtoken::errors::ErrorKind::ExpiredSignature => Refusal::Expired,
        jsonwebtoken::errors::ErrorKind::InvalidSignature => Refusal::BadSignature,
        _ => Refusal::BadClaims,
    })?;
    let c = data.claims;
    let principal = match c.scope {
        ScopeClaim::Admin if c.sub == "admin" => Principal::Admin { exp: c.exp },
        ScopeClaim::Admin => return Err(Refusal::BadClaims),
        ScopeClaim::Owner | ScopeClaim::Write | ScopeClaim::Read => {
            let tenant = parse_tenant(&c.sub).ok_or(Refusal::BadClaims)?;
            let jti = TokenId::new(c.jti).map_err(|_| Refusal::BadClaims)?;
            let scope = match c.scope {
                ScopeClaim::Owner => Scope::Owner,
                ScopeClaim::Write => Scope::Write,
                _ => Scope::Read,
            };
            let journal = c.journal.map(|j| JournalName::parse(&j)).transpose().map_err(|_| Refusal::BadClaims)?;
            Principal::Tenant(TenantToken { tenant, scope, journal, exp: c.exp, jti })
        }
    };
    Ok(Verified { kid, principal: Arc::new(principal) })
}

/// The checks a verified token passes on every use: its key is still live (a retired key's
/// tokens stop at once), it has not expired (`now ≤ exp`), its tenant is known and its `jti` is
/// not revoked.
///
/// # Errors
/// The [`Refusal`].
pub fn admit(directory: &Directory, verified: &Verified, now: u64) -> Result<Arc<Principal>, Refusal> {
    if !directory.signing_key(&verified.kid).is_some_and(|k| !k.retired && k.scope == KeyScope::Cell) {
        return Err(Refusal::UnknownKey);
    }
    if now > verified.exp() {
        return Err(Refusal::Expired);
    }
    if let Principal::Tenant(t) = &*verified.principal {
        if directory.tenant(t.tenant).is_none() {
            return Err(Refusal::UnknownTenant);
        }
        if directory.is_revoked(t.tenant, &t.jti) {
            return Err(Refusal::Revoked);
        }
    }
    Ok(Arc::clone(&verified.principal))
}

/// Verifies a bearer token against the directory's keys and revocations.
///
/// # Errors
/// The [`Refusal`] for anything but a valid, live, unrevoked token of a known tenant.
pub fn verify(directory: &Directory, token: &str) -> Result<Arc<Principal>, Refusal> {
    admit(directory, &verify_signature(directory, token)?, now_s())
}

/// Tokens whose signature verified, so that a token used again costs a map lookup, not an
/// Ed25519 verification. Bounded (`max` tokens; the oldest-inserted go first); every use still
/// runs [`admit`], so revocation, key retirement and expiry apply to cached tokens at once.
#[derive(Debug)]
pub struct TokenCache {
    max: usize,
    inner: std::sync::Mutex<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    by_token: std::collections::HashMap<Box<str>, Verified>,
    order: std::collections::VecDeque<Box<str>>,
}

impl TokenCache {
    /// A cache of at most `max` tokens (0: no caching).
    #[must_use]
    pub fn new(max: usize) -> TokenCache {
        TokenCache { max, inner: std::sync::Mutex::new(CacheInner::default()) }
    }

    /// How many tokens are remembered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().by_token.len()
    }

    /// Whether no token is remembered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// [`verify`], remembering the signature check.
    ///
    /// # Errors
    /// The [`Refusal`].
    pub fn verify(&self, directory: &Directory, token: &str, now: u64) -> Result<Arc<Principal>, Refusal> {
        {
            let mut inner = self.lock();
            if let Some(verified) = inner.by_token.get(token) {
                let admitted = admit(directory, verified, now);
                if matches!(admitted, Err(Refusal::Expired | Refusal::UnknownKey)) {
                    inner.by_token.remove(token);
                }
                return admitted;
            }
        }
        let verified = verify_signature(directory, token)?;
        let admitted = admit(directory, &verified, now)?;
        if self.max > 0 {
            let mut inner = self.lock();
            // `order` holds every remembered token (and tokens dropped on expiry): bounding it
            // bounds both.
            while inner.order.len() >= self.max {
                let Some(oldest) = inner.order.pop_front() else { break };
                inner.by_token.remove(&oldest);
            }
            let key: Box<str> = token.into();
            if inner.by_token.insert(key.clone(), verified).is_none() {
                inner.order.push_back(key);
            }
        }
        Ok(admitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use paros_client::{Checkpointable as _, Seq};
    use paros_registry::{Command, Record, RequestId};

    struct Fixture {
        directory: Directory,
        next: u64,
    }

    impl Fixture {
        fn apply(&mut self, command: Command) {
            let record = Record { id: RequestId(u128::from(self.next) + 1), command };
            self.directory.apply(Seq(self.next), &record.encode());
            self.next += 1;
        }
    }

    fn fixture(keys: &[&KeyPair]) -> Fixture {
        let mut f = Fixture { directory: Directory::new(), next: 0 };
        f.apply(Command::InitCell {
            cell: paros_registry::CellId(1),
            members: vec![paros_registry::Member {
                id: paros_core::NodeId(1),
                bus_address: paros_registry::BusAddress::new("127.0.0.1:4222").unwrap(),
                zone: paros_registry::Zone::new("z").unwrap(),
            }],
            registry: paros_core::JournalId(2),
            limits: paros_registry::Limits::default(),
        });
        assert!(f.directory.cell().is_some(), "the cell formed");
        for key in keys {
            f.apply(Command::AddSigningKey {
                scope: KeyScope::Cell,
                kid: key.kid().clone(),
                public_key: Bytes::copy_from_slice(&key.public_key()),
            });
        }
        let name = paros_registry::TenantName::parse("acme").unwrap();
        f.apply(Command::SignUp { tenant: TenantId(7), name, quotas: paros_registry::Quotas::default() });
        f
    }

    fn key(kid: &str, seed: u8) -> KeyPair {
        KeyPair::from_seed(KeyId::new(kid).unwrap(), [seed; 32])
    }

    #[test]
    fn a_cached_token_is_still_refused_once_revoked_its_key_retired_or_it_expired() {
        let (a, b) = (key("a", 1), key("b", 2));
        let mut f = fixture(&[&a, &b]);
        let cache = TokenCache::new(8);
        let now = now_s();
        let (ta, jti) = mint_tenant_token(&a, TenantId(7), Scope::Write, None, now + 60);
        let (tb, _) = mint_tenant_token(&b, TenantId(7), Scope::Read, None, now + 60);
        assert!(cache.verify(&f.directory, &ta, now).is_ok());
        assert!(cache.verify(&f.directory, &tb, now).is_ok());
        assert_eq!(cache.len(), 2, "both remembered");
        assert!(cache.verify(&f.directory, &ta, now).is_ok(), "a hit admits");
        assert_eq!(cache.verify(&f.directory, &ta, now + 61), Err(Refusal::Expired), "expiry applies to a hit");

        assert!(cache.verify(&f.directory, &ta, now).is_ok());
        f.apply(Command::RevokeToken { tenant: TenantId(7), jti });
        assert_eq!(cache.verify(&f.directory, &ta, now), Err(Refusal::Revoked), "revocation applies to a hit");

        assert!(cache.verify(&f.directory, &tb, now).is_ok());
        f.apply(Command::RetireSigningKey { kid: b.kid().clone() });
        assert_eq!(cache.verify(&f.directory, &tb, now), Err(Refusal::UnknownKey), "retirement applies to a hit");
        assert_eq!(verify(&f.directory, &tb), Err(Refusal::UnknownKey), "and to a fresh check");
    }

    #[test]
    fn the_cache_is_bounded_and_forged_tokens_are_never_remembered() {
        let a = key("a", 1);
        let f = fixture(&[&a]);
        let cache = TokenCache::new(3);
        let now = now_s();
        for _ in 0..10 {
            let (t, _) = mint_tenant_token(&a, TenantId(7), Scope::Read, None, now + 60);
            assert!(cache.verify(&f.directory, &t, now).is_ok());
            assert!(cache.len() <= 3);
        }
        let (t, _) = mint_tenant_token(&key("a", 9), TenantId(7), Scope::Owner, None, now + 60);
        assert_eq!(cache.verify(&f.directory, &t, now), Err(Refusal::BadSignature), "another key's signature");
        assert_eq!(cache.verify(&f.directory, &t, now), Err(Refusal::BadSignature), "and again: nothing was cached");
        let (unknown, _) = mint_tenant_token(&a, TenantId(8), Scope::Owner, None, now + 60);
        assert_eq!(cache.verify(&f.directory, &unknown, now), Err(Refusal::UnknownTenant));
    }
}
