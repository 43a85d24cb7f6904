//! The UploadTokenRequest (upload.cdi.kubevirt.io/v1beta1): asks for a token that lets a
//! client send data for one PVC to the upload proxy. Upstream serves this kind from CDI's
//! aggregated API server; here it is also a CRD so the embedded API server can serve it.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{FieldPath, Problem, ValidationError, ValidationResult};

/// The PVC a token is requested for.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "upload.cdi.kubevirt.io",
    version = "v1beta1",
    kind = "UploadTokenRequest",
    namespaced,
    status = "UploadTokenRequestStatus",
    derive = "PartialEq",
    doc = "UploadTokenRequest is the CR used to initiate a CDI upload"
)]
#[serde(rename_all = "camelCase")]
pub struct UploadTokenRequestSpec {
    /// The name of the PVC (or DataVolume) to upload to.
    pub pvc_name: String,
}

/// The issued token.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct UploadTokenRequestStatus {
    /// The token to send as `Authorization: Bearer <token>` to the upload proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// Checks that a token request names a PVC.
pub fn validate_upload_token_request(req: &UploadTokenRequest) -> ValidationResult {
    if req.spec.pvc_name.is_empty() {
        return Err(ValidationError::new(
            FieldPath::new("spec").child("pvcName"),
            Problem::Required,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pvc_name_is_required() {
        let mut req = UploadTokenRequest::new("t", UploadTokenRequestSpec::default());
        let err = validate_upload_token_request(&req).unwrap_err();
        assert_eq!(err.field.as_str(), "spec.pvcName");
        req.spec.pvc_name = "disk".into();
        assert!(validate_upload_token_request(&req).is_ok());
    }
}
