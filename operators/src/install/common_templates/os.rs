//! The operating systems of the bundle and what their templates say about them: names,
//! versions (the osinfo short ids upstream labels templates with), cloud images, the default
//! cloud-init user and the minimal memory osinfo gives. Values follow common-templates
//! v0.35.0 for amd64.

use super::flavor::{Flavor, Sizes, Workload};

/// One operating system's templates.
#[derive(Clone, Copy, Debug)]
pub struct OperatingSystem {
    /// The prefix of template names and the `vm.kubevirt.io/os` annotation: `fedora`.
    pub os: &'static str,
    /// `openshift.io/display-name`.
    pub display_name: &'static str,
    /// `description`.
    pub description: &'static str,
    /// `tags`.
    pub tags: &'static str,
    /// `iconClass` without its `icon-` prefix.
    pub icon: &'static str,
    /// `template.kubevirt.io/containerdisks`, one image a line.
    pub container_disks: &'static [&'static str],
    /// `template.kubevirt.io/images`, one URL a line.
    pub images: &'static [&'static str],
    /// The osinfo ids of the versions covered: `os.template.kubevirt.io/<id>` labels.
    pub versions: &'static [&'static str],
    /// The value of every `name.os.template.kubevirt.io/<id>` annotation.
    pub version_name: &'static str,
    /// The cloud-init user.
    pub cloud_user: &'static str,
    /// The minimal guest memory in bytes (the `minimal-required-memory` validation).
    pub minimal_memory: u64,
    /// UEFI firmware with SMM (Fedora and RHEL 9 templates).
    pub efi: bool,
    /// The flavors and workloads rendered.
    pub sizes: Sizes,
}

const ALL_FLAVORS: &[Flavor] = &[Flavor::Tiny, Flavor::Small, Flavor::Medium, Flavor::Large];
const NO_TINY: &[Flavor] = &[Flavor::Small, Flavor::Medium, Flavor::Large];
const SERVER_DESKTOP: &[Workload] = &[Workload::Server, Workload::Desktop];
const WITH_HIGH_PERFORMANCE: &[Workload] = &[
    Workload::Server,
    Workload::Desktop,
    Workload::HighPerformance,
];
const GIB: u64 = 1 << 30;
const GIB_AND_A_HALF: u64 = 3 << 29;

const fn sizes(flavors: &'static [Flavor], workloads: &'static [Workload]) -> Sizes {
    Sizes {
        flavors,
        workloads,
        small_memory: None,
        always_tablet: false,
    }
}

/// Every operating system of the bundle, in name order.
pub const OPERATING_SYSTEMS: &[OperatingSystem] = &[
    OperatingSystem {
        os: "centos-stream10",
        display_name: "CentOS Stream 10 VM",
        description: "Template for CentOS Stream 10 VM or newer. A PVC with the CentOS Stream disk image must be available.",
        tags: "hidden,kubevirt,virtualmachine,linux,centosstream",
        icon: "centos",
        container_disks: &["quay.io/containerdisks/centos-stream:10"],
        images: &[
            "https://cloud.centos.org/centos/10-stream/x86_64/images/CentOS-Stream-GenericCloud-10-latest.x86_64.qcow2",
        ],
        versions: &["centos-stream10"],
        version_name: "CentOS Stream 10 or higher",
        cloud_user: "centos",
        minimal_memory: GIB_AND_A_HALF,
        efi: false,
        sizes: sizes(ALL_FLAVORS, SERVER_DESKTOP),
    },
    OperatingSystem {
        os: "centos-stream9",
        display_name: "CentOS Stream 9 VM",
        description: "Template for CentOS Stream 9 VM or newer. A PVC with the CentOS Stream disk image must be available.",
        tags: "hidden,kubevirt,virtualmachine,linux,centosstream",
        icon: "centos",
        container_disks: &["quay.io/containerdisks/centos-stream:9"],
        images: &[
            "https://cloud.centos.org/centos/9-stream/x86_64/images/CentOS-Stream-GenericCloud-9-latest.x86_64.qcow2",
        ],
        versions: &["centos-stream9"],
        version_name: "CentOS Stream 9 or higher",
        cloud_user: "centos",
        minimal_memory: GIB_AND_A_HALF,
        efi: false,
        sizes: sizes(ALL_FLAVORS, SERVER_DESKTOP),
    },
    OperatingSystem {
        os: "fedora",
        display_name: "Fedora VM",
        description: "Template for Fedora Linux 43 VM or newer. A PVC with the Fedora disk image must be available.",
        tags: "hidden,kubevirt,virtualmachine,fedora",
        icon: "fedora",
        container_disks: &[
            "quay.io/containerdisks/fedora:latest",
            "quay.io/containerdisks/fedora:43",
        ],
        images: &[
            "https://download.fedoraproject.org/pub/fedora/linux/releases/43/Cloud/x86_64/images/Fedora-Cloud-Base-Generic-43-1.6.x86_64.qcow2",
        ],
        versions: &["fedora43"],
        version_name: "Fedora Linux 43 or higher",
        cloud_user: "fedora",
        minimal_memory: 2 * GIB,
        efi: true,
        sizes: sizes(NO_TINY, WITH_HIGH_PERFORMANCE),
    },
    OperatingSystem {
        os: "opensuse",
        display_name: "openSUSE Leap 15.5+ VM",
        description: "Template for openSUSE Leap 15.5 VM or newer. A PVC with the openSUSE disk image must be available.",
        tags: "hidden,kubevirt,virtualmachine,linux,opensuse",
        icon: "opensuse",
        container_disks: &[],
        images: &[
            "https://download.opensuse.org/repositories/Cloud:/Images:/Leap_15.5/images/openSUSE-Leap-15.5.x86_64-NoCloud.qcow2",
            "https://download.opensuse.org/repositories/Cloud:/Images:/Leap_15.6/images/openSUSE-Leap-15.6.x86_64-NoCloud.qcow2",
            "https://download.opensuse.org/distribution/leap/16.0/appliances/Leap-16.0-Minimal-VM.x86_64-Cloud.qcow2",
        ],
        versions: &["opensuse15.5", "opensuse15.6", "opensuse16.0"],
        version_name: "openSUSE Leap 15.5 or higher",
        cloud_user: "opensuse",
        minimal_memory: GIB,
        efi: false,
        sizes: sizes(NO_TINY, &[Workload::Server]),
    },
    OperatingSystem {
        os: "rhel8",
        display_name: "Red Hat Enterprise Linux 8 VM",
        description: "Template for Red Hat Enterprise Linux 8 VM or newer. A PVC with the RHEL disk image must be available.",
        tags: "hidden,kubevirt,virtualmachine,linux,rhel",
        icon: "rhel",
        container_disks: &["registry.redhat.io/rhel8/rhel-guest-image"],
        images: &[
            "https://access.redhat.com/downloads/content/479/ver=/rhel---8/8.6/x86_64/product-software",
        ],
        versions: &[
            "rhel8.0", "rhel8.1", "rhel8.10", "rhel8.2", "rhel8.3", "rhel8.4", "rhel8.5",
            "rhel8.6", "rhel8.7", "rhel8.8", "rhel8.9",
        ],
        version_name: "Red Hat Enterprise Linux 8.0 or higher",
        cloud_user: "cloud-user",
        minimal_memory: GIB_AND_A_HALF,
        efi: false,
        sizes: sizes(ALL_FLAVORS, WITH_HIGH_PERFORMANCE),
    },
    OperatingSystem {
        os: "rhel9",
        display_name: "Red Hat Enterprise Linux 9 VM",
        description: "Template for Red Hat Enterprise Linux 9 VM or newer. A PVC with the RHEL disk image must be available.",
        tags: "hidden,kubevirt,virtualmachine,linux,rhel",
        icon: "rhel",
        container_disks: &["registry.redhat.io/rhel9/rhel-guest-image"],
        images: &[
            "https://access.redhat.com/downloads/content/479/ver=/rhel---9/9.0/x86_64/product-software",
        ],
        versions: &[
            "rhel9.0", "rhel9.1", "rhel9.2", "rhel9.3", "rhel9.4", "rhel9.5", "rhel9.6", "rhel9.7",
            "rhel9.8",
        ],
        version_name: "Red Hat Enterprise Linux 9.0 or higher",
        cloud_user: "cloud-user",
        minimal_memory: GIB_AND_A_HALF,
        efi: true,
        sizes: sizes(ALL_FLAVORS, WITH_HIGH_PERFORMANCE),
    },
    OperatingSystem {
        os: "ubuntu",
        display_name: "Ubuntu 18.04+ VM",
        description: "Template for Ubuntu 18.04 VM or newer. A PVC with the Ubuntu disk image must be available.",
        tags: "hidden,kubevirt,virtualmachine,ubuntu",
        icon: "ubuntu",
        container_disks: &[
            "quay.io/containerdisks/ubuntu:18.04",
            "quay.io/containerdisks/ubuntu:20.04",
            "quay.io/containerdisks/ubuntu:22.04",
            "quay.io/containerdisks/ubuntu:24.04",
        ],
        images: &[
            "https://cloud-images.ubuntu.com/bionic/current/bionic-server-cloudimg-amd64.img",
            "https://cloud-images.ubuntu.com/focal/current/focal-server-cloudimg-amd64.img",
            "https://cloud-images.ubuntu.com/jammy/current/jammy-server-cloudimg-amd64.img",
            "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img",
            "https://cloud-images.ubuntu.com/questing/current/questing-server-cloudimg-amd64.img",
        ],
        versions: &[
            "ubuntu18.04",
            "ubuntu20.04",
            "ubuntu22.04",
            "ubuntu24.04",
            "ubuntu25.10",
        ],
        version_name: "Ubuntu 18.04 or higher",
        cloud_user: "ubuntu",
        minimal_memory: 2 * GIB,
        efi: false,
        sizes: Sizes {
            flavors: NO_TINY,
            workloads: SERVER_DESKTOP,
            small_memory: Some("3Gi"),
            always_tablet: true,
        },
    },
];
