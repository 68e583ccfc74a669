//! Strict query strings: every parameter known, none repeated, none empty.

use std::collections::BTreeMap;

/// Why a query string is refused (400 `malformed`).
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum InvalidQuery {
    /// A parameter this route does not take.
    #[error("unknown query parameter {0:?}")]
    Unknown(String),
    /// A parameter given twice.
    #[error("query parameter {0:?} is given more than once")]
    Repeated(&'static str),
    /// A parameter this route needs is missing.
    #[error("query parameter {0:?} is required")]
    Missing(&'static str),
    /// A parameter whose value is not what it takes.
    #[error("query parameter {name:?}: {reason}")]
    BadValue { name: &'static str, reason: String },
    /// A piece with no `=`, an empty piece, or a broken `%` escape.
    #[error("malformed query string: {0}")]
    Syntax(&'static str),
}

/// The parameters of `raw` (without the leading `?`), each one of `known`, at most once.
///
/// `%XX` escapes are decoded; `+` is kept as a literal `+` (no parameter of API v1 holds
/// text, so a `+` can only be a mistake, which the value's own check then reports).
pub(crate) fn parse(raw: &str, known: &[&'static str]) -> Result<BTreeMap<&'static str, String>, InvalidQuery> {
    let mut params = BTreeMap::new();
    if raw.is_empty() {
        return Ok(params);
    }
    for piece in raw.split('&') {
        if piece.is_empty() {
            return Err(InvalidQuery::Syntax("an empty parameter (`&&` or a trailing `&`)"));
        }
        let Some((k, v)) = piece.split_once('=') else {
            return Err(InvalidQuery::Syntax("a parameter without `=`"));
        };
        let k = decode(k)?;
        let Some(&name) = known.iter().find(|&&n| n == k) else { return Err(InvalidQuery::Unknown(k)) };
        let v = decode(v)?;
        if v.is_empty() {
            return Err(InvalidQuery::BadValue { name, reason: "an empty value (omit the parameter instead)".into() });
        }
        if params.insert(name, v).is_some() {
            return Err(InvalidQuery::Repeated(name));
        }
    }
    Ok(params)
}

fn decode(raw: &str) -> Result<String, InvalidQuery> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let escape = InvalidQuery::Syntax("a `%` escape is two hex digits");
            let (Some(&hi), Some(&lo)) = (bytes.get(i + 1), bytes.get(i + 2)) else { return Err(escape) };
            let (Some(hi), Some(lo)) = (hex_digit(hi), hex_digit(lo)) else { return Err(escape) };
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| InvalidQuery::Syntax("an escape that decodes to invalid UTF-8"))
}

fn hex_digit(b: u8) -> Option<u8> {
    char::from(b).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::{InvalidQuery, parse};

    #[test]
    fn escapes_decode_and_broken_escapes_are_refused() {
        assert_eq!(parse("from=%31%32", &["from"]).map(|p| p["from"].clone()), Ok("12".to_owned()));
        assert!(matches!(parse("from=%3", &["from"]), Err(InvalidQuery::Syntax(_))));
        assert!(matches!(parse("from=%zz", &["from"]), Err(InvalidQuery::Syntax(_))));
        assert!(matches!(parse("from=%+1", &["from"]), Err(InvalidQuery::Syntax(_))));
        assert!(matches!(parse("from=%ff", &["from"]), Err(InvalidQuery::Syntax(_))));
    }
}
