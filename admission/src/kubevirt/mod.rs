//! KubeVirt's admission: virt-api's validation of VirtualMachines and their instances, its
//! VirtualMachineInstancePresets, replica sets and pools, and virt-operator's review of an
//! update to the KubeVirt CR.

pub mod access_credentials;
pub mod preset;
pub mod replicas;
pub mod update_review;
pub mod validate;
