//! The routes of the contract, one module per resource. Each handler checks in the contract's "which error
//! wins" order: 401 → 429 (the authentication layer) → 403 → 400 (path name) → 404 → 413
//! (body) → 400 (body, query) → 403 (minting past the parent) → 413 (write limits) → 409 / 410.
//! What they share lives beside them: [`crate::access`] (tokens, scopes, names) and
//! [`crate::wire`] (bodies and queries).

pub(crate) mod journals;
pub(crate) mod machines;
pub(crate) mod ops;
pub(crate) mod records;
pub(crate) mod seats;
pub(crate) mod session;
pub(crate) mod tail;
pub(crate) mod tenants;
