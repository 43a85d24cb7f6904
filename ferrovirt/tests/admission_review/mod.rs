//! What the webhook tests share: an embedded API server with every CRD and no admission of
//! its own (standing for a cluster whose webhooks are the processes under test), and the
//! object an AdmissionReview response's patch makes.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;
use standalone::apiserver::{ApiServer, ApiServerConfig};

/// An API server in `dir` serving every CRD, admitting everything.
pub async fn bare_api_server(dir: &Path) -> ApiServer {
    let _ = rustls::crypto::ring::default_provider().install_default();
    ApiServer::start(ApiServerConfig {
        data_dir: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().expect("an address"),
        crds: api::crds::all()
            .into_iter()
            .map(|crd| serde_json::to_value(crd).expect("a CRD as JSON"))
            .collect(),
        admission: Vec::new(),
        virtual_creates: HashMap::new(),
    })
    .await
    .expect("the API server starts")
}

/// Applies a response's base64 JSON patch to `object`.
pub fn patched(response: &Value, mut object: Value) -> Value {
    let bytes: k8s_openapi::ByteString =
        serde_json::from_value(response["patch"].clone()).expect("a base64 patch");
    let patch: json_patch::Patch = serde_json::from_slice(&bytes.0).expect("a JSON patch");
    json_patch::patch(&mut object, &patch).expect("the patch applies");
    object
}
