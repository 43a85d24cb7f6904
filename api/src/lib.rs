//! The API types of Ferrovirt: upstream CDI, HPP, KubeVirt, HCO, SSP, CNAO and Tekton kinds
//! with the same groups, versions, kinds and field names, their defaulting as pure functions,
//! and the CustomResourceDefinitions generated from them. The webhooks' decisions on them (validation,
//! review) are the `admission` crate's.

// Several `printcolumn(...)` entries of one `#[kube]` attribute share keys such as
// `type_ = "string"`; clippy mistakes them for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

pub mod cdi;
pub mod cnao;
pub mod common;
pub mod crd_versions;
pub mod crds;
pub mod go_duration;
pub mod hco;
pub mod hostpath;
pub mod instancetype;
pub mod kubevirt;
pub mod label_selector;
pub mod meta_time;
pub mod network_attachment;
pub mod node_selector;
pub mod pod_contract;
pub mod pool;
pub mod quantity;
pub mod ssp;
pub mod strategic_merge;
pub mod tekton;
pub mod tekton_tasks;
pub mod template;
pub mod upload;
pub mod validation;

pub use validation::{FieldPath, Problem, ValidationError, ValidationResult};

/// This machine as `OS/ARCH` in Go's names (GOOS/GOARCH), as Kubernetes and KubeVirt report
/// the platform in their version documents.
pub fn go_platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("{}/{arch}", std::env::consts::OS)
}
