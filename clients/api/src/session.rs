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
}
