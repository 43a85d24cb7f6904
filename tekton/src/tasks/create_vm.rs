//! create-vm-from-manifest (upstream's `create-vm` binary): a VirtualMachine from a manifest
//! or from `virtctl create vm` flags, created in the namespace asked for (else the
//! manifest's, else the active one), optionally owned by the task's pod and started; its name
//! and namespace are the results and the created object is printed.

use clap::Args;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

use super::VirtctlCreateVm;
use crate::failure::{FailWith, TaskFailure, TaskResult};
use crate::objects::{Cluster, Kind, Output};
use crate::owner::own_by_task_pod;
use crate::results::Results;

/// Upstream's exit codes.
mod exit {
    pub const GENERIC: i32 = 1;
    pub const INVALID_CLI_INPUT: i32 = 2;
    pub const CREATE_VM: i32 = 4;
    pub const WRITE_RESULTS: i32 = 6;
    pub const START_VM: i32 = 7;
}

#[derive(Args, Debug, Default)]
pub struct CreateVmArgs {
    /// YAML manifest of the VirtualMachine to create.
    #[arg(long = "vm-manifest", env = "VM_MANIFEST", default_value = "")]
    manifest: String,
    /// Namespace to create the VM in [default: the manifest's, else the active namespace].
    #[arg(long = "vm-namespace", env = "VM_NAMESPACE", default_value = "")]
    namespace: String,
    /// `true` starts the VM after creating it (unless its runStrategy is Always).
    #[arg(long = "start-vm", env = "START_VM", default_value = "")]
    start_vm: String,
    /// The VM's runStrategy, replacing `running` (manifest mode only).
    #[arg(long = "run-strategy", env = "RUN_STRATEGY", default_value = "")]
    run_strategy: String,
    /// `true` makes the task's pod (POD_NAME, POD_NAMESPACE) the VM's owner.
    #[arg(
        long = "set-owner-reference",
        env = "SET_OWNER_REFERENCE",
        default_value = ""
    )]
    set_owner_reference: String,
    /// `virtctl create vm` flags to build the VM from, instead of a manifest.
    #[arg(long = "virtctl", env = "VIRTCTL", default_value = "")]
    virtctl: String,
    /// Print the created VM as `yaml` or `json`.
    #[arg(short = 'o', long = "output", default_value = "")]
    output: String,
    /// More logging.
    #[arg(long)]
    debug: bool,
}

/// The VM to create and where, before it reaches the API.
#[derive(Debug, PartialEq)]
struct Plan {
    vm: Value,
    namespace: String,
}

pub async fn run(args: CreateVmArgs, results: &Results, virtctl: &VirtctlCreateVm) -> TaskResult {
    if args.manifest.trim().is_empty() == args.virtctl.trim().is_empty() {
        return Err(TaskFailure::new(
            exit::INVALID_CLI_INPUT,
            "only one of vm-manifest or virtctl should be specified",
        ));
    }
    let output = Output::parse(&args.output).fail_with(exit::INVALID_CLI_INPUT, "")?;
    let cluster = Cluster::connect().await.fail_with(exit::GENERIC, "")?;
    let mut plan = if args.manifest.trim().is_empty() {
        from_virtctl(&args, virtctl, &cluster)?
    } else {
        from_manifest(&args, &cluster.active_namespace)?
    };
    if args.set_owner_reference == "true" {
        own_by_task_pod(&cluster, &mut plan.vm, &plan.namespace)
            .await
            .fail_with(exit::CREATE_VM, "")?;
    }
    let object: DynamicObject =
        serde_json::from_value(plan.vm).fail_with(exit::CREATE_VM, "not a VirtualMachine")?;
    let api = cluster.api(Kind::VirtualMachine, &plan.namespace);
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .fail_with(exit::CREATE_VM, "")?;
    let created = serde_json::to_value(&created).fail_with(exit::CREATE_VM, "")?;
    let name = created["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let namespace = created["metadata"]["namespace"]
        .as_str()
        .unwrap_or(&plan.namespace)
        .to_owned();
    if args.start_vm == "true" && needs_start(&created) {
        cluster
            .vm_subresource(&namespace, &name, "start")
            .await
            .fail_with(exit::START_VM, "")?;
    }
    results
        .write_all(&[("name", &name), ("namespace", &namespace)])
        .fail_with(exit::WRITE_RESULTS, "")?;
    print!("{}", output.render(&created));
    Ok(())
}

/// Manifest mode: the manifest in the namespace asked for, else its own, else the active
/// one; its (template's) `vm.kubevirt.io/name` label; `runStrategy` replacing `running`.
fn from_manifest(args: &CreateVmArgs, active_namespace: &str) -> TaskResult<Plan> {
    let invalid = |problem: String| TaskFailure::new(exit::INVALID_CLI_INPUT, problem);
    let mut vm: Value = serde_saphyr::from_str(&args.manifest)
        .map_err(|e| invalid(format!("could not read VM manifest: {e}")))?;
    check_kind(&vm).map_err(|p| invalid(format!("could not read VM manifest: {p}")))?;
    let namespace = [
        args.namespace.trim(),
        vm["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .trim(),
        active_namespace,
    ]
    .into_iter()
    .find(|n| !n.is_empty())
    .unwrap_or_default()
    .to_owned();
    vm["metadata"]["namespace"] = json!(namespace);
    add_name_label(&mut vm);
    if !args.run_strategy.is_empty() {
        if let Some(spec) = vm["spec"].as_object_mut() {
            spec.remove("running");
        }
        vm["spec"]["runStrategy"] = json!(args.run_strategy);
    }
    Ok(Plan { vm, namespace })
}

/// virtctl mode: `virtctl create vm` with the flags split on single spaces, as upstream
/// splits them; the namespace asked for, else the active one.
fn from_virtctl(
    args: &CreateVmArgs,
    virtctl: &VirtctlCreateVm,
    cluster: &Cluster,
) -> TaskResult<Plan> {
    let flags: Vec<String> = args.virtctl.split(' ').map(str::to_owned).collect();
    let mut vm = virtctl(&flags).map_err(|e| {
        TaskFailure::new(exit::CREATE_VM, format!("failed to execute command: {e}"))
    })?;
    let namespace = cluster.namespace_or_active(args.namespace.trim());
    // Upstream leaves the namespace out, which breaks setOwnerReference; the object names it.
    vm["metadata"]["namespace"] = json!(namespace);
    Ok(Plan { vm, namespace })
}

/// A manifest must be a VirtualMachine (upstream would post any kind to the VM endpoint and
/// fail there, after the fact).
fn check_kind(vm: &Value) -> Result<(), String> {
    if !vm.is_object() {
        return Err("not a YAML mapping".into());
    }
    let kind = vm["kind"].as_str().unwrap_or("VirtualMachine");
    let api_version = vm["apiVersion"].as_str().unwrap_or("kubevirt.io/v1");
    if kind != "VirtualMachine" || !api_version.starts_with("kubevirt.io/") {
        return Err(format!(
            "{api_version} {kind} is not a VirtualMachine (kubevirt.io/v1)"
        ));
    }
    Ok(())
}

/// Upstream's label `vm.kubevirt.io/name` on the template's metadata (the VM's own when it
/// has no template), when the VM has a name.
fn add_name_label(vm: &mut Value) {
    let Some(name) = vm["metadata"]["name"].as_str().filter(|n| !n.is_empty()) else {
        return;
    };
    let name = name.to_owned();
    let has_template = vm["spec"]["template"].is_object();
    let metadata = if has_template {
        &mut vm["spec"]["template"]["metadata"]
    } else {
        &mut vm["metadata"]
    };
    metadata["labels"]["vm.kubevirt.io/name"] = json!(name);
}

/// Whether `startVM` has anything to do: not with runStrategy Always or `running: true`.
fn needs_start(vm: &Value) -> bool {
    vm["spec"]["runStrategy"] != "Always" && vm["spec"]["running"] != true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(manifest: &str) -> CreateVmArgs {
        CreateVmArgs {
            manifest: manifest.into(),
            ..Default::default()
        }
    }

    const VM: &str = "apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: vm1, namespace: from-manifest}
spec:
  running: false
  template:
    spec: {domain: {devices: {}}}
";

    #[test]
    fn the_namespace_asked_for_wins_then_the_manifests_then_the_active_one() {
        let mut a = args(VM);
        assert_eq!(
            from_manifest(&a, "active").unwrap().namespace,
            "from-manifest"
        );
        a.namespace = " asked ".into();
        assert_eq!(from_manifest(&a, "active").unwrap().namespace, "asked");
        let plan =
            from_manifest(&args(&VM.replace("namespace: from-manifest", "")), "active").unwrap();
        assert_eq!(plan.namespace, "active");
        assert_eq!(plan.vm["metadata"]["namespace"], "active");
    }

    #[test]
    fn the_template_is_labelled_and_run_strategy_replaces_running() {
        let mut a = args(VM);
        a.run_strategy = "Halted".into();
        let vm = from_manifest(&a, "ns").unwrap().vm;
        assert_eq!(
            vm["spec"]["template"]["metadata"]["labels"]["vm.kubevirt.io/name"],
            "vm1"
        );
        assert_eq!(vm["spec"]["runStrategy"], "Halted");
        assert!(vm["spec"].get("running").is_none());
    }

    #[test]
    fn bad_manifests_are_named() {
        let error = |m: &str| from_manifest(&args(m), "ns").unwrap_err();
        let pod = error("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n");
        assert_eq!(pod.code, 2);
        assert_eq!(
            pod.message,
            "could not read VM manifest: v1 Pod is not a VirtualMachine (kubevirt.io/v1)"
        );
        assert!(
            error("{not yaml")
                .message
                .starts_with("could not read VM manifest: ")
        );
        assert!(error("- a list").message.contains("not a YAML mapping"));
    }

    #[test]
    fn start_is_skipped_where_the_vm_runs_anyway() {
        assert!(needs_start(&json!({"spec": {"running": false}})));
        assert!(needs_start(&json!({"spec": {"runStrategy": "Halted"}})));
        assert!(!needs_start(&json!({"spec": {"runStrategy": "Always"}})));
        assert!(!needs_start(&json!({"spec": {"running": true}})));
    }
}
