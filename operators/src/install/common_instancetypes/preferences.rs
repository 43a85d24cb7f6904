//! The VirtualMachineClusterPreferences of common-instancetypes, one per guest OS (and its
//! desktop, DPDK, realtime, virtio and architecture variants), each composed of building
//! blocks as upstream composes them: the Linux or Windows base, then what the variant adds
//! (dedicated IO thread, a tablet, spread for DPDK, EFI with or without Secure Boot, a
//! TPM), then the OS's requirements.

use serde_json::{Value, json};

use super::{LABEL_PREFIX, VENDOR, VERSION};

/// The guest OS family: the `os-type` label and the `vm.kubevirt.io/os` annotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OsType {
    Linux,
    Windows,
    Legacy,
}

impl OsType {
    fn as_str(self) -> &'static str {
        match self {
            OsType::Linux => "linux",
            OsType::Windows => "windows",
            OsType::Legacy => "legacy",
        }
    }
}

/// A building block: a fragment of a preference's spec.
type Block = fn() -> Value;

/// One preference: its name, how it shows in a console, and its blocks in order.
#[derive(Clone, Copy, Debug)]
pub struct Preference {
    pub name: &'static str,
    pub display_name: &'static str,
    /// The console's icon class without its `icon-` prefix.
    pub icon: &'static str,
    /// The `tags` annotation after `hidden,kubevirt,`.
    pub tags: &'static str,
    pub os: OsType,
    pub arch: Option<&'static str>,
    pub blocks: &'static [Block],
    /// Minimum vCPUs and guest memory, if the OS has any.
    pub requirements: Option<(u32, &'static str)>,
}

/// Virtio disks and NICs and a virtio RNG: every modern Linux guest.
fn linux_virtio() -> Value {
    json!({"devices": {
        "preferredDiskBus": "virtio",
        "preferredInterfaceModel": "virtio",
        "preferredRng": {},
    }})
}

/// SATA disks and an e1000 NIC for guests without virtio drivers.
fn legacy_devices() -> Value {
    json!({"devices": {"preferredDiskBus": "sata", "preferredInterfaceModel": "e1000"}})
}

fn virtio_transitional() -> Value {
    json!({"devices": {"preferredUseVirtioTransitional": true}})
}

fn dedicated_io_thread() -> Value {
    json!({"devices": {"preferredDiskDedicatedIoThread": true}})
}

/// A virtio tablet, so the pointer follows a desktop's.
fn desktop_tablet() -> Value {
    json!({"devices": {
        "preferredAutoattachInputDevice": true,
        "preferredInputBus": "virtio",
        "preferredInputType": "tablet",
    }})
}

/// DPDK: vCPUs spread over sockets, cores and threads, and multi-queue NICs.
fn dpdk() -> Value {
    json!({
        "cpu": {
            "preferredCPUTopology": "spread",
            "spreadOptions": {"across": "SocketsCoresThreads", "ratio": 4},
        },
        "devices": {"preferredNetworkInterfaceMultiQueue": true},
    })
}

/// Realtime: spread vCPUs, no graphics or balloon, a serial console, multi-queue NICs.
fn realtime() -> Value {
    json!({
        "cpu": {
            "preferredCPUTopology": "spread",
            "spreadOptions": {"across": "SocketsCoresThreads"},
        },
        "devices": {
            "preferredAutoattachGraphicsDevice": false,
            "preferredAutoattachMemBalloon": false,
            "preferredAutoattachSerialConsole": true,
            "preferredNetworkInterfaceMultiQueue": true,
        },
    })
}

/// EFI without Secure Boot.
fn efi() -> Value {
    json!({"firmware": {"preferredEfi": {"secureBoot": false}}})
}

/// EFI with Secure Boot, which needs SMM.
fn secure_boot() -> Value {
    json!({
        "features": {"preferredSmm": {}},
        "firmware": {"preferredEfi": {"secureBoot": true}},
    })
}

/// What every Windows guest prefers: its clock and timers, Hyper-V enlightenments, SATA and
/// e1000e, a tablet by default, vCPUs as sockets, an hour to shut down.
fn windows_base() -> Value {
    json!({
        "clock": {
            "preferredClockOffset": {"utc": {}},
            "preferredTimer": {
                "hpet": {"present": false},
                "hyperv": {},
                "pit": {"tickPolicy": "delay"},
                "rtc": {"tickPolicy": "catchup"},
            },
        },
        "cpu": {"preferredCPUTopology": "sockets"},
        "devices": {
            "preferredAutoattachInputDevice": true,
            "preferredDiskBus": "sata",
            "preferredInterfaceModel": "e1000e",
        },
        "features": {
            "preferredAcpi": {},
            "preferredApic": {},
            "preferredHyperv": {
                "frequencies": {},
                "ipi": {},
                "reenlightenment": {},
                "relaxed": {},
                "reset": {},
                "runtime": {},
                "spinlocks": {"spinlocks": 8191},
                "synic": {},
                "synictimer": {"direct": {}},
                "tlbflush": {},
                "vapic": {},
                "vpindex": {},
            },
        },
        "preferredTerminationGracePeriodSeconds": 3600,
    })
}

/// Windows with virtio drivers: virtio disks and NICs and a virtio tablet.
fn windows_virtio() -> Value {
    json!({"devices": {
        "preferredDiskBus": "virtio",
        "preferredInputBus": "virtio",
        "preferredInputType": "tablet",
        "preferredInterfaceModel": "virtio",
    }})
}

/// A persistent TPM and persistent EFI variables (Windows 11, Server 2022 and later).
fn persistent_tpm() -> Value {
    json!({
        "devices": {"preferredTPM": {"persistent": true}},
        "firmware": {"preferredEfi": {"persistent": true}},
    })
}

fn nic_e1000() -> Value {
    json!({"devices": {"preferredInterfaceModel": "e1000"}})
}

fn nic_rtl8139() -> Value {
    json!({"devices": {"preferredInterfaceModel": "rtl8139"}})
}

/// Old guests that cannot address the 64-bit PCI hole.
fn no_pci_hole64() -> Value {
    json!({"annotations": {"kubevirt.io/disablePCIHole64": "true"}})
}

const LINUX: &[Block] = &[linux_virtio];
const LINUX_IO: &[Block] = &[linux_virtio, dedicated_io_thread];
const LINUX_IO_DESKTOP: &[Block] = &[linux_virtio, dedicated_io_thread, desktop_tablet];
const LINUX_IO_DPDK: &[Block] = &[linux_virtio, dedicated_io_thread, dpdk];
const LINUX_IO_SECURE: &[Block] = &[linux_virtio, dedicated_io_thread, secure_boot];
const LINUX_DESKTOP: &[Block] = &[linux_virtio, desktop_tablet];
const LINUX_EFI: &[Block] = &[linux_virtio, efi];
const LINUX_SECURE: &[Block] = &[linux_virtio, secure_boot];
const WINDOWS: &[Block] = &[windows_base];
const WINDOWS_VIRTIO: &[Block] = &[windows_base, windows_virtio];
const WINDOWS_SECURE: &[Block] = &[windows_base, secure_boot];
const WINDOWS_SECURE_VIRTIO: &[Block] = &[windows_base, secure_boot, windows_virtio];
const WINDOWS_TPM: &[Block] = &[windows_base, secure_boot, persistent_tpm];
const WINDOWS_TPM_VIRTIO: &[Block] = &[windows_base, secure_boot, persistent_tpm, windows_virtio];

const fn linux(
    name: &'static str,
    display_name: &'static str,
    icon: &'static str,
    tags: &'static str,
    blocks: &'static [Block],
    requirements: Option<(u32, &'static str)>,
) -> Preference {
    Preference {
        name,
        display_name,
        icon,
        tags,
        os: OsType::Linux,
        arch: None,
        blocks,
        requirements,
    }
}

const fn on_arch(preference: Preference, arch: &'static str) -> Preference {
    Preference {
        arch: Some(arch),
        ..preference
    }
}

const fn windows(
    name: &'static str,
    display_name: &'static str,
    blocks: &'static [Block],
    requirements: (u32, &'static str),
) -> Preference {
    Preference {
        name,
        display_name,
        icon: "windows",
        tags: "windows",
        os: OsType::Windows,
        arch: None,
        blocks,
        requirements: Some(requirements),
    }
}

const CENTOS_TAGS: &str = "linux,centos-stream";
const RHEL_TAGS: &str = "linux,rhel";

/// Every preference of the bundle.
pub const PREFERENCES: &[Preference] = &[
    linux(
        "alpine",
        "Alpine",
        "alpine",
        "alpine",
        LINUX,
        Some((1, "512Mi")),
    ),
    linux(
        "centos.stream10",
        "CentOS Stream 10",
        "centos",
        CENTOS_TAGS,
        LINUX_IO,
        Some((1, "1.5Gi")),
    ),
    linux(
        "centos.stream10.desktop",
        "CentOS Stream 10",
        "centos",
        CENTOS_TAGS,
        LINUX_IO_DESKTOP,
        Some((1, "1.5Gi")),
    ),
    linux(
        "centos.stream9",
        "CentOS Stream 9",
        "centos",
        CENTOS_TAGS,
        LINUX_IO,
        Some((1, "1.5Gi")),
    ),
    linux(
        "centos.stream9.desktop",
        "CentOS Stream 9",
        "centos",
        CENTOS_TAGS,
        LINUX_IO_DESKTOP,
        Some((1, "1.5Gi")),
    ),
    linux(
        "centos.stream9.dpdk",
        "CentOS Stream 9",
        "centos",
        "linux,centos-stream,dpdk",
        LINUX_IO_DPDK,
        Some((8, "1.5Gi")),
    ),
    linux(
        "cirros",
        "Cirros",
        "cirros",
        "cirros",
        LINUX,
        Some((1, "256Mi")),
    ),
    linux(
        "debian",
        "Debian",
        "debian",
        "debian",
        LINUX_EFI,
        Some((1, "512Mi")),
    ),
    on_arch(
        linux(
            "fedora",
            "Fedora (amd64)",
            "fedora",
            "fedora",
            LINUX_SECURE,
            Some((1, "2Gi")),
        ),
        "amd64",
    ),
    on_arch(
        linux(
            "fedora.arm64",
            "Fedora (arm64)",
            "fedora",
            "fedora",
            LINUX,
            Some((1, "2Gi")),
        ),
        "arm64",
    ),
    on_arch(
        linux(
            "fedora.s390x",
            "Fedora (s390x)",
            "fedora",
            "fedora",
            LINUX,
            Some((1, "2Gi")),
        ),
        "s390x",
    ),
    Preference {
        name: "legacy",
        display_name: "Legacy Guest",
        icon: "other",
        tags: "legacy",
        os: OsType::Legacy,
        arch: None,
        blocks: &[legacy_devices],
        requirements: None,
    },
    linux("linux", "Linux Guest", "linux", "linux", LINUX, None),
    linux(
        "linux.efi",
        "Linux EFI Guest",
        "linux",
        "linux-efi",
        LINUX_EFI,
        None,
    ),
    linux(
        "linux.virtiotransitional",
        "Linux Virtio Transitional Guest",
        "linux",
        "linux-virtio-transitional",
        &[linux_virtio, virtio_transitional],
        None,
    ),
    linux(
        "opensuse.leap",
        "OpenSUSE Leap",
        "opensuse-leap",
        "opensuse.leap",
        LINUX,
        Some((1, "2Gi")),
    ),
    linux(
        "opensuse.tumbleweed",
        "OpenSUSE Tumbleweed",
        "opensuse-tumbleweed",
        "opensuse.tumbleweed",
        LINUX,
        Some((1, "2Gi")),
    ),
    linux(
        "oraclelinux",
        "Oracle Linux",
        "oracle",
        "oraclelinux",
        LINUX_EFI,
        Some((2, "4Gi")),
    ),
    on_arch(
        linux(
            "rhel.10",
            "Red Hat Enterprise Linux 10 (amd64)",
            "rhel",
            RHEL_TAGS,
            LINUX_IO_SECURE,
            Some((1, "1.5Gi")),
        ),
        "amd64",
    ),
    on_arch(
        linux(
            "rhel.10.arm64",
            "Red Hat Enterprise Linux 10 (arm64)",
            "rhel",
            RHEL_TAGS,
            LINUX_IO,
            Some((1, "1.5Gi")),
        ),
        "arm64",
    ),
    on_arch(
        linux(
            "rhel.10.s390x",
            "Red Hat Enterprise Linux 10 (s390x)",
            "rhel",
            RHEL_TAGS,
            LINUX_IO,
            Some((1, "1.5Gi")),
        ),
        "s390x",
    ),
    linux(
        "rhel.7",
        "Red Hat Enterprise Linux 7",
        "rhel",
        RHEL_TAGS,
        LINUX,
        Some((1, "1Gi")),
    ),
    linux(
        "rhel.7.desktop",
        "Red Hat Enterprise Linux 7",
        "rhel",
        RHEL_TAGS,
        LINUX_DESKTOP,
        Some((1, "1Gi")),
    ),
    linux(
        "rhel.8",
        "Red Hat Enterprise Linux 8",
        "rhel",
        RHEL_TAGS,
        LINUX,
        Some((1, "1.5Gi")),
    ),
    linux(
        "rhel.8.desktop",
        "Red Hat Enterprise Linux 8",
        "rhel",
        RHEL_TAGS,
        LINUX_DESKTOP,
        Some((1, "1.5Gi")),
    ),
    linux(
        "rhel.8.dpdk",
        "Red Hat Enterprise Linux 8",
        "rhel",
        "linux,rhel,dpdk",
        &[linux_virtio, dpdk],
        Some((8, "1.5Gi")),
    ),
    on_arch(
        linux(
            "rhel.9",
            "Red Hat Enterprise Linux 9 (amd64)",
            "rhel",
            RHEL_TAGS,
            LINUX_IO_SECURE,
            Some((1, "1.5Gi")),
        ),
        "amd64",
    ),
    on_arch(
        linux(
            "rhel.9.arm64",
            "Red Hat Enterprise Linux 9 (arm64)",
            "rhel",
            RHEL_TAGS,
            LINUX_IO,
            Some((1, "1.5Gi")),
        ),
        "arm64",
    ),
    on_arch(
        linux(
            "rhel.9.desktop",
            "Red Hat Enterprise Linux 9 Desktop (amd64)",
            "rhel",
            RHEL_TAGS,
            &[
                linux_virtio,
                dedicated_io_thread,
                desktop_tablet,
                secure_boot,
            ],
            Some((1, "1.5Gi")),
        ),
        "amd64",
    ),
    on_arch(
        linux(
            "rhel.9.dpdk",
            "Red Hat Enterprise Linux 9 DPDK (amd64)",
            "rhel",
            "linux,rhel,dpdk",
            &[linux_virtio, dedicated_io_thread, dpdk, secure_boot],
            Some((8, "1.5Gi")),
        ),
        "amd64",
    ),
    on_arch(
        linux(
            "rhel.9.realtime",
            "Red Hat Enterprise Linux 9 Realtime (amd64)",
            "rhel",
            "linux,rhel,realtime",
            &[linux_virtio, dedicated_io_thread, realtime, secure_boot],
            Some((4, "4Gi")),
        ),
        "amd64",
    ),
    on_arch(
        linux(
            "rhel.9.s390x",
            "Red Hat Enterprise Linux 9 (s390x)",
            "rhel",
            RHEL_TAGS,
            LINUX_IO,
            Some((1, "1.5Gi")),
        ),
        "s390x",
    ),
    linux(
        "sles",
        "SUSE Linux Enterprise Server",
        "sles",
        "sles",
        LINUX,
        Some((1, "2Gi")),
    ),
    linux(
        "ubuntu",
        "Ubuntu",
        "ubuntu",
        "ubuntu",
        LINUX,
        Some((1, "2Gi")),
    ),
    windows(
        "windows.10",
        "Microsoft Windows 10",
        WINDOWS_SECURE,
        (1, "2Gi"),
    ),
    windows(
        "windows.10.virtio",
        "Microsoft Windows 10 (virtio)",
        WINDOWS_SECURE_VIRTIO,
        (1, "2Gi"),
    ),
    windows(
        "windows.11",
        "Microsoft Windows 11",
        WINDOWS_TPM,
        (2, "4Gi"),
    ),
    windows(
        "windows.11.virtio",
        "Microsoft Windows 11 (virtio)",
        WINDOWS_TPM_VIRTIO,
        (2, "4Gi"),
    ),
    windows(
        "windows.2k12",
        "Microsoft Windows Server 2012/2012 R2",
        WINDOWS,
        (1, "512Mi"),
    ),
    windows(
        "windows.2k12.virtio",
        "Microsoft Windows Server 2012/2012 R2 (virtio)",
        WINDOWS_VIRTIO,
        (1, "512Mi"),
    ),
    windows(
        "windows.2k16",
        "Microsoft Windows Server 2016",
        WINDOWS_SECURE,
        (1, "2Gi"),
    ),
    windows(
        "windows.2k16.virtio",
        "Microsoft Windows Server 2016 (virtio)",
        WINDOWS_SECURE_VIRTIO,
        (1, "2Gi"),
    ),
    windows(
        "windows.2k19",
        "Microsoft Windows Server 2019",
        WINDOWS_SECURE,
        (1, "2Gi"),
    ),
    windows(
        "windows.2k19.virtio",
        "Microsoft Windows Server 2019 (virtio)",
        WINDOWS_SECURE_VIRTIO,
        (1, "2Gi"),
    ),
    windows(
        "windows.2k22",
        "Microsoft Windows Server 2022",
        WINDOWS_TPM,
        (1, "2Gi"),
    ),
    windows(
        "windows.2k22.virtio",
        "Microsoft Windows Server 2022 (virtio)",
        WINDOWS_TPM_VIRTIO,
        (1, "2Gi"),
    ),
    windows(
        "windows.2k25",
        "Microsoft Windows Server 2025",
        WINDOWS_TPM,
        (1, "2Gi"),
    ),
    windows(
        "windows.2k25.virtio",
        "Microsoft Windows Server 2025 (virtio)",
        WINDOWS_TPM_VIRTIO,
        (1, "2Gi"),
    ),
    windows(
        "windows.2k3",
        "Microsoft Windows Server 2003",
        &[windows_base, nic_rtl8139, no_pci_hole64],
        (1, "256Mi"),
    ),
    windows(
        "windows.2k8",
        "Microsoft Windows Server 2008/2008 R2",
        &[windows_base, nic_e1000],
        (1, "512Mi"),
    ),
    windows(
        "windows.2k8.virtio",
        "Microsoft Windows Server 2008/2008 R2 (virtio)",
        WINDOWS_VIRTIO,
        (1, "512Mi"),
    ),
    windows("windows.7", "Microsoft Windows 7", WINDOWS, (1, "2Gi")),
    windows(
        "windows.7.virtio",
        "Microsoft Windows 7 (virtio)",
        WINDOWS_VIRTIO,
        (1, "2Gi"),
    ),
    windows(
        "windows.xp",
        "Microsoft Windows XP",
        &[windows_base, no_pci_hole64],
        (1, "128Mi"),
    ),
];

/// Where the bundle's documentation and issues are, as upstream's console annotations
/// carry them: quoted, with a trailing newline.
const DOCUMENTATION_URL: &str = "\"https://github.com/kubevirt/common-instancetypes\"\n";
const SUPPORT_URL: &str = "\"https://github.com/kubevirt/common-instancetypes/issues\"\n";

/// Every preference, unordered.
pub fn all() -> Vec<Value> {
    PREFERENCES.iter().map(preference).collect()
}

fn preference(preference: &Preference) -> Value {
    let mut spec = json!({"annotations": {"vm.kubevirt.io/os": preference.os.as_str()}});
    for block in preference.blocks {
        merge(&mut spec, block());
    }
    if let Some((cpus, memory)) = preference.requirements {
        merge(
            &mut spec,
            json!({"requirements": {"cpu": {"guest": cpus}, "memory": {"guest": memory}}}),
        );
    }
    let mut labels = json!({
        format!("{LABEL_PREFIX}os-type"): preference.os.as_str(),
        format!("{LABEL_PREFIX}vendor"): VENDOR,
        format!("{LABEL_PREFIX}common-instancetypes-version"): VERSION,
    });
    if let Some(arch) = preference.arch {
        labels[format!("{LABEL_PREFIX}arch")] = json!(arch);
    }
    json!({
        "apiVersion": "instancetype.kubevirt.io/v1beta1",
        "kind": "VirtualMachineClusterPreference",
        "metadata": {
            "name": preference.name,
            "labels": labels,
            "annotations": {
                "iconClass": format!("icon-{}", preference.icon),
                "openshift.io/display-name": preference.display_name,
                "openshift.io/documentation-url": DOCUMENTATION_URL,
                "openshift.io/provider-display-name": "KubeVirt",
                "openshift.io/support-url": SUPPORT_URL,
                "tags": format!("hidden,kubevirt,{}", preference.tags),
            },
        },
        "spec": spec,
    })
}

/// Merges `patch` into `into` as a kustomize patch does: objects key by key, anything else
/// replaced.
fn merge(into: &mut Value, patch: Value) {
    match (into, patch) {
        (Value::Object(into), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(into.entry(key).or_insert(Value::Null), value);
            }
        }
        (into, patch) => *into = patch,
    }
}
