//! The patch types of the Kubernetes API: JSON patch (RFC 6902), JSON merge patch
//! (RFC 7386), strategic merge patch as kubectl sends it for core types
//! ([`api::strategic_merge`]), and server-side apply (merged like a merge patch that never
//! deletes; what an applier drops is then taken off by [`super::managed_fields`]).

use serde_json::Value;

use super::errors::ApiError;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
            other => Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got \"{other}\")"
            ))),
        }
    }
}

/// A patch as a request carries it.
pub struct Patch {
    pub kind: PatchType,
    pub body: Value,
    /// The request's `fieldManager`, which an apply must name.
    pub manager: Option<String>,
}

/// Parses a patch body: JSON, or YAML for apply.
pub fn parse_body(kind: PatchType, body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(value) = serde_json::from_slice(body) {
        return Ok(value);
    }
    if kind == PatchType::Apply {
        let text = std::str::from_utf8(body)
            .map_err(|_| ApiError::BadRequest("apply body is not UTF-8".into()))?;
        return serde_saphyr::from_str(text)
            .map_err(|e| ApiError::BadRequest(format!("apply body is not valid YAML: {e}")));
    }
    Err(ApiError::BadRequest(
        "the patch body is not valid JSON".into(),
    ))
}

/// Applies `patch` of type `kind` to `target`.
pub fn apply(kind: PatchType, target: &Value, patch: &Value) -> Result<Value, ApiError> {
    let mut out = target.clone();
    match kind {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::BadRequest(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut out, &ops).map_err(|e| ApiError::Invalid {
                kind: kind_of(target),
                name: name_of(target),
                message: format!("JSON patch failed: {e}"),
            })?;
        }
        PatchType::Merge => json_patch::merge(&mut out, patch),
        PatchType::Strategic => api::strategic_merge::merge(&mut out, patch),
        PatchType::Apply => apply_merge(&mut out, patch),
    }
    Ok(out)
}

fn kind_of(v: &Value) -> String {
    v["kind"].as_str().unwrap_or_default().to_string()
}

fn name_of(v: &Value) -> String {
    v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Server-side apply's merge: maps merge, everything else replaces, and nothing is removed
/// here ([`super::managed_fields`] removes what the applier no longer applies).
fn apply_merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (key, value) in p {
                if value.is_null() {
                    continue;
                }
                apply_merge(t.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_patches_merge_lists_by_their_keys() {
        let pod = json!({"spec": {"containers": [{"name": "c1", "image": "old"}, {"name": "c2"}]}});
        let patch = json!({"spec": {"containers": [{"name": "c1", "image": "new"}]}});
        let out = apply(PatchType::Strategic, &pod, &patch).unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "c1", "image": "new"}, {"name": "c2"}])
        );
    }

    #[test]
    fn merge_json_and_apply_patches() {
        let dv = json!({"spec": {"source": {"http": {"url": "a"}}, "storage": {"x": 1}}});
        let merged = apply(PatchType::Merge, &dv, &json!({"spec": {"storage": null}})).unwrap();
        assert_eq!(merged, json!({"spec": {"source": {"http": {"url": "a"}}}}));
        let ops = json!([{"op": "replace", "path": "/spec/source/http/url", "value": "b"}]);
        let patched = apply(PatchType::Json, &dv, &ops).unwrap();
        assert_eq!(patched["spec"]["source"]["http"]["url"], "b");
        let bad = json!([{"op": "test", "path": "/spec/storage/x", "value": 2}]);
        assert!(apply(PatchType::Json, &dv, &bad).is_err());
        let applied = apply(
            PatchType::Apply,
            &dv,
            &json!({"status": {"phase": "Succeeded"}}),
        )
        .unwrap();
        assert_eq!(applied["status"]["phase"], "Succeeded");
        assert_eq!(applied["spec"], dv["spec"]);
    }

    #[test]
    fn apply_body_may_be_yaml() {
        let body = b"status:\n  phase: Pending\n";
        assert_eq!(
            parse_body(PatchType::Apply, body).unwrap()["status"]["phase"],
            "Pending"
        );
        assert!(parse_body(PatchType::Merge, body).is_err());
    }
}
