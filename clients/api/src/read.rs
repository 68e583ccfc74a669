//! Read: `GET /v1/journals/{name}/records?from=…` — the query and the page it answers.

use core::fmt::Write as _;
use core::num::NonZeroU64;

use paros_core::Seq;
use paros_core::journal::JournalView;
use serde::{Deserialize, Serialize};

use crate::query::{self, InvalidQuery};
use crate::record::Record;

crate::object::objects_only!(Page);

/// A long-poll wait, in milliseconds: at most [`WaitMs::MAX`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct WaitMs(u16);

impl WaitMs {
    /// The longest wait API v1 allows; above it is 400.
    pub const MAX: u16 = 1000;

    /// A wait of `ms`, or `None` above [`WaitMs::MAX`].
    #[must_use]
    pub fn new(ms: u64) -> Option<WaitMs> {
        u16::try_from(ms).ok().filter(|&ms| ms <= Self::MAX).map(WaitMs)
    }

    /// The wait in milliseconds.
    #[must_use]
    pub fn get(self) -> u16 {
        self.0
    }
}

/// What a Read must see before it is served.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Consistency {
    /// Every write acknowledged before the read began; with `min_seq`, also the record there.
    Linearizable { min_seq: Option<Seq> },
    /// The record at `min_seq` applied (the server's `next_seq > min_seq`): read-your-writes.
    AtLeast { min_seq: Seq },
}

impl Default for Consistency {
    fn default() -> Self {
        Consistency::Linearizable { min_seq: None }
    }
}

/// A Read's query parameters, parsed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ReadQuery {
    /// The first position wanted (required).
    pub from: Seq,
    /// At most this many records; above the server's maximum it is clamped.
    pub limit: Option<NonZeroU64>,
    /// At most this many decoded record bytes (a page holds at least one record when one is there).
    pub max_bytes: Option<NonZeroU64>,
    /// How long an empty page waits for a record; 0 by default.
    pub wait_ms: WaitMs,
    pub consistency: Consistency,
}

const READ_PARAMS: [&str; 6] = ["from", "limit", "max_bytes", "wait_ms", "consistency", "min_seq"];

impl ReadQuery {
    /// A linearizable read from `from` with the server's defaults.
    #[must_use]
    pub fn from(from: Seq) -> ReadQuery {
        ReadQuery {
            from,
            limit: None,
            max_bytes: None,
            wait_ms: WaitMs::default(),
            consistency: Consistency::default(),
        }
    }

    /// Parses a query string (without the `?`).
    ///
    /// # Errors
    /// [`InvalidQuery`] for an unknown, repeated, empty or malformed parameter, a missing
    /// `from`, a zero `limit` or `max_bytes`, a `wait_ms` above 1000, or `at_least` without
    /// `min_seq`.
    pub fn parse(raw: &str) -> Result<ReadQuery, InvalidQuery> {
        let p = query::parse(raw, &READ_PARAMS)?;
        let seq = |name: &'static str| -> Result<Option<Seq>, InvalidQuery> {
            p.get(name)
                .map(|v| Seq::parse(v).map_err(|e| InvalidQuery::BadValue { name, reason: e.to_string() }))
                .transpose()
        };
        let at_least_one = |name: &'static str| -> Result<Option<NonZeroU64>, InvalidQuery> {
            seq(name)?
                .map(|s| NonZeroU64::new(s.0).ok_or(InvalidQuery::BadValue { name, reason: "at least 1".into() }))
                .transpose()
        };
        let from = seq("from")?.ok_or(InvalidQuery::Missing("from"))?;
        let limit = at_least_one("limit")?;
        let max_bytes = at_least_one("max_bytes")?;
        let wait_ms = match seq("wait_ms")? {
            None => WaitMs::default(),
            Some(ms) => {
                WaitMs::new(ms.0).ok_or(InvalidQuery::BadValue { name: "wait_ms", reason: "at most 1000".into() })?
            }
        };
        let min_seq = seq("min_seq")?;
        let consistency = match (p.get("consistency").map(String::as_str), min_seq) {
            (None, None) | (Some("linearizable"), None) => Consistency::Linearizable { min_seq: None },
            (Some("linearizable"), Some(s)) => Consistency::Linearizable { min_seq: Some(s) },
            (None | Some("at_least"), Some(s)) => Consistency::AtLeast { min_seq: s },
            (Some("at_least"), None) => return Err(InvalidQuery::Missing("min_seq")),
            (Some(other), _) => {
                return Err(InvalidQuery::BadValue {
                    name: "consistency",
                    reason: format!("{other:?} is neither linearizable nor at_least"),
                });
            }
        };
        Ok(ReadQuery { from, limit, max_bytes, wait_ms, consistency })
    }

    /// The query string (without the `?`) that [`ReadQuery::parse`] reads back as `self`;
    /// parameters at their defaults are left out.
    #[must_use]
    pub fn to_query(&self) -> String {
        let mut q = format!("from={}", self.from);
        if let Some(n) = self.limit {
            let _ = write!(q, "&limit={n}");
        }
        if let Some(n) = self.max_bytes {
            let _ = write!(q, "&max_bytes={n}");
        }
        if self.wait_ms.get() > 0 {
            let _ = write!(q, "&wait_ms={}", self.wait_ms.get());
        }
        match self.consistency {
            Consistency::Linearizable { min_seq: None } => {}
            Consistency::Linearizable { min_seq: Some(s) } => {
                let _ = write!(q, "&consistency=linearizable&min_seq={s}");
            }
            Consistency::AtLeast { min_seq } => {
                let _ = write!(q, "&min_seq={min_seq}");
            }
        }
        q
    }
}

/// Records at positions `from`, `from + 1`, …: a Read's 200 answer and a tail's `records` event.
///
/// `{"from", "records", "view"}`. Empty at the tail (or past it) once `wait_ms` passed.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
pub struct Page {
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::SeqSchema))]
    pub from: Seq,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub records: Vec<Record>,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::JournalViewSchema))]
    pub view: JournalView,
}

impl Page {
    /// The position after the page's last record: where the next read starts.
    #[must_use]
    pub fn next_from(&self) -> Option<Seq> {
        self.from.checked_plus(self.records.len() as u64)
    }
}
