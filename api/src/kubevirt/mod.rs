//! kubevirt.io/v1: VirtualMachine, VirtualMachineInstance and the KubeVirt operator kind,
//! with VM defaulting (validation is admission's, `admission::kubevirt`).

pub mod cluster_config;
pub mod default;
pub mod feature_gates;
pub mod gated_features;
#[allow(clippy::module_inception)]
pub mod kubevirt;
pub mod kubevirt_config;
pub mod kubevirt_config_components;
pub mod kubevirt_config_devices;
pub mod pod_contract;
pub mod preset;
pub mod replicaset;
pub mod vm;
mod vm_status;
pub mod vmi;

pub use kubevirt::{KubeVirt, KubeVirtCondition, KubeVirtSpec, KubeVirtStatus};
pub use kubevirt_config::KubeVirtConfiguration;
pub use preset::{VirtualMachineInstancePreset, VirtualMachineInstancePresetSpec};
pub use replicaset::{
    VirtualMachineInstanceReplicaSet, VirtualMachineInstanceReplicaSetSpec,
    VirtualMachineInstanceReplicaSetStatus,
};
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

/// The labels, annotations and finalizers KubeVirt's components put on objects, by
/// upstream's names (pkg/apis/core/v1 in kubevirt.io/api).
pub mod keys {
    /// On a launcher pod: `virt-launcher`; on KubeVirt's own components, their name.
    pub const APP_LABEL: &str = "kubevirt.io";
    /// The value of [`APP_LABEL`] on launcher pods.
    pub const LAUNCHER_APP: &str = "virt-launcher";
    /// On a launcher pod: the UID of the VMI it runs; on a DataVolume or VMI: the UID of
    /// the VM that created it.
    pub const CREATED_BY_LABEL: &str = "kubevirt.io/created-by";
    /// On a VMI: the node that runs it.
    pub const NODE_NAME_LABEL: &str = "kubevirt.io/nodeName";
    /// The Node label virt-handler sets on its node, and launcher pods select.
    pub const NODE_SCHEDULABLE_LABEL: &str = "kubevirt.io/schedulable";
    /// On a VMI created from a VM: the VM's name; on a launcher pod: the VMI's name, for
    /// services selecting VMs.
    pub const VM_NAME_LABEL: &str = "vm.kubevirt.io/name";
    /// On a launcher pod: the VMI's name (an annotation, as upstream).
    pub const DOMAIN_ANNOTATION: &str = "kubevirt.io/domain";
    /// The VMI finalizer virt-api adds: the VMI goes away only once its domain is gone.
    pub const VMI_FINALIZER: &str = "foregroundDeleteVirtualMachine";
    /// The finalizer the VM controller puts on its VMs and on the VMIs it creates.
    pub const VM_CONTROLLER_FINALIZER: &str = "kubevirt.io/virtualMachineControllerFinalize";
    /// On a VMI: the VM generation it was created from.
    pub const VM_GENERATION_ANNOTATION: &str = "kubevirt.io/vm-generation";
    /// On a DataVolume template: adopt an existing claim of the same name.
    pub const ALLOW_CLAIM_ADOPTION_ANNOTATION: &str = "cdi.kubevirt.io/allowClaimAdoption";
}
