//! Every body of the contract as a literal: deserialize, serialize, compare byte for byte.
//!
//! The literals are compact (what the server and client write); field order is the contract's.

use paros_api::{
    CreateJournalRequest, ErrorBody, ErrorCode, Gap, Heartbeat, JournalInfo, JournalList, JournalView, LeaderUuid,
    MintTokenRequest, Page, Scope, Seq, SetLeaderAnswer, SetLeaderRequest, SignupAnswer, SignupRequest, TokenAnswer,
    TruncateAnswer, TruncateRequest, WriteAnswer, WriteRequest, WriterMode,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Deserializes `json` as `T`, checks it re-serializes to exactly `json`, and returns it.
fn round_trip<T: Serialize + DeserializeOwned>(json: &str) -> T {
    let value: T = serde_json::from_str(json).unwrap_or_else(|e| panic!("{json} must deserialize: {e}"));
    let again = serde_json::to_string(&value).expect("API bodies serialize infallibly");
    assert_eq!(again, json, "re-serialized bytes differ from the fixture");
    value
}

const UUID_A: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";
const UUID_B: &str = "9d2c6b1a-0e3f-4a5b-8c7d-6e5f4a3b2c1d";
const VIEW_NEW: &str = r#"{"leader":null,"first_seq":0,"next_seq":0}"#;
const VIEW_LED: &str = r#"{"leader":"0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b","first_seq":3,"next_seq":10}"#;

fn uuid(s: &str) -> LeaderUuid {
    LeaderUuid::parse(s).expect("fixture uuids are canonical")
}

fn led() -> JournalView {
    JournalView { leader: Some(uuid(UUID_A)), first_seq: Seq(3), next_seq: Seq(10) }
}

#[test]
fn a_new_journals_view_has_a_null_leader_and_zero_positions() {
    assert_eq!(round_trip::<JournalView>(VIEW_NEW), JournalView::NEW);
}

#[test]
fn a_led_view_carries_its_uuid_in_canonical_form() {
    assert_eq!(round_trip::<JournalView>(VIEW_LED), led());
}

#[test]
fn positions_above_two_to_the_fifty_three_round_trip_as_exact_integers() {
    let json = r#"{"leader":null,"first_seq":9007199254740993,"next_seq":18446744073709551615}"#;
    let v: JournalView = round_trip(json);
    assert_eq!((v.first_seq, v.next_seq), (Seq((1 << 53) + 1), Seq(u64::MAX)));
    let w: WriteAnswer =
        round_trip(&format!(r#"{{"outcome":"accepted","seq":9007199254740993,"count":1,"view":{json}}}"#));
    assert_eq!(w.seq, Seq(9_007_199_254_740_993));
}

#[test]
fn api_md_spaced_examples_parse_to_the_compact_fixtures() {
    let v: JournalView =
        serde_json::from_str(r#"{"leader": null, "first_seq": 0, "next_seq": 0}"#).expect("the contract's new view");
    assert_eq!(v, JournalView::NEW);
    let s: SignupRequest = serde_json::from_str(r#"{"name": "acme"}"#).expect("the contract's signup");
    assert_eq!(serde_json::to_string(&s).expect("serializes"), r#"{"name":"acme"}"#);
    let l: SetLeaderRequest =
        serde_json::from_str(&format!(r#"{{"new": "{UUID_A}", "old": null}}"#)).expect("the contract's first claim");
    assert_eq!(l.old, None);
}

#[test]
fn signup_request_and_answer() {
    let r: SignupRequest = round_trip(r#"{"name":"acme"}"#);
    assert_eq!(r.name.as_str(), "acme");
    let a: SignupAnswer = round_trip(concat!(
        r#"{"tenant":"00c0ffee00c0ffee","name":"acme","token":"eyJhbGciOiJFZERTQSJ9.e30.c2ln","#,
        r#""token_id":"tok-1","expires_at":1767225600}"#,
    ));
    assert_eq!((a.tenant.as_str(), a.token_id.as_str(), a.expires_at), ("00c0ffee00c0ffee", "tok-1", 1_767_225_600));
}

#[test]
fn mint_token_requests_with_and_without_their_optional_fields() {
    let bare: MintTokenRequest = round_trip(r#"{"scope":"read"}"#);
    assert_eq!((bare.scope, bare.journal, bare.expires_in_s), (Scope::Read, None, None));
    let full: MintTokenRequest = round_trip(r#"{"scope":"write","journal":"orders","expires_in_s":3600}"#);
    assert_eq!(full.scope, Scope::Write);
    assert_eq!(full.journal.as_ref().map(|j| j.as_str()), Some("orders"));
    assert_eq!(full.expires_in_s.map(|n| n.get()), Some(3600));
    let owner: MintTokenRequest = round_trip(r#"{"scope":"owner","expires_in_s":60}"#);
    assert_eq!(owner.scope, Scope::Owner);
}

#[test]
fn token_answer() {
    let a: TokenAnswer = round_trip(r#"{"token":"eyJ0.eyJ1.c2ln","token_id":"7f3a","expires_at":1767229200}"#);
    assert_eq!(a.expires_at, 1_767_229_200);
}

#[test]
fn create_journal_requests_keep_an_omitted_mode_omitted() {
    let bare: CreateJournalRequest = round_trip(r#"{"name":"orders"}"#);
    assert_eq!((bare.mode, bare.mode()), (None, WriterMode::SingleWriter));
    let multi: CreateJournalRequest = round_trip(r#"{"name":"orders","mode":"multi_writer"}"#);
    assert_eq!(multi.mode(), WriterMode::MultiWriter);
    let single: CreateJournalRequest = round_trip(r#"{"name":"orders","mode":"single_writer"}"#);
    assert_eq!(single.mode, Some(WriterMode::SingleWriter));
    assert_eq!(bare.tier, None, "an omitted tier is the default tier, and stays omitted");
    let gold: CreateJournalRequest = round_trip(r#"{"name":"orders","tier":"gold-1"}"#);
    assert_eq!(gold.tier.as_deref(), Some("gold-1"));
}

#[test]
fn journal_info_and_list() {
    let info: JournalInfo =
        round_trip(&format!(r#"{{"name":"orders","mode":"single_writer","view":{VIEW_NEW},"tier":"default"}}"#));
    assert_eq!((info.view, info.tier.as_deref()), (JournalView::NEW, Some("default")));
    let orders = format!(r#"{{"name":"orders","mode":"single_writer","view":{VIEW_LED},"tier":null}}"#);
    let events = format!(r#"{{"name":"Events.v2","mode":"multi_writer","view":{VIEW_NEW},"tier":"gold"}}"#);
    let list: JournalList = round_trip(&format!(r#"{{"journals":[{orders},{events}]}}"#));
    assert_eq!(list.journals.len(), 2);
    assert_eq!(round_trip::<JournalList>(r#"{"journals":[]}"#).journals, vec![]);
    let old: JournalInfo =
        serde_json::from_str(&format!(r#"{{"name":"o","mode":"single_writer","view":{VIEW_NEW}}}"#)).unwrap();
    assert_eq!(old.tier, None, "an answer from a gateway without tiers reads as on no tier");
}

#[test]
fn set_leader_requests_with_a_null_and_a_uuid_old() {
    let first: SetLeaderRequest = round_trip(&format!(r#"{{"new":"{UUID_A}","old":null}}"#));
    assert_eq!((first.new, first.old), (uuid(UUID_A), None));
    let next: SetLeaderRequest = round_trip(&format!(r#"{{"new":"{UUID_B}","old":"{UUID_A}"}}"#));
    assert_eq!(next.old, Some(uuid(UUID_A)));
}

#[test]
fn set_leader_answer() {
    let a: SetLeaderAnswer = round_trip(&format!(r#"{{"outcome":"won","view":{VIEW_LED}}}"#));
    assert_eq!(a.view, led());
}

#[test]
fn write_requests_for_both_modes_with_empty_and_padded_records() {
    let fenced: WriteRequest =
        round_trip(&format!(r#"{{"leader":"{UUID_A}","seq":10,"records":["aGVsbG8=","","+/8="]}}"#));
    assert_eq!(
        fenced.records.iter().map(|r| r.as_bytes().to_vec()).collect::<Vec<_>>(),
        vec![b"hello".to_vec(), vec![], vec![0xfb, 0xff]]
    );
    assert_eq!(fenced.bytes(), 7);
    let append: WriteRequest = round_trip(r#"{"records":["aGk="]}"#);
    assert_eq!((append.leader, append.seq), (None, None));
    let empty: WriteRequest = round_trip(r#"{"records":[]}"#);
    assert!(empty.records.is_empty(), "an empty batch deserializes: the server refuses it with 409");
}

#[test]
fn write_answers_accepted_and_duplicate() {
    let a: WriteAnswer = round_trip(&format!(r#"{{"outcome":"accepted","seq":7,"count":3,"view":{VIEW_LED}}}"#));
    assert_eq!((a.seq, a.count), (Seq(7), 3));
    let d: WriteAnswer = round_trip(&format!(r#"{{"outcome":"duplicate","seq":7,"count":3,"view":{VIEW_LED}}}"#));
    assert_eq!(d.outcome, paros_api::WriteVerdict::Duplicate);
}

#[test]
fn read_pages_full_and_empty() {
    let p: Page = round_trip(&format!(r#"{{"from":3,"records":["aGVsbG8=",""],"view":{VIEW_LED}}}"#));
    assert_eq!(p.next_from(), Some(Seq(5)));
    let empty: Page = round_trip(&format!(r#"{{"from":10,"records":[],"view":{VIEW_LED}}}"#));
    assert_eq!(empty.next_from(), Some(Seq(10)));
}

#[test]
fn truncate_requests_for_both_modes_and_the_answer() {
    let fenced: TruncateRequest = round_trip(&format!(r#"{{"leader":"{UUID_A}","up_to":5}}"#));
    assert_eq!(fenced.up_to, Seq(5));
    let unfenced: TruncateRequest = round_trip(r#"{"up_to":5}"#);
    assert_eq!(unfenced.leader, None);
    let a: TruncateAnswer = round_trip(&format!(r#"{{"outcome":"trimmed","view":{VIEW_LED}}}"#));
    assert_eq!(a.view.first_seq, Seq(3));
}

#[test]
fn tail_gap_and_heartbeat_payloads() {
    let g: Gap = round_trip(&format!(r#"{{"from":1,"resumed_at":3,"view":{VIEW_LED}}}"#));
    assert_eq!((g.from, g.resumed_at), (Seq(1), Seq(3)));
    let h: Heartbeat = round_trip(&format!(r#"{{"view":{VIEW_LED},"caught_up":true}}"#));
    assert!(h.caught_up);
    let behind: Heartbeat = round_trip(&format!(r#"{{"view":{VIEW_NEW},"caught_up":false}}"#));
    assert!(!behind.caught_up);
}

#[test]
fn error_bodies_bare_with_a_view_and_with_the_three_limits() {
    let bare: ErrorBody = round_trip(r#"{"code":"unauthorized","message":"token expired"}"#);
    assert_eq!((bare.code, bare.view, bare.limits()), (ErrorCode::Unauthorized, None, None));
    let refused: ErrorBody =
        round_trip(&format!(r#"{{"code":"refused","message":"wrong position","view":{VIEW_LED}}}"#));
    assert_eq!(refused.view, Some(led()));
    let limits = r#""max_records":1024,"max_bytes":1048576,"max_body_bytes":2097152"#;
    let batch: ErrorBody = round_trip(&format!(
        r#"{{"code":"too_large","message":"batch over the write limits","view":{VIEW_LED},{limits}}}"#
    ));
    assert_eq!(batch.limits().map(|l| (l.max_records, l.max_bytes, l.max_body_bytes)), Some((1024, 1 << 20, 2 << 20)));
    let body: ErrorBody = round_trip(&format!(r#"{{"code":"too_large","message":"body over the limit",{limits}}}"#));
    assert_eq!(body.view, None);
    let unserved: ErrorBody =
        round_trip(r#"{"code":"unavailable","message":"not applied","applied_to":18446744073709551615}"#);
    assert_eq!((unserved.applied_to, unserved.view), (Some(Seq(u64::MAX)), None), "a u64 stays an integer");
}

#[test]
fn built_error_bodies_serialize_in_api_md_field_order() {
    let limits = paros_api::Limits { max_records: 1, max_bytes: 2, max_body_bytes: 3 };
    let b = ErrorBody::new(ErrorCode::TooLarge, "m").with_limits(limits).with_view(JournalView::NEW);
    assert_eq!(
        serde_json::to_string(&b).expect("serializes"),
        format!(
            r#"{{"code":"too_large","message":"m","view":{VIEW_NEW},"max_records":1,"max_bytes":2,"max_body_bytes":3}}"#
        )
    );
    let unserved = ErrorBody::new(ErrorCode::Unavailable, "m").with_applied_to(Some(Seq(4)));
    assert_eq!(
        serde_json::to_string(&unserved).expect("serializes"),
        r#"{"code":"unavailable","message":"m","applied_to":4}"#
    );
    let unknown = ErrorBody::new(ErrorCode::Unavailable, "m").with_applied_to(None);
    assert_eq!(serde_json::to_string(&unknown).expect("serializes"), r#"{"code":"unavailable","message":"m"}"#);
}

/// The contract's table, copied by hand: status and code string of every error.
const API_MD_TABLE: [(u16, &str); 15] = [
    (400, "malformed"),
    (401, "unauthorized"),
    (403, "forbidden"),
    (404, "unknown_journal"),
    (404, "unknown_token"),
    (409, "refused"),
    (409, "lost"),
    (409, "truncate_refused"),
    (409, "wrong_mode"),
    (409, "name_taken"),
    (410, "truncated"),
    (413, "too_large"),
    (429, "over_quota"),
    (503, "unavailable"),
    (504, "ambiguous"),
];

#[test]
fn every_error_code_has_api_md_status_and_string_and_round_trips_in_a_body() {
    let ours: Vec<(u16, &str)> = ErrorCode::ALL.iter().map(|c| (c.status(), c.as_str())).collect();
    assert_eq!(ours, API_MD_TABLE);
    for (status, name) in API_MD_TABLE {
        let b: ErrorBody = round_trip(&format!(r#"{{"code":"{name}","message":"x"}}"#));
        assert_eq!(b.status(), status);
    }
}
