//! virt-controller: the VirtualMachine controller (instances per run strategy, owned
//! DataVolumes, printable status) and the VirtualMachineInstance controller (launcher pods,
//! phases and conditions), the VirtualMachineInstanceReplicaSet controller and the
//! VirtualMachinePool controller.

pub mod claims;
pub mod instancetype;
pub mod pool;
pub mod replicaset;
pub mod vm;
pub mod vmi;
