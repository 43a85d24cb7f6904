//! The server's own responses: JSON bodies and Status errors with their warnings; and
//! request bodies read as JSON (or YAML).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Response, StatusCode, header};
use serde_json::Value;

use super::Body;
use crate::apiserver::aggregated::AggregatedBody;
use crate::apiserver::errors::ApiError;

/// Admission warnings as kube-apiserver sends them: `Warning: 299 - "text"` headers, the
/// text a quoted-string (quotes and backslashes escaped), which kubectl prints as
/// `Warning: text`.
pub(super) fn add_warnings(response: &mut Response<Body>, warnings: &[String]) {
    for warning in warnings {
        let text = warning
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace(['\n', '\r'], " ");
        if let Ok(value) = header::HeaderValue::from_str(&format!("299 - \"{text}\"")) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
}

/// `warning` before the warnings `response` already carries, as kube-apiserver orders a
/// deprecated version's warning (recorded before the request is served) and admission's.
pub(super) fn add_warning_first(response: &mut Response<Body>, warning: String) {
    let later: Vec<header::HeaderValue> = response
        .headers()
        .get_all(header::WARNING)
        .iter()
        .cloned()
        .collect();
    response.headers_mut().remove(header::WARNING);
    add_warnings(response, &[warning]);
    for value in later {
        response.headers_mut().append(header::WARNING, value);
    }
}

pub(super) fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

pub(super) fn error_response(err: &ApiError) -> Response<Body> {
    let status = StatusCode::from_u16(err.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(status, &err.status());
    if let ApiError::Refused { warnings, .. } = err {
        add_warnings(&mut response, warnings);
    }
    response
}

/// A response of this server as hyper sends it: its own, or an aggregated API's.
pub(super) fn unsync(response: Response<Body>) -> Response<AggregatedBody> {
    response.map(|body| body.map_err(|never| match never {}).boxed_unsync())
}

pub(super) fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(value) = serde_json::from_slice(body) {
        return Ok(value);
    }
    // kubectl and client libraries send JSON; YAML is accepted for hand-made requests.
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::BadRequest("the request body is not UTF-8".into()))?;
    serde_saphyr::from_str(text).map_err(|e| {
        ApiError::BadRequest(format!("the request body is not valid JSON or YAML: {e}"))
    })
}
