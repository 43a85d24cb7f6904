//! The VirtualMachineInstance (kubevirt.io/v1): one running VM. The spec types here are also
//! the template of a VirtualMachine. The domain is typed where controllers and the launcher
//! read it (resources, CPU, memory, firmware, disks, interfaces) and every other field is kept
//! as it came, so a read-modify-write loses nothing.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{ConditionStatus, Extra};

/// The desired state of a VM instance.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubevirt.io",
    version = "v1",
    kind = "VirtualMachineInstance",
    namespaced,
    status = "VirtualMachineInstanceStatus",
    shortname = "vmi",
    shortname = "vmis",
    category = "all",
    derive = "PartialEq",
    doc = "VirtualMachineInstance is *the* VirtualMachineInstance Definition. It represents a virtual machine in the runtime environment of kubernetes.",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "IP",
        type_ = "string",
        json_path = ".status.interfaces[0].ipAddress"
    ),
    printcolumn(name = "NodeName", type_ = "string", json_path = ".status.nodeName"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status"
    ),
    printcolumn(
        name = "Live-Migratable",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='LiveMigratable')].status",
        priority = 1
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Paused')].status",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceSpec {
    /// The virtual hardware.
    pub domain: DomainSpec,
    /// Labels a node must have to run the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Seconds the guest gets to shut down before it is killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    /// The volumes disks are backed by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<Volume>>,
    /// The networks interfaces attach to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networks: Option<Vec<Network>>,
    /// The guest's host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// What happens to the VM when its node is drained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<String>,
    /// Fields this version does not model (affinity, tolerations, probes, DNS, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A VM instance spec together with the metadata of the instance, as embedded in a
/// VirtualMachine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceTemplateSpec {
    /// Labels and annotations of the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    /// The instance spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<VirtualMachineInstanceSpec>,
}

/// The virtual hardware of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DomainSpec {
    /// Requests and limits of the launcher pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// The virtual CPU topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    /// The guest memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// The machine type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    /// BIOS or EFI, serial, UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<Firmware>,
    /// The devices.
    pub devices: Devices,
    /// Hypervisor features: ACPI, SMM, APIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
    /// Fields this version does not model (clock, chassis, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// Requests and limits of the launcher pod (`memory`, `cpu`, …).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    /// Requested resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<BTreeMap<String, Quantity>>,
    /// Limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The virtual CPU topology.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cpu {
    /// Cores per socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub cores: Option<u32>,
    /// Sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub sockets: Option<u32>,
    /// Threads per core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub threads: Option<u32>,
    /// The CPU model, `host-passthrough`, `host-model` or a named model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The guest memory.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// The memory the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<Quantity>,
    /// Fields this version does not model (hugepages, maxGuest).
    #[serde(flatten)]
    pub extra: Extra,
}

/// The emulated machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    /// The QEMU machine type such as `q35`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

/// Firmware settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Firmware {
    /// The SMBIOS UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The SMBIOS serial number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// The bootloader: `bios: {}` or `efi: {secureBoot: …}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootloader: Option<Bootloader>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The bootloader of a VM: one of BIOS and EFI.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bootloader {
    /// Legacy BIOS (SeaBIOS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bios: Option<BiosBootloader>,
    /// UEFI (OVMF).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efi: Option<EfiBootloader>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Legacy BIOS settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BiosBootloader {
    /// Whether the BIOS writes its output to the serial console.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_serial: Option<bool>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// UEFI settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EfiBootloader {
    /// Secure boot with Microsoft's keys enrolled; needs SMM. Defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot: Option<bool>,
    /// Whether the EFI variables outlive the VM instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent: Option<bool>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Hypervisor features.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// ACPI (on unless disabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acpi: Option<FeatureState>,
    /// APIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apic: Option<FeatureState>,
    /// System management mode, required by secure boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smm: Option<FeatureState>,
    /// Fields this version does not model (hyperv, kvm, pvspinlock, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A feature switched on (the default when the field is present) or off.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureState {
    /// Whether the feature is on; true when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

impl FeatureState {
    /// Whether a feature given as this state is on.
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

/// The devices of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Devices {
    /// The disks, each backed by the volume of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks: Option<Vec<Disk>>,
    /// The network interfaces, each attached to the network of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Vec<Interface>>,
    /// Whether a network interface is added automatically (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_pod_interface: Option<bool>,
    /// Whether a VNC display is attached (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_graphics_device: Option<bool>,
    /// Whether a serial console is attached (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_serial_console: Option<bool>,
    /// Whether a memory balloon is attached (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_mem_balloon: Option<bool>,
    /// A virtio random number generator fed from the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rng: Option<Rng>,
    /// Input devices such as a USB or virtio tablet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<Input>>,
    /// A watchdog device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watchdog: Option<Watchdog>,
    /// Fields this version does not model (tpm, gpus, hostDevices, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A virtio random number generator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Rng {
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An input device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    /// The device name.
    pub name: String,
    /// The device type; only `tablet`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The bus: `usb` (default) or `virtio`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
}

/// A watchdog device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Watchdog {
    /// The device name.
    pub name: String,
    /// An Intel 6300ESB watchdog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub i6300esb: Option<I6300esbWatchdog>,
    /// Fields this version does not model (diag288).
    #[serde(flatten)]
    pub extra: Extra,
}

/// An Intel 6300ESB watchdog.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct I6300esbWatchdog {
    /// What happens when it fires: `reset` (default), `poweroff` or `shutdown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// A disk of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disk {
    /// The name, the same as the volume's.
    pub name: String,
    /// Attached as a disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskTarget>,
    /// Attached as a CD-ROM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdrom: Option<DiskTarget>,
    /// Attached as a LUN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lun: Option<DiskTarget>,
    /// The boot order, lower first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub boot_order: Option<u32>,
    /// The serial number the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// The cache mode: `none`, `writethrough` or `writeback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// How a disk is attached.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskTarget {
    /// The bus: `virtio`, `sata`, `scsi` or `usb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A network interface of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    /// The name, the same as the network's.
    pub name: String,
    /// The device model such as `virtio` or `e1000`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A fixed MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
    /// Bridge binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub bridge: Option<serde_json::Value>,
    /// Masquerade (NAT) binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub masquerade: Option<serde_json::Value>,
    /// SR-IOV binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub sriov: Option<serde_json::Value>,
    /// A network binding plugin, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub binding: Option<serde_json::Value>,
    /// Ports forwarded to the guest with masquerade; all when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<Port>>,
    /// The boot order of the interface (network boot), lower first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub boot_order: Option<u32>,
    /// Fields this version does not model (pciAddress, dhcpOptions, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A port forwarded to the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    /// A name for the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `TCP` (default) or `UDP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The port number.
    pub port: i32,
}

impl Interface {
    /// The binding methods set on this interface.
    pub fn binding_methods(&self) -> Vec<&'static str> {
        let mut methods = Vec::new();
        for (name, set) in [
            ("bridge", self.bridge.is_some()),
            ("masquerade", self.masquerade.is_some()),
            ("sriov", self.sriov.is_some()),
            ("binding", self.binding.is_some()),
        ] {
            if set {
                methods.push(name);
            }
        }
        for name in ["slirp", "passt", "macvtap"] {
            if self.extra.contains_key(name) {
                methods.push(name);
            }
        }
        methods
    }
}

/// A network a VM attaches to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Network {
    /// The name interfaces refer to.
    pub name: String,
    /// The pod network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodNetwork>,
    /// A Multus network attachment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multus: Option<MultusNetwork>,
}

/// The pod network.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PodNetwork {
    /// The guest's IPv4 CIDR with masquerade.
    #[serde(
        default,
        rename = "vmNetworkCIDR",
        skip_serializing_if = "Option::is_none"
    )]
    pub vm_network_cidr: Option<String>,
    /// The guest's IPv6 CIDR with masquerade.
    #[serde(
        default,
        rename = "vmIPv6NetworkCIDR",
        skip_serializing_if = "Option::is_none"
    )]
    pub vm_ipv6_network_cidr: Option<String>,
}

/// A Multus network attachment.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MultusNetwork {
    /// The NetworkAttachmentDefinition, `name` or `namespace/name`.
    pub network_name: String,
    /// Whether this replaces the pod network as the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
}

/// A volume of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// The name disks refer to.
    pub name: String,
    /// A disk image in a container image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_disk: Option<ContainerDiskSource>,
    /// A cloud-init NoCloud data source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init_no_cloud: Option<CloudInitSource>,
    /// A cloud-init ConfigDrive data source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init_config_drive: Option<CloudInitSource>,
    /// A DataVolume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_volume: Option<DataVolumeVolumeSource>,
    /// A PVC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PersistentVolumeClaimVolumeSource>,
    /// A temporary empty disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_disk: Option<EmptyDiskSource>,
    /// A PVC used read-only under a throw-away overlay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<EphemeralVolumeSource>,
    /// A disk image file on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_disk: Option<HostDisk>,
    /// A ConfigMap presented as an ISO disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapVolumeSource>,
    /// A Secret presented as an ISO disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretVolumeSource>,
    /// A service account's token, CA and namespace presented as an ISO disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountVolumeSource>,
    /// Pod metadata presented as an ISO disk.
    #[serde(
        default,
        rename = "downwardAPI",
        skip_serializing_if = "Option::is_none"
    )]
    pub downward_api: Option<DownwardApiVolumeSource>,
    /// Fields this version does not model (sysprep, downwardMetrics, memoryDump, …).
    #[serde(flatten)]
    pub extra: Extra,
}

impl Volume {
    /// The volume source kinds set on this volume.
    pub fn source_kinds(&self) -> Vec<String> {
        let mut kinds: Vec<String> = [
            ("containerDisk", self.container_disk.is_some()),
            ("cloudInitNoCloud", self.cloud_init_no_cloud.is_some()),
            (
                "cloudInitConfigDrive",
                self.cloud_init_config_drive.is_some(),
            ),
            ("dataVolume", self.data_volume.is_some()),
            (
                "persistentVolumeClaim",
                self.persistent_volume_claim.is_some(),
            ),
            ("emptyDisk", self.empty_disk.is_some()),
            ("ephemeral", self.ephemeral.is_some()),
            ("hostDisk", self.host_disk.is_some()),
            ("configMap", self.config_map.is_some()),
            ("secret", self.secret.is_some()),
            ("serviceAccount", self.service_account.is_some()),
            ("downwardAPI", self.downward_api.is_some()),
        ]
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(n, _)| n.to_owned())
        .collect();
        kinds.extend(self.extra.keys().cloned());
        kinds
    }
}

/// A disk image in a container image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerDiskSource {
    /// The image.
    pub image: String,
    /// When to pull it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// A pull secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secret: Option<String>,
    /// The path of the disk inside the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Cloud-init user and network data, inline or from a Secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudInitSource {
    /// User data as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// User data, base64 encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_base64: Option<String>,
    /// A Secret holding the user data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectName>,
    /// Network data as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data: Option<String>,
    /// Network data, base64 encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data_base64: Option<String>,
    /// A Secret holding the network data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data_secret_ref: Option<LocalObjectName>,
}

/// A reference to an object in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct LocalObjectName {
    /// Its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A DataVolume backing a volume.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeVolumeSource {
    /// The DataVolume's name, in the VM's namespace.
    pub name: String,
    /// Whether the volume can be hot-unplugged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hotpluggable: Option<bool>,
}

/// A PVC backing a volume.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaimVolumeSource {
    /// The PVC's name.
    pub claim_name: String,
    /// Read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// Whether the volume can be hot-unplugged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hotpluggable: Option<bool>,
}

/// A temporary empty disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct EmptyDiskSource {
    /// Its size.
    pub capacity: Quantity,
}

/// A PVC used read-only under a throw-away overlay.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralVolumeSource {
    /// The claim, as a pod refers to one (no `hotpluggable`: an ephemeral volume is not
    /// hot-plugged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim:
        Option<k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource>,
}

/// A disk image file on the node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostDisk {
    /// The image file's path on the node.
    pub path: String,
    /// `Disk` (must exist) or `DiskOrCreate` (created sparse at `capacity`).
    #[serde(rename = "type")]
    pub type_: String,
    /// The size of a created image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Quantity>,
    /// Whether several VMs share the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
}

/// A ConfigMap presented as an ISO disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapVolumeSource {
    /// The ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether the ConfigMap may be missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    /// The ISO's volume label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_label: Option<String>,
}

/// A Secret presented as an ISO disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretVolumeSource {
    /// The Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// Whether the Secret may be missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    /// The ISO's volume label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_label: Option<String>,
}

/// A service account presented as an ISO disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountVolumeSource {
    /// The service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// Pod metadata presented as an ISO disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DownwardApiVolumeSource {
    /// The files and the fields they hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::preserve_unknown_object_list")]
    pub fields: Option<Vec<serde_json::Value>>,
    /// The ISO's volume label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_label: Option<String>,
}

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
    /// Fields this version does not model (migration state, guest OS info, volume status, …).
    #[serde(flatten)]
    pub extra: Extra,
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

/// A condition of a VM or VM instance.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineCondition {
    /// The condition type, see [`condition_types`].
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// When it was last probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// A machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl VirtualMachineCondition {
    /// A condition as of `now`; an empty reason or message is left out.
    pub fn new(type_: &str, holds: bool, reason: &str, message: &str, now: &Time) -> Self {
        let text = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Self {
            type_: type_.to_owned(),
            status: if holds {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            },
            last_probe_time: None,
            last_transition_time: Some(now.clone()),
            reason: text(reason),
            message: text(message),
        }
    }
}

/// Puts `condition` in place of the one of its type (or adds it). While the status holds,
/// the earlier transition time stays, as Kubernetes' conditions keep it.
pub fn set_condition(
    conditions: &mut Vec<VirtualMachineCondition>,
    mut condition: VirtualMachineCondition,
) {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => {
            if existing.status == condition.status {
                condition.last_transition_time = existing.last_transition_time.clone();
            }
            *existing = condition;
        }
        None => conditions.push(condition),
    }
}

/// Whether `conditions` has a condition of `type_` that holds.
pub fn condition_holds(conditions: Option<&Vec<VirtualMachineCondition>>, type_: &str) -> bool {
    conditions.is_some_and(|c| {
        c.iter()
            .any(|c| c.type_ == type_ && c.status == ConditionStatus::True)
    })
}

impl VirtualMachineInstancePhase {
    /// Whether an instance in this phase has ended for good.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

impl VirtualMachineInstance {
    /// `status.phase`, when there is one.
    pub fn phase(&self) -> Option<VirtualMachineInstancePhase> {
        self.status.as_ref().and_then(|s| s.phase)
    }

    /// Whether the instance has ended (Succeeded or Failed).
    pub fn is_final(&self) -> bool {
        self.phase()
            .is_some_and(VirtualMachineInstancePhase::is_final)
    }

    /// Whether its condition `type_` holds.
    pub fn condition_holds(&self, type_: &str) -> bool {
        condition_holds(
            self.status.as_ref().and_then(|s| s.conditions.as_ref()),
            type_,
        )
    }
}

/// Condition types of VMs and VM instances.
pub mod condition_types {
    /// The VM is running and ready.
    pub const READY: &str = "Ready";
    /// The VM is paused.
    pub const PAUSED: &str = "Paused";
    /// The VM failed to start or run.
    pub const FAILURE: &str = "Failure";
    /// The VM can be live-migrated.
    pub const LIVE_MIGRATABLE: &str = "LiveMigratable";
    /// The guest agent is connected.
    pub const AGENT_CONNECTED: &str = "AgentConnected";
    /// A spec change needs a restart to take effect.
    pub const RESTART_REQUIRED: &str = "RestartRequired";
    /// The data volumes of the VM are ready.
    pub const DATA_VOLUMES_READY: &str = "DataVolumesReady";
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
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

impl VirtualMachineInstanceSpec {
    /// The vCPUs the guest gets, as KubeVirt counts them once virt-api has defaulted the
    /// topology: sockets × cores × threads (each 1 when left out) when any is given; without
    /// a topology one socket per CPU of `limits.cpu`, else of `requests.cpu` (a fraction
    /// rounded up), else one.
    pub fn vcpus(&self) -> u64 {
        let cpu = self.domain.cpu.as_ref();
        let given =
            cpu.is_some_and(|c| c.sockets.is_some() || c.cores.is_some() || c.threads.is_some());
        if let Some(cpu) = cpu.filter(|_| given) {
            let count = |n: Option<u32>| u64::from(n.unwrap_or(1).max(1));
            return count(cpu.sockets) * count(cpu.cores) * count(cpu.threads);
        }
        let resources = self.domain.resources.as_ref();
        [
            resources.and_then(|r| r.limits.as_ref()),
            resources.and_then(|r| r.requests.as_ref()),
        ]
        .into_iter()
        .flatten()
        .find_map(|list| list.get("cpu"))
        .and_then(crate::quantity::quantity_bytes)
        .and_then(|cpus| u64::try_from(cpus).ok())
        .map_or(1, |cpus| cpus.max(1))
    }

    /// Whether the guest's vCPUs are pinned to dedicated host CPUs
    /// (`domain.cpu.dedicatedCpuPlacement`).
    pub fn dedicated_cpus(&self) -> bool {
        self.domain.cpu.as_ref().is_some_and(|c| {
            c.extra.get("dedicatedCpuPlacement") == Some(&serde_json::Value::Bool(true))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(second).expect("time"))
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let mut list = Vec::new();
        set_condition(
            &mut list,
            VirtualMachineCondition::new("Ready", false, "A", "", &at(1)),
        );
        set_condition(
            &mut list,
            VirtualMachineCondition::new("Ready", false, "B", "m", &at(2)),
        );
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].last_transition_time, Some(at(1)));
        assert_eq!(
            (list[0].reason.as_deref(), list[0].message.as_deref()),
            (Some("B"), Some("m"))
        );
        set_condition(
            &mut list,
            VirtualMachineCondition::new("Ready", true, "", "", &at(3)),
        );
        assert_eq!(list[0].last_transition_time, Some(at(3)));
        assert_eq!(list[0].reason, None);
        assert!(condition_holds(Some(&list), "Ready"));
        assert!(!condition_holds(Some(&list), "Paused"));
    }
}
