//! The AdmissionReview framing every webhook server of this binary shares: the review read
//! from a request's body, the answer carrying a response (allowed with a JSON patch, or
//! refused with a code and message), and the admission of `api::admission` as a verdict.
//! The servers (CDI's webhook, the install guards, virt-api, the MAC pool) and the plugins
//! they serve frame reviews here, never themselves.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

/// The largest review body read.
const MAX_REVIEW: usize = 3 * 1024 * 1024;

/// What an admission review decides: the JSON patch that admits the object (none when it
/// needs no change), or the HTTP code and message that refuse it.
pub type Verdict = Result<Option<Value>, (u16, String)>;

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

/// The request's object and what `api::admission` makes of it (defaulted and validated),
/// or `None` for an operation other than CREATE and UPDATE.
pub fn admit_request(request: &Value) -> Result<Option<(Value, Value)>, (u16, String)> {
    admit_request_in(
        request,
        &api::kubevirt::cluster_config::ClusterConfig::default(),
    )
}

/// [`admit_request`] on a cluster configured by `cluster` (the active KubeVirt CR's).
pub fn admit_request_in(
    request: &Value,
    cluster: &api::kubevirt::cluster_config::ClusterConfig,
) -> Result<Option<(Value, Value)>, (u16, String)> {
    let operation = request["operation"].as_str().unwrap_or_default();
    if operation != "CREATE" && operation != "UPDATE" {
        return Ok(None);
    }
    let original = request["object"].clone();
    let mut object = original.clone();
    api::admission::admit_in(&mut object, cluster).map_err(|err| (422, err.to_string()))?;
    Ok(Some((original, object)))
}

/// The JSON patch from `original` to `admitted`, none when they are equal.
pub fn patch_between(original: &Value, admitted: &Value) -> Verdict {
    let patch = json_patch::diff(original, admitted);
    if patch.0.is_empty() {
        return Ok(None);
    }
    serde_json::to_value(patch)
        .map(Some)
        .map_err(|err| (500, err.to_string()))
}

/// The AdmissionReview answering `review` with `verdict`.
pub fn answer_review(review: &Value, verdict: Verdict) -> Response<Full<Bytes>> {
    let response = match verdict {
        Ok(patch) => allowed(patch),
        Err((code, message)) => {
            json!({"allowed": false, "status": {"code": code, "message": message}})
        }
    };
    answer_with(review, response)
}

/// The AdmissionReview carrying `response` as the answer to `review`.
pub fn answer_with(review: &Value, mut response: Value) -> Response<Full<Bytes>> {
    response["uid"] = review["request"]["uid"].clone();
    respond(
        StatusCode::OK,
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
    )
}

fn allowed(patch: Option<Value>) -> Value {
    let mut response = json!({"allowed": true});
    if let Some(patch) = patch {
        let bytes = k8s_openapi::ByteString(patch.to_string().into_bytes());
        response["patchType"] = json!("JSONPatch");
        response["patch"] = serde_json::to_value(bytes).unwrap_or_default();
    }
    response
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
