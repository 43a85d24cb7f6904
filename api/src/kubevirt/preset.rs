//! VirtualMachineInstancePreset (`kubevirt.io/v1`, and `v1alpha3`): a domain spec that
//! virt-api merges into every VMI created in its namespace whose labels its selector
//! selects. Deprecated upstream (instancetypes and preferences replace it) but still served;
//! the merge is admission's (`admission::kubevirt::preset`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::vmi::DomainSpec;

/// The annotation on a VMI that keeps every preset away from it, when `"true"`.
pub const EXCLUSION_ANNOTATION: &str =
    "virtualmachineinstancepresets.admission.kubevirt.io/exclude";
/// The prefix of the annotation naming a preset applied to a VMI
/// (`virtualmachinepreset.kubevirt.io/NAME: kubevirt.io/v1`).
pub const APPLIED_ANNOTATION_PREFIX: &str = "virtualmachinepreset.kubevirt.io/";
/// The warning virt-api gives with a VMI a preset was applied to, and the CRD's for `v1`.
pub const DEPRECATION_WARNING: &str =
    "kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2.";
/// The CRD's deprecation warning for `v1alpha3`.
pub const V1ALPHA3_DEPRECATION_WARNING: &str = "kubevirt.io/v1alpha3 VirtualMachineInstancePresets is now deprecated and will be removed in v2.";

/// The spec of a preset: which VMIs it applies to, and what it gives them.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubevirt.io",
    version = "v1",
    kind = "VirtualMachineInstancePreset",
    namespaced,
    shortname = "vmipreset",
    shortname = "vmipresets",
    category = "all",
    derive = "PartialEq",
    doc = "Deprecated for removal in v2, please use VirtualMachineInstanceType and VirtualMachinePreference instead.\n\nVirtualMachineInstancePreset defines a VMI spec.domain to be applied to all VMIs that match the provided label selector More info: https://kubevirt.io/user-guide/virtual_machines/presets/#overrides"
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstancePresetSpec {
    /// Selector is a label query over a set of VMIs. Required.
    pub selector: LabelSelector,
    /// Domain is the same object type as contained in VirtualMachineInstanceSpec
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<DomainSpec>,
}

/// The preset's CRD as virt-operator's: `v1` and `v1alpha3` served, both deprecated with
/// their warnings, objects stored at `v1alpha3`.
pub fn crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use kube::CustomResourceExt;
    let crd = crate::crd_versions::also_served(
        VirtualMachineInstancePreset::crd(),
        "v1alpha3",
        Some(V1ALPHA3_DEPRECATION_WARNING),
    );
    let mut crd = crate::crd_versions::deprecated(crd, "v1", DEPRECATION_WARNING);
    for version in &mut crd.spec.versions {
        version.storage = version.name == "v1alpha3";
    }
    crd
}
