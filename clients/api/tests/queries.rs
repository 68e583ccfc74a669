//! Read and Tail parameters: strict parsing, defaults, and the SSE frames of a tail.

use core::num::NonZeroU64;

use paros_api::{
    Consistency, Gap, Heartbeat, InvalidQuery, InvalidTailEvent, JournalView, Page, ReadQuery, Record, Seq, TailEvent,
    TailFrame, WaitMs, tail_start,
};

fn parse(q: &str) -> ReadQuery {
    ReadQuery::parse(q).unwrap_or_else(|e| panic!("{q:?} must parse: {e}"))
}

#[test]
fn a_bare_read_is_linearizable_with_no_wait() {
    let q = parse("from=5");
    assert_eq!(q, ReadQuery::from(Seq(5)));
    assert_eq!((q.wait_ms.get(), q.consistency), (0, Consistency::Linearizable { min_seq: None }));
}

#[test]
fn min_seq_alone_means_at_least_and_linearizable_with_min_seq_waits_for_both() {
    assert_eq!(parse("from=0&min_seq=9").consistency, Consistency::AtLeast { min_seq: Seq(9) });
    assert_eq!(parse("from=0&consistency=at_least&min_seq=9").consistency, Consistency::AtLeast { min_seq: Seq(9) });
    assert_eq!(
        parse("min_seq=9&consistency=linearizable&from=0").consistency,
        Consistency::Linearizable { min_seq: Some(Seq(9)) }
    );
    assert_eq!(ReadQuery::parse("from=0&consistency=at_least"), Err(InvalidQuery::Missing("min_seq")));
}

#[test]
fn every_parameter_parses_and_prints_back_to_the_same_query() {
    let q =
        parse("from=18446744073709551615&limit=256&max_bytes=65536&wait_ms=1000&consistency=linearizable&min_seq=3");
    assert_eq!(q.limit, NonZeroU64::new(256));
    assert_eq!(q.max_bytes, NonZeroU64::new(65536));
    assert_eq!(q.wait_ms, WaitMs::new(1000).expect("1000 is the maximum, allowed"));
    assert_eq!(
        q.to_query(),
        "from=18446744073709551615&limit=256&max_bytes=65536&wait_ms=1000&consistency=linearizable&min_seq=3"
    );
    for text in ["from=0", "from=1&min_seq=2", "from=1&wait_ms=5", "from=1&limit=1&max_bytes=1"] {
        assert_eq!(parse(text).to_query(), text);
    }
}

#[test]
fn from_is_required_and_limits_are_at_least_one_and_waits_at_most_a_second() {
    assert_eq!(ReadQuery::parse(""), Err(InvalidQuery::Missing("from")));
    assert_eq!(ReadQuery::parse("limit=5"), Err(InvalidQuery::Missing("from")));
    for bad in ["from=0&limit=0", "from=0&max_bytes=0", "from=0&wait_ms=1001", "from=0&wait_ms=70000"] {
        assert!(matches!(ReadQuery::parse(bad), Err(InvalidQuery::BadValue { .. })), "{bad:?}");
    }
    assert_eq!(WaitMs::new(1001), None);
}

#[test]
fn unknown_repeated_empty_and_malformed_parameters_are_refused() {
    assert_eq!(ReadQuery::parse("from=0&offset=1"), Err(InvalidQuery::Unknown("offset".into())));
    assert_eq!(ReadQuery::parse("from=0&from=1"), Err(InvalidQuery::Repeated("from")));
    assert_eq!(ReadQuery::parse("FROM=0"), Err(InvalidQuery::Unknown("FROM".into())));
    for bad in [
        "from=",
        "from",
        "from=0&",
        "from=0&&limit=1",
        "from=+5",
        "from=-1",
        "from=1.0",
        "from=0x1",
        "from=18446744073709551616",
        "from=0&consistency=strong",
        "from=0&consistency=",
        "from=%",
    ] {
        assert!(ReadQuery::parse(bad).is_err(), "{bad:?} must be refused");
    }
}

#[test]
fn percent_escaped_digits_are_the_digits_they_spell() {
    assert_eq!(parse("from=%31%30").from, Seq(10));
}

#[test]
fn last_event_id_overrides_from_and_neither_starts_at_the_tail() {
    assert_eq!(tail_start("from=3", Some("7")), Ok(Some(Seq(7))));
    assert_eq!(tail_start("from=3", None), Ok(Some(Seq(3))));
    assert_eq!(tail_start("", Some("0")), Ok(Some(Seq(0))));
    assert_eq!(tail_start("", None), Ok(None));
}

#[test]
fn a_tail_cursor_that_is_not_a_u64_is_refused() {
    assert!(tail_start("from=x", None).is_err());
    assert!(tail_start("from=3", Some("-1")).is_err(), "a bad Last-Event-ID is refused even with a good from");
    assert!(tail_start("", Some("")).is_err());
    assert!(tail_start("", Some("18446744073709551616")).is_err());
    assert!(tail_start("cursor=1", None).is_err());
    assert!(tail_start("from=1&from=2", None).is_err());
}

fn frames() -> Vec<TailFrame> {
    let view = JournalView { leader: None, first_seq: Seq(3), next_seq: Seq(5) };
    vec![
        TailFrame {
            id: Seq(5),
            event: TailEvent::Records(Page {
                from: Seq(3),
                records: vec![Record::from(&b"hi"[..]), Record::default()],
                view,
            }),
        },
        TailFrame { id: Seq(3), event: TailEvent::Gap(Gap { from: Seq(1), resumed_at: Seq(3), view }) },
        TailFrame { id: Seq(9), event: TailEvent::Heartbeat(Heartbeat { view, caught_up: false }) },
    ]
}

#[test]
fn tail_frames_render_as_sse_with_event_id_and_one_data_line() {
    let sse: Vec<String> = frames().iter().map(TailFrame::to_sse).collect();
    let view = r#"{"leader":null,"first_seq":3,"next_seq":5}"#;
    assert_eq!(
        sse,
        vec![
            format!("event: records\nid: 5\ndata: {{\"from\":3,\"records\":[\"aGk=\",\"\"],\"view\":{view}}}\n\n"),
            format!("event: gap\nid: 3\ndata: {{\"from\":1,\"resumed_at\":3,\"view\":{view}}}\n\n"),
            format!("event: heartbeat\nid: 9\ndata: {{\"view\":{view},\"caught_up\":false}}\n\n"),
        ]
    );
}

#[test]
fn tail_frames_parse_back_from_their_sse_fields() {
    for frame in frames() {
        let parsed = TailFrame::parse(frame.event.name(), &frame.id.to_string(), &frame.event.data())
            .expect("its own rendering parses");
        assert_eq!(parsed, frame);
    }
}

#[test]
fn an_unknown_event_a_bad_id_or_a_bad_payload_is_refused() {
    let hb = r#"{"view":{"leader":null,"first_seq":0,"next_seq":0},"caught_up":true}"#;
    assert!(matches!(TailFrame::parse("ping", "0", hb), Err(InvalidTailEvent::UnknownEvent(_))));
    assert!(matches!(TailFrame::parse("heartbeat", "-1", hb), Err(InvalidTailEvent::Id(_))));
    assert!(matches!(TailFrame::parse("gap", "0", hb), Err(InvalidTailEvent::Payload { event: "gap", .. })));
    assert!(matches!(
        TailFrame::parse("heartbeat", "0", r#"{"view":{"leader":null,"first_seq":0,"next_seq":0},"caught_up":null}"#),
        Err(InvalidTailEvent::Payload { .. })
    ));
}
