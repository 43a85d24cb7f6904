//! Operators of operators: each reads its top-level custom resource and deploys what it names.

pub mod cdi_operator;
pub mod changes;
pub mod cnao;
pub mod common_instancetypes;
pub mod common_templates;
pub mod components;
pub mod deployer;
pub mod hco;
pub mod hco_bundle;
pub mod hpp;
pub mod manifests;
pub mod operator_cr;
pub mod operator_manifests;
pub mod single_cr;
pub mod ssp;
pub mod tekton_tasks;
pub mod virt_operator;
pub mod workloads;
