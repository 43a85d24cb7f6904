//! The AdmissionReview over HTTP, for every webhook server of this binary: the review read
//! from a request's body, and the answer carrying admission's response (the framing itself,
//! allowed with a JSON patch or refused, is `admission::review`). The servers (CDI's webhook,
//! the install guards, virt-api, the MAC pool) answer here, never themselves.

use admission::review::{self, Verdict};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

/// The largest review body read.
const MAX_REVIEW: usize = 3 * 1024 * 1024;

/// The review (an AdmissionReview, or at `/convert` a ConversionReview) in `request`'s
/// body, or the answer that refuses the body.
pub async fn read_review(request: Request<Incoming>) -> Result<Value, Response<Full<Bytes>>> {
    let body = match Limited::new(request.into_body(), MAX_REVIEW)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(err) => {
            let message = format!("reading the review's body: {err}");
            return Err(respond(StatusCode::BAD_REQUEST, &json!({"error": message})));
        }
    };
    serde_json::from_slice(&body).map_err(|err| {
        let message =
            format!("the body is not a review (AdmissionReview or ConversionReview): {err}");
        respond(StatusCode::BAD_REQUEST, &json!({"error": message}))
    })
}

/// The AdmissionReview answering `review` with `verdict`.
pub fn answer_review(review: &Value, verdict: Verdict) -> Response<Full<Bytes>> {
    respond(StatusCode::OK, &review::answer(review, verdict))
}

/// The AdmissionReview carrying `response` as the answer to `review`.
pub fn answer_with(review: &Value, response: Value) -> Response<Full<Bytes>> {
    respond(StatusCode::OK, &review::answer_with(review, response))
}

/// An answer of `status` with `body` as JSON.
pub fn respond(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}
