//! The domain: a pure function from a defaulted VirtualMachineInstance and the facts of its
//! node ([`NodeFacts`]) to the QEMU invocation that runs it ([`Domain`]): the argument
//! vector, the files to make before QEMU starts, and the sockets QEMU will listen on.
//!
//! ```text
//!   VMI spec ──► fields (anything not modelled is refused, by name)
//!            ──► machine (accel, CPU, memory, SMBIOS)   firmware (SeaBIOS | OVMF, NVRAM)
//!            ──► disks (volumes → blockdevs + devices)  network (user-mode NAT, taps)
//!            ──► devices (serial, VNC, rng, tablet, watchdog, balloon, agent, QMP)
//!            ──► qemu_args: the command line, assembled in one place
//! ```
//!
//! Nothing here touches the filesystem: what has to exist before QEMU starts is described
//! by [`PrepareStep`]s that the launcher carries out.

mod devices;
mod disks;
pub mod facts;
mod fields;
mod firmware;
mod machine;
mod network;
mod opts;
mod qemu_args;

use std::path::PathBuf;

use api::kubevirt::VirtualMachineInstance;
use api::validation::{FieldPath, ValidationError};

pub use facts::{Acceleration, FirmwarePaths, NodeFacts, PodPort, VolumeBacking};
pub use network::ForwardRoute;

/// The QEMU invocation of a VMI.
#[derive(Debug, Clone, PartialEq)]
pub struct Domain {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The SMBIOS UUID the guest sees.
    pub uuid: String,
    /// What to create before QEMU starts, in order.
    pub prepare: Vec<PrepareStep>,
    /// The sockets QEMU listens on.
    pub sockets: DomainSockets,
    /// Whether the guest runs under software emulation (the `SoftwareEmulation` condition).
    pub software_emulation: bool,
    /// Whether the guest stays paused after start (`startStrategy: Paused`).
    pub start_paused: bool,
    /// Tap devices the launcher creates before QEMU starts and removes at the end.
    pub taps: Vec<TapDevice>,
    /// How ports of the pod's address reach the guest (masquerade).
    pub forward_route: Option<ForwardRoute>,
    /// Where this launcher differs from KubeVirt for this VMI, to log.
    pub warnings: Vec<String>,
}

/// The unix sockets of a running domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainSockets {
    /// QMP.
    pub qmp: PathBuf,
    /// QEMU's end of the serial console, when one is attached (the launcher serves the
    /// console to clients on a socket of its own).
    pub serial: Option<PathBuf>,
    /// The VNC display, when a graphics device is attached.
    pub vnc: Option<PathBuf>,
    /// The qemu guest agent channel.
    pub guest_agent: PathBuf,
}

/// A tap device the launcher creates on a bridge before QEMU opens it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapDevice {
    /// The tap's name.
    pub name: String,
    /// The bridge it joins.
    pub bridge: String,
    /// The pod interface a CNI plugin made for the network, to join the bridge as well: the
    /// bridge is then the launcher's own, made in the pod (KubeVirt's `k6t-<hash>`).
    pub pod_port: Option<String>,
}

/// Something to make before QEMU starts.
#[derive(Debug, Clone, PartialEq)]
pub enum PrepareStep {
    /// A sparse raw image of `size` bytes, unless the file exists already.
    SparseImageIfMissing {
        /// The image.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The field that asked for it, for error messages.
        field: String,
    },
    /// The file must exist (a `hostDisk` of type `Disk`, the image under an overlay).
    MustExist {
        /// The file.
        path: PathBuf,
        /// What the file is, for the error message.
        what: String,
    },
    /// A qcow2 overlay over a raw image that stays untouched, made afresh.
    Qcow2Overlay {
        /// The overlay.
        path: PathBuf,
        /// The read-only image under it.
        backing: PathBuf,
    },
    /// A cloud-init ISO (NoCloud or ConfigDrive).
    CloudInitIso {
        /// The ISO.
        path: PathBuf,
        /// What goes in it.
        data: crate::cloudinit::CloudInitData,
    },
    /// An ISO of the files of a directory (ConfigMap, Secret, service account, downward
    /// API), labelled `label`.
    DirectoryIso {
        /// The ISO.
        path: PathBuf,
        /// Its volume label.
        label: String,
        /// The files.
        dir: PathBuf,
    },
    /// A copy of `from` at `to` unless `to` exists (an EFI variable store).
    CopyIfMissing {
        /// The template.
        from: PathBuf,
        /// The copy.
        to: PathBuf,
    },
    /// A small file with fixed contents.
    WriteFile {
        /// The file.
        path: PathBuf,
        /// Its contents.
        contents: Vec<u8>,
    },
}

/// Why a VMI cannot become a QEMU invocation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// The spec does not pass validation.
    #[error("invalid VMI: {0}")]
    Invalid(#[from] ValidationError),
    /// A field (or a value of it) this launcher cannot run.
    #[error("{field}: {reason}")]
    Unsupported {
        /// The field's path, such as `spec.domain.devices.tpm`.
        field: String,
        /// Why.
        reason: String,
    },
    /// A combination KubeVirt refuses, in KubeVirt's own words (which name the field).
    #[error("{0}")]
    Refused(String),
    /// KVM is unusable and software emulation is not allowed (KubeVirt's wording, then how
    /// to allow it).
    #[error(
        "kvm not present and emulation is not allowed (/dev/kvm is missing or cannot run \
         guests on this node; spec.configuration.developerConfiguration.useEmulation on the \
         KubeVirt CR allows software emulation)"
    )]
    KvmNotPresent,
    /// A firmware image the VMI needs is not on the node.
    #[error("{field}: {what} firmware not found on this node (looked for {looked_for})")]
    FirmwareMissing {
        /// The field that asks for the firmware.
        field: String,
        /// Which firmware.
        what: String,
        /// Where it was looked for.
        looked_for: String,
    },
    /// A volume the VMI uses has nothing backing it on this node.
    #[error("{field}: volume {volume:?} {problem}")]
    VolumeBacking {
        /// The volume's field.
        field: String,
        /// The volume.
        volume: String,
        /// What is wrong.
        problem: String,
    },
}

impl DomainError {
    fn unsupported(field: &FieldPath, reason: impl Into<String>) -> Self {
        Self::Unsupported {
            field: field.to_string(),
            reason: reason.into(),
        }
    }

    /// A short machine-readable name of the error, for metrics and reasons.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "invalid",
            Self::Unsupported { .. } => "unsupported",
            Self::Refused(_) => "refused",
            Self::KvmNotPresent => "kvm_not_present",
            Self::FirmwareMissing { .. } => "firmware_missing",
            Self::VolumeBacking { .. } => "volume_backing",
        }
    }
}

/// Builds the QEMU invocation of `vmi` on a node described by `facts`.
pub fn build(vmi: &VirtualMachineInstance, facts: &NodeFacts) -> Result<Domain, DomainError> {
    // virt-api defaults every VMI; a VMI that reached us another way gets the same.
    let mut vmi = vmi.clone();
    // Its own cluster config is unknown here; what virt-api gave the VMI is kept.
    let cluster = api::kubevirt::cluster_config::ClusterConfig::default();
    api::kubevirt::default::default_instance_spec(&mut vmi.spec, &cluster);
    let vmi = &vmi;
    let spec = &vmi.spec;
    admission::kubevirt::validate::validate_instance_spec(spec, &FieldPath::new("spec"))?;
    fields::refuse_unmodelled(spec)?;
    let identity = machine::Identity::of(vmi);
    let machine = machine::plan(spec, facts)?;
    let firmware = firmware::plan(spec, facts, &identity, &machine)?;
    let disks = disks::plan(spec, facts, &identity, &machine)?;
    let network = network::plan(vmi, facts, &identity)?;
    check_boot_orders(spec)?;
    let devices = devices::plan(spec, facts)?;
    let mut prepare = Vec::new();
    prepare.extend(firmware.prepare.iter().cloned());
    prepare.extend(disks.prepare.iter().cloned());
    let argv = qemu_args::assemble(
        facts, &identity, &machine, &firmware, &disks, &network, &devices,
    );
    Ok(Domain {
        argv,
        uuid: identity.uuid.clone(),
        prepare,
        sockets: devices.sockets.clone(),
        software_emulation: machine.software_emulation,
        start_paused: machine.start_paused,
        taps: network.taps.clone(),
        forward_route: network.forward_route.clone(),
        warnings: network.warnings.clone(),
    })
}

/// Disks and interfaces share one boot order (QEMU's bootindex), as in KubeVirt.
fn check_boot_orders(spec: &api::kubevirt::VirtualMachineInstanceSpec) -> Result<(), DomainError> {
    let devices = FieldPath::new("spec").child("domain").child("devices");
    let disks = spec
        .domain
        .devices
        .disks
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, d)| (devices.child("disks").index(i), d.boot_order));
    let interfaces = spec
        .domain
        .devices
        .interfaces
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, n)| (devices.child("interfaces").index(i), n.boot_order));
    let mut seen = std::collections::BTreeSet::new();
    for (path, order) in disks.chain(interfaces) {
        if let Some(order) = order
            && !seen.insert(order)
        {
            return Err(DomainError::Refused(format!(
                "Boot order for {}.bootOrder already set for a different device.",
                path
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
