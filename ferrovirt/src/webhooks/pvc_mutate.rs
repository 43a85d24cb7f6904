//! CDI's PVC mutating webhook (`pvc-mutate.cdi.kubevirt.io`) in the embedded API server: a
//! claim created with `cdi.kubevirt.io/applyStorageProfile: "true"` is completed from its
//! class's StorageProfile ([`operators::cdi::pvc_rendering`]). It runs after the
//! DefaultStorageClass plugin, as a webhook runs after kube-apiserver's built-in plugins, so
//! the claim already carries its class.

use api::cdi::{CDIConfig, StorageProfile};
use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
use operators::cdi::datavolume::settings::{CDI_CONFIG, ClusterSettings};
use operators::cdi::pvc_rendering::{
    APPLY_STORAGE_PROFILE_LABEL, CONTENT_TYPE_ANNOTATION, RENDERING_DISABLED, RenderInputs,
    render_claim,
};
use serde::de::DeserializeOwned;
use serde_json::Value;
use standalone::apiserver::{
    AdmissionPlugin, AdmissionRequest, Operation, Refusal, Resources, Wording,
};

/// The webhook's name, as refusals quote it.
pub const WEBHOOK: &str = "pvc-mutate.cdi.kubevirt.io";

/// The plugin, for `ferrovirt up`'s admission chain.
pub fn embedded() -> AdmissionPlugin {
    let claims = Resources::One {
        group: String::new(),
        plural: "persistentvolumeclaims".to_owned(),
    };
    let mutate = Box::new(|request: &AdmissionRequest, claim: &mut Value| {
        if request.operation != Operation::Create || !wants_rendering(claim) {
            return Ok(Vec::new());
        }
        render(request, claim)?;
        Ok(Vec::new())
    });
    AdmissionPlugin::mutating(WEBHOOK, claims, Wording::Webhook, mutate)
}

/// Whether `claim` carries the label that asks for rendering (the webhook's object selector).
pub fn wants_rendering(claim: &Value) -> bool {
    claim["metadata"]["labels"][APPLY_STORAGE_PROFILE_LABEL] == "true"
}

/// Renders `claim` in place unless CDIConfig turns rendering off.
fn render(request: &AdmissionRequest, claim: &mut Value) -> Result<(), Refusal> {
    let config: Option<CDIConfig> =
        typed(request.get("cdi.kubevirt.io", "cdiconfigs", "", CDI_CONFIG))?;
    let disabled = config
        .as_ref()
        .and_then(|c| c.spec.webhook_pvc_rendering.as_deref())
        == Some(RENDERING_DISABLED);
    if disabled {
        return Ok(());
    }
    let mut spec: PersistentVolumeClaimSpec = serde_json::from_value(claim["spec"].clone())
        .map_err(|e| Refusal::new(400, e.to_string()))?;
    // A class that does not exist counts as none, as CDI finds no class by that name.
    let class = match spec.storage_class_name.clone() {
        Some(name) => request
            .get("storage.k8s.io", "storageclasses", "", &name)
            .map_err(Refusal::from)?
            .map(|_| name),
        None => None,
    };
    let profile: Option<StorageProfile> = match &class {
        Some(class) => typed(request.get("cdi.kubevirt.io", "storageprofiles", "", class))?,
        None => None,
    };
    let settings = ClusterSettings {
        config,
        ..Default::default()
    };
    let inputs = RenderInputs {
        class: class.as_deref(),
        profile: profile.as_ref().and_then(|p| p.status.as_ref()),
        overhead: settings.overhead_of(class.as_deref()),
        archive: claim["metadata"]["annotations"][CONTENT_TYPE_ANNOTATION] == "archive",
    };
    render_claim(&mut spec, &inputs).map_err(|e| Refusal::new(400, e.to_string()))?;
    claim["spec"] = serde_json::to_value(&spec).map_err(|e| Refusal::new(500, e.to_string()))?;
    Ok(())
}

/// A looked-up object as its type (`None` when it does not exist).
fn typed<T: DeserializeOwned>(
    found: Result<Option<Value>, standalone::apiserver::ApiError>,
) -> Result<Option<T>, Refusal> {
    found
        .map_err(Refusal::from)?
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| Refusal::new(500, e.to_string()))
}
