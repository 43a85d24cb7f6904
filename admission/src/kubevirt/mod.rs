//! KubeVirt's admission: virt-api's validation of VirtualMachines and their instances, and
//! virt-operator's review of an update to the KubeVirt CR; replica sets and pools.

pub mod replicas;
pub mod update_review;
pub mod validate;
