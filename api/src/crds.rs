//! The CustomResourceDefinitions of every kind in this crate, as deployed to a cluster and
//! served by the embedded API server.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::crd_versions::{also_served, spec_optional};

use crate::{
    cdi, cnao, hco, hostpath, instancetype, kubevirt, network_attachment, pool, ssp, tekton, upload,
};

/// Every CRD the embedded API server serves, in a stable order.
///
/// Tekton's Task, TaskRun, Pipeline and PipelineRun are served for the tekton tasks'
/// runner of `ferrovirt up`; a cluster gets them from Tekton itself ([`deployed`]).
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
        instancetype::VirtualMachineInstancetype::crd(),
        instancetype::VirtualMachineClusterInstancetype::crd(),
        instancetype::VirtualMachinePreference::crd(),
        instancetype::VirtualMachineClusterPreference::crd(),
        kubevirt_v1alpha3(kubevirt::VirtualMachineInstanceReplicaSet::crd()),
        pool::VirtualMachinePool::crd(),
        kubevirt::preset::crd(),
        hco::schema::crd(),
        ssp::crd(),
        also_served(
            spec_optional(cnao::NetworkAddonsConfig::crd()),
            "v1alpha1",
            None,
        ),
        network_attachment::NetworkAttachmentDefinition::crd(),
        crate::template::crd(),
        crate::tekton_tasks::crd(),
    ]
    .into_iter()
    .chain(tekton::crds())
    .collect()
}

/// The CRDs a cluster gets (`deploy/crds`): all but UploadTokenRequest, whose group an
/// APIService serves there (a CRD of the same group would be shadowed by it, or on the
/// embedded API server refuse it), and Tekton's, which Tekton installs (two owners of one
/// CRD would overwrite each other's schema and conversion webhook).
pub fn deployed() -> Vec<CustomResourceDefinition> {
    all()
        .into_iter()
        .filter(|crd| crd.spec.names.kind != "UploadTokenRequest")
        .filter(|crd| crd.spec.group != tekton::GROUP)
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
