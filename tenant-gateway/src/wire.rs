//! What every route reads and answers the same way: JSON bodies (413 before 400), the query
//! string of a route that takes none, JSON answers, and the writer mode as it travels.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::BodyExt as _;
use paros_api::ErrorCode;
use serde::Serialize;

use crate::error::{ApiError, ApiResult};
use crate::state::Gateway;

/// Reads the body, refusing (413) one over the limit before it is buffered whole, then (400)
/// one that is not JSON.
pub(crate) async fn json_body<T: serde::de::DeserializeOwned>(
    g: &Gateway,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<T> {
    let limit = g.inner.config.body_limit_bytes;
    let too_large = || {
        ApiError::new(ErrorCode::TooLarge, format!("the body is over {limit} bytes"))
            .with_limits(g.inner.config.limits())
    };
    if let Some(len) =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok())
        && len > limit
    {
        drain(g, body);
        return Err(too_large());
    }
    let limit_usize = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut body = body;
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut held = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::malformed(format!("reading the body: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        held += data.len();
        if held > limit_usize {
            drain(g, body);
            return Err(too_large());
        }
        chunks.push(data);
    }
    // One chunk (the usual body) is kept as it came; several are joined.
    let bytes = if chunks.len() == 1 { chunks.swap_remove(0) } else { Bytes::from(chunks.concat()) };
    if !media_type_is(headers, "application/json") {
        return Err(ApiError::malformed("the body is application/json"));
    }
    serde_json::from_slice(&bytes).map_err(|e| ApiError::malformed(format!("bad body: {e}")))
}

/// Reads and drops what is left of a body refused 413, in a task of its own, within the
/// gateway's drain bounds (`body_drain_bytes_max`, `body_drain_time_max`, `body_drains_max`):
/// the client finishes sending and reads the answer rather than a reset stream.
fn drain(g: &Gateway, mut body: Body) {
    let cfg = g.inner.config;
    if cfg.body_drain_bytes_max == 0 {
        return;
    }
    let Ok(permit) = std::sync::Arc::clone(&g.inner.drains).try_acquire_owned() else { return };
    tokio::spawn(async move {
        let _permit = permit;
        let read = async {
            let mut dropped = 0u64;
            while dropped <= cfg.body_drain_bytes_max {
                match body.frame().await {
                    Some(Ok(frame)) => dropped += frame.data_ref().map_or(0, |d| d.len() as u64),
                    Some(Err(_)) | None => break,
                }
            }
        };
        let _ = tokio::time::timeout(cfg.body_drain_time_max, read).await;
    });
}

/// Whether the request's `Content-Type` names `media_type` (parameters aside).
pub(crate) fn media_type_is(headers: &HeaderMap, media_type: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case(media_type))
}

/// 400 for a query string on a route that takes no parameter (the contract: unknown query
/// parameters are `malformed` on every route). An empty query (a bare `?`) names none.
pub(crate) fn no_query(query: Option<&str>) -> ApiResult<()> {
    match query {
        None | Some("") => Ok(()),
        Some(q) => {
            let first = q.split('&').next().unwrap_or_default();
            let name = first.split_once('=').map_or(first, |(name, _)| name);
            let shown: String = name.chars().take(64).collect();
            Err(ApiError::malformed(format!("this route takes no query parameters: unknown `{shown}`")))
        }
    }
}

/// A JSON answer.
pub(crate) fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    let bytes = serde_json::to_vec(body).expect("API bodies serialize");
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response()
}

pub(crate) use paros_client::convert::api_mode;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_without_parameters_refuses_any_query_but_an_empty_one() {
        assert!(no_query(None).is_ok());
        assert!(no_query(Some("")).is_ok());
        for q in ["x=1", "from=0", "x", "&", "a=1&a=1", "%zz=1"] {
            let e = no_query(Some(q)).expect_err(q);
            assert_eq!(e.code(), Some(ErrorCode::Malformed), "{q}");
        }
    }
}
