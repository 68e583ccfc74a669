//! The append session, `POST /v1/journals/{name}/session`: one streaming request per writer.
//!
//! The request body is a stream of lines (`application/x-ndjson`), each one Write request
//! body ([`WriteRequest`](crate::WriteRequest)), sent without waiting for answers. The answer
//! (200, `application/x-ndjson`, sent at once) is a stream of lines too: the `n`th answer line
//! answers the `n`th request line, exactly as `POST /v1/journals/{name}/records` would have
//! answered it (`{"status": 200, "body": <WriteAnswer>}`, or the error status and its
//! [`ErrorBody`](crate::ErrorBody), with `retry_after_s` on a 429). The first answer that is not
//! 200 ends the session: the gateway reads no further line, answers the lines it had read
//! already (each with its own outcome), and ends the stream with one [`SessionEnd`] line. A
//! request line the stream ends without answering was never read: it took no effect.
//! A stream that breaks off without its end line leaves the unanswered lines undecided.

use bytes::{Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::calls::{WriteAnswer, WriteVerdict};
use crate::outcome::{ApiError, WriteOutcome};

/// The content type of both directions of a session.
pub const SESSION_CONTENT_TYPE: &str = "application/x-ndjson";

/// Why a session ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SessionEndCode {
    /// A request line was answered with an error (the line before the end line says which).
    Refused,
    /// The request body ended: every line was answered.
    Closed,
    /// No request line came within the gateway's idle timeout.
    Idle,
}

/// The last line of a session's answer stream: `{"end": {"code", "answered", "message"}}`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionEnd {
    pub code: SessionEndCode,
    /// The request lines the session read and answered; every later line took no effect.
    pub answered: u64,
    pub message: String,
}

/// One line of a session's answer stream, parsed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum SessionLine {
    /// The answer to the request line of the same rank, as the Write route gives it: feed
    /// `status` and `body` to [`WriteOutcome::from_response`](crate::WriteOutcome::from_response).
    Answer { status: u16, retry_after_s: Option<u64>, body: Vec<u8> },
    /// The end of the stream.
    End(SessionEnd),
}

/// A session line that is neither an answer nor an end.
#[derive(Debug, thiserror::Error)]
#[error("not a session line: {0}")]
pub struct InvalidSessionLine(String);

#[derive(Deserialize)]
struct Wire<'a> {
    status: Option<u16>,
    retry_after_s: Option<u64>,
    #[serde(borrow)]
    body: Option<&'a RawValue>,
    end: Option<SessionEnd>,
}

impl SessionLine {
    /// Parses one answer line (without its newline).
    ///
    /// # Errors
    /// [`InvalidSessionLine`] for a line that is not JSON, or holds neither a status with its
    /// body nor an end, or both.
    pub fn parse(line: &[u8]) -> Result<SessionLine, InvalidSessionLine> {
        let wire: Wire<'_> = serde_json::from_slice(line).map_err(|e| InvalidSessionLine(e.to_string()))?;
        match wire {
            Wire { status: Some(status), body: Some(body), end: None, retry_after_s } => {
                Ok(SessionLine::Answer { status, retry_after_s, body: body.get().as_bytes().to_vec() })
            }
            Wire { status: None, body: None, retry_after_s: None, end: Some(end) } => Ok(SessionLine::End(end)),
            _ => Err(InvalidSessionLine("neither a status with its body nor an end".into())),
        }
    }

    /// The line's JSON and its newline. `body` of an answer must be one JSON value.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = match self {
            SessionLine::Answer { status, retry_after_s, body } => {
                let mut out = Vec::with_capacity(body.len() + 48);
                answer_head(&mut out, *status, *retry_after_s);
                out.extend_from_slice(body);
                out.push(b'}');
                out
            }
            SessionLine::End(end) => {
                #[derive(Serialize)]
                struct Ended<'a> {
                    end: &'a SessionEnd,
                }
                serde_json::to_vec(&Ended { end }).expect("an end line serializes")
            }
        };
        out.push(b'\n');
        out
    }
}

/// `{"status":…[,"retry_after_s":…],"body":` — an answer line up to its body.
fn answer_head(out: &mut Vec<u8>, status: u16, retry_after_s: Option<u64>) {
    use std::io::Write as _;
    let _ = write!(out, "{{\"status\":{status}");
    if let Some(s) = retry_after_s {
        let _ = write!(out, ",\"retry_after_s\":{s}");
    }
    out.extend_from_slice(b",\"body\":");
}

/// The answer line of `body` and its newline, serialized in place: the bytes
/// [`SessionLine::Answer`]'s [`encode`](SessionLine::encode) gives for `body`'s JSON, in one
/// buffer.
///
/// # Errors
/// `body`'s serialization error (none for the API's bodies).
pub fn answer_line<T: Serialize + ?Sized>(
    status: u16,
    retry_after_s: Option<u64>,
    body: &T,
) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(256);
    answer_head(&mut out, status, retry_after_s);
    serde_json::to_writer(&mut out, body)?;
    out.extend_from_slice(b"}\n");
    Ok(out)
}

/// One answer line of a session of Writes, read in one pass: the answer's outcome, as
/// [`WriteOutcome::from_response`] gives it for the line's status and body.
#[derive(Debug)]
pub enum WriteLine {
    /// The answer to the request line of the same rank.
    Answer { status: u16, retry_after_s: Option<u64>, outcome: Result<WriteOutcome, ApiError> },
    /// The end of the stream.
    End(SessionEnd),
}

impl WriteLine {
    /// Parses one answer line (without its newline) of a session of Writes. A 200 whose status
    /// comes before its body, as the gateway writes it, is read in one pass; any other line as
    /// [`SessionLine::parse`] and [`WriteOutcome::from_response`] read it, with the same result.
    ///
    /// # Errors
    /// As [`SessionLine::parse`].
    pub fn parse(line: &[u8]) -> Result<WriteLine, InvalidSessionLine> {
        if let Ok(Accepted { retry_after_s, answer }) = serde_json::from_slice::<Accepted>(line) {
            let WriteAnswer { outcome, seq, count, view } = answer;
            let outcome = Ok(match outcome {
                WriteVerdict::Accepted => WriteOutcome::Accepted { seq, count, view },
                WriteVerdict::Duplicate => WriteOutcome::Duplicate { seq, count, view },
            });
            return Ok(WriteLine::Answer { status: 200, retry_after_s, outcome });
        }
        Ok(match SessionLine::parse(line)? {
            SessionLine::Answer { status, retry_after_s, body } => {
                WriteLine::Answer { status, retry_after_s, outcome: WriteOutcome::from_response(status, &body) }
            }
            SessionLine::End(end) => WriteLine::End(end),
        })
    }
}

/// A line `{"status": 200, …, "body": <WriteAnswer>}` with its status before its body: the
/// one-pass reading of [`WriteLine::parse`]. Anything else fails it (and is read the general way).
struct Accepted {
    retry_after_s: Option<u64>,
    answer: WriteAnswer,
}

impl<'de> Deserialize<'de> for Accepted {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Accepted, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Accepted;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a 200 answer line, its status before its body")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Accepted, A::Error> {
                use serde::de::Error as _;
                let (mut status, mut retry_after_s, mut answer) = (None::<u16>, None::<Option<u64>>, None);
                while let Some(key) = map.next_key::<&'de str>()? {
                    match key {
                        "status" if status.is_none() => status = Some(map.next_value()?),
                        "retry_after_s" if retry_after_s.is_none() => retry_after_s = Some(map.next_value()?),
                        "body" if answer.is_none() && status == Some(200) => answer = Some(map.next_value()?),
                        "status" | "retry_after_s" | "body" | "end" => return Err(A::Error::custom("not one pass")),
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                let answer = answer.ok_or_else(|| A::Error::custom("no body"))?;
                Ok(Accepted { retry_after_s: retry_after_s.flatten(), answer })
            }
        }
        d.deserialize_map(Visit)
    }
}

/// At most this many bytes of ready lines are joined into one chunk by [`gather`].
pub const CHUNK_BYTES_MAX: usize = 64 << 10;

/// `first` and the lines `next` has ready behind it, joined up to [`CHUNK_BYTES_MAX`] bytes: one
/// body frame (and one write) for a burst of lines instead of one each, in either direction.
pub fn gather(first: Bytes, mut next: impl FnMut() -> Option<Bytes>) -> Bytes {
    let mut joined: Option<BytesMut> = None;
    while joined.as_ref().map_or(first.len(), BytesMut::len) < CHUNK_BYTES_MAX {
        let Some(line) = next() else { break };
        joined.get_or_insert_with(|| BytesMut::from(&first[..])).extend_from_slice(&line);
    }
    joined.map_or(first, BytesMut::freeze)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_lines_are_gathered_up_to_the_chunk_bound() {
        let mut ready = vec![Bytes::from_static(b"b\n"), Bytes::from_static(b"c\n")].into_iter();
        assert_eq!(gather(Bytes::from_static(b"a\n"), || ready.next()), Bytes::from_static(b"a\nb\nc\n"));
        let big = Bytes::from(vec![b'x'; CHUNK_BYTES_MAX]);
        let mut left = 1;
        let once = gather(big.clone(), || {
            (left > 0).then(|| {
                left -= 1;
                Bytes::from_static(b"y")
            })
        });
        assert_eq!((once, left), (big, 1), "a full chunk takes nothing more");
    }

    #[test]
    fn answers_and_ends_round_trip_and_anything_else_is_refused() {
        let answer =
            SessionLine::Answer { status: 429, retry_after_s: Some(2), body: br#"{"code":"over_quota"}"#.to_vec() };
        let line = answer.encode();
        assert_eq!(line.last(), Some(&b'\n'));
        let in_place = answer_line(429, Some(2), &serde_json::json!({"code": "over_quota"})).unwrap();
        assert_eq!(in_place, line, "serialized in place, the same bytes");
        let plain = SessionLine::Answer { status: 200, retry_after_s: None, body: b"[1]".to_vec() };
        assert_eq!(answer_line(200, None, &[1]).unwrap(), plain.encode());
        assert_eq!(SessionLine::parse(&line[..line.len() - 1]).unwrap(), answer);
        let end = SessionLine::End(SessionEnd { code: SessionEndCode::Idle, answered: 3, message: "idle".into() });
        let line = end.encode();
        assert_eq!(
            String::from_utf8_lossy(&line),
            "{\"end\":{\"code\":\"idle\",\"answered\":3,\"message\":\"idle\"}}\n"
        );
        assert_eq!(SessionLine::parse(line.trim_ascii_end()).unwrap(), end);
        for bad in [
            &b"{}"[..],
            b"{\"status\":200}",
            b"not json",
            br#"{"status":200,"body":{},"end":{"code":"idle","answered":0,"message":""}}"#,
        ] {
            assert!(SessionLine::parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    /// The reading in two passes that [`WriteLine::parse`] must agree with.
    fn two_passes(line: &[u8]) -> String {
        format!(
            "{:?}",
            SessionLine::parse(line).map(|l| match l {
                SessionLine::Answer { status, retry_after_s, body } => {
                    WriteLine::Answer { status, retry_after_s, outcome: WriteOutcome::from_response(status, &body) }
                }
                SessionLine::End(end) => WriteLine::End(end),
            })
        )
    }

    #[test]
    fn a_write_line_read_in_one_pass_is_what_two_passes_read() {
        let view = r#"{"leader":"0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b","first_seq":0,"next_seq":41}"#;
        let accepted = format!(r#"{{"outcome":"accepted","seq":40,"count":1,"view":{view}}}"#);
        let lines = [
            format!(r#"{{"status":200,"body":{accepted}}}"#),
            format!(r#"{{"status":200,"body":{}}}"#, accepted.replace("accepted", "duplicate")),
            format!(r#"{{"status":200,"retry_after_s":3,"body":{accepted},"extra":[1,{{}}]}}"#),
            format!(r#"{{"status":200,"retry_after_s":null,"body":{accepted}}}"#),
            format!(r#"{{"body":{accepted},"status":200}}"#),
            format!(r#"{{"status":409,"body":{{"code":"refused","message":"m","view":{view}}}}}"#),
            format!(r#"{{"status":200,"body":{{"code":"refused","message":"m","view":{view}}}}}"#),
            format!(r#"{{"status":200,"body":{accepted},"status":200}}"#),
            format!(r#"{{"status":200,"body":{accepted},"body":{accepted}}}"#),
            format!(r#"{{"status":200,"body":{accepted},"end":{{"code":"idle","answered":0,"message":""}}}}"#),
            format!(r#"{{"status":200,"body":{}}}"#, accepted.replace("\"count\"", "\"c\\u006funt\"")),
            r#"{"status":201,"body":{}}"#.to_owned(),
            r#"{"status":null,"body":{}}"#.to_owned(),
            r#"{"end":{"code":"closed","answered":2,"message":"the request body ended"}}"#.to_owned(),
            "not json".to_owned(),
            format!(r#"{{"status":200,"body":{accepted}}} trailing"#),
        ];
        for line in &lines {
            let one = format!("{:?}", WriteLine::parse(line.as_bytes()));
            assert_eq!(one, two_passes(line.as_bytes()), "{line}");
        }
        let Ok(WriteLine::Answer { status: 200, retry_after_s: Some(3), outcome: Ok(WriteOutcome::Accepted { .. }) }) =
            WriteLine::parse(lines[2].as_bytes())
        else {
            panic!("the one-pass reading keeps retry_after_s");
        };
    }
}
