//! The VirtualMachine (kubevirt.io/v1): a VM that outlives its instances, started and stopped
//! according to its run strategy, with the DataVolumes it owns.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::vmi::VirtualMachineInstanceTemplateSpec;
use crate::cdi::datavolume::DataVolumeSpec;

pub use super::vm_status::*;

/// The desired state of a VirtualMachine.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubevirt.io",
    version = "v1",
    kind = "VirtualMachine",
    namespaced,
    status = "VirtualMachineStatus",
    shortname = "vm",
    shortname = "vms",
    category = "all",
    derive = "PartialEq",
    doc = "VirtualMachine handles the VirtualMachines that are not running or are in a stopped state The VirtualMachine contains the template to create the VirtualMachineInstance. It also mirrors the running state of the created VirtualMachineInstance in its status.",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.printableStatus"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineSpec {
    /// Deprecated switch between `Always` (true) and `Halted` (false); excludes `runStrategy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<bool>,
    /// When instances are started and restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_strategy: Option<RunStrategy>,
    /// An instance type to take CPU and memory from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instancetype: Option<InstancetypeMatcher>,
    /// A preference to take device defaults from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preference: Option<PreferenceMatcher>,
    /// The instance to create: required in the schema, as upstream (serde still reads a
    /// missing one as None).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required)]
    pub template: Option<VirtualMachineInstanceTemplateSpec>,
    /// DataVolumes created with the VM and owned by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_volume_templates: Option<Vec<DataVolumeTemplateSpec>>,
    /// What a change of the template's volumes does: `Replacement` (on the next start) or
    /// `Migration` (moves the storage of the running instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_volumes_strategy: Option<String>,
}

/// An instance type a VM refers to, by name or inferred from a volume.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstancetypeMatcher {
    /// The volume whose labels name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infer_from_volume: Option<String>,
    /// What happens when inferring fails: `Reject` or `Ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infer_from_volume_failure_policy: Option<String>,
    /// The kind, namespaced or cluster-wide (the cluster-wide one by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The controller revision holding the object as first applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_name: Option<String>,
}

/// A preference a VM refers to; the same shape as [`InstancetypeMatcher`].
pub type PreferenceMatcher = InstancetypeMatcher;

/// When the instances of a VirtualMachine run.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum RunStrategy {
    /// Always keep an instance running.
    Always,
    /// Restart the instance only when it fails.
    RerunOnFailure,
    /// Start and stop only on request.
    Manual,
    /// Keep no instance running.
    Halted,
    /// Run the instance once, not restarting it.
    Once,
    /// Wait to receive a migration from another cluster.
    WaitAsReceiver,
}

impl RunStrategy {
    /// Every run strategy, as written in YAML.
    pub const ALL: [&'static str; 6] = [
        "Always",
        "RerunOnFailure",
        "Manual",
        "Halted",
        "Once",
        "WaitAsReceiver",
    ];

    /// The value as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "Always",
            Self::RerunOnFailure => "RerunOnFailure",
            Self::Manual => "Manual",
            Self::Halted => "Halted",
            Self::Once => "Once",
            Self::WaitAsReceiver => "WaitAsReceiver",
        }
    }

    /// Parses a value as written in YAML.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Always,
            Self::RerunOnFailure,
            Self::Manual,
            Self::Halted,
            Self::Once,
            Self::WaitAsReceiver,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

impl VirtualMachine {
    /// Whether its condition `type_` holds.
    pub fn condition_holds(&self, type_: &str) -> bool {
        super::vmi::condition_holds(
            self.status.as_ref().and_then(|s| s.conditions.as_ref()),
            type_,
        )
    }
}

/// The actions of `status.stateChangeRequests`, written by the start, stop and restart
/// subresources and carried out by the VM controller.
pub mod state_change {
    /// Create an instance.
    pub const START: &str = "Start";
    /// Delete the instance with the request's UID.
    pub const STOP: &str = "Stop";
    /// The key and value of a start request's data asking for a paused start.
    pub const PAUSED: (&str, &str) = ("paused", "true");
}

impl VirtualMachineSpec {
    /// The effective run strategy: `runStrategy`, else `Always`/`Halted` from `running`,
    /// else `Halted`.
    pub fn effective_run_strategy(&self) -> RunStrategy {
        match (self.run_strategy, self.running) {
            (Some(r), _) => r,
            (None, Some(true)) => RunStrategy::Always,
            _ => RunStrategy::Halted,
        }
    }
}

/// A DataVolume created with a VirtualMachine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeTemplateSpec {
    /// Deprecated and ignored; kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Deprecated and ignored; kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name, labels and annotations of the DataVolume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    /// The DataVolume spec.
    pub spec: DataVolumeSpec,
    /// A placeholder upstream keeps so that objects of an older API still read: always empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DataVolumeTemplateStatus>,
}

/// The status a DataVolume template may carry: an object with no fields (KubeVirt's
/// `DataVolumeTemplateDummyStatus`), so anything written inside it is refused.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DataVolumeTemplateStatus {}
