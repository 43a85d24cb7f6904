//! `create instancetype` and `create preference`: print a VirtualMachine(Cluster)Instancetype
//! or VirtualMachine(Cluster)Preference manifest built from flags, as virtctl's do. The
//! cluster-wide kind unless `--namespaced` or `-n` is given (`-n` also sets the namespace).

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use serde_json::{Value, json};

#[derive(Args, Debug, Default)]
pub struct CreateInstancetypeArgs {
    /// The name [default: clusterinstancetype-XXXXX or instancetype-XXXXX].
    #[arg(long)]
    name: Option<String>,
    /// The namespace; makes a namespaced VirtualMachineInstancetype.
    #[arg(short, long)]
    namespace: Option<String>,
    /// A namespaced VirtualMachineInstancetype instead of a cluster one.
    #[arg(long)]
    namespaced: bool,
    /// The guest's vCPUs.
    #[arg(long, required = true)]
    cpu: u32,
    /// The guest's memory (a quantity).
    #[arg(long, required = true)]
    memory: String,
    /// `auto` or `shared`.
    #[arg(long = "iothreadspolicy")]
    io_threads_policy: Option<String>,
    /// `name:N,devicename:D`, repeatable: a vGPU to pass through.
    #[arg(long = "gpu")]
    gpus: Vec<String>,
    /// `name:N,devicename:D`, repeatable: a host device to pass through.
    #[arg(long = "hostdevice")]
    host_devices: Vec<String>,
}

#[derive(Args, Debug, Default)]
pub struct CreatePreferenceArgs {
    /// The name [default: clusterpreference-XXXXX or preference-XXXXX].
    #[arg(long)]
    name: Option<String>,
    /// The namespace; makes a namespaced VirtualMachinePreference.
    #[arg(short, long)]
    namespace: Option<String>,
    /// A namespaced VirtualMachinePreference instead of a cluster one.
    #[arg(long)]
    namespaced: bool,
    /// `spec.volumes.preferredStorageClassName`.
    #[arg(long)]
    volume_storage_class: Option<String>,
    /// `spec.machine.preferredMachineType`.
    #[arg(long)]
    machine_type: Option<String>,
    /// `spec.cpu.preferredCPUTopology`: sockets, cores, threads, spread, any, or their
    /// prefer* forms.
    #[arg(long)]
    cpu_topology: Option<String>,
}

pub fn create_instancetype(args: CreateInstancetypeArgs) -> Result<()> {
    print_yaml(&instancetype_manifest(
        &args,
        &mut api::common::random_name_suffix,
    )?)
}

pub fn create_preference(args: CreatePreferenceArgs) -> Result<()> {
    print_yaml(&preference_manifest(
        &args,
        &mut api::common::random_name_suffix,
    )?)
}

fn print_yaml(object: &Value) -> Result<()> {
    print!(
        "{}",
        serde_saphyr::to_string(object).context("writing the manifest")?
    );
    Ok(())
}

/// The kind (cluster or namespaced), name and metadata of a new object.
fn metadata(
    name: Option<&String>,
    namespace: Option<&String>,
    namespaced: bool,
    stem: &str,
    suffix: &mut dyn FnMut() -> String,
) -> (bool, Value) {
    let namespaced = namespaced || namespace.is_some();
    let name = match name {
        Some(name) => name.clone(),
        None if namespaced => format!("{stem}-{}", suffix()),
        None => format!("cluster{stem}-{}", suffix()),
    };
    let mut metadata = json!({"creationTimestamp": null, "name": name});
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    (namespaced, metadata)
}

fn instancetype_manifest(
    args: &CreateInstancetypeArgs,
    suffix: &mut dyn FnMut() -> String,
) -> Result<Value> {
    let (namespaced, metadata) = metadata(
        args.name.as_ref(),
        args.namespace.as_ref(),
        args.namespaced,
        "instancetype",
        suffix,
    );
    if api::quantity::parse_quantity(&args.memory).is_none() {
        bail!(
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
    }
    if args.cpu == 0 {
        bail!("cpu value must be greater than zero");
    }
    let mut spec = json!({"cpu": {"guest": args.cpu}, "memory": {"guest": args.memory}});
    if !args.gpus.is_empty() {
        spec["gpus"] = devices("gpu", &args.gpus)?;
    }
    if !args.host_devices.is_empty() {
        spec["hostDevices"] = devices("hostdevice", &args.host_devices)?;
    }
    if let Some(policy) = &args.io_threads_policy {
        if policy != "auto" && policy != "shared" {
            return Err(flag_error(
                "iothreadspolicy",
                "IOThread must be of value auto or shared",
            ));
        }
        spec["ioThreadsPolicy"] = json!(policy);
    }
    let kind = if namespaced {
        "VirtualMachineInstancetype"
    } else {
        "VirtualMachineClusterInstancetype"
    };
    Ok(json!({
        "apiVersion": "instancetype.kubevirt.io/v1beta1",
        "kind": kind,
        "metadata": metadata,
        "spec": spec,
    }))
}

fn preference_manifest(
    args: &CreatePreferenceArgs,
    suffix: &mut dyn FnMut() -> String,
) -> Result<Value> {
    let (namespaced, metadata) = metadata(
        args.name.as_ref(),
        args.namespace.as_ref(),
        args.namespaced,
        "preference",
        suffix,
    );
    let mut spec = json!({});
    if let Some(class) = &args.volume_storage_class {
        spec["volumes"] = json!({"preferredStorageClassName": class});
    }
    if let Some(machine) = &args.machine_type {
        spec["machine"] = json!({"preferredMachineType": machine});
    }
    if let Some(topology) = &args.cpu_topology {
        if !api::instancetype::topology::TOPOLOGIES.contains(&topology.as_str()) {
            return Err(flag_error(
                "cpu-topology",
                "CPU topology must have a value of sockets, cores, threads or spread",
            ));
        }
        spec["cpu"] = json!({"preferredCPUTopology": topology});
    }
    let kind = if namespaced {
        "VirtualMachinePreference"
    } else {
        "VirtualMachineClusterPreference"
    };
    Ok(json!({
        "apiVersion": "instancetype.kubevirt.io/v1beta1",
        "kind": kind,
        "metadata": metadata,
        "spec": spec,
    }))
}

fn flag_error(flag: &str, message: &str) -> anyhow::Error {
    anyhow!("failed to parse \"--{flag}\" flag: {message}")
}

/// `name:N,devicename:D` flags as GPUs or host devices.
fn devices(flag: &str, values: &[String]) -> Result<Value> {
    let mut devices = Vec::new();
    for value in values {
        let mut name = "";
        let mut device_name = "";
        for pair in value.split(',') {
            match pair.split_once(':') {
                Some(("name", v)) => name = v,
                Some(("devicename", v)) => device_name = v,
                _ => {
                    return Err(flag_error(flag, &format!("unknown param(s): {pair}")));
                }
            }
        }
        if name.is_empty() {
            return Err(flag_error(flag, "name must be specified"));
        }
        if device_name.is_empty() {
            return Err(flag_error(flag, "deviceName must be specified"));
        }
        devices.push(json!({"name": name, "deviceName": device_name}));
    }
    Ok(json!(devices))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed() -> impl FnMut() -> String {
        || "abcde".to_owned()
    }

    #[test]
    fn an_instancetype_is_cluster_wide_unless_namespaced() {
        let args = CreateInstancetypeArgs {
            cpu: 2,
            memory: "256Mi".into(),
            ..Default::default()
        };
        let cluster = instancetype_manifest(&args, &mut fixed()).unwrap();
        assert_eq!(
            serde_saphyr::to_string(&cluster).unwrap(),
            "apiVersion: instancetype.kubevirt.io/v1beta1\nkind: VirtualMachineClusterInstancetype\n\
             metadata:\n  creationTimestamp: null\n  name: clusterinstancetype-abcde\n\
             spec:\n  cpu:\n    guest: 2\n  memory:\n    guest: 256Mi\n"
        );
        let in_namespace = CreateInstancetypeArgs {
            namespace: Some("ns".into()),
            io_threads_policy: Some("shared".into()),
            gpus: vec!["name:gpu1,devicename:nvidia".into()],
            ..args
        };
        let namespaced = instancetype_manifest(&in_namespace, &mut fixed()).unwrap();
        assert_eq!(namespaced["kind"], "VirtualMachineInstancetype");
        assert_eq!(
            namespaced["metadata"],
            json!({"creationTimestamp": null, "name": "instancetype-abcde", "namespace": "ns"})
        );
        assert_eq!(namespaced["spec"]["ioThreadsPolicy"], "shared");
        assert_eq!(
            namespaced["spec"]["gpus"],
            json!([{"name": "gpu1", "deviceName": "nvidia"}])
        );
    }

    #[test]
    fn bad_instancetype_flags_are_refused_with_virtctls_messages() {
        let base = || CreateInstancetypeArgs {
            cpu: 1,
            memory: "1Gi".into(),
            ..Default::default()
        };
        let cases = [
            (
                CreateInstancetypeArgs { cpu: 0, ..base() },
                "cpu value must be greater than zero",
            ),
            (
                CreateInstancetypeArgs {
                    io_threads_policy: Some("dedicated".into()),
                    ..base()
                },
                "failed to parse \"--iothreadspolicy\" flag: IOThread must be of value auto or shared",
            ),
            (
                CreateInstancetypeArgs {
                    host_devices: vec!["devicename:x".into()],
                    ..base()
                },
                "failed to parse \"--hostdevice\" flag: name must be specified",
            ),
            (
                CreateInstancetypeArgs {
                    gpus: vec!["name:g".into()],
                    ..base()
                },
                "failed to parse \"--gpu\" flag: deviceName must be specified",
            ),
        ];
        for (args, message) in cases {
            let err = instancetype_manifest(&args, &mut fixed()).unwrap_err();
            assert_eq!(err.to_string(), message);
        }
    }

    #[test]
    fn a_preference_without_flags_has_an_empty_spec() {
        let cluster = preference_manifest(&CreatePreferenceArgs::default(), &mut fixed()).unwrap();
        assert_eq!(
            cluster,
            json!({
                "apiVersion": "instancetype.kubevirt.io/v1beta1",
                "kind": "VirtualMachineClusterPreference",
                "metadata": {"creationTimestamp": null, "name": "clusterpreference-abcde"},
                "spec": {},
            })
        );
        let namespaced = preference_manifest(
            &CreatePreferenceArgs {
                namespaced: true,
                volume_storage_class: Some("local".into()),
                machine_type: Some("q35".into()),
                cpu_topology: Some("preferSpread".into()),
                ..Default::default()
            },
            &mut fixed(),
        )
        .unwrap();
        assert_eq!(namespaced["kind"], "VirtualMachinePreference");
        assert_eq!(namespaced["metadata"]["name"], "preference-abcde");
        assert_eq!(
            namespaced["spec"],
            json!({
                "cpu": {"preferredCPUTopology": "preferSpread"},
                "machine": {"preferredMachineType": "q35"},
                "volumes": {"preferredStorageClassName": "local"},
            })
        );
        let bad = preference_manifest(
            &CreatePreferenceArgs {
                cpu_topology: Some("dies".into()),
                ..Default::default()
            },
            &mut fixed(),
        )
        .unwrap_err();
        assert_eq!(
            bad.to_string(),
            "failed to parse \"--cpu-topology\" flag: CPU topology must have a value of sockets, cores, threads or spread"
        );
    }
}
