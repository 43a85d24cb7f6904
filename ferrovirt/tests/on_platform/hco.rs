//! HCO on `ferrovirt up`, through kubectl: upstream's example HyperConverged becomes the
//! KubeVirt, CDI, NetworkAddonsConfig and SSP CRs with HCO's spec, each reports Available
//! and the HC aggregates them to Available/ReconcileComplete; an operand edited by hand is
//! put back; the HC's `videoConfig` feature gate reaches the KubeVirt CR and decides
//! whether virt-api admits a VM with a video device; deleting the HC while a VM exists is
//! refused with virt-operator's message inside HCO's; an HC of another name is not
//! reconciled and says why.

use crate::platform;

use std::time::{Duration, Instant};

use api::kubevirt::cluster_config::feature_gates as kubevirt_feature_gates;
use platform::{Platform, condition};
use serde_json::Value;

const NAMESPACE: &str = "kubevirt-hyperconverged";
const KUBEVIRT: &str = "kubevirt-kubevirt-hyperconverged";
const LIMIT: Duration = Duration::from_secs(120);

/// HCO's example CR (deploy/hco.cr.yaml) of its v1beta1 API.
const EXAMPLE_HC: &str = include_str!("../data/hco.cr.yaml");
/// HCO's example CR of its v1 API (upstream's deploy/hco.cr.yaml today).
const EXAMPLE_HC_V1: &str = include_str!("../data/hco.v1.cr.yaml");
/// The HC's resource at v1beta1, for the v1beta1 client's reads and patches.
const HCO_V1BETA1: &str = "hyperconvergeds.v1beta1.hco.kubevirt.io";

fn vm_with_video(name: &str) -> String {
    format!(
        r#"apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
  namespace: default
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        resources:
          requests:
            memory: 64Mi
        devices:
          video:
            type: virtio
"#
    )
}

fn is_true(object: &Value, type_: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["status"] == "True")
}

/// Sets the video gate as a v1 client does: an entry of the gate list.
fn set_video_gate(platform: &Platform, on: bool) {
    let state = if on { "Enabled" } else { "Disabled" };
    let patch =
        format!(r#"{{"spec":{{"featureGates":[{{"name":"videoConfig","state":"{state}"}}]}}}}"#);
    let hc = ["hco", "kubevirt-hyperconverged", "-n", NAMESPACE];
    platform.ok(&[&["patch"][..], &hc, &["--type=merge", "-p", &patch]].concat());
    platform.wait_json(
        &["get", "kubevirt", KUBEVIRT, "-n", NAMESPACE],
        LIMIT,
        "the gate reaching KubeVirt",
        |kv| {
            kubevirt_feature_gates(kv)
                .iter()
                .any(|g| g == "VideoConfig")
                == on
        },
    );
}

#[test]
fn the_example_hyperconverged_deploys_and_governs_its_operands() {
    let platform = Platform::start("hco");
    platform.ok_stdin(&["apply", "-n", NAMESPACE, "-f", "-"], Some(EXAMPLE_HC_V1));
    let hc = platform.wait_json(
        &["get", "hco", "kubevirt-hyperconverged", "-n", NAMESPACE],
        LIMIT,
        "the HC becoming Available",
        |hc| is_true(hc, "Available") && is_true(hc, "ReconcileComplete"),
    );
    assert_eq!(hc["status"]["systemHealthStatus"], "healthy", "{hc:#}");
    assert_eq!(
        hc["apiVersion"], "hco.kubevirt.io/v1",
        "v1 is the preferred version"
    );
    assert_eq!(
        hc["spec"]["deployment"]["uninstallStrategy"],
        "BlockUninstallIfWorkloadsExist"
    );
    // A v1beta1 client reads the same HC flat, what v1beta1 cannot say kept in an annotation.
    let beta = hc_as_v1beta1(&platform);
    assert_eq!(beta["apiVersion"], "hco.kubevirt.io/v1beta1");
    assert_eq!(
        beta["spec"]["uninstallStrategy"],
        "BlockUninstallIfWorkloadsExist"
    );
    assert_eq!(
        beta["spec"]["resourceRequirements"]["vmiCPUAllocationRatio"],
        10
    );
    assert_eq!(beta["spec"]["featureGates"]["videoConfig"], true);
    assert_eq!(
        beta["metadata"]["annotations"]["hco.kubevirt.io/v1-only-fields"],
        r#"{"deployNetworkResourcesInjector":true}"#
    );
    assert_eq!(beta["status"], hc["status"]);
    let related: Vec<&str> = hc["status"]["relatedObjects"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert_eq!(
        related,
        [
            "KubeVirt",
            "CDI",
            "NetworkAddonsConfig",
            "SSP",
            "TektonTasks"
        ],
        "{hc:#}"
    );

    // The CLI download hands out this binary as virtctl.
    let server = platform.wait_json(
        &[
            "get",
            "pod",
            "hyperconverged-cluster-cli-download",
            "-n",
            NAMESPACE,
        ],
        LIMIT,
        "the CLI download server",
        |pod| pod["status"]["phase"] == "Running",
    );
    platform.ok(&[
        "get",
        "service",
        "hyperconverged-cluster-cli-download",
        "-n",
        NAMESPACE,
    ]);
    let url = format!(
        "http://{}:8080/amd64/linux/virtctl.tar.gz",
        server["status"]["podIP"].as_str().expect("podIP")
    );
    let unpacked = platform.data_dir().join("cli-download");
    std::fs::create_dir_all(&unpacked).expect("a directory to unpack into");
    let fetched = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "curl -sSf --retry 20 --retry-connrefused --retry-delay 1 {url} | tar -xzf - -C {}",
            unpacked.display()
        ))
        .status()
        .expect("curl | tar");
    assert!(fetched.success(), "downloading {url}");
    let same = std::process::Command::new("cmp")
        .arg(unpacked.join("virtctl"))
        .arg(env!("CARGO_BIN_EXE_ferrovirt"))
        .status()
        .expect("cmp");
    assert!(same.success(), "virtctl is not this binary");
    std::fs::remove_dir_all(&unpacked).expect("removing the download");

    // Every operand has HCO's spec and its own Available.
    let kubevirt = platform
        .json(&["get", "kubevirt", KUBEVIRT, "-n", NAMESPACE])
        .expect("KubeVirt");
    assert_eq!(kubevirt["status"]["phase"], "Deployed");
    let configuration = &kubevirt["spec"]["configuration"];
    assert_eq!(
        configuration["network"]["defaultNetworkInterface"],
        "masquerade"
    );
    assert_eq!(
        kubevirt["spec"]["uninstallStrategy"],
        "BlockUninstallIfWorkloadsExist"
    );
    assert!(
        kubevirt_feature_gates(&kubevirt)
            .iter()
            .any(|g| g == "VideoConfig")
    );
    assert_eq!(
        configuration["migrations"]["parallelMigrationsPerCluster"],
        5
    );
    let cdi = platform
        .json(&["get", "cdi", "cdi-kubevirt-hyperconverged"])
        .expect("CDI");
    assert!(is_true(&cdi, "Available"), "{cdi:#}");
    assert_eq!(
        cdi["spec"]["config"]["featureGates"][0],
        "HonorWaitForFirstConsumer"
    );
    // The CDI CR's config becomes CDIConfig `config`, whose status says what is in effect;
    // the HC's storage workload resources reach the worker pods' defaults that way.
    platform.wait_json(
        &["get", "cdiconfig", "config"],
        LIMIT,
        "the CDI CR's config in CDIConfig",
        |config| config["spec"]["featureGates"][0] == "HonorWaitForFirstConsumer",
    );
    // The HC patched, then CDIConfig's status waited for until its worker CPU limit is `cpu`.
    let worker_cpu_limit = |patch: &str, what: &str, cpu: &str| {
        platform.ok(&patch_hc(patch));
        platform.wait_json(&["get", "cdiconfig", "config"], LIMIT, what, |config| {
            config["status"]["defaultPodResourceRequirements"]["limits"]["cpu"] == cpu
        })
    };
    let config = worker_cpu_limit(
        r#"{"spec":{"resourceRequirements":{"storageWorkloads":{"limits":{"cpu":"2"}}}}}"#,
        "the HC's storage workload resources in CDIConfig's status",
        "2",
    );
    assert_eq!(
        config["status"]["defaultPodResourceRequirements"]["requests"],
        serde_json::json!({"cpu": "100m", "memory": "60M"}),
        "CDI's defaults where the HC names nothing"
    );
    // Taken out of the HC, the resources go from CDIConfig's spec and its status.
    let config = worker_cpu_limit(
        r#"{"spec":{"resourceRequirements":{"storageWorkloads":null}}}"#,
        "CDI's default worker limits back in CDIConfig's status",
        "750m",
    );
    assert!(
        config["spec"]["podResourceRequirements"].is_null(),
        "{config:#}"
    );
    // The HC's vCPU allocation ratio reaches the KubeVirt CR, and from it the CPU a launcher
    // pod requests for a VMI that asks for none: two vCPUs over 4 are half a CPU. Its
    // namespace selected for automatic CPU limits, the pod is limited to its two vCPUs.
    platform.ok(&patch_hc(
        r#"{"spec":{"resourceRequirements":{"vmiCPUAllocationRatio":4,
            "autoCPULimitNamespaceLabelSelector":{"matchLabels":{"autoCpuLimit":"true"}}}}}"#,
    ));
    platform.wait_json(
        &["get", "kubevirt", KUBEVIRT, "-n", NAMESPACE],
        LIMIT,
        "the HC's CPU allocation ratio and CPU limit selector in the KubeVirt CR",
        |kv| {
            let config = &kv["spec"]["configuration"];
            config["developerConfiguration"]["cpuAllocationRatio"] == 4
                && config["autoCPULimitNamespaceLabelSelector"]["matchLabels"]["autoCpuLimit"]
                    == "true"
        },
    );
    platform.ok(&["label", "namespace", "default", "autoCpuLimit=true"]);
    platform.ok_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: shared-cpu, namespace: default}\n\
             spec:\n  terminationGracePeriodSeconds: 0\n  domain:\n    cpu: {cores: 2}\n    resources: {requests: {memory: 64Mi}}\n    devices: {}\n",
        ),
    );
    let vmi = platform
        .json(&["get", "vmi", "shared-cpu"])
        .expect("the VMI");
    let selector = format!(
        "kubevirt.io/created-by={}",
        vmi["metadata"]["uid"].as_str().expect("a uid")
    );
    let pods = platform.wait_json(
        &["get", "pods", "-l", &selector],
        LIMIT,
        "the VMI's launcher pod",
        |pods| {
            pods["items"]
                .as_array()
                .is_some_and(|items| !items.is_empty())
        },
    );
    let resources = &pods["items"][0]["spec"]["containers"][0]["resources"];
    assert_eq!(resources["requests"]["cpu"], "500m", "{resources:#}");
    assert_eq!(resources["limits"]["cpu"], "2", "{resources:#}");
    platform.ok(&["delete", "vmi", "shared-cpu", "--timeout=120s"]);
    let nac = platform
        .json(&["get", "networkaddonsconfig", "cluster"])
        .expect("NetworkAddonsConfig");
    assert!(is_true(&nac, "Available"), "{nac:#}");
    let ssp = platform
        .json(&["get", "ssp", "ssp-kubevirt-hyperconverged", "-n", NAMESPACE])
        .expect("SSP");
    assert_eq!(ssp["spec"]["commonTemplates"]["namespace"], "openshift");

    // An operand edited by hand is put back.
    let kubevirt_patch = |patch: &str| {
        platform.kubectl(
            &[
                "patch",
                "kubevirt",
                KUBEVIRT,
                "-n",
                NAMESPACE,
                "--type=merge",
                "-p",
                patch,
            ],
            None,
        )
    };
    let patched = kubevirt_patch(
        r#"{"spec":{"configuration":{"network":{"defaultNetworkInterface":"bridge"}}}}"#,
    );
    assert!(patched.status.success(), "{patched:?}");
    platform.wait_json(
        &["get", "kubevirt", KUBEVIRT, "-n", NAMESPACE],
        LIMIT,
        "the KubeVirt CR being put back",
        |kv| kv["spec"]["configuration"]["network"]["defaultNetworkInterface"] == "masquerade",
    );

    // virt-operator's review of KubeVirt CR updates: a refusal in its words, a warning for
    // a graduated gate.
    let refused = kubevirt_patch(r#"{"spec":{"infra":{"replicas":0}}}"#);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains(
            "admission webhook \"kubevirt-update-validator.kubevirt.io\" denied the request: infra replica count can't be 0"
        ),
        "{stderr}"
    );
    // A changed placement is judged by the API server, through a dry-run DaemonSet.
    let refused = kubevirt_patch(
        r#"{"spec":{"workloads":{"nodePlacement":{"tolerations":[{"key":"virt","operator":"Sometimes"}]}}}}"#,
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains(
            r#"denied the request: DaemonSet.apps "placement-validation-webhook" is invalid: spec.template.spec.tolerations[0].operator: Unsupported value: "Sometimes": supported values: "Equal", "Exists""#
        ),
        "{stderr}"
    );
    assert!(
        platform
            .json(&[
                "get",
                "daemonset",
                "placement-validation-webhook",
                "-n",
                NAMESPACE
            ])
            .is_none(),
        "the dry run wrote its DaemonSet"
    );
    // A refusal keeps the review's warnings, as kube-apiserver passes on both.
    let both = kubevirt_patch(
        r#"{"spec":{"infra":{"replicas":0},"configuration":{"developerConfiguration":{"featureGates":["LiveMigration"]}}}}"#,
    );
    let stderr = String::from_utf8_lossy(&both.stderr);
    assert!(!both.status.success());
    assert!(
        stderr.contains("infra replica count can't be 0"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Warning: feature gate LiveMigration is deprecated"),
        "{stderr}"
    );
    let warned = kubevirt_patch(
        r#"{"spec":{"configuration":{"developerConfiguration":{"featureGates":["CPUManager","LiveMigration"]}}}}"#,
    );
    let stderr = String::from_utf8_lossy(&warned.stderr);
    assert!(warned.status.success(), "{stderr}");
    assert!(
        stderr.contains("Warning: feature gate LiveMigration is deprecated (feature state is \"General Availability\")"),
        "{stderr}"
    );
    platform.wait_json(
        &["get", "kubevirt", KUBEVIRT, "-n", NAMESPACE],
        LIMIT,
        "HCO's feature gates put back",
        |kv| {
            !kubevirt_feature_gates(kv)
                .iter()
                .any(|g| g == "LiveMigration")
        },
    );

    // The HC's videoConfig gate decides whether virt-api admits a video device.
    set_video_gate(&platform, false);
    let refused = platform.kubectl(&["apply", "-f", "-"], Some(&vm_with_video("video")));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains(
            "Video configuration is specified but the VideoConfig feature gate is not enabled"
        ),
        "{stderr}"
    );
    set_video_gate(&platform, true);
    platform.apply(&vm_with_video("video"));

    // With a VM, HCO refuses to be deleted and says why.
    let refused = platform.kubectl(
        &[
            "delete",
            "hco",
            "kubevirt-hyperconverged",
            "-n",
            NAMESPACE,
            "--wait=false",
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "the delete went through");
    assert!(stderr.contains(r#"admission webhook "validate-hco.kubevirt.io" denied the request: admission webhook "kubevirt-validator.kubevirt.io" denied the request: Rejecting the uninstall request, since there are still Virtual Machines present."#), "{stderr}");
    assert!(
        platform
            .json(&["get", "hco", "kubevirt-hyperconverged", "-n", NAMESPACE])
            .is_some()
    );

    // Without workloads it goes, and its operands with it.
    platform.ok(&["delete", "vm", "video", "-n", "default"]);
    platform.ok(&[
        "delete",
        "hco",
        "kubevirt-hyperconverged",
        "-n",
        NAMESPACE,
        "--timeout=60s",
    ]);
    assert!(
        platform
            .json(&["get", "kubevirt", KUBEVIRT, "-n", NAMESPACE])
            .is_none()
    );
    assert!(
        platform
            .json(&["get", "cdi", "cdi-kubevirt-hyperconverged"])
            .is_none()
    );
    // The CLI download goes with the HC (its owner) too.
    let started = Instant::now();
    let service = [
        "get",
        "service",
        "hyperconverged-cluster-cli-download",
        "-n",
        NAMESPACE,
    ];
    while platform.json(&service).is_some() {
        assert!(started.elapsed() < LIMIT, "the CLI download Service stayed");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn a_hyperconverged_of_another_name_is_not_reconciled() {
    let platform = Platform::start("hco-name");
    let other = EXAMPLE_HC.replace("name: kubevirt-hyperconverged", "name: my-hyperconverged");
    platform.ok_stdin(&["apply", "-n", NAMESPACE, "-f", "-"], Some(&other));
    let hc = platform.wait_json(
        &["get", "hco", "my-hyperconverged", "-n", NAMESPACE],
        LIMIT,
        "the HC being reported invalid",
        |hc| condition(hc, "ReconcileComplete").is_some(),
    );
    let complete = condition(&hc, "ReconcileComplete").expect("condition");
    assert_eq!(complete["status"], "False");
    assert_eq!(complete["reason"], "InvalidRequest");
    assert_eq!(
        complete["message"],
        "Request does not match expected name (kubevirt-hyperconverged) and namespace (kubevirt-hyperconverged)"
    );
    assert!(
        platform
            .json(&[
                "get",
                "kubevirt",
                "kubevirt-my-hyperconverged",
                "-n",
                NAMESPACE
            ])
            .is_none()
    );

    // What an HC leaves out, the CRD's defaults (upstream's) fill in, at either version.
    let bare = format!(
        "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nmetadata: {{name: bare, namespace: {NAMESPACE}}}\nspec: {{}}\n"
    );
    platform.ok_stdin(&["apply", "-f", "-"], Some(&bare));
    let v1 = platform
        .json(&["get", "hco", "bare", "-n", NAMESPACE])
        .expect("the bare HC");
    let spec = &v1["spec"];
    assert_eq!(
        spec["deployment"]["uninstallStrategy"], "BlockUninstallIfWorkloadsExist",
        "{v1}"
    );
    assert_eq!(
        spec["virtualization"]["liveMigrationConfig"]["completionTimeoutPerGiB"],
        20
    );
    assert_eq!(
        spec["security"]["certConfig"]["server"]["renewBefore"],
        "12h0m0s"
    );
    // As upstream's CRD has it, `workloadSources` itself has no default.
    assert!(spec["workloadSources"].is_null(), "{v1}");
    let beta = platform
        .json(&["get", HCO_V1BETA1, "bare", "-n", NAMESPACE])
        .expect("the bare HC at v1beta1");
    assert_eq!(
        beta["spec"]["liveMigrationConfig"]["parallelOutboundMigrationsPerNode"], 1,
        "{beta}"
    );
    assert_eq!(
        beta["spec"]["resourceRequirements"]["vmiCPUAllocationRatio"],
        10
    );
}

fn refusal(platform: &Platform, args: &[&str], stdin: Option<&str>) -> String {
    let out = platform.kubectl(args, stdin);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "kubectl {args:?} went through");
    stderr
}

/// The HC as a v1beta1 client reads it.
fn hc_as_v1beta1(platform: &Platform) -> Value {
    let hc = [
        "get",
        HCO_V1BETA1,
        "kubevirt-hyperconverged",
        "-n",
        NAMESPACE,
    ];
    platform.json(&hc).expect("the HC at v1beta1")
}

/// A merge patch of the HC, as a v1beta1 client sends it.
fn patch_hc(patch: &str) -> Vec<&str> {
    vec![
        "patch",
        HCO_V1BETA1,
        "kubevirt-hyperconverged",
        "-n",
        NAMESPACE,
        "--type=merge",
        "-p",
        patch,
    ]
}

/// The hco-webhook: the HC's own checks on create and update, warnings for deprecated
/// gates, a dry-run update of each operand so that their admission judges the change, and
/// `--dry-run=server` writing nothing.
#[test]
fn the_hco_webhook_judges_changes_before_they_reach_the_operands() {
    let platform = Platform::start("hco-webhook");
    let elsewhere = refusal(
        &platform,
        &["apply", "-n", "default", "-f", "-"],
        Some(EXAMPLE_HC),
    );
    assert!(
        elsewhere.contains(r#"admission webhook "validate-hco.kubevirt.io" denied the request: invalid namespace for v1beta1.HyperConverged - please use the kubevirt-hyperconverged namespace"#),
        "{elsewhere}"
    );
    platform.ok_stdin(&["apply", "-n", NAMESPACE, "-f", "-"], Some(EXAMPLE_HC));
    platform.wait_json(
        &["get", "networkaddonsconfig", "cluster"],
        LIMIT,
        "the HC's operands",
        |nac| is_true(nac, "Available"),
    );

    // The HC's own checks.
    let short = refusal(
        &platform,
        &patch_hc(r#"{"spec":{"certConfig":{"server":{"renewBefore":"5m"}}}}"#),
        None,
    );
    assert!(
        short.contains("spec.certConfig.server.renewBefore: value is too small"),
        "{short}"
    );

    // What only an operand's admission knows: CNAO's MAC range, through the dry-run update.
    let backwards = r#"{"spec":{"kubeMacPoolConfiguration":{"rangeStart":"02:00:00:00:00:10","rangeEnd":"02:00:00:00:00:00"}}}"#;
    let range = refusal(&platform, &patch_hc(backwards), None);
    assert!(
        range.contains(r#"admission webhook "validate-hco.kubevirt.io" denied the request: "#)
            && range.contains("Range end is lesser than or equal to its start"),
        "{range}"
    );
    let nac = platform
        .json(&["get", "networkaddonsconfig", "cluster"])
        .expect("NetworkAddonsConfig");
    assert_ne!(
        nac["spec"]["kubeMacPool"]["rangeStart"], "02:00:00:00:00:10",
        "the refused range reached CNAO: {nac:#}"
    );

    // A deprecated gate is let through with HCO's warning.
    let out = platform.kubectl(
        &patch_hc(r#"{"spec":{"featureGates":{"nonRoot":true}}}"#),
        None,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Warning: spec.featureGates.nonRoot is deprecated and ignored."),
        "{stderr}"
    );

    // A server-side dry run is judged but not written.
    let mut dry = patch_hc(r#"{"spec":{"featureGates":{"videoConfig":false}}}"#);
    dry.push("--dry-run=server");
    platform.ok(&dry);
    let hc = hc_as_v1beta1(&platform);
    assert_eq!(hc["spec"]["featureGates"]["videoConfig"], true, "{hc:#}");
    let mut dry_short = patch_hc(r#"{"spec":{"certConfig":{"ca":{"duration":"1m"}}}}"#);
    dry_short.push("--dry-run=server");
    let judged = refusal(&platform, &dry_short, None);
    assert!(judged.contains("value is too small"), "{judged}");
}
