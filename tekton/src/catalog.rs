//! One description of each task (its parameters, results, how its step passes them to
//! `ferrovirt task NAME`, and the API access it needs), from which its Task and its RBAC in
//! `deploy/tekton/` are generated. Names, parameter names, types and defaults, result names,
//! step names, environment variables and the ClusterRole/ServiceAccount/RoleBinding names
//! are upstream's (kubevirt-tekton-tasks v0.26.0), so pipelines written for upstream's tasks
//! use these unchanged; the step runs this project's image.

use serde_json::{Value, json};

/// The image whose `ferrovirt` the steps run.
pub const DEFAULT_IMAGE: &str = "quay.io/ferrovirt/ferrovirt:latest";

/// A task.
pub struct TaskDefinition {
    pub name: &'static str,
    pub display_name: &'static str,
    pub description: &'static str,
    pub params: &'static [Param],
    pub results: &'static [(&'static str, &'static str)],
    /// The step's name (upstream's).
    pub step: &'static str,
    /// `ferrovirt task` arguments after the task's name.
    pub args: &'static [&'static str],
    /// Environment variable to the parameter it carries.
    pub env: &'static [(&'static str, &'static str)],
    /// POD_NAME and POD_NAMESPACE from the downward API (for setOwnerReference).
    pub pod_env: bool,
    /// The connection Secret mounted at /data/connectionsecret (execute-in-vm's).
    pub connection_secret: bool,
    /// ClusterRole rules: API group, resources, verbs.
    pub rules: &'static [(
        &'static str,
        &'static [&'static str],
        &'static [&'static str],
    )],
}

/// A parameter.
pub struct Param {
    pub name: &'static str,
    pub description: &'static str,
    pub array: bool,
    /// `None` makes it required.
    pub default: Option<&'static str>,
}

const fn string(
    name: &'static str,
    default: Option<&'static str>,
    description: &'static str,
) -> Param {
    Param {
        name,
        description,
        array: false,
        default,
    }
}

const fn array(name: &'static str, description: &'static str) -> Param {
    Param {
        name,
        description,
        array: true,
        default: Some("[]"),
    }
}

const OWNER: Param = string(
    "setOwnerReference",
    Some("false"),
    "true makes the TaskRun's pod the owner of the created object, so it goes when the run is deleted.",
);

const VM_VERBS: &[&str] = &["get", "list", "watch"];

/// Every task this project runs, in the order of upstream's catalogue.
pub const TASKS: &[TaskDefinition] = &[
    TaskDefinition {
        name: "create-vm-from-manifest",
        display_name: "KubeVirt create VM from manifest",
        description: "Creates a KubeVirt VirtualMachine from a manifest or from virtctl create vm flags, and can start it right away with startVM.",
        params: &[
            string(
                "manifest",
                Some(""),
                "The VirtualMachine to create, as YAML.",
            ),
            string(
                "virtctl",
                Some(""),
                "virtctl create vm flags to build the VirtualMachine from, instead of a manifest.",
            ),
            string(
                "namespace",
                Some(""),
                "Namespace to create the VM in; the manifest's, else the TaskRun's, when empty.",
            ),
            string(
                "startVM",
                Some(""),
                "true starts the VM once created (not needed with runStrategy Always).",
            ),
            string(
                "runStrategy",
                Some(""),
                "The VM's runStrategy; replaces spec.running.",
            ),
            OWNER,
        ],
        results: &[
            ("name", "Name of the created VM."),
            ("namespace", "Namespace of the created VM."),
        ],
        step: "createvm",
        args: &["--output=yaml"],
        env: &[
            ("VM_MANIFEST", "manifest"),
            ("VM_NAMESPACE", "namespace"),
            ("VIRTCTL", "virtctl"),
            ("START_VM", "startVM"),
            ("SET_OWNER_REFERENCE", "setOwnerReference"),
            ("RUN_STRATEGY", "runStrategy"),
        ],
        pod_env: true,
        connection_secret: false,
        rules: &[
            (
                "kubevirt.io",
                &["virtualmachines", "virtualmachineinstances"],
                &["get", "list", "watch", "create", "update"],
            ),
            (
                "subresources.kubevirt.io",
                &["virtualmachines/start"],
                &["update"],
            ),
            ("", &["persistentvolumeclaims"], &["update"]),
            ("", &["pods"], &["get"]),
        ],
    },
    TaskDefinition {
        name: "modify-data-object",
        display_name: "KubeVirt modify data object",
        description: "Creates a DataVolume or DataSource (optionally replacing one and waiting until it is ready), or deletes a DataVolume, DataSource or PersistentVolumeClaim.",
        params: &[
            string(
                "manifest",
                Some(""),
                "The DataVolume or DataSource to create, as YAML.",
            ),
            string(
                "namespace",
                Some(""),
                "Namespace of the object; the manifest's, else the TaskRun's, when empty.",
            ),
            string(
                "waitForSuccess",
                Some("false"),
                "true waits until the object is ready (a DataVolume imported, a DataSource Ready).",
            ),
            string(
                "allowReplace",
                Some("false"),
                "true replaces an existing object of the same name.",
            ),
            string(
                "deleteObject",
                Some("false"),
                "true deletes the object named by deleteObjectKind and deleteObjectName; the other parameters are ignored.",
            ),
            string(
                "deleteObjectKind",
                Some(""),
                "Kind to delete: DataVolume, DataSource or PersistentVolumeClaim.",
            ),
            string(
                "deleteObjectName",
                Some(""),
                "Name of the object to delete.",
            ),
            string(
                "timeout",
                Some("1h"),
                "How long waitForSuccess waits, as a Go duration (3h2m1s).",
            ),
            OWNER,
        ],
        results: &[
            ("name", "Name of the created object."),
            ("namespace", "Namespace of the created object."),
        ],
        step: "modify-data-object",
        args: &["--output=yaml"],
        env: &[
            ("DATA_OBJECT_MANIFEST", "manifest"),
            ("DATA_OBJECT_NAMESPACE", "namespace"),
            ("WAIT_FOR_SUCCESS", "waitForSuccess"),
            ("ALLOW_REPLACE", "allowReplace"),
            ("DELETE_OBJECT", "deleteObject"),
            ("DELETE_OBJECT_KIND", "deleteObjectKind"),
            ("DELETE_OBJECT_NAME", "deleteObjectName"),
            ("SET_OWNER_REFERENCE", "setOwnerReference"),
            ("TIMEOUT", "timeout"),
        ],
        pod_env: true,
        connection_secret: false,
        rules: &[
            (
                "cdi.kubevirt.io",
                &["datavolumes", "datasources"],
                &["get", "create", "delete"],
            ),
            ("", &["pods"], &["create", "get"]),
            ("", &["persistentvolumeclaims"], &["get", "delete"]),
        ],
    },
    TaskDefinition {
        name: "wait-for-vmi-status",
        display_name: "KubeVirt wait for VMI status",
        description: "Waits until a VirtualMachineInstance meets a condition, for pipelines that must wait for a VM (an installation, say).",
        params: &[
            string("vmiName", None, "Name of the VirtualMachineInstance."),
            string(
                "vmiNamespace",
                Some(""),
                "Its namespace; the TaskRun's when empty.",
            ),
            string(
                "successCondition",
                Some(""),
                "Label-selector condition over the VMI's fields that ends the task successfully, e.g. status.phase == Succeeded.",
            ),
            string(
                "failureCondition",
                Some(""),
                "Label-selector condition over the VMI's fields that fails the task, e.g. status.phase in (Failed, Unknown).",
            ),
        ],
        results: &[],
        step: "wait-for-vmi-status",
        args: &[],
        env: &[
            ("VMI_NAME", "vmiName"),
            ("VMI_NAMESPACE", "vmiNamespace"),
            ("SUCCESS_CONDITION", "successCondition"),
            ("FAILURE_CONDITION", "failureCondition"),
        ],
        pod_env: false,
        connection_secret: false,
        rules: &[("kubevirt.io", &["virtualmachineinstances"], VM_VERBS)],
    },
    TaskDefinition {
        name: "cleanup-vm",
        display_name: "KubeVirt cleanup VM",
        description: "Runs an optional command in a KubeVirt VM, then stops and/or deletes the VM.",
        params: &[
            string("vmName", None, "Name of the VM."),
            string(
                "vmNamespace",
                Some(""),
                "Its namespace; the TaskRun's when empty.",
            ),
            string(
                "secretName",
                Some("__empty__"),
                "Secret with the SSH connection details (execute-in-vm's format).",
            ),
            string("stop", Some("true"), "true stops the VM after the command."),
            string(
                "delete",
                Some("false"),
                "true deletes the VM after the command.",
            ),
            string(
                "timeout",
                Some("30m"),
                "Limit for the command, starting the VM included, as a Go duration (3h2m1s); the VM is stopped or deleted when it passes.",
            ),
            array("command", "Command to run in the VM."),
            array("args", "Arguments of the command."),
            string(
                "script",
                Some(""),
                "Script to run in the VM, instead of a command.",
            ),
        ],
        results: &[],
        step: "execute-in-vm",
        args: &[
            "--stop",
            "$(params.stop)",
            "--delete",
            "$(params.delete)",
            "--timeout",
            "$(params.timeout)",
            "--",
            "$(params.command[*])",
            "$(params.args[*])",
        ],
        env: &[
            ("VM_NAME", "vmName"),
            ("VM_NAMESPACE", "vmNamespace"),
            ("EXECUTE_SCRIPT", "script"),
            ("CONNECTION_SECRET_NAME", "secretName"),
        ],
        pod_env: false,
        connection_secret: true,
        rules: &[
            (
                "kubevirt.io",
                &["virtualmachines", "virtualmachineinstances"],
                &["get", "list", "watch", "delete"],
            ),
            (
                "subresources.kubevirt.io",
                &[
                    "virtualmachines/start",
                    "virtualmachines/stop",
                    "virtualmachines/restart",
                ],
                &["update"],
            ),
        ],
    },
    TaskDefinition {
        name: "execute-in-vm",
        display_name: "KubeVirt execute in vm",
        description: "Runs a command or a script in a KubeVirt VM over SSH, starting the VM first when it is not running.",
        params: &[
            string("vmName", None, "Name of the VM."),
            string(
                "vmNamespace",
                Some(""),
                "Its namespace; the TaskRun's when empty.",
            ),
            string(
                "secretName",
                Some("__empty__"),
                "Secret with the SSH connection details: type, user, ssh-privatekey, host-public-key or disable-strict-host-key-checking, additional-ssh-options.",
            ),
            array("command", "Command to run in the VM."),
            array("args", "Arguments of the command."),
            string(
                "script",
                Some(""),
                "Script to run in the VM, instead of a command.",
            ),
        ],
        results: &[],
        step: "execute-in-vm",
        args: &["--", "$(params.command[*])", "$(params.args[*])"],
        env: &[
            ("VM_NAME", "vmName"),
            ("VM_NAMESPACE", "vmNamespace"),
            ("EXECUTE_SCRIPT", "script"),
            ("CONNECTION_SECRET_NAME", "secretName"),
        ],
        pod_env: false,
        connection_secret: true,
        rules: &[
            (
                "kubevirt.io",
                &["virtualmachines", "virtualmachineinstances"],
                VM_VERBS,
            ),
            (
                "subresources.kubevirt.io",
                &[
                    "virtualmachines/start",
                    "virtualmachines/stop",
                    "virtualmachines/restart",
                ],
                &["update"],
            ),
        ],
    },
    TaskDefinition {
        name: "generate-ssh-keys",
        display_name: "KubeVirt generate ssh keys",
        description: "Generates an SSH key pair: the public key into a Secret a VM's accessCredentials can name, the private key into a Secret execute-in-vm connects with.",
        params: &[
            string(
                "publicKeySecretName",
                Some(""),
                "A new or existing Secret to add the public key to; a new one with a generated name when empty.",
            ),
            string(
                "publicKeySecretNamespace",
                Some(""),
                "Its namespace; the TaskRun's when empty.",
            ),
            string(
                "privateKeySecretName",
                Some(""),
                "A new Secret for the private key; generated name when empty.",
            ),
            string(
                "privateKeySecretNamespace",
                Some(""),
                "Its namespace; the TaskRun's when empty.",
            ),
            array(
                "privateKeyConnectionOptions",
                "KEY:VALUE connection options stored beside the private key, e.g. user:fedora, disable-strict-host-key-checking:true.",
            ),
            string(
                "additionalSSHKeygenOptions",
                Some(""),
                "More ssh-keygen options.",
            ),
        ],
        results: &[
            ("publicKeySecretName", "Name of the public key's Secret."),
            (
                "publicKeySecretNamespace",
                "Namespace of the public key's Secret.",
            ),
            ("privateKeySecretName", "Name of the private key's Secret."),
            (
                "privateKeySecretNamespace",
                "Namespace of the private key's Secret.",
            ),
        ],
        step: "generate-ssh-keys",
        args: &["--", "$(params.privateKeyConnectionOptions[*])"],
        env: &[
            ("PUBLIC_KEY_SECRET_NAME", "publicKeySecretName"),
            ("PUBLIC_KEY_SECRET_NAMESPACE", "publicKeySecretNamespace"),
            ("PRIVATE_KEY_SECRET_NAME", "privateKeySecretName"),
            ("PRIVATE_KEY_SECRET_NAMESPACE", "privateKeySecretNamespace"),
            (
                "ADDITIONAL_SSH_KEYGEN_OPTIONS",
                "additionalSSHKeygenOptions",
            ),
        ],
        pod_env: false,
        connection_secret: false,
        rules: &[(
            "",
            &["secrets"],
            &["get", "list", "create", "patch", "delete"],
        )],
    },
];

/// The task named `name`.
pub fn task(name: &str) -> Option<&'static TaskDefinition> {
    TASKS.iter().find(|t| t.name == name)
}

impl TaskDefinition {
    /// The Task (`tekton.dev/v1`) whose step runs `image`.
    pub fn task_object(&self, image: &str) -> Value {
        json!({
            "apiVersion": "tekton.dev/v1",
            "kind": "Task",
            "metadata": {
                "name": self.name,
                "labels": {"app.kubernetes.io/part-of": "ferrovirt"},
                "annotations": {
                    "tekton.dev/pipelines.minVersion": "0.43.0",
                    "tekton.dev/categories": "Automation",
                    "tekton.dev/tags": "kubevirt",
                    "tekton.dev/displayName": self.display_name,
                    "tekton.dev/platforms": "linux/amd64",
                },
            },
            "spec": self.spec(image),
        })
    }

    fn spec(&self, image: &str) -> Value {
        let mut spec = json!({
            "description": self.description,
            "params": self.params.iter().map(param).collect::<Vec<_>>(),
            "steps": [self.step_object(image)],
        });
        if !self.results.is_empty() {
            spec["results"] = self
                .results
                .iter()
                .map(|(name, description)| json!({"name": name, "description": description}))
                .collect();
        }
        if self.connection_secret {
            spec["volumes"] = json!([{"name": "connectionsecret",
                "secret": {"secretName": "$(params.secretName)", "optional": true}}]);
        }
        spec
    }

    fn step_object(&self, image: &str) -> Value {
        let mut env: Vec<Value> = self
            .env
            .iter()
            .map(|(name, param)| json!({"name": name, "value": format!("$(params.{param})")}))
            .collect();
        if self.pod_env {
            for (name, field) in [
                ("POD_NAME", "metadata.name"),
                ("POD_NAMESPACE", "metadata.namespace"),
            ] {
                env.push(json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": field}}}));
            }
        }
        let mut step = json!({
            "name": self.step,
            "image": image,
            "command": ["ferrovirt", "task", self.name],
            "env": env,
            "securityContext": {
                "runAsNonRoot": true,
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        });
        if !self.args.is_empty() {
            step["args"] = json!(self.args);
        }
        if self.connection_secret {
            step["volumeMounts"] = json!([{"name": "connectionsecret",
                "mountPath": "/data/connectionsecret/", "readOnly": true}]);
        }
        step
    }

    /// The ClusterRole, ServiceAccount and RoleBinding named `<task>-task`, as upstream
    /// names them; the RoleBinding binds in the namespace the objects are applied to.
    pub fn rbac_objects(&self) -> Vec<Value> {
        let name = format!("{}-task", self.name);
        let rules: Vec<Value> = self
            .rules
            .iter()
            .map(|(group, resources, verbs)| {
                json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
            })
            .collect();
        vec![
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": name}, "rules": rules}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": name},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                   "subjects": [{"kind": "ServiceAccount", "name": name}]}),
        ]
    }
}

fn param(p: &Param) -> Value {
    let mut value = json!({
        "name": p.name,
        "description": p.description,
        "type": if p.array { "array" } else { "string" },
    });
    match (p.default, p.array) {
        (Some(_), true) => value["default"] = json!([]),
        (Some(default), false) => value["default"] = json!(default),
        (None, _) => {}
    }
    value
}

/// The files of `deploy/tekton/`: path (relative to it) to contents.
pub fn deploy_files(image: &str) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for task in TASKS {
        let yaml = serde_saphyr::to_string(&task.task_object(image)).unwrap_or_default();
        files.push((format!("tasks/{}.yaml", task.name), yaml));
        let rbac: Vec<String> = task
            .rbac_objects()
            .iter()
            .map(|o| serde_saphyr::to_string(o).unwrap_or_default())
            .collect();
        files.push((format!("rbac/{}.yaml", task.name), rbac.join("---\n")));
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deploy_dir() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/tekton")
    }

    /// `deploy/tekton/` is what the catalogue generates; `FERROVIRT_WRITE_DEPLOY=1` rewrites it.
    #[test]
    fn deploy_tekton_is_current() {
        let dir = deploy_dir();
        let mut stale = Vec::new();
        for (path, contents) in deploy_files(DEFAULT_IMAGE) {
            let file = dir.join(&path);
            if std::env::var_os("FERROVIRT_WRITE_DEPLOY").is_some() {
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, &contents).unwrap();
            } else if std::fs::read_to_string(&file).ok().as_deref() != Some(contents.as_str()) {
                stale.push(path);
            }
        }
        assert!(
            stale.is_empty(),
            "stale in deploy/tekton: {stale:?}; regenerate with FERROVIRT_WRITE_DEPLOY=1 cargo test -p ferrovirt-tekton deploy_tekton_is_current"
        );
    }

    #[test]
    fn every_env_var_carries_a_declared_param_and_every_param_reaches_the_step() {
        for task in TASKS {
            let names: Vec<&str> = task.params.iter().map(|p| p.name).collect();
            for (env, param) in task.env {
                assert!(names.contains(param), "{}: {env} names {param}", task.name);
            }
            for p in task.params {
                let used = task.env.iter().any(|(_, q)| q == &p.name)
                    || task
                        .args
                        .iter()
                        .any(|a| a.contains(&format!("params.{}", p.name)))
                    || (p.name == "secretName" && task.connection_secret);
                assert!(used, "{}: param {} reaches nothing", task.name, p.name);
            }
        }
    }

    #[test]
    fn tasks_run_their_own_command() {
        let task = task("cleanup-vm").unwrap().task_object("img");
        let step = &task["spec"]["steps"][0];
        assert_eq!(step["command"], json!(["ferrovirt", "task", "cleanup-vm"]));
        assert_eq!(step["args"][0], "--stop");
        assert_eq!(task["spec"]["params"][6]["default"], json!([]));
        assert!(task["spec"].get("results").is_none());
    }
}
