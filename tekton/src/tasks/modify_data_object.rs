//! modify-data-object: creates a DataVolume or DataSource from a manifest (replacing one of
//! the same name if allowed, optionally waiting until it is ready), or deletes a DataVolume,
//! DataSource or claim by name. Success and failure are upstream's: a DataVolume that CDI
//! garbage-collected after its import counts as done while its claim exists.

use std::time::{Duration, Instant};

use clap::Args;
use kube::api::{DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::failure::{FailWith, TaskFailure, TaskResult};
use crate::objects::{Cluster, Kind, Output, is_not_found};
use crate::owner::own_by_task_pod;
use crate::results::Results;

/// Upstream's exit codes.
mod exit {
    pub const INVALID_CLI_INPUT: i32 = -1;
    pub const CLIENT: i32 = 1;
    pub const CREATE: i32 = 2;
    pub const WRITE_RESULTS: i32 = 3;
    pub const DELETE: i32 = 4;
}

/// How often a wait looks again. Upstream looks every 15 s; a second is as cheap here.
const POLL: Duration = Duration::from_secs(1);
/// How long a replaced object may take to go (upstream's hour).
const REPLACE_LIMIT: Duration = Duration::from_secs(3600);

#[derive(Args, Debug, Default)]
pub struct ModifyDataObjectArgs {
    /// YAML manifest of the DataVolume or DataSource to create.
    #[arg(
        long = "data-object-manifest",
        env = "DATA_OBJECT_MANIFEST",
        default_value = ""
    )]
    manifest: String,
    /// Namespace of the object [default: the manifest's, else the active namespace].
    #[arg(
        long = "data-object-namespace",
        env = "DATA_OBJECT_NAMESPACE",
        default_value = ""
    )]
    namespace: String,
    /// `true` waits until the object is ready.
    #[arg(
        long = "wait-for-success",
        env = "WAIT_FOR_SUCCESS",
        default_value = ""
    )]
    wait_for_success: String,
    /// How long to wait, as a Go duration (`1h`); empty waits for ever.
    #[arg(long = "timeout", env = "TIMEOUT", default_value = "")]
    timeout: String,
    /// `true` deletes the object named by the delete-object flags instead.
    #[arg(long = "delete-object", env = "DELETE_OBJECT", default_value = "")]
    delete_object: String,
    /// Kind to delete: DataVolume, DataSource or PersistentVolumeClaim.
    #[arg(
        long = "delete-object-kind",
        env = "DELETE_OBJECT_KIND",
        default_value = ""
    )]
    delete_object_kind: String,
    /// Name to delete.
    #[arg(
        long = "delete-object-name",
        env = "DELETE_OBJECT_NAME",
        default_value = ""
    )]
    delete_object_name: String,
    /// `true` replaces an object of the same name.
    #[arg(long = "allow-replace", env = "ALLOW_REPLACE", default_value = "")]
    allow_replace: String,
    /// `true` makes the task's pod (POD_NAME, POD_NAMESPACE) the object's owner.
    #[arg(
        long = "set-owner-reference",
        env = "SET_OWNER_REFERENCE",
        default_value = ""
    )]
    set_owner_reference: String,
    /// Print the created object as `yaml` or `json`.
    #[arg(short = 'o', long = "output", default_value = "")]
    output: String,
    /// More logging.
    #[arg(long)]
    debug: bool,
}

/// What the task is asked to do, checked.
#[derive(Debug, PartialEq)]
enum Action {
    Delete {
        kind: Kind,
        name: String,
        namespace: String,
    },
    Create {
        object: Value,
        kind: Kind,
        namespace: String,
        wait: Option<Option<Duration>>,
        replace: bool,
    },
}

pub async fn run(args: ModifyDataObjectArgs, results: &Results) -> TaskResult {
    let cluster = Cluster::connect().await.fail_with(exit::CLIENT, "")?;
    let output = Output::parse(&args.output).fail_with(exit::INVALID_CLI_INPUT, "")?;
    match action(&args, &cluster.active_namespace)? {
        Action::Delete {
            kind,
            name,
            namespace,
        } => {
            cluster
                .api(kind, &namespace)
                .delete(&name, &DeleteParams::default())
                .await
                .fail_with(exit::DELETE, "")?;
            Ok(())
        }
        Action::Create {
            mut object,
            kind,
            namespace,
            wait,
            replace,
        } => {
            if args.set_owner_reference == "true" {
                own_by_task_pod(&cluster, &mut object, &namespace)
                    .await
                    .fail_with(exit::CREATE, "could not create data object")?;
            }
            let created = create(&cluster, object, kind, &namespace, replace).await?;
            let name = created["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if let Some(limit) = wait {
                wait_for_success(&cluster, kind, &name, &namespace, limit)
                    .await
                    .fail_with(exit::CREATE, "Failed to wait for success of data object")?;
            }
            results
                .write_all(&[("name", &name), ("namespace", &namespace)])
                .fail_with(exit::WRITE_RESULTS, "")?;
            print!("{}", output.render(&created));
            Ok(())
        }
    }
}

/// Checks the flags as upstream does, in its order and with its messages.
fn action(args: &ModifyDataObjectArgs, active_namespace: &str) -> TaskResult<Action> {
    let invalid = |message: String| TaskFailure::new(exit::INVALID_CLI_INPUT, message);
    let asked_namespace = args.namespace.trim();
    if args.delete_object == "true" {
        if args.delete_object_kind.is_empty() {
            return Err(invalid(
                "delete-object-kind param has to be specified".into(),
            ));
        }
        if args.delete_object_name.is_empty() {
            return Err(invalid(
                "delete-object-name param has to be specified".into(),
            ));
        }
        let kind = match args.delete_object_kind.as_str() {
            "DataVolume" => Kind::DataVolume,
            "DataSource" => Kind::DataSource,
            "PersistentVolumeClaim" => Kind::PersistentVolumeClaim,
            _ => {
                return Err(invalid(
                    "delete-object-kind param has to have values DataVolume, DataSource or PersistentVolumeClaim".into(),
                ));
            }
        };
        let namespace = first_non_empty(&[asked_namespace, active_namespace]);
        return Ok(Action::Delete {
            kind,
            name: args.delete_object_name.clone(),
            namespace,
        });
    }
    let timeout = match args.timeout.trim() {
        "" => None,
        text => Some(api::go_duration::parse(text).ok_or_else(|| {
            invalid(format!(
                "error during parsing timeout: time: invalid duration \"{text}\""
            ))
        })?),
    };
    let manifest = args.manifest.trim();
    if manifest.is_empty() {
        return Err(invalid(
            "data-object-manifest param has to be specified".into(),
        ));
    }
    let mut object: Value = serde_saphyr::from_str(manifest)
        .map_err(|e| invalid(format!("could not read data object manifest: {e}")))?;
    let group = object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .split('/')
        .next()
        .unwrap_or_default();
    let kind = match (group, object["kind"].as_str().unwrap_or_default()) {
        ("cdi.kubevirt.io", "DataVolume") => Kind::DataVolume,
        ("cdi.kubevirt.io", "DataSource") => Kind::DataSource,
        _ => {
            return Err(invalid(
                "could not identify data object, wrong group or kind".into(),
            ));
        }
    };
    let manifest_namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let namespace = first_non_empty(&[asked_namespace, &manifest_namespace, active_namespace]);
    object["metadata"]["namespace"] = json!(namespace);
    let replace = args.allow_replace == "true"
        && object["metadata"]["name"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
    Ok(Action::Create {
        object,
        kind,
        namespace,
        wait: (args.wait_for_success.trim() == "true").then_some(timeout),
        replace,
    })
}

fn first_non_empty(candidates: &[&str]) -> String {
    candidates
        .iter()
        .find(|c| !c.is_empty())
        .map_or_else(String::new, |c| (*c).to_owned())
}

/// Creates `object`, first deleting one of its name (and for a DataVolume gone already, its
/// claim) when `replace`, and waiting until that is gone.
async fn create(
    cluster: &Cluster,
    object: Value,
    kind: Kind,
    namespace: &str,
    replace: bool,
) -> TaskResult<Value> {
    let failed = |e: kube::Error| {
        TaskFailure::new(exit::CREATE, format!("could not create data object: {e}"))
    };
    if replace {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        remove_for_replace(cluster, kind, name, namespace)
            .await
            .map_err(failed)?;
    }
    let object: DynamicObject = serde_json::from_value(object).map_err(|e| {
        TaskFailure::new(exit::CREATE, format!("could not create data object: {e}"))
    })?;
    let created = cluster
        .api(kind, namespace)
        .create(&PostParams::default(), &object)
        .await
        .map_err(failed)?;
    serde_json::to_value(created).fail_with(exit::CREATE, "could not create data object")
}

async fn remove_for_replace(
    cluster: &Cluster,
    kind: Kind,
    name: &str,
    namespace: &str,
) -> Result<(), kube::Error> {
    let api = cluster.api(kind, namespace);
    let target = match api.get(name).await {
        Err(e) if is_not_found(&e) && kind == Kind::DataVolume => {
            // The DataVolume may be gone with its claim kept: the claim is what is replaced.
            let claims = cluster.api(Kind::PersistentVolumeClaim, namespace);
            match claims.get(name).await {
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e) => return Err(e),
                Ok(_) => claims,
            }
        }
        Err(e) if is_not_found(&e) => return Ok(()),
        Err(e) => return Err(e),
        Ok(_) => api,
    };
    match target.delete(name, &DeleteParams::default()).await {
        Err(e) if !is_not_found(&e) => return Err(e),
        _ => {}
    }
    let deadline = Instant::now() + REPLACE_LIMIT;
    while Instant::now() < deadline {
        match target.get(name).await {
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(e),
            Ok(_) => tokio::time::sleep(POLL).await,
        }
    }
    Ok(())
}

/// What a look at the object says.
#[derive(Debug, PartialEq)]
enum Progress {
    Done,
    Waiting,
    Failed(String),
}

async fn wait_for_success(
    cluster: &Cluster,
    kind: Kind,
    name: &str,
    namespace: &str,
    limit: Option<Duration>,
) -> Result<(), String> {
    let deadline = limit.map(|l| Instant::now() + l);
    loop {
        let progress = match cluster.api(kind, namespace).get(name).await {
            Ok(object) => {
                let object = serde_json::to_value(object).map_err(|e| e.to_string())?;
                progress_of(kind, &object)
            }
            Err(e) if is_not_found(&e) && kind == Kind::DataVolume => {
                // Garbage-collected after success: done if its claim is there.
                cluster
                    .api(Kind::PersistentVolumeClaim, namespace)
                    .get(name)
                    .await
                    .map(|_| Progress::Done)
                    .map_err(|e| e.to_string())?
            }
            Err(e) => return Err(e.to_string()),
        };
        match progress {
            Progress::Done => return Ok(()),
            Progress::Failed(why) => return Err(why),
            Progress::Waiting => {}
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err("timed out waiting for the condition".into());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Upstream's reading of a DataVolume's or DataSource's status.
fn progress_of(kind: Kind, object: &Value) -> Progress {
    let status = &object["status"];
    let condition = |type_: &str| {
        status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == type_)
            .cloned()
            .unwrap_or(Value::Null)
    };
    if kind == Kind::DataSource {
        return if condition("Ready")["status"] == "True" {
            Progress::Done
        } else {
            Progress::Waiting
        };
    }
    let phase = status["phase"].as_str().unwrap_or_default();
    let bound = condition("Bound")["status"] == "True";
    let running = condition("Running");
    if phase == "Succeeded" && bound {
        return Progress::Done;
    }
    let restarts = status["restartCount"].as_i64().unwrap_or(0);
    if phase == "ImportInProgress"
        && restarts > 3
        && bound
        && running["status"] == "False"
        && running["reason"] == "Error"
    {
        return Progress::Failed(format!("Import of DV failed: {object}"));
    }
    if phase == "Failed" {
        return Progress::Failed(format!("DV is in phase failed: {object}"));
    }
    Progress::Waiting
}

#[cfg(test)]
mod tests {
    use super::*;

    const DV: &str = "apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata: {name: disk}
spec: {source: {blank: {}}, storage: {resources: {requests: {storage: 1Gi}}}}
";

    fn args(manifest: &str) -> ModifyDataObjectArgs {
        ModifyDataObjectArgs {
            manifest: manifest.into(),
            ..Default::default()
        }
    }

    fn refusal(args: &ModifyDataObjectArgs) -> String {
        let failure = action(args, "active").unwrap_err();
        assert_eq!(failure.exit_status(), 255, "{failure}");
        failure.message
    }

    #[test]
    fn bad_input_is_refused_with_upstreams_words() {
        assert_eq!(
            refusal(&args("")),
            "data-object-manifest param has to be specified"
        );
        assert_eq!(
            refusal(&args("apiVersion: kubevirt.io/v1\nkind: VirtualMachine\n")),
            "could not identify data object, wrong group or kind"
        );
        let mut bad_timeout = args(DV);
        bad_timeout.timeout = "soon".into();
        assert!(refusal(&bad_timeout).starts_with("error during parsing timeout"));
        let mut delete = args("");
        delete.delete_object = "true".into();
        assert_eq!(
            refusal(&delete),
            "delete-object-kind param has to be specified"
        );
        delete.delete_object_kind = "Pod".into();
        assert_eq!(
            refusal(&delete),
            "delete-object-name param has to be specified"
        );
        delete.delete_object_name = "p".into();
        assert!(refusal(&delete).starts_with("delete-object-kind param has to have values"));
    }

    #[test]
    fn create_takes_the_namespace_asked_for_and_replaces_only_named_objects() {
        let mut a = args(DV);
        a.allow_replace = "true".into();
        a.wait_for_success = "true".into();
        a.timeout = "10m".into();
        match action(&a, "active").unwrap() {
            Action::Create {
                namespace,
                replace,
                wait,
                object,
                kind,
            } => {
                assert_eq!(
                    (namespace.as_str(), replace, kind),
                    ("active", true, Kind::DataVolume)
                );
                assert_eq!(wait, Some(Some(Duration::from_secs(600))));
                assert_eq!(object["metadata"]["namespace"], "active");
            }
            other => panic!("{other:?}"),
        }
        let generated = args(&DV.replace("name: disk", "generateName: disk-"));
        let mut generated = generated;
        generated.allow_replace = "true".into();
        assert!(matches!(
            action(&generated, "ns").unwrap(),
            Action::Create { replace: false, .. }
        ));
    }

    #[test]
    fn data_volume_progress_is_read_as_upstream_reads_it() {
        let dv = |phase: &str, bound: &str, restarts: i64, running: Value| {
            json!({"status": {"phase": phase, "restartCount": restarts, "conditions": [
                {"type": "Bound", "status": bound}, running]}})
        };
        let ok = json!({"type": "Running", "status": "False", "reason": "Completed"});
        assert_eq!(
            progress_of(Kind::DataVolume, &dv("Succeeded", "True", 0, ok.clone())),
            Progress::Done
        );
        assert_eq!(
            progress_of(Kind::DataVolume, &dv("Succeeded", "False", 0, ok.clone())),
            Progress::Waiting
        );
        assert_eq!(
            progress_of(Kind::DataVolume, &dv("ImportInProgress", "True", 2, ok)),
            Progress::Waiting
        );
        let error = json!({"type": "Running", "status": "False", "reason": "Error"});
        assert!(matches!(
            progress_of(Kind::DataVolume, &dv("ImportInProgress", "True", 4, error)),
            Progress::Failed(m) if m.starts_with("Import of DV failed")
        ));
        assert!(matches!(
            progress_of(Kind::DataVolume, &dv("Failed", "True", 0, Value::Null)),
            Progress::Failed(m) if m.starts_with("DV is in phase failed")
        ));
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(progress_of(Kind::DataSource, &ready), Progress::Done);
    }
}
