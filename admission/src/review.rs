//! The AdmissionReview framing every webhook shares, as JSON: the request's object read out
//! of a review and admitted ([`admit_request`]), and the answer to a review ([`answer`]):
//! allowed with a JSON patch or with warnings ([`warned_response`]), or refused with a
//! [`Refusal`]. The servers carry the review over HTTP; the plugins they serve frame reviews
//! here, never themselves.

use api::kubevirt::cluster_config::ClusterConfig;
use serde_json::{Value, json};

use crate::Refusal;

/// What an admission review decides: the JSON patch that admits the object (none when it
/// needs no change), or the refusal.
pub type Verdict = Result<Option<Value>, Refusal>;

/// The request's object and what [`crate::admit`] makes of it (defaulted and validated), or
/// `None` for an operation other than CREATE and UPDATE.
pub fn admit_request(request: &Value) -> Result<Option<(Value, Value)>, Refusal> {
    admit_request_in(request, &ClusterConfig::default())
}

/// [`admit_request`] on a cluster configured by `cluster` (the active KubeVirt CR's).
pub fn admit_request_in(
    request: &Value,
    cluster: &ClusterConfig,
) -> Result<Option<(Value, Value)>, Refusal> {
    let operation = request["operation"].as_str().unwrap_or_default();
    if operation != "CREATE" && operation != "UPDATE" {
        return Ok(None);
    }
    let original = request["object"].clone();
    let mut object = original.clone();
    crate::admit_in(&mut object, cluster).map_err(|err| Refusal::new(422, err.to_string()))?;
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
        .map_err(|err| Refusal::new(500, err.to_string()))
}

/// The AdmissionReview answering `review` with `verdict`.
pub fn answer(review: &Value, verdict: Verdict) -> Value {
    let response = match verdict {
        Ok(patch) => allowed(patch),
        Err(refusal) => {
            json!({"allowed": false, "status": {"code": refusal.code, "message": refusal.message}})
        }
    };
    answer_with(review, response)
}

/// The AdmissionReview carrying `response` as the answer to `review`.
pub fn answer_with(review: &Value, mut response: Value) -> Value {
    response["uid"] = review["request"]["uid"].clone();
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
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

/// The AdmissionResponse of a check that warns: allowed or refused, its warnings carried
/// either way.
pub fn warned_response(verdict: Result<Vec<String>, Refusal>) -> Value {
    let (mut answer, warnings) = match verdict {
        Ok(warnings) => (json!({"allowed": true}), warnings),
        Err(refusal) => (
            json!({
                "allowed": false,
                "status": {"code": refusal.code, "message": refusal.message},
            }),
            refusal.warnings,
        ),
    };
    if !warnings.is_empty() {
        answer["warnings"] = json!(warnings);
    }
    answer
}
