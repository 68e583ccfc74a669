//! The tenant's verbs: `paros signup`, `token`, `journal`, `write`, `read`, `tail`, `truncate`
//! and `set-leader`, over a gateway's HTTP API v1 (paros-client's `http` module).
//!
//! The gateway URL and the token come from `--url`/`--token`, else `PAROS_URL`/`PAROS_TOKEN`.
//! Text goes to stdout by default, one JSON document (or one per line, for `tail`) with
//! `--json`; diagnostics go to stderr. Exit codes ([`Failure::exit_code`]): 0 ok, 2 bad
//! arguments, 3 refused / lost / fenced, 4 ambiguous, 5 unavailable, 6 unauthorized /
//! forbidden, 1 anything else (an answer outside the contract).

mod run;

use std::num::NonZeroU64;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use paros_api::{JournalName, LeaderUuid, Scope, TenantName, WriterMode};
use paros_client::{Decided, GatewayError, WriterError};
use paros_core::journal::Outcome;

pub use run::execute;

/// Where the gateway is and who is asking; shared by every verb.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct Gateway {
    /// The gateway's URL (default: $PAROS_URL).
    #[arg(long)]
    pub url: Option<String>,
    /// The bearer token (default: $PAROS_TOKEN).
    #[arg(long)]
    pub token: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The tenant verbs, flattened into the `paros` binary's subcommands.
#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Create a tenant; prints its owner token.
    Signup {
        name: TenantName,
        #[command(flatten)]
        gateway: Gateway,
    },
    /// Mint or revoke tokens (needs an owner token).
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Create, list, show or delete journals.
    Journal {
        #[command(subcommand)]
        command: JournalCommand,
    },
    /// Write records (the arguments, else one per stdin line), in batches. A single-writer
    /// journal is claimed under a fresh leader uuid unless `--leader` names the one in force.
    Write {
        journal: JournalName,
        records: Vec<String>,
        /// Write under this leader uuid (already in force) instead of claiming.
        #[arg(long)]
        leader: Option<LeaderUuid>,
        /// Records per batch.
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
        batch: u32,
        /// Records are given in standard base64.
        #[arg(long)]
        base64: bool,
        #[command(flatten)]
        gateway: Gateway,
    },
    /// Read one page of records from `--from`.
    Read {
        journal: JournalName,
        #[arg(long)]
        from: u64,
        #[arg(long)]
        limit: Option<NonZeroU64>,
        #[arg(long)]
        max_bytes: Option<NonZeroU64>,
        /// Wait at the tail this long for a record (at most 1000).
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1000))]
        wait_ms: u64,
        /// Read-your-writes: served once the record at this position is applied.
        #[arg(long)]
        min_seq: Option<u64>,
        /// Print records in base64 instead of text.
        #[arg(long)]
        base64: bool,
        #[command(flatten)]
        gateway: Gateway,
    },
    /// Follow the journal (SSE) from `--from`, or from its tail; gaps are reported on stderr.
    Tail {
        journal: JournalName,
        #[arg(long)]
        from: Option<u64>,
        /// Print records in base64 instead of text.
        #[arg(long)]
        base64: bool,
        #[command(flatten)]
        gateway: Gateway,
    },
    /// Trim everything below `--up-to` (under `--leader` on a single-writer journal).
    Truncate {
        journal: JournalName,
        #[arg(long)]
        up_to: u64,
        #[arg(long)]
        leader: Option<LeaderUuid>,
        #[command(flatten)]
        gateway: Gateway,
    },
    /// Compare-and-set the writer in force: `--old` (none: a journal never led) to `--new`.
    SetLeader {
        journal: JournalName,
        #[arg(long)]
        new: LeaderUuid,
        #[arg(long)]
        old: Option<LeaderUuid>,
        #[command(flatten)]
        gateway: Gateway,
    },
}

#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum TokenCommand {
    /// Mint a token no wider than the one asking.
    Mint {
        #[arg(long, value_enum)]
        scope: ScopeArg,
        /// Restrict the token to one journal.
        #[arg(long)]
        journal: Option<JournalName>,
        #[arg(long)]
        expires_in_s: Option<NonZeroU64>,
        #[command(flatten)]
        gateway: Gateway,
    },
    /// Revoke a token by its id.
    Revoke {
        token_id: String,
        #[command(flatten)]
        gateway: Gateway,
    },
}

#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum JournalCommand {
    /// Create a journal of this tenant.
    Create {
        name: JournalName,
        #[arg(long, value_enum, default_value = "single_writer")]
        mode: ModeArg,
        #[command(flatten)]
        gateway: Gateway,
    },
    /// List this tenant's journals.
    List {
        #[command(flatten)]
        gateway: Gateway,
    },
    /// Show one journal: its mode, leader and retained positions.
    Show {
        name: JournalName,
        #[command(flatten)]
        gateway: Gateway,
    },
    /// Delete a journal and every record it holds.
    Delete {
        name: JournalName,
        #[command(flatten)]
        gateway: Gateway,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScopeArg {
    Read,
    Write,
    Owner,
}

impl From<ScopeArg> for Scope {
    fn from(s: ScopeArg) -> Scope {
        match s {
            ScopeArg::Read => Scope::Read,
            ScopeArg::Write => Scope::Write,
            ScopeArg::Owner => Scope::Owner,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeArg {
    #[value(name = "single_writer", alias = "single-writer")]
    SingleWriter,
    #[value(name = "multi_writer", alias = "multi-writer")]
    MultiWriter,
}

impl From<ModeArg> for WriterMode {
    fn from(m: ModeArg) -> WriterMode {
        match m {
            ModeArg::SingleWriter => WriterMode::SingleWriter,
            ModeArg::MultiWriter => WriterMode::MultiWriter,
        }
    }
}

/// How a verb failed, and the exit code that says so.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// Exit 2.
    #[error("{0}")]
    BadArgs(String),
    /// Exit 3: refused, lost, fenced, truncated, too large, no such journal or name taken.
    #[error("{0}")]
    Refused(String),
    /// Exit 4: may or may not have taken effect.
    #[error("{0}")]
    Ambiguous(String),
    /// Exit 5: nothing was done; try again later.
    #[error("{0}")]
    Unavailable(String),
    /// Exit 6: the token does not allow it.
    #[error("{0}")]
    Denied(String),
    /// Exit 1.
    #[error("{0}")]
    Other(String),
}

impl Failure {
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Other(_) => 1,
            Failure::BadArgs(_) => 2,
            Failure::Refused(_) => 3,
            Failure::Ambiguous(_) => 4,
            Failure::Unavailable(_) => 5,
            Failure::Denied(_) => 6,
        }
    }

    /// A gateway error. `read_only`: the request changes nothing, so a lost answer is
    /// unavailability, not ambiguity.
    #[must_use]
    pub fn from_gateway(e: &GatewayError, read_only: bool) -> Failure {
        let msg = e.to_string();
        match e {
            GatewayError::Url { .. } | GatewayError::BadToken => Failure::BadArgs(msg),
            GatewayError::NotSent(_) => Failure::Unavailable(msg),
            GatewayError::NoAnswer(_) if read_only => Failure::Unavailable(msg),
            GatewayError::NoAnswer(_) => Failure::Ambiguous(msg),
            GatewayError::Tail(_) => Failure::Other(msg),
            GatewayError::Api { status, error, retry_after_s } => {
                if error.code().is_none() && !matches!(status, 503 | 504) {
                    return Failure::Other(msg);
                }
                let msg = match retry_after_s {
                    Some(s) => format!("{msg} (retry after {s} s)"),
                    None => msg,
                };
                Failure::from_status(*status, msg, read_only)
            }
        }
    }

    fn from_status(status: u16, msg: String, read_only: bool) -> Failure {
        match status {
            400 => Failure::BadArgs(msg),
            401 | 403 => Failure::Denied(msg),
            429 | 503 => Failure::Unavailable(msg),
            504 if read_only => Failure::Unavailable(msg),
            504 => Failure::Ambiguous(msg),
            404 | 409 | 410 | 413 => Failure::Refused(msg),
            _ => Failure::Other(msg),
        }
    }

    /// A call the client policy decided without an acknowledgement.
    #[must_use]
    pub fn from_decided(decided: &Decided) -> Failure {
        match decided {
            Decided::Verdict(o) => match o {
                Outcome::Refused(v) => Failure::Refused(format!(
                    "refused: the journal's tail is {}, led by {}",
                    v.next_seq.0,
                    leader(v.leader)
                )),
                Outcome::Truncated(v) => {
                    Failure::Refused(format!("truncated: the journal starts at {}", v.first_seq.0))
                }
                Outcome::WrongMode(_) => {
                    Failure::Refused("wrong_mode: the call is shaped for the other writer mode".into())
                }
                Outcome::Lost(v) => Failure::Refused(format!("lost: the journal is led by {}", leader(v.leader))),
                Outcome::TruncateRefused(v) => {
                    Failure::Refused(format!("truncate_refused: the writer in force is {}", leader(v.leader)))
                }
                ok => Failure::Other(format!("unexpected verdict {ok:?}")),
            },
            Decided::TooLarge(t) => Failure::Refused(format!(
                "too_large: at most {} records and {} bytes per write",
                t.max_records, t.max_bytes
            )),
            Decided::Ambiguous => Failure::Ambiguous("ambiguous: the call may or may not have taken effect".into()),
            Decided::Unavailable => {
                Failure::Unavailable("unavailable: no answer within the client's bounds; nothing was done".into())
            }
            Decided::UnknownJournal => Failure::Refused("unknown_journal".into()),
            Decided::Denied { denial, ambiguous } => {
                let mut msg = format!("denied: {denial}");
                if *ambiguous {
                    msg.push_str(" (after an attempt that got no answer: the call may have taken effect)");
                }
                if denial.code == "contract" {
                    return Failure::Other(msg);
                }
                Failure::from_status(denial.status, msg, false)
            }
        }
    }

    /// A writer's error.
    #[must_use]
    pub fn from_writer(e: &WriterError) -> Failure {
        match e {
            WriterError::Superseded { view } => {
                Failure::Refused(format!("fenced: the journal is led by {} now", leader(view.leader)))
            }
            WriterError::Lost { view } => Failure::Refused(format!("lost the claim to {}", leader(view.leader))),
            WriterError::Halted { at } => Failure::Refused(format!("halted: the batch at {} failed", at.0)),
            WriterError::Failed { seq, decided } => {
                let f = Failure::from_decided(decided);
                f.with_prefix(&format!("the batch at {}", seq.0))
            }
            WriterError::Undecided { decided } => Failure::from_decided(decided),
            other => Failure::Other(other.to_string()),
        }
    }

    fn with_prefix(self, prefix: &str) -> Failure {
        let wrap = |m: String| format!("{prefix}: {m}");
        match self {
            Failure::BadArgs(m) => Failure::BadArgs(wrap(m)),
            Failure::Refused(m) => Failure::Refused(wrap(m)),
            Failure::Ambiguous(m) => Failure::Ambiguous(wrap(m)),
            Failure::Unavailable(m) => Failure::Unavailable(wrap(m)),
            Failure::Denied(m) => Failure::Denied(wrap(m)),
            Failure::Other(m) => Failure::Other(wrap(m)),
        }
    }
}

fn leader(l: Option<paros_core::LeaderUuid>) -> String {
    l.map_or_else(|| "nobody".to_owned(), |u| paros_client::convert::api_uuid(u).to_string())
}

/// Runs one verb to completion and turns its result into the process's exit code.
pub fn run(verb: Verb, runtime: &tokio::runtime::Runtime) -> ExitCode {
    let env = |k: &str| std::env::var(k).ok();
    match runtime.block_on(execute(verb, &env)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("paros: {f}");
            ExitCode::from(f.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use paros_client::Denial;
    use paros_core::Seq;
    use paros_core::journal::{JournalView, TooLarge};

    #[derive(Parser, Debug)]
    struct T {
        #[command(subcommand)]
        verb: Verb,
    }

    fn parse(args: &[&str]) -> Result<Verb, clap::Error> {
        T::try_parse_from(std::iter::once("paros").chain(args.iter().copied())).map(|t| t.verb)
    }

    const U: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";

    /// Every verb and sub-verb says what it does in `--help`, in its own words: a subcommand
    /// without a doc comment shows the doc of the `Gateway` flags it flattens instead.
    #[test]
    fn every_verb_has_its_own_help_line() {
        use clap::CommandFactory;
        fn walk(cmd: &clap::Command, path: &str, abouts: &mut Vec<(String, String)>) {
            for sub in cmd.get_subcommands() {
                let path = format!("{path} {}", sub.get_name());
                abouts.push((path.clone(), sub.get_about().map(|a| a.to_string()).unwrap_or_default()));
                walk(sub, &path, abouts);
            }
        }
        let mut abouts = Vec::new();
        walk(&T::command(), "paros", &mut abouts);
        assert!(abouts.len() > 10, "{abouts:?}");
        for (path, about) in &abouts {
            assert!(!about.is_empty() && !about.starts_with("Where the gateway is"), "{path}: {about:?}");
        }
    }

    #[test]
    fn write_takes_records_a_leader_and_gateway_flags() {
        let v = parse(&["write", "orders", "a", "b", "--leader", U, "--batch", "2", "--url", "http://g", "--json"])
            .unwrap();
        assert_eq!(
            v,
            Verb::Write {
                journal: JournalName::parse("orders").unwrap(),
                records: vec!["a".into(), "b".into()],
                leader: Some(LeaderUuid::parse(U).unwrap()),
                batch: 2,
                base64: false,
                gateway: Gateway { url: Some("http://g".into()), token: None, json: true },
            }
        );
    }

    #[test]
    fn token_mint_and_journal_create_parse_their_enums() {
        let v = parse(&["token", "mint", "--scope", "read", "--journal", "orders", "--expires-in-s", "60"]).unwrap();
        let Verb::Token { command: TokenCommand::Mint { scope, journal, expires_in_s, .. } } = v else {
            panic!("a token mint: {v:?}")
        };
        assert!(matches!(scope, ScopeArg::Read) && journal.is_some(), "{scope:?} {journal:?}");
        assert_eq!(expires_in_s.map(|n| n.get()), Some(60));
        let v = parse(&["journal", "create", "orders", "--mode", "multi_writer"]).unwrap();
        assert!(matches!(v, Verb::Journal { command: JournalCommand::Create { mode: ModeArg::MultiWriter, .. } }));
        let v = parse(&["journal", "create", "orders"]).unwrap();
        assert!(matches!(v, Verb::Journal { command: JournalCommand::Create { mode: ModeArg::SingleWriter, .. } }));
        assert!(matches!(
            parse(&["journal", "list", "--token", "t"]).unwrap(),
            Verb::Journal { command: JournalCommand::List { .. } }
        ));
    }

    #[test]
    fn bad_arguments_are_refused_with_exit_code_2() {
        for bad in [
            &["token", "mint", "--scope", "admin"][..],
            &["journal", "create", "-bad-name"],
            &["read", "orders"],
            &["read", "orders", "--from", "-1"],
            &["read", "orders", "--from", "0", "--wait-ms", "1001"],
            &["read", "orders", "--from", "0", "--limit", "0"],
            &["set-leader", "orders", "--new", "0F8B1C2E-4A5D-4E6F-9A0B-1C2D3E4F5A6B"],
            &["set-leader", "orders", "--new", "00000000-0000-0000-0000-000000000000"],
            &["truncate", "orders", "--leader", U],
            &["write", "orders", "--batch", "0"],
            &["signup", "Acme"],
        ] {
            let e = parse(bad).expect_err(&format!("{bad:?} must be refused"));
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }

    #[test]
    fn set_leader_truncate_tail_and_read_parse() {
        let v = parse(&["set-leader", "orders", "--new", U]).unwrap();
        assert!(matches!(v, Verb::SetLeader { old: None, .. }));
        let v = parse(&["truncate", "orders", "--up-to", "5", "--leader", U]).unwrap();
        assert!(matches!(v, Verb::Truncate { up_to: 5, leader: Some(_), .. }));
        let v = parse(&["tail", "orders", "--from", "3"]).unwrap();
        assert!(matches!(v, Verb::Tail { from: Some(3), .. }));
        let v =
            parse(&["read", "orders", "--from", "3", "--limit", "10", "--wait-ms", "500", "--min-seq", "2"]).unwrap();
        assert!(matches!(v, Verb::Read { from: 3, wait_ms: 500, min_seq: Some(2), .. }));
    }

    fn view() -> JournalView {
        JournalView { leader: None, first_seq: Seq(0), next_seq: Seq(4) }
    }

    #[test]
    fn decided_calls_map_to_their_exit_codes() {
        let denial =
            |status, code| Decided::Denied { denial: Denial { status, code, retry_after_s: None }, ambiguous: false };
        let cases = [
            (Decided::Verdict(Outcome::Refused(view())), 3),
            (Decided::Verdict(Outcome::Lost(view())), 3),
            (Decided::Verdict(Outcome::TruncateRefused(view())), 3),
            (Decided::Verdict(Outcome::Truncated(view())), 3),
            (Decided::TooLarge(TooLarge { max_records: 1, max_bytes: 1 }), 3),
            (Decided::UnknownJournal, 3),
            (Decided::Ambiguous, 4),
            (Decided::Unavailable, 5),
            (denial(401, "unauthorized"), 6),
            (denial(403, "forbidden"), 6),
            (denial(429, "over_quota"), 5),
            (denial(400, "malformed"), 2),
            (denial(409, "contract"), 1),
        ];
        for (decided, code) in cases {
            assert_eq!(Failure::from_decided(&decided).exit_code(), code, "{decided:?}");
        }
        let fenced = WriterError::Superseded { view: view() };
        assert_eq!(Failure::from_writer(&fenced).exit_code(), 3);
        let failed = WriterError::Failed { seq: Seq(3), decided: Decided::Ambiguous };
        assert_eq!(Failure::from_writer(&failed).exit_code(), 4);
    }

    #[test]
    fn gateway_errors_map_to_their_exit_codes() {
        let api = |status: u16, code: paros_api::ErrorCode| GatewayError::Api {
            status,
            error: paros_api::ApiError::Answered(Box::new(paros_api::ErrorBody::new(code, "m"))),
            retry_after_s: None,
        };
        use paros_api::ErrorCode as C;
        let cases = [
            (api(401, C::Unauthorized), false, 6),
            (api(403, C::Forbidden), true, 6),
            (api(429, C::OverQuota), false, 5),
            (api(503, C::Unavailable), false, 5),
            (api(504, C::Ambiguous), false, 4),
            (api(404, C::UnknownJournal), true, 3),
            (api(409, C::NameTaken), false, 3),
            (api(400, C::Malformed), false, 2),
            (GatewayError::NotSent("refused".into()), false, 5),
            (GatewayError::NoAnswer("timeout".into()), false, 4),
            (GatewayError::NoAnswer("timeout".into()), true, 5),
            (GatewayError::BadToken, false, 2),
            (GatewayError::Tail("bad".into()), true, 1),
        ];
        for (e, read_only, code) in cases {
            assert_eq!(Failure::from_gateway(&e, read_only).exit_code(), code, "{e:?}");
        }
    }
}
