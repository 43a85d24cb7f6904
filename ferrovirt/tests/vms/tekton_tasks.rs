//! The KubeVirt tekton tasks on `ferrovirt up`, each run as its Task's step runs it (the
//! step's environment and arguments, results in a results directory, the exit code and
//! stdout checked): generate-ssh-keys makes the connection Secret, modify-data-object
//! imports a disk over HTTP and waits for it, create-vm-from-manifest makes and starts a VM
//! that gets the public key by accessCredentials, wait-for-vmi-status sees it run,
//! execute-in-vm runs commands in the guest over SSH (one fails, with upstream's code), and
//! cleanup-vm stops and deletes it. Bad input ends with upstream's codes and words. Then the
//! same Tasks as a PipelineRun: an import, a VM on it, Running, cleanup in `finally`; and a
//! PipelineRun of all six on the Debian guest, whose cloud-init installs the key and whose
//! sshd runs the command, once succeeding and once failing.

use std::path::Path;

use base64::Engine;

use super::*;

/// What a task run left: its exit code, stdout and stderr.
struct TaskRun {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `ferrovirt task NAME ARGS` with `env`, results under `results`.
fn task(
    platform: &Platform,
    results: &Path,
    name: &str,
    env: &[(&str, &str)],
    args: &[&str],
) -> TaskRun {
    let mut command = ferrovirt(platform);
    command
        .args(["task", name])
        .args(args)
        .env("FERROVIRT_TASK_RESULTS_DIR", results)
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    let out = command.output().expect("ferrovirt task");
    TaskRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn result(results: &Path, name: &str) -> String {
    std::fs::read_to_string(results.join(name)).unwrap_or_else(|e| panic!("result {name}: {e}"))
}

fn assert_code(run: &TaskRun, code: i32, words: &str) {
    assert!(
        run.code == code && run.stderr.contains(words),
        "expected exit {code} with {words:?}; got {}\nstdout:\n{}\nstderr:\n{}",
        run.code,
        run.stdout,
        run.stderr
    );
}

/// The files of Secret `name`, as a Secret volume mounts them, in `dir`.
fn mount_secret(platform: &Platform, name: &str, dir: &Path) {
    let secret = platform.json(&["get", "secret", name]).expect("the Secret");
    std::fs::create_dir_all(dir).expect("mount dir");
    for (key, value) in secret["data"].as_object().expect("data") {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value.as_str().unwrap_or_default())
            .expect("base64");
        std::fs::write(dir.join(key), bytes).expect("write");
    }
}

fn vm_manifest(url: &str, public_key_secret: &str) -> String {
    let vm = vm_yaml("tasked", "Halted", url).replace(
        "          disks:\n          - name: root\n            disk:\n              bus: virtio\n",
        "          disks:\n          - name: root\n            disk:\n              bus: virtio\n          - name: seed\n            disk:\n              bus: virtio\n          interfaces:\n          - name: default\n            masquerade: {}\n            ports:\n            - port: 22\n",
    );
    format!(
        "{vm}      - name: seed
        cloudInitNoCloud:
          userData: \"#cloud-config\"
      networks:
      - name: default
        pod: {{}}
      accessCredentials:
      - sshPublicKey:
          source:
            secret:
              secretName: {public_key_secret}
          propagationMethod:
            noCloud: {{}}
"
    )
}

#[test]
fn the_tekton_tasks_run_a_vm_from_keys_to_cleanup() {
    let _booting = one_at_a_time();
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("tekton-tasks");
    let results_dir = ferrovirt_tests::TempDir::new("task-results");
    let results = results_dir.path();
    let url = server.url(fast_guest_qcow2());

    // generate-ssh-keys: a public key Secret and a connection Secret in execute-in-vm's format.
    let keys = task(
        &platform,
        results,
        "generate-ssh-keys",
        &[
            ("PRIVATE_KEY_SECRET_NAME", "conn"),
            ("ADDITIONAL_SSH_KEYGEN_OPTIONS", "-t ed25519"),
        ],
        &["--", "user:root", "disable-strict-host-key-checking:true"],
    );
    assert_code(&keys, 0, "");
    let public = result(results, "publicKeySecretName");
    assert!(public.starts_with("public-key-"), "{public}");
    assert_eq!(result(results, "privateKeySecretName"), "conn");
    assert_eq!(result(results, "privateKeySecretNamespace"), "default");
    let conn = platform.json(&["get", "secret", "conn"]).expect("conn");
    assert_eq!(conn["type"], "kubernetes.io/ssh-auth");
    let again = task(
        &platform,
        results,
        "generate-ssh-keys",
        &[("PRIVATE_KEY_SECRET_NAME", "conn")],
        &[],
    );
    assert_code(&again, 253, "conn secret already exists");

    // modify-data-object: an HTTP import, waited for.
    let dv = platform::http_datavolume("golden", &url, "128Mi", "");
    let imported = task(
        &platform,
        results,
        "modify-data-object",
        &[
            ("DATA_OBJECT_MANIFEST", &dv),
            ("WAIT_FOR_SUCCESS", "true"),
            ("TIMEOUT", "10m"),
        ],
        &["--output=yaml"],
    );
    assert_code(&imported, 0, "");
    assert!(
        imported
            .stdout
            .starts_with("apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\n"),
        "{}",
        imported.stdout
    );
    assert_eq!(result(results, "name"), "golden");
    let phase = platform.json(&["get", "dv", "golden"]).expect("dv");
    assert_eq!(phase["status"]["phase"], "Succeeded");
    let wrong_kind = task(
        &platform,
        results,
        "modify-data-object",
        &[(
            "DATA_OBJECT_MANIFEST",
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: x}\n",
        )],
        &[],
    );
    assert_code(
        &wrong_kind,
        255,
        "could not identify data object, wrong group or kind",
    );
    let deleted = task(
        &platform,
        results,
        "modify-data-object",
        &[
            ("DELETE_OBJECT", "true"),
            ("DELETE_OBJECT_KIND", "DataVolume"),
            ("DELETE_OBJECT_NAME", "golden"),
        ],
        &[],
    );
    assert_code(&deleted, 0, "");

    // create-vm-from-manifest: made Halted, then started by startVM.
    let wrong = task(
        &platform,
        results,
        "create-vm-from-manifest",
        &[(
            "VM_MANIFEST",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
        )],
        &[],
    );
    assert_code(
        &wrong,
        2,
        "could not read VM manifest: v1 Pod is not a VirtualMachine",
    );
    let neither = task(&platform, results, "create-vm-from-manifest", &[], &[]);
    assert_code(
        &neither,
        2,
        "only one of vm-manifest or virtctl should be specified",
    );
    let created = task(
        &platform,
        results,
        "create-vm-from-manifest",
        &[
            ("VM_MANIFEST", &vm_manifest(&url, &public)),
            ("START_VM", "true"),
        ],
        &["--output=yaml"],
    );
    assert_code(&created, 0, "");
    assert!(
        created
            .stdout
            .contains("apiVersion: kubevirt.io/v1\nkind: VirtualMachine\n"),
        "{}",
        created.stdout
    );
    assert_eq!(result(results, "name"), "tasked");
    let vm = platform.json(&["get", "vm", "tasked"]).expect("vm");
    assert_eq!(
        vm["spec"]["template"]["metadata"]["labels"]["vm.kubevirt.io/name"],
        "tasked"
    );

    // wait-for-vmi-status: a bad condition, then Running.
    let bad = task(
        &platform,
        results,
        "wait-for-vmi-status",
        &[
            ("VMI_NAME", "tasked"),
            ("SUCCESS_CONDITION", "status.phase in Running"),
        ],
        &[],
    );
    assert_code(&bad, 255, "success-condition: could not parse condition");
    let running = task(
        &platform,
        results,
        "wait-for-vmi-status",
        &[
            ("VMI_NAME", "tasked"),
            ("SUCCESS_CONDITION", "status.phase == Running"),
            ("FAILURE_CONDITION", "status.phase in (Failed, Unknown)"),
        ],
        &[],
    );
    assert_code(&running, 0, "");

    // The busybox guest has no cloud-init: it installs the NoCloud key itself and starts sshd.
    let mut console = Console::open(&platform, "tasked");
    console.run(
        "mount -t iso9660 /dev/vdb /mnt && grep -o 'ssh-ed25519 [^\"]*' /mnt/meta-data > /root/.ssh/authorized_keys && dropbear -R -p 22 && echo SSHD-\"UP\"",
        "SSHD-UP",
    );
    drop(console);

    // execute-in-vm over SSH with the connection Secret, as the Task mounts it.
    let secret_dir = results.join("connectionsecret");
    mount_secret(&platform, "conn", &secret_dir);
    let secret_env = [
        ("VM_NAME", "tasked"),
        ("CONNECTION_SECRET_NAME", "conn"),
        (
            "FERROVIRT_CONNECTION_SECRET_DIR",
            secret_dir.to_str().expect("utf-8"),
        ),
    ];
    let hello = task(
        &platform,
        results,
        "execute-in-vm",
        &secret_env,
        &["--", "echo", "hello-from-$(hostname)"],
    );
    assert_code(&hello, 0, "");
    assert!(
        hello.stdout.contains("hello-from-fastguest"),
        "{}",
        hello.stdout
    );
    let failing = task(
        &platform,
        results,
        "execute-in-vm",
        &secret_env,
        &["--", "exit", "3"],
    );
    assert_code(&failing, 253, "exit status 3");

    // cleanup-vm: stopped and deleted.
    let cleanup = task(
        &platform,
        results,
        "cleanup-vm",
        &[("VM_NAME", "tasked")],
        &[
            "--stop",
            "true",
            "--delete",
            "true",
            "--timeout",
            "5m",
            "--",
        ],
    );
    assert_code(&cleanup, 0, "");
    assert_gone(&platform, "vm", "tasked");
}

/// Waits until PipelineRun `name` has ended (its Succeeded condition True or False).
fn pipeline_run_end(platform: &Platform, name: &str, limit: Duration) -> Value {
    let start = Instant::now();
    loop {
        let run = platform
            .json(&["get", "pipelinerun", name])
            .expect("the run");
        let status = &run["status"]["conditions"][0]["status"];
        if status == "True" || status == "False" {
            return run;
        }
        assert!(
            start.elapsed() < limit,
            "the PipelineRun did not end within {limit:?}: {run:#}\n{}",
            platform.log()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The results of TaskRun `name`, by name.
fn task_results(platform: &Platform, name: &str) -> serde_json::Map<String, Value> {
    let run = platform
        .json(&["get", "taskrun", name])
        .unwrap_or_else(|| panic!("no TaskRun {name}"));
    run["status"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| Some((r["name"].as_str()?.to_owned(), r["value"].clone())))
        .collect()
}

/// Applies the Tasks `tasks` and their RBAC as `deploy/tekton/` has them.
fn deploy_tasks(platform: &Platform, tasks: &[&str]) {
    for task in tasks {
        platform.apply(&deploy(&format!("tasks/{task}.yaml")));
        platform.apply(&deploy(&format!("rbac/{task}.yaml")));
    }
}

fn deploy(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/tekton")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A pipeline of the project's Tasks as `deploy/tekton/` has them, each under its own service
/// account: keys, an HTTP import waited for, a VM on the imported claim that gets the public
/// key by accessCredentials (both names passed on as results), Running; cleanup in `finally`.
const VM_PIPELINE: &str = r##"
apiVersion: tekton.dev/v1
kind: Pipeline
metadata:
  name: vm-from-import
spec:
  params:
  - name: url
  tasks:
  - name: keys
    taskRef:
      name: generate-ssh-keys
  - name: import
    taskRef:
      name: modify-data-object
    params:
    - name: waitForSuccess
      value: "true"
    - name: manifest
      value: |
        apiVersion: cdi.kubevirt.io/v1beta1
        kind: DataVolume
        metadata:
          name: piped-root
        spec:
          source:
            http:
              url: "$(params.url)"
          storage:
            resources:
              requests:
                storage: 128Mi
  - name: create
    taskRef:
      name: create-vm-from-manifest
    params:
    - name: startVM
      value: "true"
    - name: manifest
      value: |
        apiVersion: kubevirt.io/v1
        kind: VirtualMachine
        metadata:
          name: piped
        spec:
          runStrategy: Halted
          template:
            spec:
              terminationGracePeriodSeconds: 5
              domain:
                resources:
                  requests:
                    memory: 256Mi
                devices:
                  disks:
                  - name: root
                    disk:
                      bus: virtio
                  - name: seed
                    disk:
                      bus: virtio
              volumes:
              - name: root
                persistentVolumeClaim:
                  claimName: $(tasks.import.results.name)
              - name: seed
                cloudInitNoCloud:
                  userData: "#cloud-config"
              accessCredentials:
              - sshPublicKey:
                  source:
                    secret:
                      secretName: $(tasks.keys.results.publicKeySecretName)
                  propagationMethod:
                    noCloud: {}
  - name: wait
    taskRef:
      name: wait-for-vmi-status
    params:
    - name: vmiName
      value: $(tasks.create.results.name)
    - name: successCondition
      value: status.phase == Running
    - name: failureCondition
      value: status.phase in (Failed, Unknown)
  finally:
  - name: cleanup
    taskRef:
      name: cleanup-vm
    params:
    - name: vmName
      value: $(tasks.create.results.name)
    - name: delete
      value: "true"
"##;

#[test]
fn a_pipelinerun_imports_a_disk_runs_a_vm_on_it_and_cleans_up() {
    let _booting = one_at_a_time();
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("tekton-pipeline");
    let tasks = [
        "generate-ssh-keys",
        "modify-data-object",
        "create-vm-from-manifest",
        "wait-for-vmi-status",
        "cleanup-vm",
    ];
    deploy_tasks(&platform, &tasks);
    platform.apply(VM_PIPELINE);
    let accounts: String = [
        ("keys", "generate-ssh-keys"),
        ("import", "modify-data-object"),
        ("create", "create-vm-from-manifest"),
        ("wait", "wait-for-vmi-status"),
        ("cleanup", "cleanup-vm"),
    ]
    .iter()
    .map(|(task, sa)| format!("  - pipelineTaskName: {task}\n    serviceAccountName: {sa}-task\n"))
    .collect();
    platform.apply(&format!(
        "apiVersion: tekton.dev/v1
kind: PipelineRun
metadata:
  name: run
spec:
  pipelineRef:
    name: vm-from-import
  params:
  - name: url
    value: \"{}\"
  taskRunSpecs:
{accounts}",
        server.url(fast_guest_qcow2())
    ));
    let run = pipeline_run_end(&platform, "run", Duration::from_secs(600));
    let condition = &run["status"]["conditions"][0];
    assert_eq!(condition["reason"], "Succeeded", "{run:#}");
    assert_eq!(
        condition["message"],
        "Tasks Completed: 5 (Failed: 0, Cancelled 0), Skipped: 0"
    );
    let result =
        |task: &str, name: &str| task_results(&platform, &format!("run-{task}"))[name].clone();
    assert_eq!(result("import", "name"), "piped-root");
    assert_eq!(result("create", "name"), "piped");
    let wait = platform
        .json(&["get", "taskrun", "run-wait"])
        .expect("wait");
    assert_eq!(
        wait["spec"]["serviceAccountName"],
        "wait-for-vmi-status-task"
    );
    assert_eq!(wait["spec"]["params"][0]["value"], "piped");
    // cleanup-vm in `finally` stopped and deleted the VM; the imported disk stays.
    assert_gone(&platform, "vm", "piped");
    assert!(platform.json(&["get", "dv", "piped-root"]).is_some());
}

/// A pipeline of all six Tasks on a guest with cloud-init and sshd: keys for user `debian`,
/// the DataVolume `disk` (an import or a clone) waited for, a VM on it that gets the public
/// key by accessCredentials through the cloud-init source `cloudInit` (`cloudInitNoCloud` or
/// `cloudInitConfigDrive`, propagation `propagation`), Running, `command` over SSH; the VM
/// stopped and deleted in `finally`.
const SSH_PIPELINE: &str = r##"
apiVersion: tekton.dev/v1
kind: Pipeline
metadata:
  name: vm-ssh
spec:
  params:
  - name: disk
  - name: vmName
  - name: cloudInit
  - name: propagation
  - name: command
    type: array
  tasks:
  - name: keys
    taskRef:
      name: generate-ssh-keys
    params:
    - name: privateKeyConnectionOptions
      value:
      - user:debian
      - disable-strict-host-key-checking:true
  - name: import
    taskRef:
      name: modify-data-object
    params:
    - name: waitForSuccess
      value: "true"
    - name: manifest
      value: $(params.disk)
  - name: create
    taskRef:
      name: create-vm-from-manifest
    params:
    - name: startVM
      value: "true"
    - name: manifest
      value: |
        apiVersion: kubevirt.io/v1
        kind: VirtualMachine
        metadata:
          name: $(params.vmName)
        spec:
          runStrategy: Halted
          template:
            spec:
              terminationGracePeriodSeconds: 30
              domain:
                cpu:
                  cores: 2
                resources:
                  requests:
                    memory: 1Gi
                devices:
                  disks:
                  - name: root
                    disk:
                      bus: virtio
                  - name: cloudinit
                    disk:
                      bus: virtio
                  interfaces:
                  - name: default
                    masquerade: {}
                    ports:
                    - port: 22
              networks:
              - name: default
                pod: {}
              volumes:
              - name: root
                persistentVolumeClaim:
                  claimName: $(tasks.import.results.name)
              - name: cloudinit
                $(params.cloudInit):
                  userData: |
                    #cloud-config
                    manage_etc_hosts: true
              accessCredentials:
              - sshPublicKey:
                  source:
                    secret:
                      secretName: $(tasks.keys.results.publicKeySecretName)
                  propagationMethod:
                    $(params.propagation): {}
  - name: wait
    taskRef:
      name: wait-for-vmi-status
    params:
    - name: vmiName
      value: $(tasks.create.results.name)
    - name: successCondition
      value: status.phase == Running
    - name: failureCondition
      value: status.phase in (Failed, Unknown)
  - name: execute
    runAfter:
    - wait
    taskRef:
      name: execute-in-vm
    params:
    - name: vmName
      value: $(tasks.create.results.name)
    - name: secretName
      value: $(tasks.keys.results.privateKeySecretName)
    - name: command
      value:
      - $(params.command[*])
  finally:
  - name: cleanup
    taskRef:
      name: cleanup-vm
    params:
    - name: vmName
      value: $(tasks.create.results.name)
    - name: delete
      value: "true"
"##;

/// The pipeline tasks of [`SSH_PIPELINE`] with the Task each runs.
const SSH_PIPELINE_TASKS: [(&str, &str); 6] = [
    ("keys", "generate-ssh-keys"),
    ("import", "modify-data-object"),
    ("create", "create-vm-from-manifest"),
    ("wait", "wait-for-vmi-status"),
    ("execute", "execute-in-vm"),
    ("cleanup", "cleanup-vm"),
];

/// A DataVolume manifest `name` of 3Gi (the Debian guest's 2 GiB and the file system's
/// overhead) from `source`, indented for a YAML block.
fn disk_manifest(name: &str, source: &str) -> String {
    format!(
        "apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: {name}
spec:
  source:
{source}  storage:
    resources:
      requests:
        storage: 3Gi
"
    )
}

/// Starts PipelineRun `name` of [`SSH_PIPELINE`] (each task under its Task's service
/// account) and waits for its end; prints how long each TaskRun took.
fn run_ssh_pipeline(
    platform: &Platform,
    name: &str,
    disk: &str,
    (cloud_init, propagation): (&str, &str),
    command: &[&str],
) -> Value {
    let accounts: String = SSH_PIPELINE_TASKS
        .iter()
        .map(|(task, sa)| {
            format!("  - pipelineTaskName: {task}\n    serviceAccountName: {sa}-task\n")
        })
        .collect();
    let quoted = |text: &str| serde_json::to_string(text).expect("a JSON string");
    let command: Vec<String> = command.iter().map(|word| quoted(word)).collect();
    platform.apply(&format!(
        "apiVersion: tekton.dev/v1
kind: PipelineRun
metadata:
  name: {name}
spec:
  pipelineRef:
    name: vm-ssh
  params:
  - name: disk
    value: {}
  - name: vmName
    value: {name}
  - name: cloudInit
    value: {cloud_init}
  - name: propagation
    value: {propagation}
  - name: command
    value: [{}]
  taskRunSpecs:
{accounts}",
        quoted(disk),
        command.join(", ")
    ));
    let start = Instant::now();
    let run = pipeline_run_end(platform, name, Duration::from_secs(1200));
    eprintln!("PipelineRun {name} ended after {:?}", start.elapsed());
    for (task, _) in SSH_PIPELINE_TASKS {
        if let Some(tr) = platform.json(&["get", "taskrun", &format!("{name}-{task}")]) {
            let status = &tr["status"];
            eprintln!(
                "  {task}: {} .. {} {}",
                status["startTime"].as_str().unwrap_or("-"),
                status["completionTime"].as_str().unwrap_or("-"),
                status["conditions"][0]["reason"].as_str().unwrap_or("-")
            );
        }
    }
    run
}

/// The log of the step of TaskRun `name`.
fn step_log(platform: &Platform, name: &str, step: &str) -> String {
    let run = platform
        .json(&["get", "taskrun", name])
        .expect("the TaskRun");
    let pod = run["status"]["podName"].as_str().expect("its pod");
    let out = platform.kubectl(&["logs", pod, "-c", &format!("step-{step}")], None);
    assert!(
        out.status.success(),
        "kubectl logs {pod}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts that TaskRun `name` ended with `reason` and that its results are exactly `names`.
fn assert_task_run(platform: &Platform, name: &str, reason: &str, names: &[&str]) {
    let run = platform
        .json(&["get", "taskrun", name])
        .expect("the TaskRun");
    assert_eq!(run["status"]["conditions"][0]["reason"], reason, "{run:#}");
    let results = task_results(platform, name);
    let mut found: Vec<&str> = results.keys().map(String::as_str).collect();
    found.sort_unstable();
    let mut expected = names.to_vec();
    expected.sort_unstable();
    assert_eq!(found, expected, "results of {name}: {run:#}");
}

/// The KubeVirt tekton tasks end to end as a pipeline on a real guest: the Debian guest's
/// disk imported over HTTP, its cloud-init installing the generated key (NoCloud) and its
/// sshd running the command, whose output is in the step's log; each TaskRun's results as
/// upstream's, the VM deleted in `finally`. Then the same pipeline with a failing command on
/// a clone of that disk (key by ConfigDrive): Failed in Tekton's words, the command's exit
/// status in execute-in-vm's log, and `finally` still deletes the VM.
#[test]
fn a_pipelinerun_runs_a_command_over_ssh_in_a_debian_vm_and_cleans_up_when_it_fails() {
    let _booting = one_at_a_time();
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("tekton-ssh");
    let tasks: Vec<&str> = SSH_PIPELINE_TASKS.iter().map(|(_, t)| *t).collect();
    deploy_tasks(&platform, &tasks);
    platform.apply(SSH_PIPELINE);

    let http = format!(
        "    http:\n      url: \"{}\"\n",
        server.url(debian_guest_qcow2())
    );
    let run = run_ssh_pipeline(
        &platform,
        "ssh-ok",
        &disk_manifest("ssh-ok-disk", &http),
        ("cloudInitNoCloud", "noCloud"),
        &["uname", "-n", "&&", "id", "-un"],
    );
    let condition = &run["status"]["conditions"][0];
    assert_eq!(condition["reason"], "Succeeded", "{run:#}");
    assert_eq!(
        condition["message"],
        "Tasks Completed: 6 (Failed: 0, Cancelled 0), Skipped: 0"
    );
    let keys = task_results(&platform, "ssh-ok-keys");
    assert!(
        keys["publicKeySecretName"]
            .as_str()
            .is_some_and(|n| n.starts_with("public-key-")),
        "{keys:?}"
    );
    assert!(
        keys["privateKeySecretName"]
            .as_str()
            .is_some_and(|n| n.starts_with("private-key-")),
        "{keys:?}"
    );
    assert_eq!(keys["publicKeySecretNamespace"], "default");
    assert_eq!(keys["privateKeySecretNamespace"], "default");
    assert_task_run(
        &platform,
        "ssh-ok-keys",
        "Succeeded",
        &[
            "publicKeySecretName",
            "publicKeySecretNamespace",
            "privateKeySecretName",
            "privateKeySecretNamespace",
        ],
    );
    assert_task_run(
        &platform,
        "ssh-ok-import",
        "Succeeded",
        &["name", "namespace"],
    );
    assert_eq!(
        task_results(&platform, "ssh-ok-import")["name"],
        "ssh-ok-disk"
    );
    assert_task_run(
        &platform,
        "ssh-ok-create",
        "Succeeded",
        &["name", "namespace"],
    );
    assert_eq!(task_results(&platform, "ssh-ok-create")["name"], "ssh-ok");
    assert_eq!(
        task_results(&platform, "ssh-ok-create")["namespace"],
        "default"
    );
    for task in ["wait", "execute", "cleanup"] {
        assert_task_run(&platform, &format!("ssh-ok-{task}"), "Succeeded", &[]);
    }
    // cloud-init set the host name from the metadata and installed the key for "debian".
    let output = step_log(&platform, "ssh-ok-execute", "execute-in-vm");
    assert!(output.contains("ssh-ok\ndebian\n"), "{output}");
    assert_gone(&platform, "vm", "ssh-ok");
    assert_gone(&platform, "vmi", "ssh-ok");

    let clone = "    pvc:\n      name: ssh-ok-disk\n      namespace: default\n";
    let run = run_ssh_pipeline(
        &platform,
        "ssh-fail",
        &disk_manifest("ssh-fail-disk", clone),
        ("cloudInitConfigDrive", "configDrive"),
        &["exit", "3"],
    );
    // Tekton v1.15 counts the tasks in the run's condition; the failed one is its TaskRun.
    let condition = &run["status"]["conditions"][0];
    assert_eq!(condition["status"], "False", "{run:#}");
    assert_eq!(condition["reason"], "Failed", "{run:#}");
    assert_eq!(
        condition["message"],
        "Tasks Completed: 6 (Failed: 1, Cancelled 0), Skipped: 0"
    );
    let execute = platform
        .json(&["get", "taskrun", "ssh-fail-execute"])
        .expect("the failed TaskRun");
    let failed = &execute["status"]["conditions"][0];
    assert_eq!(failed["reason"], "StepFailed", "{execute:#}");
    assert_eq!(
        failed["message"],
        "\"step-execute-in-vm\" exited with code 253: Error"
    );
    let output = step_log(&platform, "ssh-fail-execute", "execute-in-vm");
    assert!(output.contains("exit status 3"), "{output}");
    for task in ["keys", "import", "create", "wait", "cleanup"] {
        let tr = platform
            .json(&["get", "taskrun", &format!("ssh-fail-{task}")])
            .expect("the TaskRun");
        assert_eq!(
            tr["status"]["conditions"][0]["reason"], "Succeeded",
            "{tr:#}"
        );
    }
    assert_eq!(
        task_results(&platform, "ssh-fail-import")["name"],
        "ssh-fail-disk"
    );
    assert_gone(&platform, "vm", "ssh-fail");
    assert_gone(&platform, "vmi", "ssh-fail");
}
