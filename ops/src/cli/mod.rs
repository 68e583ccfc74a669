//! The tenant's verbs: `paros signup`, `token`, `journal`, `write`, `read`, `tail`, `truncate`
//! and `set-leader`, over a gateway's HTTP API v1 (paros-client's `http` module).
//!
//! The gateway URL and the token come from `--url`/`--token`, else `PAROS_URL`/`PAROS_TOKEN`.
//! Text goes to stdout by default, one JSON document (or one per line, for `tail`) with
//! `--json`; diagnostics go to stderr. Exit codes ([`Failure::exit_code`]): 0 ok, 2 bad
//! arguments, 3 refused / lost / fenced, 4 ambiguous, 5 unavailable, 6 unauthorized /
//! forbidden, 1 anything else (an answer outside the contract).

mod cell;
mod run;

use std::num::NonZeroU64;

use clap::{Args, Subcommand, ValueEnum};
use paros_api::{InvalidOpaque, InvalidRecord, JournalName, LeaderUuid, Scope, TenantName, WriteOutcome, WriterMode};
use paros_client::{AnswerError, Decided, GatewayError, WriterConfigError, WriterError};
use paros_core::Seq;
use paros_core::journal::{JournalView, Outcome};
use serde_json::json;

pub use cell::{CellVerb, MoveArgs, execute_cell};
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
    /// Speak plain HTTP/1.1: one request per call, no HTTP/2 and no append sessions (for a
    /// proxy that speaks neither). Default: $PAROS_HTTP1 set to anything but `0`, else off.
    #[arg(long)]
    pub http1: bool,
    /// PEM certificates to trust beside the system's, for an `https://` gateway whose
    /// certificate a private authority signed, or that signed its own (default: $PAROS_CA_FILE).
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<std::path::PathBuf>,
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
    /// Write records (the arguments, else one per stdin line, written as the lines arrive: a
    /// live stream can be piped in), in batches of the records ready together. A single-writer
    /// journal is claimed under a fresh leader uuid unless `--leader` names the one in force;
    /// its batches are pipelined on one append session.
    Write {
        journal: JournalName,
        records: Vec<String>,
        /// Write under this leader uuid (already in force) instead of claiming.
        #[arg(long)]
        leader: Option<LeaderUuid>,
        /// Records per batch at most.
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
        /// When `--from` was truncated away, report the gap on stderr (as `tail` does) and read
        /// from the journal's first retained position, instead of exiting 3.
        #[arg(long)]
        through_gaps: bool,
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
        /// The replica tier to place it on (default: the cell's `default` tier).
        #[arg(long, value_name = "NAME", value_parser = tier_name)]
        tier: Option<String>,
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
    /// Move a journal's seat from one voter to another node (an admin token). The registry
    /// records the move; its mover has the journal decide it and records it done once the
    /// target holds the journal (`paros cell status` shows it until then).
    Move(MoveArgs),
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

/// How a verb failed: one variant per reason, with the typed cause as its source where there is
/// one. [`Failure::exit_code`] derives the exit class from the reason; the message of a variant
/// says what happened and leaves its source's message to the chain the caller prints.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Neither `--url` nor `PAROS_URL` names the gateway. Exit 2.
    #[error("no gateway URL: give --url or set PAROS_URL")]
    NoUrl,
    /// The token (`--token` or `PAROS_TOKEN`) is not one. Exit 2.
    #[error("the token")]
    BadToken {
        #[source]
        source: InvalidOpaque,
    },
    /// `token revoke` was given something that is not a token id. Exit 2.
    #[error("token id {id:?}")]
    BadTokenId {
        id: String,
        #[source]
        source: InvalidOpaque,
    },
    /// A `--base64` record that does not decode. Exit 2.
    #[error("{record:?}")]
    BadRecord {
        record: String,
        #[source]
        source: InvalidRecord,
    },
    /// `write` got no records (none as arguments, an empty stdin). Exit 2.
    #[error("no records to write")]
    NoRecords,
    /// `write --leader` on a multi-writer journal. Exit 2.
    #[error("a multi-writer journal takes no --leader")]
    LeaderOnMultiWriter,
    /// `--wait-ms` above the API's bound. Exit 2.
    #[error("--wait-ms is at most 1000 (not {wait_ms})")]
    WaitTooLong { wait_ms: u64 },
    /// The input the verb was given (the records on stdin) could not be read. Exit 2.
    #[error("{what}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A request to the gateway came to no answer of its call; the exit class follows the
    /// error (and `read_only`: a request that changes nothing is unavailable, not ambiguous,
    /// when its answer is lost).
    #[error("{}", gateway_text(.error, .read_only))]
    Gateway {
        #[source]
        error: GatewayError,
        read_only: bool,
    },
    /// A call the client policy decided without the verdict the verb wanted: a refusing
    /// verdict (exit 3), too large or no such journal (3), ambiguous (4), unavailable (5), a
    /// denial (by its status), or a verdict no call of this verb gets (1).
    #[error("{}", decided_text(.decided))]
    Decided { decided: Decided },
    /// Another writer took the journal while this one wrote. Exit 3.
    #[error("fenced: the journal is led by {} now", leader(.view.leader))]
    Fenced { view: JournalView },
    /// The claim's compare-and-set lost to another writer. Exit 3.
    #[error("lost the claim to {}", leader(.view.leader))]
    ClaimLost { view: JournalView },
    /// The writer stopped after the batch at `at` failed. Exit 3.
    #[error("halted: the batch at {} failed", .at.0)]
    Halted { at: Seq },
    /// The writer refused a call the verb made of it. Exit 1.
    #[error("the writer refused the call")]
    Writer {
        #[source]
        error: WriterError,
    },
    /// The writer's configuration was refused. Exit 1.
    #[error("the writer's configuration")]
    WriterConfig {
        #[source]
        error: WriterConfigError,
    },
    /// An operator route answered an error (its own code, or the contract's); the exit class
    /// follows the status as for the tenant verbs.
    #[error("{} ({status} {code}): {message}", operator_class(*.status, *.read_only))]
    Operator { status: u16, code: String, message: String, read_only: bool },
    /// An answer that cannot answer the call it came back for. Exit 1.
    #[error("an answer outside the contract")]
    Answer {
        #[source]
        error: AnswerError,
    },
    /// A truncate shaped for the other writer mode: a single-writer journal is truncated by its
    /// writer in force (`--leader`), a multi-writer journal with no `--leader`. Exit 3.
    #[error("{}", truncate_shape_text(.journal, *.leader_given, .view))]
    TruncateShape { journal: JournalName, leader_given: bool, view: JournalView },
    /// The read's `--from` is below the journal's first retained position. Exit 3.
    #[error("truncated: {journal} starts at {} now", .view.first_seq)]
    ReadTruncated { journal: JournalName, view: JournalView },
    /// The read was not served within its bounds; `applied_to` is how far the server that got
    /// furthest had applied the journal, when one said. Exit 5.
    #[error("{}", unserved_text(*.applied_to))]
    ReadUnserved { applied_to: Option<Seq> },
    /// A multi-writer append answered with an outcome other than its acknowledgement, after
    /// `after` records were appended: ambiguous (exit 4), too large or refused (3).
    #[error("{}", append_text(.outcome, .after))]
    Append { outcome: WriteOutcome, after: u64 },
    /// A JSON document the verb prints could not be made. Exit 1.
    #[error("{what}")]
    Json {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// A single-writer batch at `seq` failed; the exit class is the failure's.
    #[error("the batch at {seq}")]
    Batch {
        seq: u64,
        #[source]
        failure: Box<Failure>,
    },
    /// A multi-writer append failed after `records` records; the exit class is the failure's.
    #[error("after {records} records")]
    Appending {
        records: u64,
        #[source]
        failure: Box<Failure>,
    },
}

/// The exit classes, as the module doc lists them.
const OTHER: u8 = 1;
const BAD_ARGS: u8 = 2;
const REFUSED: u8 = 3;
const AMBIGUOUS: u8 = 4;
const UNAVAILABLE: u8 = 5;
const DENIED: u8 = 6;

impl Failure {
    /// The process's exit code for this failure: 1 other, 2 bad arguments, 3 refused, 4
    /// ambiguous, 5 unavailable, 6 denied.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::NoUrl
            | Failure::BadToken { .. }
            | Failure::BadTokenId { .. }
            | Failure::BadRecord { .. }
            | Failure::NoRecords
            | Failure::LeaderOnMultiWriter
            | Failure::WaitTooLong { .. }
            | Failure::Io { .. } => BAD_ARGS,
            Failure::Gateway { error, read_only } => gateway_code(error, *read_only),
            Failure::Operator { status, read_only, .. } => status_code(*status, *read_only),
            Failure::Decided { decided } => decided_code(decided),
            Failure::Fenced { .. } | Failure::ClaimLost { .. } | Failure::Halted { .. } => REFUSED,
            Failure::ReadTruncated { .. } | Failure::TruncateShape { .. } => REFUSED,
            Failure::ReadUnserved { .. } => UNAVAILABLE,
            Failure::Append { outcome, .. } => match outcome {
                WriteOutcome::Ambiguous => AMBIGUOUS,
                WriteOutcome::TooLarge { .. }
                | WriteOutcome::Refused(_)
                | WriteOutcome::WrongMode(_)
                | WriteOutcome::Truncated(_) => REFUSED,
                WriteOutcome::Accepted { .. } | WriteOutcome::Duplicate { .. } => OTHER,
            },
            Failure::Writer { .. } | Failure::WriterConfig { .. } | Failure::Answer { .. } | Failure::Json { .. } => {
                OTHER
            }
            Failure::Batch { failure, .. } | Failure::Appending { failure, .. } => failure.exit_code(),
        }
    }

    /// A gateway error. `read_only`: the request changes nothing, so a lost answer is
    /// unavailability, not ambiguity.
    #[must_use]
    pub fn from_gateway(error: GatewayError, read_only: bool) -> Failure {
        Failure::Gateway { error, read_only }
    }

    /// A call the client policy decided without an acknowledgement.
    #[must_use]
    pub fn from_decided(decided: Decided) -> Failure {
        Failure::Decided { decided }
    }

    /// A writer's error.
    #[must_use]
    pub fn from_writer(error: WriterError) -> Failure {
        match error {
            WriterError::Superseded { view } => Failure::Fenced { view },
            WriterError::Lost { view } => Failure::ClaimLost { view },
            WriterError::Halted { at } => Failure::Halted { at },
            WriterError::Failed { seq, decided } => {
                Failure::Batch { seq: seq.0, failure: Box::new(Failure::Decided { decided }) }
            }
            WriterError::Undecided { decided } => Failure::Decided { decided },
            WriterError::Denied { denial, ambiguous } => {
                Failure::Decided { decided: Decided::Denied { denial, ambiguous } }
            }
            WriterError::Answer(error) => Failure::Answer { error },
            error => Failure::Writer { error },
        }
    }
}

fn gateway_code(e: &GatewayError, read_only: bool) -> u8 {
    match e {
        GatewayError::Url { .. } | GatewayError::BadToken | GatewayError::Roots(_) => BAD_ARGS,
        GatewayError::NotSent(_) => UNAVAILABLE,
        GatewayError::NoAnswer(_) if read_only => UNAVAILABLE,
        GatewayError::NoAnswer(_) => AMBIGUOUS,
        GatewayError::Tail(_) => OTHER,
        GatewayError::Denied(d) => {
            if e.code().is_none() && !matches!(d.status, 503 | 504) {
                OTHER
            } else {
                status_code(d.status, read_only)
            }
        }
    }
}

fn status_code(status: u16, read_only: bool) -> u8 {
    match status {
        400 => BAD_ARGS,
        401 | 403 => DENIED,
        429 | 503 => UNAVAILABLE,
        504 if read_only => UNAVAILABLE,
        504 => AMBIGUOUS,
        404 | 409 | 410 | 413 => REFUSED,
        _ => OTHER,
    }
}

fn operator_class(status: u16, read_only: bool) -> &'static str {
    match status_code(status, read_only) {
        BAD_ARGS => "bad request",
        REFUSED => "refused",
        AMBIGUOUS => "ambiguous: the call may or may not have taken effect",
        UNAVAILABLE => "unavailable: nothing was done",
        DENIED => "denied",
        _ => "unexpected answer",
    }
}

/// What a gateway error came to, by its exit class; the error's own message follows it.
fn gateway_text(e: &GatewayError, read_only: &bool) -> String {
    let class = match gateway_code(e, *read_only) {
        BAD_ARGS if matches!(e, GatewayError::Url { .. } | GatewayError::BadToken | GatewayError::Roots(_)) => {
            "cannot talk to the gateway"
        }
        BAD_ARGS => "bad request",
        REFUSED => "refused",
        AMBIGUOUS => "ambiguous: the call may or may not have taken effect",
        UNAVAILABLE if matches!(e, GatewayError::NoAnswer(_)) => "unavailable",
        UNAVAILABLE => "unavailable: nothing was done",
        DENIED => "denied",
        _ => "unexpected answer",
    };
    // A refusal's own message names its `Retry-After`.
    class.to_owned()
}

fn decided_code(decided: &Decided) -> u8 {
    match decided {
        Decided::Verdict(
            Outcome::Refused(_)
            | Outcome::Truncated(_)
            | Outcome::WrongMode(_)
            | Outcome::Lost(_)
            | Outcome::TruncateRefused(_),
        )
        | Decided::TooLarge(_)
        | Decided::UnknownJournal => REFUSED,
        Decided::Verdict(_) => OTHER,
        Decided::Ambiguous => AMBIGUOUS,
        Decided::Unavailable => UNAVAILABLE,
        Decided::Denied { denial, .. } if denial.code == "contract" => OTHER,
        Decided::Denied { denial, .. } => status_code(denial.status, false),
    }
}

fn decided_text(decided: &Decided) -> String {
    match decided {
        Decided::Verdict(o) => match o {
            Outcome::Refused(v) => {
                format!("refused: the journal's tail is {}, led by {}", v.next_seq.0, leader(v.leader))
            }
            Outcome::Truncated(v) => format!("truncated: the journal starts at {}", v.first_seq.0),
            Outcome::WrongMode(_) => "wrong_mode: the call is shaped for the other writer mode".into(),
            Outcome::Lost(v) => format!("lost: the journal is led by {}", leader(v.leader)),
            Outcome::TruncateRefused(v) => format!("truncate_refused: the writer in force is {}", leader(v.leader)),
            ok => format!("unexpected verdict {ok:?}"),
        },
        Decided::TooLarge(t) => {
            format!("too_large: at most {} records and {} bytes per write", t.max_records, t.max_bytes)
        }
        Decided::Ambiguous => "ambiguous: the call may or may not have taken effect".into(),
        Decided::Unavailable => "unavailable: no answer within the client's bounds; nothing was done".into(),
        Decided::UnknownJournal => "unknown_journal".into(),
        Decided::Denied { denial, ambiguous } => {
            let mut msg = format!("denied: {denial}");
            if *ambiguous {
                msg.push_str(" (after an attempt that got no answer: the call may have taken effect)");
            }
            msg
        }
    }
}

/// What an unserved read prints: how far a server had applied the journal, when one said.
fn unserved_text(applied_to: Option<Seq>) -> String {
    match applied_to {
        Some(a) => format!("unavailable: the read was not served in time (a server had applied up to {a})"),
        None => "unavailable: the read was not served in time".to_owned(),
    }
}

fn truncate_shape_text(journal: &JournalName, leader_given: bool, view: &JournalView) -> String {
    if leader_given {
        format!("wrong_mode: {journal} has many writers; truncate it without --leader")
    } else {
        match view.leader {
            Some(u) => format!("wrong_mode: {journal} has a single writer; pass --leader {u} (the writer in force)"),
            None => format!(
                "wrong_mode: {journal} has a single writer and none claimed it yet; \
                 claim it with `paros set-leader {journal} --new <uuid>`, then truncate with --leader <uuid>"
            ),
        }
    }
}

fn append_text(outcome: &WriteOutcome, after: &u64) -> String {
    match outcome {
        WriteOutcome::Ambiguous => format!("after {after} records: the next batch may or may not have been appended"),
        WriteOutcome::TooLarge { limits, .. } => format!(
            "too_large: at most {} records, {} bytes, {} body bytes per write",
            limits.max_records, limits.max_bytes, limits.max_body_bytes
        ),
        WriteOutcome::Refused(v) | WriteOutcome::WrongMode(v) | WriteOutcome::Truncated(v) => {
            format!("refused: the journal's tail is {}", v.next_seq)
        }
        ok => format!("after {after} records: unexpected outcome {ok:?}"),
    }
}

fn leader(l: Option<paros_core::LeaderUuid>) -> String {
    l.map_or_else(|| "nobody".to_owned(), |u| u.to_string())
}

/// Runs one `paros cell` verb spoken to a gateway; as [`run`].
///
/// # Errors
/// The verb's [`Failure`].
pub fn run_cell(verb: CellVerb, runtime: &tokio::runtime::Runtime) -> Result<(), Failure> {
    let env = |k: &str| std::env::var(k).ok();
    runtime.block_on(execute_cell(verb, &env))
}

/// Runs one verb to completion; the caller prints a failure's chain and exits with its code.
///
/// # Errors
/// The verb's [`Failure`].
pub fn run(verb: Verb, runtime: &tokio::runtime::Runtime) -> Result<(), Failure> {
    let env = |k: &str| std::env::var(k).ok();
    runtime.block_on(execute(verb, &env))
}

impl Verb {
    /// Whether the verb was asked for JSON (`--json`): then a failure is printed on stdout as
    /// one JSON object too ([`Failure::json_body`]).
    #[must_use]
    pub fn wants_json(&self) -> bool {
        let gateway = match self {
            Verb::Signup { gateway, .. }
            | Verb::Write { gateway, .. }
            | Verb::Read { gateway, .. }
            | Verb::Tail { gateway, .. }
            | Verb::Truncate { gateway, .. }
            | Verb::SetLeader { gateway, .. } => gateway,
            Verb::Token { command } => match command {
                TokenCommand::Mint { gateway, .. } | TokenCommand::Revoke { gateway, .. } => gateway,
            },
            Verb::Journal { command } => match command {
                JournalCommand::Create { gateway, .. }
                | JournalCommand::List { gateway, .. }
                | JournalCommand::Show { gateway, .. }
                | JournalCommand::Delete { gateway, .. }
                | JournalCommand::Move(MoveArgs { gateway, .. }) => gateway,
            },
        };
        gateway.json
    }
}

impl Failure {
    /// The failure as one JSON object for `--json`: the gateway's error body as it came (`code`,
    /// `message`, and `view` or the limits where the contract gives them) for an error the
    /// gateway answered, the same shape for a refusing verdict, and for any other failure a
    /// `code` naming its class (`bad_arguments`, `ambiguous`, `unavailable`, `denied`,
    /// `other`) with the message. `exit` is the process's exit code.
    #[must_use]
    pub fn json_body(&self) -> serde_json::Value {
        let exit = self.exit_code();
        let message = self.to_string();
        let refusal = |code: &str, v: &JournalView| json!({"code": code, "message": message, "view": v, "exit": exit});
        match self {
            Failure::Gateway { error: GatewayError::Denied(d), .. } if d.code != "contract" => {
                serde_json::json!({"code": d.code, "message": d.message, "exit": exit})
            }
            Failure::Operator { code, message, .. } if code != "contract" => {
                serde_json::json!({"code": code, "message": message, "exit": exit})
            }
            Failure::Decided { decided: Decided::Verdict(o) } => match o {
                Outcome::Refused(v) => refusal("refused", v),
                Outcome::Truncated(v) => refusal("truncated", v),
                Outcome::WrongMode(v) => refusal("wrong_mode", v),
                Outcome::Lost(v) => refusal("lost", v),
                Outcome::TruncateRefused(v) => refusal("truncate_refused", v),
                _ => serde_json::json!({"code": "other", "message": self.to_string(), "exit": exit}),
            },
            Failure::TruncateShape { view, .. } => refusal("wrong_mode", view),
            Failure::ReadTruncated { view, .. } => {
                serde_json::json!({"code": "truncated", "message": self.to_string(), "view": view, "exit": exit})
            }
            _ => {
                let class = match exit {
                    BAD_ARGS => "bad_arguments",
                    REFUSED => "refused",
                    AMBIGUOUS => "ambiguous",
                    UNAVAILABLE => "unavailable",
                    DENIED => "denied",
                    _ => "other",
                };
                serde_json::json!({"code": class, "message": error_chain(self), "exit": exit})
            }
        }
    }
}

/// An error and its sources, outermost first, joined by `: `: what `main` prints for a
/// [`Failure`]. A source whose message its parent already ends with (a library error that
/// prints its own source) is not repeated.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(source) = next {
        let more = source.to_string();
        if !text.ends_with(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        next = source.source();
    }
    text
}

/// A `--tier` value: a tier name (`^[a-z0-9][a-z0-9-]{0,62}$`), refused before any request.
fn tier_name(raw: &str) -> Result<String, String> {
    paros_api::check_tier_name(raw).map(|()| raw.to_owned()).map_err(|e| format!("not a tier name: {e}"))
}

/// The gateway client for `gateway`'s URL and token (or the environment's), and `--json`.
pub(crate) fn connect(
    gateway: &Gateway,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(paros_client::GatewayClient, bool), Failure> {
    let url = gateway.url.clone().or_else(|| env("PAROS_URL")).ok_or(Failure::NoUrl)?;
    let token = gateway
        .token
        .clone()
        .or_else(|| env("PAROS_TOKEN"))
        .map(|t| paros_api::Token::parse(t.trim()).map_err(|source| Failure::BadToken { source }))
        .transpose()?;
    let http1 = gateway.http1 || env("PAROS_HTTP1").is_some_and(|v| !v.is_empty() && v != "0");
    let config = paros_client::HttpConfig { http2: !http1, sessions: !http1, ..paros_client::HttpConfig::default() };
    let ca_file = gateway.ca_file.clone().or_else(|| env("PAROS_CA_FILE").filter(|v| !v.is_empty()).map(Into::into));
    let roots = match ca_file {
        Some(path) => std::fs::read(&path).map_err(|e| {
            Failure::from_gateway(paros_client::GatewayError::Roots(format!("{}: {e}", path.display())), true)
        })?,
        None => Vec::new(),
    };
    let g = paros_client::GatewayClient::trusting(&url, token.as_ref(), config, &roots)
        .map_err(|e| Failure::from_gateway(e, true))?;
    Ok((g, gateway.json))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use paros_client::Denial;
    use paros_core::journal::TooLarge;

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
                gateway: Gateway { url: Some("http://g".into()), token: None, json: true, http1: false, ca_file: None },
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
        let denial = |status, code| Decided::Denied { denial: Denial::new(status, code, "m"), ambiguous: false };
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
            let text = format!("{decided:?}");
            assert_eq!(Failure::from_decided(decided).exit_code(), code, "{text}");
        }
        let fenced = WriterError::Superseded { view: view() };
        assert_eq!(Failure::from_writer(fenced).exit_code(), 3);
        let failed = WriterError::Failed { seq: Seq(3), decided: Decided::Ambiguous };
        assert_eq!(Failure::from_writer(failed).exit_code(), 4);
    }

    #[test]
    fn gateway_errors_map_to_their_exit_codes() {
        let api =
            |status: u16, code: paros_api::ErrorCode| GatewayError::Denied(Denial::new(status, code.as_str(), "m"));
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
            let text = format!("{e:?}");
            assert_eq!(Failure::from_gateway(e, read_only).exit_code(), code, "{text}");
        }
    }

    fn chain_of(f: &Failure) -> String {
        error_chain(f)
    }

    /// A failure's message says what happened; its cause follows it in the chain `main`
    /// prints, and a wrapper's exit class is its failure's.
    #[test]
    fn a_failure_names_what_happened_and_its_cause_follows() {
        let batch = Failure::from_writer(WriterError::Failed { seq: Seq(3), decided: Decided::Ambiguous });
        assert_eq!(chain_of(&batch), "the batch at 3: ambiguous: the call may or may not have taken effect");
        assert_eq!(batch.exit_code(), 4);

        let lost = Failure::from_gateway(GatewayError::NoAnswer("timed out".into()), false);
        assert_eq!(
            chain_of(&lost),
            "ambiguous: the call may or may not have taken effect: no answer from the gateway: timed out"
        );
        let source = std::error::Error::source(&lost).expect("the gateway error is the source");
        assert!(matches!(source.downcast_ref::<GatewayError>(), Some(GatewayError::NoAnswer(_))), "{source:?}");

        let quota = Failure::Appending {
            records: 2,
            failure: Box::new(Failure::from_gateway(
                GatewayError::Denied(Denial { retry_after_s: Some(3), ..Denial::new(429, "over_quota", "slow down") }),
                false,
            )),
        };
        assert_eq!(
            chain_of(&quota),
            "after 2 records: unavailable: nothing was done: over_quota: slow down (HTTP 429); retry after 3 s"
        );
        assert_eq!(quota.exit_code(), 5);

        let u = LeaderUuid::parse(U).unwrap();
        let fenced = Failure::from_writer(WriterError::Superseded { view: JournalView { leader: Some(u), ..view() } });
        assert_eq!(chain_of(&fenced), format!("fenced: the journal is led by {U} now"));

        let stdin = Failure::Io { what: "reading stdin", source: std::io::Error::other("closed") };
        assert_eq!((chain_of(&stdin).as_str(), stdin.exit_code()), ("reading stdin: closed", 2));
    }

    /// A source whose parent already prints it is not printed twice.
    #[test]
    fn the_chain_does_not_repeat_a_source_its_parent_prints() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer: {0}")]
        struct Outer(#[source] std::io::Error);
        assert_eq!(error_chain(&Outer(std::io::Error::other("inner"))), "outer: inner");
    }
}
