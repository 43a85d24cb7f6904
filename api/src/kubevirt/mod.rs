//! kubevirt.io/v1: VirtualMachine, VirtualMachineInstance and the KubeVirt operator kind,
//! with VM defaulting and validation.

pub mod default;
#[allow(clippy::module_inception)]
pub mod kubevirt;
pub mod validate;
pub mod vm;
pub mod vmi;

pub use kubevirt::{KubeVirt, KubeVirtSpec, KubeVirtStatus};
pub use vm::{
    DataVolumeTemplateSpec, RunStrategy, VirtualMachine, VirtualMachinePrintableStatus,
    VirtualMachineSpec, VirtualMachineStatus,
};
pub use vmi::{
    VirtualMachineInstance, VirtualMachineInstancePhase, VirtualMachineInstanceSpec,
    VirtualMachineInstanceStatus, VirtualMachineInstanceTemplateSpec,
};

/// The API group.
pub const GROUP: &str = "kubevirt.io";
/// The API version.
pub const VERSION: &str = "v1";
