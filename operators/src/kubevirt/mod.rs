//! virt-controller: the VirtualMachine controller (instances per run strategy, owned
//! DataVolumes, printable status) and the VirtualMachineInstance controller (launcher pods,
//! phases and conditions).

pub mod instancetype;
pub mod vm;
pub mod vmi;
