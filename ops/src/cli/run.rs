//! Carrying the verbs out: one gateway connection per run, the client policy for the calls
//! that change a journal, and the text or JSON the verb prints.

use std::io::BufRead;
use std::time::Duration;

use bytes::Bytes;
use paros_api::{
    Consistency, CreateJournalRequest, JournalInfo, JournalName, MintTokenRequest, ReadOutcome, ReadQuery, Record,
    TailEvent, TokenId, WaitMs, WriteOutcome, WriteRequest, WriterMode,
};
use paros_client::{Client, ClientConfig, Decided, GatewayClient, GatewayError, HttpService, Writer, WriterConfig};
use paros_core::journal::{JournalView, Outcome};
use paros_core::{Call, Seq};
use serde_json::json;

use super::{Failure, JournalCommand, TokenCommand, Verb, connect};

/// Runs `verb`; `env` reads `PAROS_URL` and `PAROS_TOKEN` (the process environment, or a
/// test's).
///
/// # Errors
/// The verb's [`Failure`].
pub async fn execute(verb: Verb, env: &dyn Fn(&str) -> Option<String>) -> Result<(), Failure> {
    match verb {
        Verb::Signup { name, gateway } => {
            let (g, json) = connect(&gateway, env)?;
            let a = g.signup(&name).await.map_err(|e| Failure::from_gateway(e, false))?.answer;
            if json {
                println!("{}", to_json(&a));
            } else {
                println!("tenant {} ({})", a.name, a.tenant.as_str());
                println!("token_id {}", a.token_id.as_str());
                println!("expires_at {}", a.expires_at);
                println!("export PAROS_TOKEN={}", a.token.as_str());
            }
            Ok(())
        }
        Verb::Token { command: TokenCommand::Mint { scope, journal, expires_in_s, gateway } } => {
            let (g, json) = connect(&gateway, env)?;
            let request = MintTokenRequest { scope: scope.into(), journal, expires_in_s };
            let a = g.mint_token(&request).await.map_err(|e| Failure::from_gateway(e, false))?;
            if json {
                println!("{}", to_json(&a));
            } else {
                println!("token_id {}", a.token_id.as_str());
                println!("expires_at {}", a.expires_at);
                println!("token {}", a.token.as_str());
            }
            Ok(())
        }
        Verb::Token { command: TokenCommand::Revoke { token_id, gateway } } => {
            let (g, json) = connect(&gateway, env)?;
            let id =
                TokenId::parse(&token_id).map_err(|source| Failure::BadTokenId { id: token_id.clone(), source })?;
            g.revoke_token(&id).await.map_err(|e| Failure::from_gateway(e, false))?;
            print_done(json, "revoked", id.as_str());
            Ok(())
        }
        Verb::Journal { command } => journal(command, env).await,
        Verb::Write { journal, records, leader, batch, base64, gateway } => {
            let (g, json) = connect(&gateway, env)?;
            let mut records = if records.is_empty() {
                Records::stdin(base64)
            } else {
                Records::Given(records.into_iter().map(|r| decode(r, base64)).collect::<Result<Vec<_>, _>>()?.into())
            };
            if !records.any().await? {
                return Err(Failure::NoRecords);
            }
            let batches = Batches { records, max: batch as usize };
            let info = g.show_journal(&journal).await.map_err(|e| Failure::from_gateway(e, true))?;
            let written = match (info.mode, leader) {
                (WriterMode::MultiWriter, Some(_)) => {
                    return Err(Failure::LeaderOnMultiWriter);
                }
                (WriterMode::MultiWriter, None) => append(&g, &journal, batches).await?,
                (WriterMode::SingleWriter, None) => claim_and_write(g, journal, batches).await?,
                (WriterMode::SingleWriter, Some(l)) => write_as(g, journal, l, info, batches).await?,
            };
            print_written(json, &written);
            Ok(())
        }
        Verb::Read { journal, from, limit, max_bytes, wait_ms, min_seq, base64, through_gaps, gateway } => {
            let (g, json) = connect(&gateway, env)?;
            let wait_ms = WaitMs::new(wait_ms).ok_or(Failure::WaitTooLong { wait_ms })?;
            let consistency = match min_seq {
                Some(s) => Consistency::AtLeast { min_seq: Seq(s) },
                None => Consistency::Linearizable { min_seq: None },
            };
            let mut query = ReadQuery { from: Seq(from), limit, max_bytes, wait_ms, consistency };
            let (mut answer, mut served_by) =
                g.read_served(&journal, &query).await.map_err(|e| Failure::from_gateway(e, true))?;
            if let (ReadOutcome::Truncated(view), true) = (&answer, through_gaps) {
                // One gap at most: the read below starts at the first retained position, which
                // only a truncation racing this read can move again (then it exits 3).
                eprintln!(
                    "gap: positions [{}, {}) were truncated; resuming at {}",
                    query.from, view.first_seq, view.first_seq
                );
                query.from = view.first_seq;
                (answer, served_by) =
                    g.read_served(&journal, &query).await.map_err(|e| Failure::from_gateway(e, true))?;
            }
            match answer {
                ReadOutcome::Page(page) => {
                    if json {
                        println!("{}", to_json(&page));
                    } else {
                        print_records(page.from.0, &page.records, base64);
                        // The server that answered, as the gateway names it (a replica or a voter).
                        let by = served_by.map(|s| format!(", served by {s}")).unwrap_or_default();
                        eprintln!(
                            "next {} of [{}, {}){by}",
                            page.next_from().map_or(0, |s| s.0),
                            page.view.first_seq,
                            page.view.next_seq
                        );
                    }
                    Ok(())
                }
                ReadOutcome::Truncated(view) => Err(Failure::ReadTruncated { journal, view }),
                ReadOutcome::Unserved { applied_to } => Err(Failure::ReadUnserved { applied_to }),
            }
        }
        Verb::Tail { journal, from, base64, gateway } => {
            let (g, json) = connect(&gateway, env)?;
            let mut tail = g.tail(&journal, from.map(Seq)).await.map_err(|e| Failure::from_gateway(e, true))?;
            loop {
                let frame = tail.next().await.map_err(|e| Failure::from_gateway(e, true))?;
                if json {
                    let data: serde_json::Value = serde_json::from_str(&frame.event.data())
                        .map_err(|source| Failure::Json { what: "a tail frame's data", source })?;
                    println!("{}", json!({"event": frame.event.name(), "id": frame.id.0, "data": data}));
                }
                match &frame.event {
                    TailEvent::Records(page) if !json => print_records(page.from.0, &page.records, base64),
                    TailEvent::Gap(gap) => {
                        eprintln!(
                            "gap: positions [{}, {}) were truncated; resuming at {}",
                            gap.from, gap.resumed_at, gap.resumed_at
                        );
                    }
                    _ => {}
                }
            }
        }
        Verb::Truncate { journal, up_to, leader, gateway } => {
            let (g, json) = connect(&gateway, env)?;
            let leader_given = leader.is_some();
            let call = Call::Truncate { leader, up_to: Seq(up_to) };
            let view = decide(g, &journal, call, |o| matches!(o, Outcome::Trimmed(_))).await.map_err(|f| match f {
                Failure::Decided { decided: Decided::Verdict(Outcome::WrongMode(view)) } => {
                    Failure::TruncateShape { journal: journal.clone(), leader_given, view }
                }
                other => other,
            })?;
            print_view(json, "trimmed", &view);
            Ok(())
        }
        Verb::SetLeader { journal, new, old, gateway } => {
            let (g, json) = connect(&gateway, env)?;
            let call = Call::SetLeader { new, old };
            let view = decide(g, &journal, call, |o| matches!(o, Outcome::Won(_))).await?;
            print_view(json, "won", &view);
            Ok(())
        }
    }
}

async fn journal(command: JournalCommand, env: &dyn Fn(&str) -> Option<String>) -> Result<(), Failure> {
    match command {
        JournalCommand::Move(args) => super::cell::journal_move(args, env).await?,
        JournalCommand::Create { name, mode, tier, gateway } => {
            let (g, json) = connect(&gateway, env)?;
            let info = g
                .create_journal(&CreateJournalRequest { name, mode: Some(mode.into()), tier })
                .await
                .map_err(|e| Failure::from_gateway(e, false))?;
            print_info(json, &info);
        }
        JournalCommand::List { gateway } => {
            let (g, json) = connect(&gateway, env)?;
            let list = g.list_journals().await.map_err(|e| Failure::from_gateway(e, true))?;
            if json {
                println!("{}", to_json(&list));
            } else {
                list.journals.iter().for_each(|i| println!("{}", info_line(i)));
            }
        }
        JournalCommand::Show { name, gateway } => {
            let (g, json) = connect(&gateway, env)?;
            let info = g.show_journal(&name).await.map_err(|e| Failure::from_gateway(e, true))?;
            print_info(json, &info);
        }
        JournalCommand::Delete { name, gateway } => {
            let (g, json) = connect(&gateway, env)?;
            g.delete_journal(&name).await.map_err(|e| Failure::from_gateway(e, false))?;
            print_done(json, "deleted", name.as_str());
        }
    }
    Ok(())
}

fn client(g: GatewayClient) -> Client<HttpService> {
    Client::new(HttpService::from_gateway(g), ClientConfig::default()).expect("the default client config is valid")
}

/// A call through the client policy; `ok` picks the verdicts that succeed.
async fn decide(
    g: GatewayClient,
    journal: &JournalName,
    call: Call,
    ok: fn(&Outcome) -> bool,
) -> Result<JournalView, Failure> {
    let decided = client(g).call(journal, call).await.map_err(|error| Failure::Answer { error })?;
    match decided {
        Decided::Verdict(o @ (Outcome::Trimmed(v) | Outcome::Won(v))) if ok(&o) => Ok(v),
        other => Err(Failure::from_decided(other)),
    }
}

/// What a write verb wrote.
struct Written {
    leader: Option<paros_core::LeaderUuid>,
    first: Option<u64>,
    count: u64,
    next_seq: u64,
}

async fn claim_and_write(g: GatewayClient, journal: JournalName, mut batches: Batches) -> Result<Written, Failure> {
    let mut writer =
        Writer::new(client(g), journal, WriterConfig::default()).map_err(|error| Failure::WriterConfig { error })?;
    let view = writer.claim().await.map_err(Failure::from_writer)?;
    let leader = writer.core().uuid();
    eprintln!("claimed as leader {}", leader.map_or_else(String::new, |u| u.to_string()));
    let mut done = Written { leader, first: None, count: 0, next_seq: view.next_seq.0 };
    let mut take =
        |report: Option<(Seq, Result<paros_client::Written, paros_client::WriterError>)>| -> Result<(), Failure> {
            if let Some((_, result)) = report {
                let w = result.map_err(Failure::from_writer)?;
                done.first.get_or_insert(w.seq.0);
                done.count += w.count;
                done.next_seq = w.seq.0 + w.count;
            }
            Ok(())
        };
    // Batches go out as their records arrive (stdin may be a live stream), acknowledgements are
    // taken as they come; both waits are cancel-safe.
    loop {
        tokio::select! {
            biased;
            report = writer.next_report(), if writer.in_flight() > 0 => take(report)?,
            batch = batches.next() => {
                let Some(batch) = batch? else { break };
                let bytes = batch.iter().map(|r| r.len() as u64).sum();
                while !writer.has_room(bytes) {
                    take(writer.next_report().await)?;
                }
                writer.submit(batch).map_err(Failure::from_writer)?;
            }
        }
    }
    while writer.in_flight() > 0 {
        take(writer.next_report().await)?;
    }
    Ok(done)
}

async fn write_as(
    g: GatewayClient,
    journal: JournalName,
    leader: paros_core::LeaderUuid,
    info: JournalInfo,
    mut batches: Batches,
) -> Result<Written, Failure> {
    let view = info.view;
    if view.leader != Some(leader) {
        return Err(Failure::from_decided(Decided::Verdict(Outcome::Refused(view))));
    }
    let client = client(g);
    let mut done = Written { leader: Some(leader), first: None, count: 0, next_seq: view.next_seq.0 };
    while let Some(records) = batches.next().await? {
        let (seq, count) = (Seq(done.next_seq), records.len() as u64);
        let decided = client
            .call(&journal, Call::Write { leader: Some(leader), seq, records })
            .await
            .map_err(|error| Failure::Answer { error })?;
        match decided {
            Decided::Verdict(
                Outcome::Accepted { seq: at, count: n, .. } | Outcome::Duplicate { seq: at, count: n, .. },
            ) if at == seq && n == count => {
                done.first.get_or_insert(seq.0);
                done.count += n;
                done.next_seq = seq.0 + n;
            }
            other => return Err(Failure::Batch { seq: seq.0, failure: Box::new(Failure::from_decided(other)) }),
        }
    }
    Ok(done)
}

/// Multi-writer appends: one request per batch, retried only when the gateway says nothing
/// was done (a retry after a lost answer would append the batch twice).
async fn append(g: &GatewayClient, journal: &JournalName, mut batches: Batches) -> Result<Written, Failure> {
    let mut done = Written { leader: None, first: None, count: 0, next_seq: 0 };
    while let Some(records) = batches.next().await? {
        let request = WriteRequest::append(records.into_iter().map(|r| Record(r.to_vec())).collect());
        let mut attempt = 0u32;
        let outcome = loop {
            match g.write(journal, &request).await {
                Err(
                    e @ (GatewayError::NotSent(_) | GatewayError::Denied(paros_client::Denial { status: 503, .. })),
                ) if attempt < 5 => {
                    attempt += 1;
                    eprintln!("retrying: {e}");
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                }
                Err(e) => {
                    let failure = Box::new(Failure::from_gateway(e, false));
                    return Err(Failure::Appending { records: done.count, failure });
                }
                Ok(o) => break o,
            }
        };
        match outcome {
            WriteOutcome::Accepted { seq, count, view } | WriteOutcome::Duplicate { seq, count, view } => {
                done.first.get_or_insert(seq.0);
                done.count += count;
                done.next_seq = view.next_seq.0;
            }
            outcome => return Err(Failure::Append { outcome, after: done.count }),
        }
    }
    Ok(done)
}

/// Lines of stdin buffered ahead of the writes.
const STDIN_LINES_AHEAD: usize = 4096;

/// Where a write verb's records come from: its arguments, or stdin, line by line as it arrives.
enum Records {
    Given(std::collections::VecDeque<Bytes>),
    Stdin { lines: tokio::sync::mpsc::Receiver<Result<Bytes, Failure>>, held: Option<Result<Bytes, Failure>> },
}

impl Records {
    /// Reads stdin on a thread of its own (a blocking read), each line decoded, into a bounded
    /// queue; the first bad line or read error ends it.
    fn stdin(base64: bool) -> Records {
        let (tx, lines) = tokio::sync::mpsc::channel(STDIN_LINES_AHEAD);
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let record = line
                    .map_err(|source| Failure::Io { what: "reading stdin", source })
                    .and_then(|l| decode(l, base64));
                let failed = record.is_err();
                if tx.blocking_send(record).is_err() || failed {
                    return;
                }
            }
        });
        Records::Stdin { lines, held: None }
    }

    /// Whether there is a record to write at all (waiting for stdin's first line or its end).
    async fn any(&mut self) -> Result<bool, Failure> {
        match self {
            Records::Given(records) => Ok(!records.is_empty()),
            Records::Stdin { lines, held } => {
                if held.is_none() {
                    *held = lines.recv().await;
                }
                match held {
                    None => Ok(false),
                    Some(Ok(_)) => Ok(true),
                    Some(Err(_)) => Err(held.take().and_then(Result::err).expect("an error is held")),
                }
            }
        }
    }

    /// The next record, waiting for it; `None` at the end.
    async fn next(&mut self) -> Result<Option<Bytes>, Failure> {
        match self {
            Records::Given(records) => Ok(records.pop_front()),
            Records::Stdin { lines, held } => match held.take() {
                Some(r) => r.map(Some),
                None => lines.recv().await.transpose(),
            },
        }
    }

    /// The next record if it is here already. An error is held for [`next`](Self::next) to
    /// report, after the records before it are written.
    fn ready(&mut self) -> Option<Bytes> {
        match self {
            Records::Given(records) => records.pop_front(),
            Records::Stdin { lines, held } => {
                let next = match held.take() {
                    Some(r) => r,
                    None => lines.try_recv().ok()?,
                };
                match next {
                    Ok(record) => Some(record),
                    Err(e) => {
                        *held = Some(Err(e));
                        None
                    }
                }
            }
        }
    }
}

/// Records gathered into batches: at least one record each (waited for), then those already
/// here, up to `max`.
struct Batches {
    records: Records,
    max: usize,
}

impl Batches {
    /// The next batch, `None` at the end. Cancel-safe: a record taken is in the batch returned.
    async fn next(&mut self) -> Result<Option<Vec<Bytes>>, Failure> {
        let Some(first) = self.records.next().await? else { return Ok(None) };
        let mut batch = vec![first];
        while batch.len() < self.max {
            match self.records.ready() {
                Some(r) => batch.push(r),
                None => break,
            }
        }
        Ok(Some(batch))
    }
}

fn decode(record: String, base64: bool) -> Result<Bytes, Failure> {
    if base64 {
        Record::from_base64(&record)
            .map(|rec| Bytes::from(rec.0))
            .map_err(|source| Failure::BadRecord { record, source })
    } else {
        Ok(Bytes::from(record))
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("API bodies serialize infallibly")
}

fn view_text(v: &JournalView) -> String {
    let leader = v.leader.map_or_else(|| "-".to_owned(), |l| l.to_string());
    format!("leader {leader} first_seq {} next_seq {}", v.first_seq, v.next_seq)
}

fn info_line(i: &JournalInfo) -> String {
    let mode = match i.mode {
        WriterMode::SingleWriter => "single_writer",
        WriterMode::MultiWriter => "multi_writer",
    };
    let tier = i.tier.as_ref().map(|t| format!(" tier {t}")).unwrap_or_default();
    format!("{} {mode} {}{tier}", i.name, view_text(&i.view))
}

fn print_info(json: bool, info: &JournalInfo) {
    if json {
        println!("{}", to_json(info));
    } else {
        println!("{}", info_line(info));
    }
}

fn print_done(json: bool, what: &str, name: &str) {
    if json {
        println!("{}", json!({ what: name }));
    } else {
        println!("{what} {name}");
    }
}

fn print_view(json: bool, outcome: &str, view: &JournalView) {
    if json {
        println!("{}", json!({"outcome": outcome, "view": view}));
    } else {
        println!("{outcome}: {}", view_text(view));
    }
}

fn print_written(json: bool, w: &Written) {
    if json {
        println!("{}", json!({"leader": w.leader, "seq": w.first, "count": w.count, "next_seq": w.next_seq}));
    } else {
        let at = w.first.map_or_else(String::new, |f| format!(" at [{f}, {})", f + w.count));
        let by = w.leader.map_or_else(String::new, |l| format!(" as leader {l}"));
        println!("wrote {} records{at}{by}", w.count);
    }
}

fn print_records(from: u64, records: &[Record], base64: bool) {
    for (i, r) in records.iter().enumerate() {
        let text = if base64 { r.to_base64() } else { String::from_utf8_lossy(r.as_bytes()).into_owned() };
        println!("{}\t{text}", from + i as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::connect;
    use crate::cli::{Failure, Gateway};

    #[test]
    fn the_url_and_token_come_from_flags_before_the_environment() {
        let env = |k: &str| match k {
            "PAROS_URL" => Some("http://from-env:1".to_owned()),
            "PAROS_TOKEN" => Some("env.token\n".to_owned()),
            _ => None,
        };
        assert!(connect(&Gateway::default(), &env).is_ok(), "the environment is enough");
        let flags = Gateway {
            url: Some("http://flag:2".into()),
            token: Some("flag.token".into()),
            json: true,
            http1: false,
            ca_file: None,
        };
        let (g, json) = connect(&flags, &env).unwrap();
        assert!(json);
        assert!(format!("{g:?}").contains("http://flag:2/"));
        let none = |_: &str| None;
        assert!(matches!(connect(&Gateway::default(), &none), Err(Failure::NoUrl)));
        let bad = Gateway { url: Some("not a url".into()), ..Gateway::default() };
        assert_eq!(connect(&bad, &none).unwrap_err().exit_code(), 2);
        let bad_token = Gateway { url: Some("http://x".into()), token: Some("has space".into()), ..Gateway::default() };
        assert_eq!(connect(&bad_token, &none).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn a_ca_file_that_holds_no_certificate_is_refused_before_any_request() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let missing = dir.path().join("missing.pem");
        let url = Some("https://g:1".to_owned());
        for file in [&empty, &missing] {
            let flags = Gateway { url: url.clone(), ca_file: Some(file.clone()), ..Gateway::default() };
            let e = connect(&flags, &|_| None).unwrap_err();
            let said = crate::cli::error_chain(&e);
            assert_eq!(e.exit_code(), 2, "{file:?}: {said}");
            assert!(said.contains("certificates to trust"), "{said}");
        }
        let from_env = |k: &str| (k == "PAROS_CA_FILE").then(|| missing.display().to_string());
        let e = connect(&Gateway { url, ..Gateway::default() }, &from_env).unwrap_err();
        let said = crate::cli::error_chain(&e);
        assert!(said.contains("missing.pem"), "$PAROS_CA_FILE is read: {said}");
    }
}
