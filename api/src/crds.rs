//! The CustomResourceDefinitions of every kind in this crate, as deployed to a cluster and
//! served by the embedded API server.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, JSON,
};
use kube::CustomResourceExt;

use crate::{cdi, cnao, hco, hostpath, kubevirt, network_attachment, ssp, upload};

/// Every CRD the embedded API server serves, in a stable order.
///
/// `UploadTokenRequest` is served upstream by CDI's aggregated API server, not a CRD, and
/// so it is on a cluster (`ferrovirt webhook` behind its APIService); the embedded API
/// server serves it as a CRD whose creates it answers.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        cdi::DataVolume::crd(),
        cdi::DataSource::crd(),
        cdi::DataImportCron::crd(),
        also_served(cdi::CDI::crd(), "v1alpha1", None),
        cdi::CDIConfig::crd(),
        cdi::StorageProfile::crd(),
        upload::UploadTokenRequest::crd(),
        spec_optional(hostpath::HostPathProvisioner::crd()),
        kubevirt_v1alpha3(kubevirt::VirtualMachine::crd()),
        kubevirt_v1alpha3(kubevirt::VirtualMachineInstance::crd()),
        kubevirt_v1alpha3(kubevirt::KubeVirt::crd()),
        hco::schema::crd(),
        ssp::crd(),
        also_served(
            spec_optional(cnao::NetworkAddonsConfig::crd()),
            "v1alpha1",
            None,
        ),
        network_attachment::NetworkAttachmentDefinition::crd(),
        crate::template::crd(),
    ]
}

/// The CRDs a cluster gets (`deploy/crds`): all but UploadTokenRequest, whose group an
/// APIService serves there (a CRD of the same group would be shadowed by it, or on the
/// embedded API server refuse it).
pub fn deployed() -> Vec<CustomResourceDefinition> {
    all()
        .into_iter()
        .filter(|crd| crd.spec.names.kind != "UploadTokenRequest")
        .collect()
}

/// The file name of a CRD in `deploy/crds`: `<group>_<plural>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// A CRD as YAML, exactly as committed under `deploy/crds`.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::SerializeError> {
    serde_saphyr::to_string(crd)
}

/// The deprecation warning upstream's CRDs give for `kubevirt.io/v1alpha3`.
pub const KUBEVIRT_V1ALPHA3_DEPRECATION_WARNING: &str =
    "kubevirt.io/v1alpha3 is now deprecated and will be removed in a future release.";

/// A kubevirt.io CRD serving v1alpha3 too, deprecated, as virt-operator's CRDs do.
fn kubevirt_v1alpha3(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    also_served(crd, "v1alpha3", Some(KUBEVIRT_V1ALPHA3_DEPRECATION_WARNING))
}

/// `crd` serving `version` too, with its storage version's schema, subresources and
/// columns, not stored, optionally deprecated with `warning`: upstream's older versions
/// whose schema is the current one, so objects move between them by their `apiVersion`
/// alone (conversion strategy `None`).
pub fn also_served(
    mut crd: CustomResourceDefinition,
    version: &str,
    warning: Option<&str>,
) -> CustomResourceDefinition {
    let stored = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .cloned()
        .expect("a CRD has a storage version");
    let mut older = stored;
    older.name = version.to_owned();
    older.storage = false;
    crd.spec.versions.push(older);
    match warning {
        Some(warning) => deprecated(crd, version, warning),
        None => crd,
    }
}

/// `crd` with `version` marked deprecated, kube-apiserver warning `warning` on its use.
pub fn deprecated(
    mut crd: CustomResourceDefinition,
    version: &str,
    warning: &str,
) -> CustomResourceDefinition {
    for served in crd.spec.versions.iter_mut().filter(|v| v.name == version) {
        served.deprecated = Some(true);
        served.deprecation_warning = Some(warning.to_owned());
    }
    crd
}

/// `crd` with conversion strategy `None` said outright, as upstream's SSP CRD says it.
pub fn conversion_none(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "None".to_owned(),
        webhook: None,
    });
    crd
}

/// `crd` whose objects may leave out `spec` (every version), as upstream's CRD allows. A
/// missing one is defaulted to `{}`, so that the typed clients here (whose `spec` is not
/// optional) read the object as Go reads it, a zero spec.
pub fn spec_optional(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        let root = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut());
        if let Some(root) = root {
            if let Some(required) = root.required.as_mut() {
                required.retain(|field| field != "spec");
            }
            if root.required.as_ref().is_some_and(Vec::is_empty) {
                root.required = None;
            }
            let spec = root.properties.as_mut().and_then(|p| p.get_mut("spec"));
            if let Some(spec) = spec {
                spec.default = Some(JSON(serde_json::json!({})));
            }
        }
    }
    crd
}
