//! The KubeVirt tekton tasks (kubevirt/kubevirt-tekton-tasks) as commands of this project's
//! binary, `ferrovirt task NAME`, with the parameters, environment, results, exit codes and
//! output of upstream's task binaries, so that the tasks' YAML runs them unchanged; and the
//! one description of each task that its Task YAML in `deploy/tekton/` is generated from.

pub mod catalog;
pub mod condition;
pub mod entrypoint;
pub mod failure;
pub mod objects;
pub mod owner;
pub mod results;
pub mod runner;
pub mod tasks;

pub use failure::TaskFailure;
pub use tasks::{TaskCommand, VirtctlCreateVm, run};
