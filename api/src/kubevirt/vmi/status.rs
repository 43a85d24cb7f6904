//! The observed state of a VirtualMachineInstance (`status`): phase, conditions, the guest's
//! interfaces and OS, volumes, devices, memory and CPU as the running domain has them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Machine, VirtualMachineCondition, VirtualMachineInstanceMigrationState};

/// The observed state of a VM instance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceStatus {
    /// The lifecycle phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<VirtualMachineInstancePhase>,
    /// The node running the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Why the VM is in this phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Ready, Paused, LiveMigratable, AgentConnected, ….
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<VirtualMachineCondition>>,
    /// The guest's interfaces and addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Vec<VirtualMachineInstanceNetworkInterface>>,
    /// The vsock context ID given to the guest.
    #[serde(default, rename = "VSOCKCID", skip_serializing_if = "Option::is_none")]
    pub vsock_cid: Option<i64>,
    /// The launcher pods of the instance, by pod UID, with the node each runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_pods: Option<BTreeMap<String, String>>,
    /// The vCPU topology the domain runs with.
    #[serde(
        default,
        rename = "currentCPUTopology",
        skip_serializing_if = "Option::is_none"
    )]
    pub current_cpu_topology: Option<CpuTopology>,
    /// The host devices and GPUs given to the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_status: Option<DeviceStatus>,
    /// The node the instance is being evacuated from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evacuation_node_name: Option<String>,
    /// Whether the guest's filesystems are frozen (`frozen` or empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_freeze_status: Option<String>,
    /// The guest OS as the guest agent reports it.
    #[serde(
        default,
        rename = "guestOSInfo",
        skip_serializing_if = "Option::is_none"
    )]
    pub guest_os_info: Option<VirtualMachineInstanceGuestOsInfo>,
    /// Checksums of the kernel and initrd the guest booted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_boot_status: Option<KernelBootStatus>,
    /// The launcher image the instance runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher_container_image_version: Option<String>,
    /// The machine type the domain runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    /// Guest memory at boot, now and requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStatus>,
    /// Volumes whose storage was moved by a migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrated_volumes: Option<Vec<StorageMigratedVolumeInfo>>,
    /// How the instance migrates: `BlockMigration` or `LiveMigration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration_method: Option<String>,
    /// The last or current migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration_state: Option<VirtualMachineInstanceMigrationState>,
    /// How migration data travels (`Unix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration_transport: Option<String>,
    /// When the instance entered each phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_transition_timestamps: Option<Vec<VirtualMachineInstancePhaseTransitionTimestamp>>,
    /// The launcher pod's QoS class: `BestEffort`, `Burstable` or `Guaranteed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos_class: Option<String>,
    /// The user ID the launcher runs as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_user: Option<i64>,
    /// The SELinux context of the launcher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selinux_context: Option<String>,
    /// Host facts the instance needs on a migration target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_hints: Option<TopologyHints>,
    /// The controller revision of the VM the instance was created from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine_revision_name: Option<String>,
    /// The state of each volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_status: Option<Vec<VolumeStatus>>,
}

/// The lifecycle phase of a VM instance.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum VirtualMachineInstancePhase {
    /// Accepted, not yet scheduled.
    Pending,
    /// The launcher pod is being scheduled.
    Scheduling,
    /// The launcher pod runs and the VM is being started.
    Scheduled,
    /// The VM runs.
    Running,
    /// The VM stopped on its own.
    Succeeded,
    /// The VM failed.
    Failed,
    /// The target of a cross-cluster migration waits for its source.
    WaitingForSync,
    /// The state cannot be determined.
    Unknown,
}

/// A guest network interface and its addresses.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceNetworkInterface {
    /// The interface name from the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The primary IP address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_address: Option<String>,
    /// All IP addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_addresses: Option<Vec<String>>,
    /// The MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// The name inside the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface_name: Option<String>,
    /// Where the entry comes from: `domain`, `guest-agent`, `multus-status`, comma-joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info_source: Option<String>,
    /// The link state: `up` or `down`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_state: Option<String>,
    /// The name of the interface in the launcher pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_interface_name: Option<String>,
    /// The number of queues of the interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_count: Option<i32>,
}

/// A vCPU topology.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CpuTopology {
    /// Cores per socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<i64>,
    /// Sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<i64>,
    /// Threads per core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<i64>,
}

/// The GPUs and host devices given to the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceStatus {
    /// One entry per GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_statuses: Option<Vec<DeviceStatusInfo>>,
    /// One entry per host device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_device_statuses: Option<Vec<DeviceStatusInfo>>,
}

/// A device of the guest and the resource claim it came from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceStatusInfo {
    /// The device's name in the spec.
    pub name: String,
    /// The dynamically allocated device backing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_resource_claim_status: Option<DeviceResourceClaimStatus>,
}

/// The device a resource claim allocated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceResourceClaimStatus {
    /// Addresses of the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<DeviceAttribute>,
    /// The allocated device's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The claim it was allocated for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_name: Option<String>,
}

/// How an allocated device is found on the host.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAttribute {
    /// The mediated device's UUID.
    #[serde(default, rename = "mDevUUID", skip_serializing_if = "Option::is_none")]
    pub mdev_uuid: Option<String>,
    /// The PCI address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_address: Option<String>,
}

/// The guest OS as the guest agent reports it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceGuestOsInfo {
    /// The OS's short ID (`fedora`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The kernel release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_release: Option<String>,
    /// The kernel version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_version: Option<String>,
    /// The guest's machine architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The OS name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The OS name with its version, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pretty_name: Option<String>,
    /// The OS version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The OS version's short ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
}

/// Checksums of the kernel and initrd a guest booted directly.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelBootStatus {
    /// The initrd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initrd_info: Option<BootFileInfo>,
    /// The kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_info: Option<BootFileInfo>,
}

/// A boot file's checksum (upstream's `InitrdInfo` and `KernelInfo`, the same shape).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct BootFileInfo {
    /// The file's CRC32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<i64>,
}

/// Guest memory as the domain has it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStatus {
    /// Memory at boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_at_boot: Option<Quantity>,
    /// Memory now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_current: Option<Quantity>,
    /// Memory asked for (by a hotplug).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_requested: Option<Quantity>,
}

/// A volume whose claim a migration replaced.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageMigratedVolumeInfo {
    /// The volume's name.
    pub volume_name: String,
    /// The claim it moved to.
    #[serde(
        default,
        rename = "destinationPVCInfo",
        skip_serializing_if = "Option::is_none"
    )]
    pub destination_pvc_info: Option<PersistentVolumeClaimInfo>,
    /// The claim it moved from.
    #[serde(
        default,
        rename = "sourcePVCInfo",
        skip_serializing_if = "Option::is_none"
    )]
    pub source_pvc_info: Option<PersistentVolumeClaimInfo>,
}

/// What the instance knows of a volume's claim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaimInfo {
    /// The claim's access modes (`ReadWriteOnce`, `ReadWriteMany`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_modes: Option<Vec<String>>,
    /// The claim's capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
    /// The claim's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    /// The share of a filesystem volume kept free for filesystem overhead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem_overhead: Option<String>,
    /// Whether the volume's space is allocated up front.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preallocated: Option<bool>,
    /// The claim's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<BTreeMap<String, Quantity>>,
    /// `Block` or `Filesystem`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mode: Option<String>,
}

/// When the instance entered a phase.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstancePhaseTransitionTimestamp {
    /// The phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<VirtualMachineInstancePhase>,
    /// When it was entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_transition_timestamp: Option<Time>,
}

/// Host facts an instance needs on any node it runs on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyHints {
    /// The TSC frequency the guest was started with, in Hz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tsc_frequency: Option<i64>,
}

/// The state of one volume of the instance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeStatus {
    /// The volume's name.
    pub name: String,
    /// The guest device it is attached as (`vda`), empty while not attached.
    pub target: String,
    /// A container disk's checksum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_disk_volume: Option<ContainerDiskInfo>,
    /// The attachment pod of a hotplugged volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hotplug_volume: Option<HotplugVolumeStatus>,
    /// The memory dump written to the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_dump_volume: Option<DomainMemoryDumpInfo>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The volume's claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim_info: Option<PersistentVolumeClaimInfo>,
    /// The hotplug phase (`Bound`, `AttachedToNode`, `Ready`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// A machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The volume's size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
}

/// A container disk's checksum.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ContainerDiskInfo {
    /// The disk image's CRC32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<i64>,
}

/// The pod a hotplugged volume is attached through.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HotplugVolumeStatus {
    /// The attachment pod's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach_pod_name: Option<String>,
    /// The attachment pod's UID.
    #[serde(
        default,
        rename = "attachPodUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub attach_pod_uid: Option<String>,
}

/// A memory dump written to a volume.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DomainMemoryDumpInfo {
    /// The claim the dump is written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    /// When the dump ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_timestamp: Option<Time>,
    /// When the dump started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    /// The dump file's name on the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_file_name: Option<String>,
}
