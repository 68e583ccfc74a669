//! A (status, body) answer maps to one typed outcome, and an answer off the contract is refused.

use paros_api::outcome::plain;
use paros_api::{
    ApiError, ContractError, ErrorCode, JournalView, LeaderUuid, ReadOutcome, Seq, SetLeaderOutcome, TruncateOutcome,
    WriteOutcome,
};

const VIEW: &str = r#"{"leader":"0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b","first_seq":3,"next_seq":10}"#;

fn view() -> JournalView {
    JournalView {
        leader: LeaderUuid::new(0x0f8b_1c2e_4a5d_4e6f_9a0b_1c2d_3e4f_5a6b),
        first_seq: Seq(3),
        next_seq: Seq(10),
    }
}

fn err(code: &str) -> String {
    format!(r#"{{"code":"{code}","message":"m","view":{VIEW}}}"#)
}

fn bare(code: &str) -> String {
    format!(r#"{{"code":"{code}","message":"m"}}"#)
}

const LIMITS: &str = r#""max_records":1024,"max_bytes":1048576,"max_body_bytes":2097152"#;

#[test]
fn a_write_maps_every_verdict_of_api_md_to_its_outcome() {
    let ok = format!(r#"{{"outcome":"accepted","seq":10,"count":2,"view":{VIEW}}}"#);
    assert_eq!(
        WriteOutcome::from_response(200, ok.as_bytes()).ok(),
        Some(WriteOutcome::Accepted { seq: Seq(10), count: 2, view: view() })
    );
    let dup = format!(r#"{{"outcome":"duplicate","seq":8,"count":2,"view":{VIEW}}}"#);
    assert_eq!(
        WriteOutcome::from_response(200, dup.as_bytes()).ok(),
        Some(WriteOutcome::Duplicate { seq: Seq(8), count: 2, view: view() })
    );
    assert_eq!(WriteOutcome::from_response(409, err("refused").as_bytes()).ok(), Some(WriteOutcome::Refused(view())));
    assert_eq!(
        WriteOutcome::from_response(409, err("wrong_mode").as_bytes()).ok(),
        Some(WriteOutcome::WrongMode(view()))
    );
    assert_eq!(
        WriteOutcome::from_response(410, err("truncated").as_bytes()).ok(),
        Some(WriteOutcome::Truncated(view()))
    );
    assert_eq!(WriteOutcome::from_response(504, bare("ambiguous").as_bytes()).ok(), Some(WriteOutcome::Ambiguous));
}

#[test]
fn a_too_large_write_carries_its_limits_and_the_view_when_the_batch_was_judged() {
    let batch = format!(r#"{{"code":"too_large","message":"m","view":{VIEW},{LIMITS}}}"#);
    let Ok(WriteOutcome::TooLarge { limits, view: v }) = WriteOutcome::from_response(413, batch.as_bytes()) else {
        panic!("a 413 too_large is the TooLarge outcome");
    };
    assert_eq!(
        (limits.max_records, limits.max_bytes, limits.max_body_bytes, v),
        (1024, 1 << 20, 2 << 20, Some(view()))
    );
    let body = format!(r#"{{"code":"too_large","message":"m",{LIMITS}}}"#);
    assert!(matches!(WriteOutcome::from_response(413, body.as_bytes()), Ok(WriteOutcome::TooLarge { view: None, .. })));
}

#[test]
fn a_too_large_without_all_three_limits_breaks_the_contract() {
    let short = r#"{"code":"too_large","message":"m","max_records":1024,"max_bytes":1048576}"#;
    assert!(matches!(
        WriteOutcome::from_response(413, short.as_bytes()),
        Err(ApiError::Contract(ContractError::MissingLimits))
    ));
    assert!(matches!(
        plain::create_journal(413, short.as_bytes()),
        Err(ApiError::Contract(ContractError::MissingLimits))
    ));
}

#[test]
fn a_journal_verdict_without_its_view_breaks_the_contract() {
    for (status, code) in [(409, "refused"), (409, "wrong_mode"), (410, "truncated")] {
        let r = WriteOutcome::from_response(status, bare(code).as_bytes());
        assert!(matches!(r, Err(ApiError::Contract(ContractError::MissingView(_)))), "{code}: {r:?}");
    }
    assert!(matches!(
        SetLeaderOutcome::from_response(409, bare("lost").as_bytes()),
        Err(ApiError::Contract(ContractError::MissingView(ErrorCode::Lost)))
    ));
}

#[test]
fn a_code_answered_with_another_status_than_the_tables_breaks_the_contract() {
    let r = WriteOutcome::from_response(409, err("truncated").as_bytes());
    assert!(
        matches!(r, Err(ApiError::Contract(ContractError::StatusMismatch { status: 409, code: ErrorCode::Truncated }))),
        "{r:?}"
    );
}

#[test]
fn errors_that_are_no_outcome_of_the_call_are_answered_errors() {
    for (status, code) in [
        (400, "malformed"),
        (401, "unauthorized"),
        (403, "forbidden"),
        (404, "unknown_journal"),
        (429, "over_quota"),
        (503, "unavailable"),
    ] {
        let r = WriteOutcome::from_response(status, bare(code).as_bytes());
        assert_eq!(r.as_ref().err().and_then(ApiError::code).map(ErrorCode::as_str), Some(code), "{r:?}");
    }
    let lost = SetLeaderOutcome::from_response(409, err("refused").as_bytes());
    assert_eq!(lost.err().and_then(|e| e.code()), Some(ErrorCode::Refused), "refused is no SetLeader outcome");
}

#[test]
fn a_status_the_call_never_answers_or_a_body_off_the_contract_is_refused() {
    let ok = format!(r#"{{"outcome":"accepted","seq":10,"count":2,"view":{VIEW}}}"#);
    assert!(matches!(
        WriteOutcome::from_response(201, ok.as_bytes()),
        Err(ApiError::Contract(ContractError::UnexpectedStatus(201)))
    ));
    assert!(matches!(
        WriteOutcome::from_response(302, b""),
        Err(ApiError::Contract(ContractError::UnexpectedStatus(302)))
    ));
    let html = b"<html>502 Bad Gateway</html>";
    assert!(matches!(
        WriteOutcome::from_response(502, html),
        Err(ApiError::Contract(ContractError::BadBody { status: 502, .. }))
    ));
    let wrong = format!(r#"{{"outcome":"won","view":{VIEW}}}"#);
    assert!(matches!(
        WriteOutcome::from_response(200, wrong.as_bytes()),
        Err(ApiError::Contract(ContractError::BadBody { .. }))
    ));
}

#[test]
fn a_read_maps_pages_truncation_and_unserved() {
    let page = format!(r#"{{"from":3,"records":["aGk="],"view":{VIEW}}}"#);
    let Ok(ReadOutcome::Page(p)) = ReadOutcome::from_response(200, page.as_bytes()) else {
        panic!("a 200 read is a page")
    };
    assert_eq!((p.from, p.records.len(), p.view), (Seq(3), 1, view()));
    assert_eq!(ReadOutcome::from_response(410, err("truncated").as_bytes()).ok(), Some(ReadOutcome::Truncated(view())));
    assert_eq!(
        ReadOutcome::from_response(503, bare("unavailable").as_bytes()).ok(),
        Some(ReadOutcome::Unserved { applied_to: None })
    );
    let applied = r#"{"code":"unavailable","message":"m","applied_to":7}"#;
    assert_eq!(
        ReadOutcome::from_response(503, applied.as_bytes()).ok(),
        Some(ReadOutcome::Unserved { applied_to: Some(Seq(7)) }),
        "a read's 503 says how far the closest server had applied"
    );
    assert!(ReadOutcome::from_response(504, bare("ambiguous").as_bytes()).is_err(), "a read has no ambiguous outcome");
}

#[test]
fn a_set_leader_maps_won_lost_wrong_mode_and_ambiguous() {
    let won = format!(r#"{{"outcome":"won","view":{VIEW}}}"#);
    assert_eq!(SetLeaderOutcome::from_response(200, won.as_bytes()).ok(), Some(SetLeaderOutcome::Won(view())));
    assert_eq!(SetLeaderOutcome::from_response(409, err("lost").as_bytes()).ok(), Some(SetLeaderOutcome::Lost(view())));
    assert_eq!(
        SetLeaderOutcome::from_response(409, err("wrong_mode").as_bytes()).ok(),
        Some(SetLeaderOutcome::WrongMode(view()))
    );
    assert_eq!(
        SetLeaderOutcome::from_response(504, bare("ambiguous").as_bytes()).ok(),
        Some(SetLeaderOutcome::Ambiguous)
    );
}

#[test]
fn a_truncate_maps_trimmed_refused_wrong_mode_and_ambiguous() {
    let trimmed = format!(r#"{{"outcome":"trimmed","view":{VIEW}}}"#);
    assert_eq!(TruncateOutcome::from_response(200, trimmed.as_bytes()).ok(), Some(TruncateOutcome::Trimmed(view())));
    assert_eq!(
        TruncateOutcome::from_response(409, err("truncate_refused").as_bytes()).ok(),
        Some(TruncateOutcome::TruncateRefused(view()))
    );
    assert_eq!(
        TruncateOutcome::from_response(409, err("wrong_mode").as_bytes()).ok(),
        Some(TruncateOutcome::WrongMode(view()))
    );
    assert_eq!(
        TruncateOutcome::from_response(504, bare("ambiguous").as_bytes()).ok(),
        Some(TruncateOutcome::Ambiguous)
    );
}

#[test]
fn plain_calls_answer_their_own_success_status_and_nothing_else() {
    let info = format!(r#"{{"name":"orders","mode":"single_writer","view":{VIEW}}}"#);
    assert_eq!(plain::create_journal(201, info.as_bytes()).map(|j| j.view).ok(), Some(view()));
    assert!(matches!(
        plain::create_journal(200, info.as_bytes()),
        Err(ApiError::Contract(ContractError::UnexpectedStatus(200)))
    ));
    assert_eq!(plain::show_journal(200, info.as_bytes()).map(|j| j.name.to_string()).ok(), Some("orders".to_owned()));
    assert_eq!(
        plain::create_journal(409, bare("name_taken").as_bytes()).err().and_then(|e| e.code()),
        Some(ErrorCode::NameTaken)
    );
    assert!(plain::delete_journal(204, b"").is_ok());
    assert_eq!(
        plain::delete_journal(404, bare("unknown_journal").as_bytes()).err().and_then(|e| e.code()),
        Some(ErrorCode::UnknownJournal)
    );
    assert!(plain::revoke_token(204, b"").is_ok());
    assert_eq!(
        plain::revoke_token(404, bare("unknown_token").as_bytes()).err().and_then(|e| e.code()),
        Some(ErrorCode::UnknownToken)
    );
    assert!(matches!(plain::revoke_token(200, b"{}"), Err(ApiError::Contract(ContractError::UnexpectedStatus(200)))));
    let signup = r#"{"tenant":"t1","name":"acme","token":"a.b.c","token_id":"j1","expires_at":1}"#;
    assert_eq!(plain::signup(200, signup.as_bytes()).map(|s| s.name.to_string()).ok(), Some("acme".to_owned()));
    assert_eq!(
        plain::signup(403, bare("forbidden").as_bytes()).err().and_then(|e| e.code()),
        Some(ErrorCode::Forbidden)
    );
    let token = r#"{"token":"a.b.c","token_id":"j2","expires_at":2}"#;
    assert_eq!(plain::mint_token(200, token.as_bytes()).map(|t| t.expires_at).ok(), Some(2));
    assert_eq!(plain::list_journals(200, br#"{"journals":[]}"#).map(|l| l.journals.len()).ok(), Some(0));
}
