//! `status.migrationState` of a VirtualMachineInstance: where the last or current migration
//! goes from and to, how far it got, and the settings it runs with.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::kubevirt::kubevirt_config::MigrationConfiguration;

/// The last or current migration of an instance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceMigrationState {
    /// Whether an abort was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_requested: Option<bool>,
    /// How the abort went: `Succeeded`, `Failed` or `Aborting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_status: Option<String>,
    /// Whether the migration finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<bool>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_timestamp: Option<Time>,
    /// Whether it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<bool>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// The settings it runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration_configuration: Option<MigrationConfiguration>,
    /// The network it uses: `Pod` or `Migration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration_network_type: Option<String>,
    /// The migration policy that applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration_policy_name: Option<String>,
    /// The UID of the VirtualMachineInstanceMigration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration_uid: Option<String>,
    /// `PreCopy` or `PostCopy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The node it leaves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_node: Option<String>,
    /// The claim holding the source's persistent state.
    #[serde(
        default,
        rename = "sourcePersistentStatePVCName",
        skip_serializing_if = "Option::is_none"
    )]
    pub source_persistent_state_pvc_name: Option<String>,
    /// The launcher pod it leaves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_pod: Option<String>,
    /// The source side, for a migration between clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_state: Option<VirtualMachineInstanceMigrationSourceState>,
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    /// The UID of the target's attachment pod.
    #[serde(
        default,
        rename = "targetAttachmentPodUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub target_attachment_pod_uid: Option<String>,
    /// Host CPUs the target pins the guest to.
    #[serde(
        default,
        rename = "targetCPUSet",
        skip_serializing_if = "Option::is_none"
    )]
    pub target_cpu_set: Option<Vec<i32>>,
    /// Ports the target listens on for direct migration, by port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_direct_migration_node_ports: Option<BTreeMap<String, i32>>,
    /// The node it goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_node: Option<String>,
    /// The address of the target node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_node_address: Option<String>,
    /// Whether the target saw the domain arrive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_node_domain_detected: Option<bool>,
    /// When the domain was ready on the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_node_domain_ready_timestamp: Option<Time>,
    /// The target node's CPU topology, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_node_topology: Option<String>,
    /// The claim holding the target's persistent state.
    #[serde(
        default,
        rename = "targetPersistentStatePVCName",
        skip_serializing_if = "Option::is_none"
    )]
    pub target_persistent_state_pvc_name: Option<String>,
    /// The launcher pod it goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_pod: Option<String>,
    /// The target side, for a migration between clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_state: Option<VirtualMachineInstanceMigrationTargetState>,
}

/// The source side of a migration between clusters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceMigrationSourceState {
    /// What both sides record.
    #[serde(flatten)]
    pub common: MigrationSideState,
    /// Node selectors the target must honour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selectors: Option<BTreeMap<String, String>>,
}

/// The target side of a migration between clusters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceMigrationTargetState {
    /// What both sides record.
    #[serde(flatten)]
    pub common: MigrationSideState,
    /// The UID of the target's attachment pod.
    #[serde(
        default,
        rename = "attachmentPodUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub attachment_pod_uid: Option<String>,
    /// Host CPUs the target pins the guest to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_set: Option<Vec<i32>>,
    /// Ports the target listens on for direct migration, by port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_migration_node_ports: Option<BTreeMap<String, i32>>,
    /// Whether the target saw the domain arrive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_detected: Option<bool>,
    /// When the domain was ready on the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_ready_timestamp: Option<Time>,
    /// The node's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_address: Option<String>,
    /// The node's CPU topology, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_topology: Option<String>,
}

/// What each side of a migration between clusters records (upstream's common migration
/// state, embedded in both).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationSideState {
    /// The libvirt domain's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_name: Option<String>,
    /// The libvirt domain's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_namespace: Option<String>,
    /// The UID of the migration object on this side.
    #[serde(
        default,
        rename = "migrationUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub migration_uid: Option<String>,
    /// The node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The claim holding persistent state.
    #[serde(
        default,
        rename = "persistentStatePVCName",
        skip_serializing_if = "Option::is_none"
    )]
    pub persistent_state_pvc_name: Option<String>,
    /// The launcher pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The launcher's SELinux context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selinux_context: Option<String>,
    /// The address the other side synchronises with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_address: Option<String>,
    /// The UID of the instance on this side.
    #[serde(
        default,
        rename = "virtualMachineInstanceUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub virtual_machine_instance_uid: Option<String>,
}
