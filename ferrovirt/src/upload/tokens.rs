//! UploadTokenRequest answered by the embedded API server: a create of
//! `upload.cdi.kubevirt.io/v1beta1` `uploadtokenrequests` is not stored; it is answered with
//! the request and `status.token`, an upload token for the named PVC signed with the key in
//! the data directory, as CDI's API server answers it.
//!
//! Authorization: the embedded API server authorizes the create like any other (the admin
//! may; a user it impersonates needs an RBAC rule for `create uploadtokenrequests`).

use serde_json::{Value, json};
use standalone::apiserver::{ApiError, VirtualCreate};
use uploadproxy::UploadTokenIssuer;

/// The API group of UploadTokenRequest.
pub const GROUP: &str = "upload.cdi.kubevirt.io";
/// The resource (plural) the virtual create answers.
pub const PLURAL: &str = "uploadtokenrequests";
const KIND: &str = "UploadTokenRequest";
const API_VERSION: &str = "upload.cdi.kubevirt.io/v1beta1";

/// The `virtual_creates` entry of the API server that answers UploadTokenRequests with
/// tokens from `issuer`.
pub fn upload_token_requests(
    issuer: std::sync::Arc<UploadTokenIssuer>,
) -> ((String, String), Box<VirtualCreate>) {
    let create = move |namespace: &str, body: Value| answer(&issuer, namespace, body);
    ((GROUP.into(), PLURAL.into()), Box::new(create))
}

/// Checks a request body and answers it: the object as sent, with the namespace of the path,
/// its type filled in and `status.token` set.
pub fn answer(
    issuer: &UploadTokenIssuer,
    namespace: &str,
    mut body: Value,
) -> Result<Value, ApiError> {
    let Some(object) = body.as_object_mut() else {
        return Err(ApiError::BadRequest(format!(
            "the body of a {KIND} must be a JSON object"
        )));
    };
    if namespace.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "{KIND} is namespaced: POST it to /apis/{API_VERSION}/namespaces/NAMESPACE/{PLURAL}"
        )));
    }
    for (field, expected) in [("kind", KIND), ("apiVersion", API_VERSION)] {
        match object.get(field) {
            None | Some(Value::Null) => {
                object.insert(field.into(), expected.into());
            }
            Some(Value::String(given)) if given == expected => {}
            Some(given) => {
                return Err(ApiError::BadRequest(format!(
                    "{field} {given} does not match the expected {expected:?} of this resource"
                )));
            }
        }
    }
    let metadata = object.entry("metadata").or_insert_with(|| json!({}));
    let Some(metadata) = metadata.as_object_mut() else {
        return Err(ApiError::BadRequest("metadata must be an object".into()));
    };
    let name = metadata
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    match metadata.get("namespace") {
        None | Some(Value::Null) => {}
        Some(Value::String(given)) if given.is_empty() || given == namespace => {}
        Some(given) => {
            return Err(ApiError::BadRequest(format!(
                "the namespace of the provided object ({given}) does not match the namespace sent on the request ({namespace:?})"
            )));
        }
    }
    metadata.insert("namespace".into(), namespace.into());
    // CDI answers with the request's metadata; Go renders its unset creation time as null.
    metadata.entry("creationTimestamp").or_insert(Value::Null);
    let invalid = |message: &str| ApiError::Invalid {
        kind: KIND.into(),
        name: name.clone(),
        message: message.into(),
    };
    let pvc_name = match object.get("spec").and_then(|spec| spec.get("pvcName")) {
        None | Some(Value::Null) => return Err(invalid("spec.pvcName: Required value")),
        Some(Value::String(pvc)) if pvc.is_empty() => {
            return Err(invalid("spec.pvcName: Required value"));
        }
        Some(Value::String(pvc)) => pvc.clone(),
        Some(other) => {
            return Err(invalid(&format!(
                "spec.pvcName: Invalid value: {other}: must be a string"
            )));
        }
    };
    let token = issuer
        .issue(namespace, &pvc_name)
        .map_err(ApiError::internal)?;
    object.insert("status".into(), json!({ "token": token }));
    tracing::info!(%namespace, pvc = %pvc_name, "issued an upload token");
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issuer() -> (tempfile::TempDir, UploadTokenIssuer) {
        let dir = tempfile::tempdir().unwrap();
        let issuer = UploadTokenIssuer::load_or_create(dir.path()).unwrap();
        (dir, issuer)
    }

    fn request(pvc: Value) -> Value {
        json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": "token-for-virtctl"},
            "spec": {"pvcName": pvc},
        })
    }

    #[test]
    fn answers_with_a_token_for_the_pvc() {
        let (dir, issuer) = issuer();
        let validator = issuer.validator();
        let ((group, plural), create) = upload_token_requests(std::sync::Arc::new(issuer));
        assert_eq!((group.as_str(), plural.as_str()), (GROUP, PLURAL));
        let answer = create("tenant", request(json!("disk"))).unwrap();
        assert_eq!(answer["kind"], KIND);
        assert_eq!(answer["apiVersion"], API_VERSION);
        assert_eq!(answer["metadata"]["name"], "token-for-virtctl");
        assert_eq!(answer["metadata"]["namespace"], "tenant");
        assert!(answer["metadata"]["creationTimestamp"].is_null());
        assert_eq!(answer["spec"]["pvcName"], "disk");
        let token = answer["status"]["token"].as_str().unwrap();
        let claims = validator.validate(token).unwrap();
        assert_eq!(
            (claims.namespace.as_str(), claims.name.as_str()),
            ("tenant", "disk")
        );
        // The key is kept: a restarted server's proxy accepts tokens issued before.
        let again = UploadTokenIssuer::load_or_create(dir.path()).unwrap();
        assert!(again.validator().validate(token).is_ok());
    }

    #[test]
    fn type_and_namespace_are_filled_in() {
        let (_dir, issuer) = issuer();
        let answer = super::answer(&issuer, "ns", json!({"spec": {"pvcName": "p"}})).unwrap();
        assert_eq!(answer["kind"], KIND);
        assert_eq!(answer["metadata"]["namespace"], "ns");
        assert!(answer["status"]["token"].is_string());
    }

    #[test]
    fn bad_requests_are_refused_naming_the_field() {
        let (_dir, issuer) = issuer();
        for pvc in [json!(""), Value::Null, json!(7)] {
            let err = super::answer(&issuer, "ns", request(pvc)).unwrap_err();
            assert_eq!(err.code(), 422, "{err}");
            assert!(err.to_string().contains("spec.pvcName"), "{err}");
        }
        let mut no_spec = request(json!("p"));
        no_spec.as_object_mut().unwrap().remove("spec");
        let err = super::answer(&issuer, "ns", no_spec).unwrap_err();
        assert!(err.to_string().contains("spec.pvcName"), "{err}");

        let mut wrong_kind = request(json!("p"));
        wrong_kind["kind"] = json!("DataVolume");
        let err = super::answer(&issuer, "ns", wrong_kind).unwrap_err();
        assert_eq!(err.code(), 400);
        assert!(err.to_string().contains("kind"), "{err}");

        let mut wrong_version = request(json!("p"));
        wrong_version["apiVersion"] = json!("cdi.kubevirt.io/v1beta1");
        let err = super::answer(&issuer, "ns", wrong_version).unwrap_err();
        assert!(err.to_string().contains("apiVersion"), "{err}");

        let mut other_namespace = request(json!("p"));
        other_namespace["metadata"]["namespace"] = json!("elsewhere");
        let err = super::answer(&issuer, "ns", other_namespace).unwrap_err();
        assert_eq!(err.code(), 400);
        assert!(err.to_string().contains("namespace"), "{err}");

        let err = super::answer(&issuer, "", request(json!("p"))).unwrap_err();
        assert_eq!(err.code(), 400);
        let err = super::answer(&issuer, "ns", json!([1])).unwrap_err();
        assert_eq!(err.code(), 400);
    }
}
