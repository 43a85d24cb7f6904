//! The tasks, one module each, and the command line that picks one. Each task's flags and
//! environment variables are its upstream binary's, so its Task YAML passes parameters the
//! same way; results go to the results directory, the created object (where the task makes
//! one) to stdout, and failures end with upstream's exit code.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::Value;

use crate::failure::TaskResult;
use crate::results::{Results, TEKTON_RESULTS_DIR};

pub mod create_vm;
pub mod execute_in_vm;
pub mod generate_ssh_keys;
pub mod modify_data_object;
pub mod wait_for_vmi_status;

/// `virtctl create vm` with the given arguments: the VM manifest it prints, or why not. The
/// binary provides it (its `create vm`), so that this crate does not depend on the CLI.
pub type VirtctlCreateVm = dyn Fn(&[String]) -> Result<Value, String> + Send + Sync;

/// A task to run.
#[derive(Subcommand, Debug)]
pub enum TaskCommand {
    /// Create a VirtualMachine from a manifest or from `virtctl create vm` flags, and
    /// optionally start it (upstream's `create-vm`).
    #[command(name = "create-vm-from-manifest", alias = "create-vm")]
    CreateVmFromManifest(create_vm::CreateVmArgs),
    /// Create (optionally replacing, and waiting for) or delete a DataVolume or DataSource.
    ModifyDataObject(modify_data_object::ModifyDataObjectArgs),
    /// Wait until a VirtualMachineInstance meets a success or a failure condition.
    WaitForVmiStatus(wait_for_vmi_status::WaitForVmiStatusArgs),
    /// Run a command or script in a VM over SSH, then optionally stop and delete the VM.
    ExecuteInVm(execute_in_vm::ExecuteInVmArgs),
    /// execute-in-vm as the cleanup-vm task runs it: stop and/or delete the VM, after an
    /// optional command.
    CleanupVm(execute_in_vm::ExecuteInVmArgs),
    /// Generate an SSH key pair into a public-key Secret and an execute-in-vm connection Secret.
    GenerateSshKeys(generate_ssh_keys::GenerateSshKeysArgs),
    /// One step of a TaskRun's pod on `ferrovirt up`: wait for the step before, run the
    /// step's command, post, and leave the results in the termination message.
    #[command(hide = true)]
    Step(crate::entrypoint::StepArgs),
}

/// Where results are written: Tekton's directory (in the pod, under the node agent's pod
/// root on `ferrovirt up`) unless `FERROVIRT_TASK_RESULTS_DIR` names another (to run a task
/// outside a TaskRun's pod).
pub fn results_from_env() -> Results {
    let dir = std::env::var_os("FERROVIRT_TASK_RESULTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| api::pod_contract::in_pod(TEKTON_RESULTS_DIR));
    Results::new(dir)
}

/// Runs `command`.
pub async fn run(command: TaskCommand, virtctl: &VirtctlCreateVm) -> TaskResult {
    let results = results_from_env();
    match command {
        TaskCommand::CreateVmFromManifest(args) => create_vm::run(args, &results, virtctl).await,
        TaskCommand::ModifyDataObject(args) => modify_data_object::run(args, &results).await,
        TaskCommand::WaitForVmiStatus(args) => wait_for_vmi_status::run(args).await,
        TaskCommand::ExecuteInVm(args) | TaskCommand::CleanupVm(args) => {
            execute_in_vm::run(args).await
        }
        TaskCommand::GenerateSshKeys(args) => generate_ssh_keys::run(args, &results).await,
        TaskCommand::Step(args) => crate::entrypoint::run(args).await,
    }
}
