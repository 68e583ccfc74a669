//! Every rule of the contract that refuses a body, one claim each: the body must not deserialize.

use core::fmt::Debug;

use paros_api::{
    CreateJournalRequest, ErrorBody, JournalName, JournalView, LeaderUuid, MintTokenRequest, Page, SetLeaderRequest,
    SignupRequest, TenantName, TruncateRequest, WriteRequest,
};
use serde::de::DeserializeOwned;

const UUID: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";

/// Asserts `json` does not deserialize as `T` and returns the error's text.
fn refused<T: DeserializeOwned + Debug>(json: &str) -> String {
    match serde_json::from_str::<T>(json) {
        Ok(v) => panic!("{json} must be refused, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

fn write_with_leader(leader: &str) -> String {
    format!(r#"{{"leader":"{leader}","seq":0,"records":[]}}"#)
}

#[test]
fn an_unknown_field_is_refused_in_every_request() {
    refused::<SignupRequest>(r#"{"name":"acme","plan":"pro"}"#);
    refused::<MintTokenRequest>(r#"{"scope":"read","tenant":"other"}"#);
    refused::<CreateJournalRequest>(r#"{"name":"orders","replicas":5}"#);
    refused::<SetLeaderRequest>(&format!(r#"{{"new":"{UUID}","old":null,"force":true}}"#));
    refused::<WriteRequest>(r#"{"records":[],"sync":true}"#);
    let e = refused::<TruncateRequest>(r#"{"up_to":1,"upto":1}"#);
    assert!(e.contains("unknown field"), "{e}");
}

#[test]
fn null_for_an_optional_field_is_refused() {
    for json in [r#"{"scope":"read","journal":null}"#, r#"{"scope":"read","expires_in_s":null}"#] {
        let e = refused::<MintTokenRequest>(json);
        assert!(e.contains("null"), "{e}");
    }
    refused::<CreateJournalRequest>(r#"{"name":"orders","mode":null}"#);
    refused::<CreateJournalRequest>(r#"{"name":"orders","tier":null}"#);
    refused::<WriteRequest>(r#"{"leader":null,"seq":0,"records":[]}"#);
    refused::<WriteRequest>(&format!(r#"{{"leader":"{UUID}","seq":null,"records":[]}}"#));
    refused::<TruncateRequest>(r#"{"leader":null,"up_to":1}"#);
}

#[test]
fn null_for_an_optional_answer_field_is_refused_too() {
    refused::<ErrorBody>(r#"{"code":"refused","message":"m","view":null}"#);
    refused::<ErrorBody>(r#"{"code":"too_large","message":"m","max_records":null}"#);
    refused::<ErrorBody>(r#"{"code":"unavailable","message":"m","applied_to":null}"#);
    refused::<ErrorBody>(r#"{"code":"unavailable","message":"m","applied_to":-1}"#);
}

#[test]
fn set_leaders_old_is_required_though_it_may_be_null() {
    let e = refused::<SetLeaderRequest>(&format!(r#"{{"new":"{UUID}"}}"#));
    assert!(e.contains("missing field `old`"), "{e}");
    refused::<SetLeaderRequest>(r#"{"new":null,"old":null}"#);
    refused::<SetLeaderRequest>(r#"{"old":null}"#);
}

#[test]
fn a_views_leader_is_required_though_it_may_be_null() {
    refused::<JournalView>(r#"{"first_seq":0,"next_seq":0}"#);
}

#[test]
fn required_fields_are_required() {
    refused::<SignupRequest>("{}");
    refused::<MintTokenRequest>(r#"{"journal":"orders"}"#);
    refused::<CreateJournalRequest>(r#"{"mode":"multi_writer"}"#);
    refused::<WriteRequest>(&format!(r#"{{"leader":"{UUID}","seq":0}}"#));
    refused::<TruncateRequest>(&format!(r#"{{"leader":"{UUID}"}}"#));
}

#[test]
fn a_repeated_field_is_refused() {
    let e = refused::<SignupRequest>(r#"{"name":"acme","name":"acme"}"#);
    assert!(e.contains("duplicate field"), "{e}");
}

#[test]
fn a_wrong_type_is_refused() {
    refused::<WriteRequest>(r#"{"records":"aGk="}"#);
    refused::<WriteRequest>(r#"{"records":[7]}"#);
    refused::<SignupRequest>(r#"{"name":7}"#);
    refused::<SignupRequest>("");
}

#[test]
fn any_uuid_spelling_but_canonical_lowercase_hyphenated_is_refused() {
    for bad in [
        "0F8B1C2E-4A5D-4E6F-9A0B-1C2D3E4F5A6B",          // uppercase
        "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6B",          // one uppercase digit
        "{0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b}",        // braces
        "urn:uuid:0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b", // urn
        "0f8b1c2e4a5d4e6f9a0b1c2d3e4f5a6b",              // simple
        "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6",           // one digit short
        "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6bb",         // one digit long
        "0f8b1c2e_4a5d_4e6f_9a0b_1c2d3e4f5a6b",          // wrong separators
        "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6g",          // not hex
        " f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b",          // space
        "00000000-0000-0000-0000-000000000000",          // nil
    ] {
        assert!(LeaderUuid::parse(bad).is_err(), "{bad:?} must be refused");
        refused::<WriteRequest>(&write_with_leader(bad));
        refused::<SetLeaderRequest>(&format!(r#"{{"new":"{bad}","old":null}}"#));
        refused::<JournalView>(&format!(r#"{{"leader":"{bad}","first_seq":0,"next_seq":0}}"#));
    }
    let e = refused::<WriteRequest>(&write_with_leader("00000000-0000-0000-0000-000000000000"));
    assert!(e.contains("nil"), "{e}");
}

#[test]
fn the_largest_uuid_is_accepted_whatever_its_version_bits() {
    assert_eq!(LeaderUuid::parse("ffffffff-ffff-ffff-ffff-ffffffffffff").map(LeaderUuid::get), Ok(u128::MAX));
    assert_eq!(LeaderUuid::parse("00000000-0000-0000-0000-000000000001").map(LeaderUuid::get), Ok(1));
}

#[test]
fn a_record_that_is_not_strict_padded_standard_base64_is_refused() {
    for bad in ["aGk", "aGk=\n", "aG k=", "-_8=", "aGk==", "a", "aGl=", "*"] {
        let e = refused::<WriteRequest>(&serde_json::json!({ "records": [bad] }).to_string());
        assert!(e.contains("base64"), "{bad:?}: {e}");
        let view = serde_json::json!({ "leader": null, "first_seq": 0, "next_seq": 0 });
        refused::<Page>(&serde_json::json!({ "from": 0, "records": [bad], "view": view }).to_string());
    }
}

#[test]
fn tenant_names_stop_at_sixty_three_characters_of_lowercase_digits_and_hyphens() {
    let ok = ["a", "0", "acme", "a-b", "a-", "9lives", &"a".repeat(63), &format!("a{}", "-".repeat(62))];
    for name in ok {
        assert_eq!(TenantName::parse(name).map(|n| n.to_string()).as_deref(), Ok(name), "{name:?} is a tenant name");
    }
    let bad = ["", "-acme", "Acme", "acMe", "a_b", "a.b", "a b", "acme\n", "ac/me", "ácme", &"a".repeat(64)];
    for name in bad {
        assert!(TenantName::parse(name).is_err(), "{name:?} is not a tenant name");
        refused::<SignupRequest>(&serde_json::json!({ "name": name }).to_string());
    }
}

#[test]
fn tier_names_follow_the_tenant_pattern() {
    for tier in ["default", "0", "gold-1", &"t".repeat(63)] {
        let body = serde_json::json!({ "name": "o", "tier": tier }).to_string();
        assert!(serde_json::from_str::<CreateJournalRequest>(&body).is_ok(), "{tier:?} is a tier name");
    }
    for tier in ["", "-gold", "Gold", "go_ld", "gold\n", &"t".repeat(64)] {
        refused::<CreateJournalRequest>(&serde_json::json!({ "name": "o", "tier": tier }).to_string());
    }
    refused::<CreateJournalRequest>(r#"{"name":"o","tier":7}"#);
}

#[test]
fn journal_names_stop_at_one_hundred_twenty_eight_characters() {
    let ok = ["o", "Orders", "0rders", "orders.v2", "a_b-c.d", "a..", "A-", &"J".repeat(128)];
    for name in ok {
        assert!(JournalName::parse(name).is_ok(), "{name:?} is a journal name");
        assert!(serde_json::from_str::<CreateJournalRequest>(&format!(r#"{{"name":"{name}"}}"#)).is_ok());
    }
    let bad = [
        "",
        "-orders",
        ".orders",
        "_orders",
        "..",
        "or ders",
        "or/ders",
        "orders\n",
        "ordérs",
        "a:b",
        &"J".repeat(129),
    ];
    for name in bad {
        assert!(JournalName::parse(name).is_err(), "{name:?} is not a journal name");
        refused::<CreateJournalRequest>(&serde_json::json!({ "name": name }).to_string());
        refused::<MintTokenRequest>(&serde_json::json!({ "scope": "read", "journal": name }).to_string());
    }
}

#[test]
fn a_position_that_is_not_a_json_u64_integer_is_refused() {
    for bad in ["1.0", "1e3", "-1", "\"5\"", "18446744073709551616", "null", "true"] {
        refused::<TruncateRequest>(&format!(r#"{{"up_to":{bad}}}"#));
        refused::<JournalView>(&format!(r#"{{"leader":null,"first_seq":0,"next_seq":{bad}}}"#));
    }
}

#[test]
fn a_view_whose_first_seq_passes_its_next_seq_is_refused() {
    let e = refused::<JournalView>(r#"{"leader":null,"first_seq":5,"next_seq":4}"#);
    assert!(e.contains("first_seq"), "{e}");
}

#[test]
fn scope_admin_and_unknown_modes_are_refused() {
    for scope in ["admin", "Owner", "READ", "", "root"] {
        refused::<MintTokenRequest>(&format!(r#"{{"scope":"{scope}"}}"#));
    }
    for mode in ["single", "multi", "SingleWriter", "single-writer"] {
        refused::<CreateJournalRequest>(&format!(r#"{{"name":"o","mode":"{mode}"}}"#));
    }
}

#[test]
fn a_token_lifetime_of_zero_seconds_is_refused() {
    refused::<MintTokenRequest>(r#"{"scope":"read","expires_in_s":0}"#);
    refused::<MintTokenRequest>(r#"{"scope":"read","expires_in_s":-5}"#);
}

#[test]
fn an_unknown_error_code_is_refused() {
    let e = refused::<ErrorBody>(r#"{"code":"teapot","message":"m"}"#);
    assert!(e.contains("teapot"), "{e}");
    refused::<ErrorBody>(r#"{"code":"Malformed","message":"m"}"#);
}

#[test]
fn a_body_given_as_an_array_of_its_fields_is_refused() {
    let e = refused::<SignupRequest>(r#"["acme"]"#);
    assert!(e.contains("JSON object"), "{e}");
    refused::<MintTokenRequest>(r#"["read"]"#);
    refused::<CreateJournalRequest>(r#"["orders","single_writer"]"#);
    refused::<SetLeaderRequest>(&format!(r#"["{UUID}",null]"#));
    refused::<WriteRequest>(r#"[null,null,[]]"#);
    refused::<TruncateRequest>(r#"[null,1]"#);
    refused::<JournalView>("[null,0,0]");
    refused::<ErrorBody>(r#"["malformed","m"]"#);
    refused::<Page>(r#"[0,[],{"leader":null,"first_seq":0,"next_seq":0}]"#);
}
