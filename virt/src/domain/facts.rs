//! What the domain builder needs to know about the node and the pod, beyond the VMI: how
//! guests are accelerated, where the firmware is, what backs each volume, and where the
//! VMI's own files go. Gathered by the launcher (`crate::launcher::node_facts`) and passed
//! in, so that building the domain stays a pure function.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

/// How QEMU runs the guest's instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acceleration {
    /// /dev/kvm exists and runs guests at speed.
    Kvm,
    /// No usable KVM: software emulation (TCG) is the only way, if it is allowed.
    Unavailable {
        /// KubeVirt's `developerConfiguration.useEmulation`.
        emulation_allowed: bool,
    },
}

/// Firmware images found on the node; `None` where the file is missing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirmwarePaths {
    /// SeaBIOS (`bios-256k.bin`).
    pub seabios: Option<PathBuf>,
    /// OVMF code without secure boot.
    pub ovmf_code: Option<PathBuf>,
    /// The empty EFI variable store matching `ovmf_code`.
    pub ovmf_vars: Option<PathBuf>,
    /// OVMF code built with secure boot (needs SMM).
    pub ovmf_code_secure_boot: Option<PathBuf>,
    /// An EFI variable store with Microsoft's keys enrolled, for secure boot.
    pub ovmf_vars_secure_boot: Option<PathBuf>,
}

/// What backs a volume on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeBacking {
    /// A filesystem claim: the directory that holds (or will hold) `disk.img`.
    ClaimDirectory {
        /// The mounted claim.
        dir: PathBuf,
        /// The claim's capacity, the size of a `disk.img` created when it is missing.
        capacity: u64,
    },
    /// A block claim: the device node.
    BlockDevice(PathBuf),
    /// A directory of files (a ConfigMap, Secret, service account or downward API volume,
    /// or the Secret of a cloud-init `secretRef`).
    Files(PathBuf),
    /// A containerDisk already pulled into the node's cache: its raw image.
    ContainerDiskImage(PathBuf),
}

/// Everything besides the VMI that decides the QEMU invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    /// The QEMU binary.
    pub qemu_binary: PathBuf,
    /// KVM, or software emulation and whether it is allowed.
    pub acceleration: Acceleration,
    /// Firmware images.
    pub firmware: FirmwarePaths,
    /// Volume name to what backs it on this node.
    pub volumes: BTreeMap<String, VolumeBacking>,
    /// Paths (volume backings, host disks) on which O_DIRECT opens fail, so `cache: none`
    /// cannot be used there.
    pub no_direct_io: Vec<PathBuf>,
    /// The VMI's private directory: overlays, ISOs, the serial log.
    pub run_dir: PathBuf,
    /// Where QEMU's unix sockets go: the run directory, or a short directory when the run
    /// directory is too deep for socket addresses ([`crate::unix_path::socket_dir`]).
    pub socket_dir: PathBuf,
    /// Where EFI variable stores persist across restarts of the VMI.
    pub nvram_dir: PathBuf,
    /// The address forwarded guest ports listen on (the pod's IP).
    pub pod_ip: IpAddr,
    /// Network name to the Linux bridge a `bridge` binding attaches its tap to; bridge
    /// bindings of other networks are refused.
    pub bridges: BTreeMap<String, String>,
    /// Network name to the pod interface a CNI plugin made for it (a secondary network on a
    /// cluster): a `bridge` binding bridges it to the guest's tap in the pod.
    pub pod_ports: BTreeMap<String, PodPort>,
    /// Whether the launcher may create tap devices (CAP_NET_ADMIN).
    pub may_create_tap: bool,
    /// Secret name to the directory where an access credential's Secret is mounted
    /// (KubeVirt's `<secret>-access-cred` volume).
    pub access_credentials: BTreeMap<String, PathBuf>,
}

/// A pod interface of a secondary network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPort {
    /// Its name (KubeVirt's `pod<hash>`).
    pub interface: String,
    /// Its MAC address, which the guest's NIC takes when the interface names none.
    pub mac: String,
}
