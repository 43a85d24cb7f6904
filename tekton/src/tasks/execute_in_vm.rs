//! execute-in-vm and cleanup-vm (upstream's `execute-in-vm` binary): runs a command or script
//! in a VM over SSH with the connection Secret's keys, starting the VM first if it is not
//! running, then stops and/or deletes it when asked. Unlike upstream since v0.24, the stop and
//! delete still happen when the command fails or times out (cleanup-vm's promise); the task
//! then fails with upstream's code for a failed action.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use kube::api::DeleteParams;
use serde_json::Value;

use crate::failure::{TaskFailure, TaskResult};
use crate::objects::{Cluster, Kind, is_not_found};

mod connection;

use connection::Connection;

/// Upstream's exit codes.
mod exit {
    pub const INVALID_ARGUMENTS: i32 = -1;
    pub const INITIALIZATION: i32 = -2;
    pub const ACTIONS_FAILED: i32 = -3;
}

/// Where the Task mounts the connection Secret.
const CONNECTION_SECRET_DIR: &str = "/data/connectionsecret";

#[derive(Args, Debug, Default)]
pub struct ExecuteInVmArgs {
    /// Name of the VirtualMachine.
    #[arg(long = "vm-name", env = "VM_NAME", default_value = "")]
    name: String,
    /// Its namespace [default: the active namespace].
    #[arg(long = "vm-namespace", env = "VM_NAMESPACE", default_value = "")]
    namespace: String,
    /// `true` stops the VM afterwards.
    #[arg(long = "stop", default_value = "")]
    stop: String,
    /// `true` deletes the VM afterwards.
    #[arg(long = "delete", default_value = "")]
    delete: String,
    /// Limit for the command, starting the VM included, as a Go duration; empty for none.
    #[arg(long = "timeout", default_value = "")]
    timeout: String,
    /// A script to run instead of a command.
    #[arg(long = "script", env = "EXECUTE_SCRIPT", default_value = "")]
    script: String,
    /// The connection Secret's name (checked; its files are read from the mount).
    #[arg(
        long = "connectionSecretName",
        env = "CONNECTION_SECRET_NAME",
        default_value = ""
    )]
    connection_secret_name: String,
    /// Where the connection Secret is mounted.
    #[arg(long = "connection-secret-dir", env = "FERROVIRT_CONNECTION_SECRET_DIR", default_value = CONNECTION_SECRET_DIR)]
    connection_secret_dir: PathBuf,
    /// More logging.
    #[arg(long)]
    debug: bool,
    /// The command and its arguments (after `--`).
    #[arg(last = true)]
    command: Vec<String>,
}

/// The checked flags.
#[derive(Debug, PartialEq)]
struct Plan {
    name: String,
    namespace: String,
    script: String,
    timeout: Option<Duration>,
    stop: bool,
    delete: bool,
}

pub async fn run(args: ExecuteInVmArgs) -> TaskResult {
    let cluster = Cluster::connect()
        .await
        .map_err(|e| TaskFailure::new(exit::INITIALIZATION, e.to_string()))?;
    let plan = plan(&args, &cluster.active_namespace)
        .map_err(|m| TaskFailure::new(exit::INVALID_ARGUMENTS, m))?;
    let mut failure = None;
    if !plan.script.is_empty() {
        // An in-pod path: under the pod's root where the node agent runs the pod.
        let dir = api::pod_contract::in_pod(&args.connection_secret_dir.to_string_lossy());
        let connection =
            Connection::read(&dir).map_err(|m| TaskFailure::new(exit::INITIALIZATION, m))?;
        let deadline = plan.timeout.map(|t| Instant::now() + t);
        if let Err(message) = execute(&cluster, &plan, &connection, deadline).await {
            tracing::error!(%message, "the command failed");
            failure = Some(TaskFailure::new(exit::ACTIONS_FAILED, message));
        }
    }
    if plan.stop {
        ensure_stopped(&cluster, &plan)
            .await
            .map_err(|m| TaskFailure::new(exit::ACTIONS_FAILED, m))?;
    }
    if plan.delete {
        ensure_deleted(&cluster, &plan)
            .await
            .map_err(|m| TaskFailure::new(exit::ACTIONS_FAILED, m))?;
    }
    failure.map_or(Ok(()), Err)
}

fn plan(args: &ExecuteInVmArgs, active_namespace: &str) -> Result<Plan, String> {
    let name = args.name.trim();
    if name.is_empty() {
        return Err("missing value for vm-name option".into());
    }
    if !api::validation::is_dns1123_subdomain(name) {
        return Err(format!(
            "vm-name is not a valid name: {}",
            api::validation::DNS1123_SUBDOMAIN_MESSAGE
        ));
    }
    let namespace = match args.namespace.trim() {
        "" => active_namespace.to_owned(),
        namespace => namespace.to_owned(),
    };
    let stop = flag("stop", &args.stop)?;
    let delete = flag("delete", &args.delete)?;
    let command = args.command.join(" ");
    if !args.script.is_empty() && !command.trim().is_empty() {
        return Err("only one of command|script options is allowed".into());
    }
    let script = if args.script.is_empty() {
        command
    } else {
        args.script.clone()
    };
    if script.trim().is_empty() && !stop && !delete {
        return Err("no action was specified: at least one of the following options is required: command|script|stop|delete".into());
    }
    if !script.trim().is_empty() {
        let secret = args.connection_secret_name.trim();
        if secret.is_empty() || secret == "__empty__" {
            return Err("connection secret should not be empty".into());
        }
        if !api::validation::is_dns1123_subdomain(secret) {
            return Err(format!(
                "connection secret does not have a valid name: {}",
                api::validation::DNS1123_SUBDOMAIN_MESSAGE
            ));
        }
    }
    let timeout = match args.timeout.trim() {
        "" => None,
        text => Some(api::go_duration::parse(text).ok_or_else(|| {
            format!("could not parse timeout: time: invalid duration \"{text}\"")
        })?),
    };
    Ok(Plan {
        name: name.to_owned(),
        namespace,
        script: if script.trim().is_empty() {
            String::new()
        } else {
            script
        },
        timeout,
        stop,
        delete,
    })
}

fn flag(option: &str, value: &str) -> Result<bool, String> {
    match value.to_lowercase().as_str() {
        "" | "false" => Ok(false),
        "true" => Ok(true),
        _ => Err(format!(
            "invalid option {option} {value}, only true|false is allowed"
        )),
    }
}

/// Time left before `deadline`, or an error saying it passed.
fn remaining(deadline: Option<Instant>) -> Result<Option<Duration>, String> {
    match deadline {
        None => Ok(None),
        Some(d) => d
            .checked_duration_since(Instant::now())
            .filter(|left| !left.is_zero())
            .map(Some)
            .ok_or_else(|| "command timed out".to_owned()),
    }
}

async fn execute(
    cluster: &Cluster,
    plan: &Plan,
    connection: &Connection,
    deadline: Option<Instant>,
) -> Result<(), String> {
    let ip = ensure_running(cluster, plan, deadline).await?;
    connection.wait_reachable(&ip, remaining(deadline)?).await?;
    connection
        .run(&ip, &plan.script, remaining(deadline)?)
        .await
}

/// Starts the VM if its instance is missing or failed (once), and waits until it runs and
/// its pod network interface has an address.
async fn ensure_running(
    cluster: &Cluster,
    plan: &Plan,
    deadline: Option<Instant>,
) -> Result<String, String> {
    let vmis = cluster.api(Kind::VirtualMachineInstance, &plan.namespace);
    let mut started = false;
    loop {
        remaining(deadline)?;
        match vmis.get(&plan.name).await {
            Err(e) if is_not_found(&e) => {
                if !started {
                    start(cluster, plan).await?;
                    started = true;
                }
            }
            Err(e) => return Err(e.to_string()),
            Ok(vmi) => {
                let vmi = serde_json::to_value(vmi).map_err(|e| e.to_string())?;
                match vmi["status"]["phase"].as_str() {
                    Some("Failed") if !started => {
                        start(cluster, plan).await?;
                        started = true;
                    }
                    Some("Running") => {
                        if let Some(ip) = pod_network_address(&vmi)? {
                            return Ok(ip);
                        }
                    }
                    _ => {}
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
}

async fn start(cluster: &Cluster, plan: &Plan) -> Result<(), String> {
    cluster
        .vm_subresource(&plan.namespace, &plan.name, "start")
        .await
        .map_err(|e| e.to_string())
}

/// The address of the interface on the pod network, once reported.
fn pod_network_address(vmi: &Value) -> Result<Option<String>, String> {
    let network = vmi["spec"]["networks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n.get("pod").is_some())
        .and_then(|n| n["name"].as_str())
        .ok_or("ip address not found: pod network not found")?;
    Ok(vmi["status"]["interfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["name"] == network)
        .and_then(|i| i["ipAddress"].as_str())
        .filter(|ip| !ip.is_empty())
        .map(|ip| ip.split('/').next().unwrap_or(ip).to_owned()))
}

/// Stops the VM (once; a conflict means it is stopping already) and waits until its
/// instance is gone or has ended.
async fn ensure_stopped(cluster: &Cluster, plan: &Plan) -> Result<(), String> {
    let vmis = cluster.api(Kind::VirtualMachineInstance, &plan.namespace);
    let mut asked = false;
    loop {
        match vmis.get(&plan.name).await {
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(e.to_string()),
            Ok(vmi) => {
                let phase =
                    serde_json::to_value(&vmi).map_err(|e| e.to_string())?["status"]["phase"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                if phase == "Succeeded" || phase == "Failed" {
                    return Ok(());
                }
            }
        }
        if !asked {
            match cluster
                .vm_subresource(&plan.namespace, &plan.name, "stop")
                .await
            {
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(e) => return Err(e.to_string()),
                Ok(()) => {}
            }
            asked = true;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Deletes the VM (once) and waits until it is gone.
async fn ensure_deleted(cluster: &Cluster, plan: &Plan) -> Result<(), String> {
    let vms = cluster.api(Kind::VirtualMachine, &plan.namespace);
    let mut asked = false;
    loop {
        match vms.get(&plan.name).await {
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(e.to_string()),
            Ok(_) if !asked => match vms.delete(&plan.name, &DeleteParams::default()).await {
                Err(e) if !is_not_found(&e) => return Err(e.to_string()),
                _ => asked = true,
            },
            Ok(_) => {}
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Reads one file of the mounted Secret; a missing file is empty.
fn secret_value(dir: &Path, key: &str) -> Result<String, String> {
    match std::fs::read_to_string(dir.join(key)) {
        Ok(value) => Ok(value),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(format!("{}: {e}", dir.join(key).display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(name: &str) -> ExecuteInVmArgs {
        ExecuteInVmArgs {
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn bad_flags_are_refused_with_upstreams_words() {
        let refusal = |a: &ExecuteInVmArgs| plan(a, "ns").unwrap_err();
        assert_eq!(refusal(&args("")), "missing value for vm-name option");
        assert!(refusal(&args("Bad")).starts_with("vm-name is not a valid name"));
        assert_eq!(
            refusal(&args("vm")),
            "no action was specified: at least one of the following options is required: command|script|stop|delete"
        );
        let mut both = args("vm");
        both.script = "ls".into();
        both.command = vec!["ls".into()];
        assert_eq!(
            refusal(&both),
            "only one of command|script options is allowed"
        );
        let mut no_secret = args("vm");
        no_secret.command = vec!["ls".into(), "-l".into()];
        no_secret.connection_secret_name = "__empty__".into();
        assert_eq!(refusal(&no_secret), "connection secret should not be empty");
        let mut bad_stop = args("vm");
        bad_stop.stop = "yes".into();
        assert_eq!(
            refusal(&bad_stop),
            "invalid option stop yes, only true|false is allowed"
        );
        let mut bad_timeout = args("vm");
        bad_timeout.stop = "true".into();
        bad_timeout.timeout = "ages".into();
        assert!(refusal(&bad_timeout).starts_with("could not parse timeout"));
    }

    #[test]
    fn cleanup_needs_no_secret_and_a_command_is_joined() {
        let mut cleanup = args("vm");
        cleanup.stop = "TRUE".into();
        cleanup.delete = "true".into();
        cleanup.timeout = "30m".into();
        let p = plan(&cleanup, "active").unwrap();
        assert!(p.stop && p.delete && p.script.is_empty());
        assert_eq!(
            (p.namespace.as_str(), p.timeout),
            ("active", Some(Duration::from_secs(1800)))
        );
        let mut command = args("vm");
        command.command = vec!["echo".into(), "hi".into()];
        command.connection_secret_name = "conn".into();
        assert_eq!(plan(&command, "ns").unwrap().script, "echo hi");
    }

    #[test]
    fn the_address_is_the_pod_networks() {
        let vmi = serde_json::json!({
            "spec": {"networks": [{"name": "default", "pod": {}}]},
            "status": {"interfaces": [{"name": "default", "ipAddress": "10.0.0.5"}]}});
        assert_eq!(pod_network_address(&vmi), Ok(Some("10.0.0.5".into())));
        let no_pod = serde_json::json!({"spec": {"networks": [{"name": "b", "multus": {}}]}});
        assert_eq!(
            pod_network_address(&no_pod),
            Err("ip address not found: pod network not found".into())
        );
    }
}
