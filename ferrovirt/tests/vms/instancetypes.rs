//! Instancetypes and preferences on `ferrovirt up`, as a KubeVirt user meets them: a VM
//! sized by a cluster instancetype and shaped by a preference, both inferred from the
//! labels of the DataSource it clones its disk from, boots with the instancetype's vCPUs and
//! memory on QEMU's command line and the preference's disk bus; the revisions keep a later
//! edit of the instancetype from reaching it across a restart; bad input is refused (or
//! reported) with KubeVirt's words; a VM naming common-instancetypes' `u1.small` and `cirros`
//! boots with them.

use super::*;

const INSTANCETYPE: &str = "apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: ft.small
spec:
  cpu:
    guest: 2
  memory:
    guest: 256Mi
";

const PREFERENCE: &str = "apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: ft.linux
spec:
  devices:
    preferredDiskBus: virtio
  preferredTerminationGracePeriodSeconds: 20
";

/// A VM whose root disk clones DataSource `golden`, with `matchers` (YAML under `spec:`)
/// and `domain` (YAML under `domain:`).
fn vm(name: &str, matchers: &str, domain: &str) -> String {
    format!(
        "apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Always
{matchers}
  dataVolumeTemplates:
  - metadata:
      name: {name}-root
    spec:
      sourceRef:
        kind: DataSource
        name: golden
      storage:
        resources:
          requests:
            storage: 128Mi
  template:
    spec:
      domain:
        devices: {{}}
{domain}
      volumes:
      - name: root
        dataVolume:
          name: {name}-root
"
    )
}

/// Applies `yaml`, expecting a refusal that mentions `words`.
fn refused(platform: &Platform, yaml: &str, words: &str) {
    let out = platform.kubectl(&["apply", "-f", "-"], Some(yaml));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "applied, expected a refusal with {words:?}"
    );
    assert!(stderr.contains(words), "expected {words:?} in: {stderr}");
}

fn arg_after<'a>(args: &'a [String], flag: &str) -> &'a str {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map_or("", String::as_str)
}

#[test]
fn a_vm_sized_by_an_inferred_instancetype_boots_with_it_and_keeps_it() {
    let _booting = one_at_a_time();
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("instancetypes");
    // common-instancetypes are there on a bare platform, as with a default KubeVirt CR.
    let u1_small = platform.wait_json(
        &["get", "virtualmachineclusterinstancetype", "u1.small"],
        Duration::from_secs(60),
        "common-instancetypes' u1.small is not deployed",
        |_| true,
    );
    assert_eq!(
        (
            &u1_small["spec"]["cpu"]["guest"],
            &u1_small["spec"]["memory"]["guest"]
        ),
        (&serde_json::json!(1), &serde_json::json!("2Gi"))
    );
    platform.apply(INSTANCETYPE);
    platform.apply(PREFERENCE);
    platform.apply(&platform::http_datavolume(
        "golden",
        &server.url(fast_guest_qcow2()),
        "128Mi",
        "",
    ));
    platform.apply(
        "apiVersion: cdi.kubevirt.io/v1beta1
kind: DataSource
metadata:
  name: golden
  labels:
    instancetype.kubevirt.io/default-instancetype: ft.small
    instancetype.kubevirt.io/default-preference: ft.linux
spec:
  source:
    pvc:
      name: golden
      namespace: default
",
    );

    // Bad input, with KubeVirt's words.
    refused(
        &platform,
        &vm(
            "clash",
            "  instancetype:\n    name: ft.small",
            "        cpu:\n          sockets: 2",
        ),
        "VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type",
    );
    platform.apply(
        "apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: ft.big
spec:
  requirements:
    cpu:
      guest: 4
",
    );
    refused(
        &platform,
        &vm(
            "small",
            "  instancetype:\n    name: ft.small\n  preference:\n    name: ft.big",
            "",
        ),
        "failure checking preference requirements: insufficient CPU resources of 2 vCPU provided by instance type, preference requires 4 vCPU",
    );
    let container_disk = "apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: nolabels
spec:
  runStrategy: Halted
  instancetype:
    inferFromVolume: root
    inferFromVolumeFailurePolicy: POLICY
  template:
    spec:
      domain:
        devices: {}
      volumes:
      - name: root
        containerDisk:
          image: example.org/disk:latest
";
    refused(
        &platform,
        &container_disk.replace("POLICY", "Reject"),
        "unable to infer defaults from volume root as type is not supported",
    );
    platform.apply(&container_disk.replace("POLICY", "Ignore"));
    let ignored = platform.json(&["get", "vm", "nolabels"]).expect("the VM");
    assert!(ignored["spec"].get("instancetype").is_none(), "{ignored:#}");
    refused(
        &platform,
        &container_disk.replace("POLICY", "Sometimes"),
        "Invalid value 'Sometimes' for InferFromVolumeFailurePolicy",
    );
    platform.apply(&vm("ghost", "  instancetype:\n    name: nope", ""));
    let ghost = platform.wait_json(
        &["get", "vm", "ghost"],
        STOP,
        "the VM did not report its missing instancetype",
        |vm| condition(vm, "Failure").is_some(),
    );
    let failure = condition(&ghost, "Failure").expect("Failure");
    assert_eq!(failure["reason"], "FailedFindInstancetype", "{ghost:#}");
    assert!(
        failure["message"]
            .as_str()
            .unwrap_or_default()
            .contains("\"nope\" not found"),
        "{ghost:#}"
    );
    assert_gone(&platform, "vmi", "ghost");

    // Inferred from the DataSource's labels, then booted with them.
    platform.wait_phase("default", "golden", "Succeeded", BOOT);
    platform.apply(&vm(
        "sized",
        "  instancetype:\n    inferFromVolume: root\n  preference:\n    inferFromVolume: root",
        "",
    ));
    let stored = platform.json(&["get", "vm", "sized"]).expect("the VM");
    assert_eq!(
        stored["spec"]["instancetype"],
        serde_json::json!({"name": "ft.small", "kind": "virtualmachineclusterinstancetype"})
    );
    assert_eq!(stored["spec"]["preference"]["name"], "ft.linux");
    let running = |platform: &Platform| {
        platform.wait_json(&["get", "vmi", "sized"], BOOT, "the VMI did not run", |v| {
            vmi_phase(v) == "Running"
        })
    };
    let vmi = running(&platform);
    let spec = &vmi["spec"]["domain"];
    assert_eq!(spec["cpu"]["sockets"], 2, "{vmi:#}");
    assert_eq!(spec["memory"]["guest"], "256Mi", "{vmi:#}");
    assert_eq!(
        spec["devices"]["disks"][0]["disk"]["bus"], "virtio",
        "{vmi:#}"
    );
    assert_eq!(vmi["spec"]["terminationGracePeriodSeconds"], 20);
    assert_eq!(
        vmi["metadata"]["annotations"]["kubevirt.io/cluster-instancetype-name"],
        "ft.small"
    );
    let args = qemu_command_line("sized").expect("the VMI's QEMU");
    assert!(arg_after(&args, "-smp").starts_with('2'), "{args:?}");
    assert_eq!(arg_after(&args, "-m"), "256M", "{args:?}");
    let mut console = Console::open(&platform, "sized");
    console.run(
        "echo CPUS-$(grep -c ^processor /proc/cpuinfo)-END",
        "CPUS-2-END",
    );
    drop(console);

    let stored = platform.json(&["get", "vm", "sized"]).expect("the VM");
    let revision = stored["status"]["instancetypeRef"]["controllerRevisionRef"]["name"]
        .as_str()
        .expect("a revision in the VM's status")
        .to_string();
    assert!(
        revision.starts_with("sized-ft.small-v1beta1-"),
        "{revision}"
    );
    let kept = platform
        .json(&["get", "controllerrevision", &revision])
        .expect("the revision");
    assert_eq!(kept["data"]["spec"]["cpu"]["guest"], 2);
    assert_eq!(
        kept["metadata"]["labels"]["instancetype.kubevirt.io/object-kind"],
        "VirtualMachineClusterInstancetype"
    );

    // An edit of the instancetype does not reach the VM, not even across a restart.
    platform.ok(&[
        "patch",
        "virtualmachineclusterinstancetype",
        "ft.small",
        "--type=merge",
        "-p",
        r#"{"spec":{"cpu":{"guest":1}}}"#,
    ]);
    let first = vmi["metadata"]["uid"].clone();
    verb(&platform, &["restart", "sized"]).expect("restart");
    let again = platform.wait_json(
        &["get", "vmi", "sized"],
        BOOT,
        "the VMI was not replaced and run",
        |v| v["metadata"]["uid"] != first && vmi_phase(v) == "Running",
    );
    assert_eq!(again["spec"]["domain"]["cpu"]["sockets"], 2, "{again:#}");
    platform.ok(&["delete", "vm", "sized", "--timeout=120s"]);
    // The revision is the VM's: collected with it.
    let deadline = Instant::now() + STOP;
    while platform
        .json(&["get", "controllerrevision", &revision])
        .is_some()
    {
        assert!(Instant::now() < deadline, "the revision outlived its VM");
        std::thread::sleep(Duration::from_millis(250));
    }

    // Sized by common-instancetypes' own u1.small and shaped by their cirros preference, as
    // a user names them.
    platform.apply(&vm(
        "sized-by-u1",
        "  instancetype:\n    name: u1.small\n  preference:\n    name: cirros",
        "",
    ));
    let vmi = platform.wait_json(
        &["get", "vmi", "sized-by-u1"],
        BOOT,
        "the VMI sized by u1.small did not run",
        |v| vmi_phase(v) == "Running",
    );
    let spec = &vmi["spec"]["domain"];
    assert_eq!(spec["cpu"]["sockets"], 1, "{vmi:#}");
    assert_eq!(spec["memory"]["guest"], "2Gi", "{vmi:#}");
    assert_eq!(
        spec["devices"]["disks"][0]["disk"]["bus"], "virtio",
        "{vmi:#}"
    );
    assert!(spec["devices"]["rng"].is_object(), "{vmi:#}");
    let args = qemu_command_line("sized-by-u1").expect("the VMI's QEMU");
    assert!(arg_after(&args, "-smp").starts_with('1'), "{args:?}");
    assert_eq!(arg_after(&args, "-m"), "2048M", "{args:?}");
    assert!(
        args.iter().any(|a| a.contains("virtio-rng-pci")),
        "the preference's rng is not on QEMU's command line: {args:?}"
    );
    let mut console = Console::open(&platform, "sized-by-u1");
    console.run(
        "echo CPUS-$(grep -c ^processor /proc/cpuinfo)-END",
        "CPUS-1-END",
    );
}
