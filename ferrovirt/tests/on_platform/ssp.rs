//! The SSP operator on `ferrovirt up`: an SSP CR gets the common templates (a template
//! deleted or edited by hand is put back, one of an older bundle is deprecated), its boot
//! sources from a local registry as DataImportCrons and DataSources in `kubevirt-os-images`
//! that a VM's dataVolumeTemplate clones through `sourceRef`, SSP's status, and deleting it
//! removes what it made.

use crate::platform;

use std::time::{Duration, Instant};

use ferrovirt_tests::registry::{
    ImageSpec, LayerCompression, LayerSpec, OciLayout, RegistryServer, RegistryServerOptions,
};
use platform::{Platform, condition};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);
const SSP_NAMESPACE: &str = "kubevirt-hyperconverged";
const TEMPLATES_NAMESPACE: &str = "openshift";
const GOLDEN: &str = "kubevirt-os-images";

/// Waits until `kubectl get ARGS` says NotFound.
fn wait_gone(platform: &Platform, args: &[&str], limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let out = platform.kubectl(args, None);
        if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound") {
            return;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!(
        "{args:?} is still there after {limit:?}\n--- log:\n{}",
        platform.log()
    );
}

fn namespaces(platform: &Platform) {
    for name in [SSP_NAMESPACE, TEMPLATES_NAMESPACE] {
        platform.apply(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n"
        ));
    }
}

fn ssp_yaml(crons: &str) -> String {
    format!(
        r#"apiVersion: ssp.kubevirt.io/v1beta2
kind: SSP
metadata:
  name: ssp-kubevirt-hyperconverged
  namespace: {SSP_NAMESPACE}
spec:
  commonTemplates:
    namespace: {TEMPLATES_NAMESPACE}
    dataImportCronTemplates: {crons}
"#
    )
}

fn ssp_args() -> [&'static str; 5] {
    [
        "get",
        "ssp",
        "ssp-kubevirt-hyperconverged",
        "-n",
        SSP_NAMESPACE,
    ]
}

fn is_deployed(ssp: &Value) -> bool {
    ssp["status"]["phase"] == "Deployed"
        && condition(ssp, "Available").is_some_and(|c| c["status"] == "True")
        && ssp["status"]["observedGeneration"] == ssp["metadata"]["generation"]
}

fn template_args(name: &str) -> [&str; 5] {
    ["get", "template", name, "-n", TEMPLATES_NAMESPACE]
}

#[test]
fn an_ssp_keeps_the_common_templates_and_removes_them_when_deleted() {
    let platform = Platform::start("ssp-templates");
    namespaces(&platform);
    platform.apply(&ssp_yaml("[]"));
    let ssp = platform.wait_json(
        &ssp_args(),
        LIMIT,
        "the object to come to the expected state",
        is_deployed,
    );
    assert_eq!(
        ssp["metadata"]["finalizers"][0],
        "ssp.kubevirt.io/finalizer"
    );
    assert_eq!(
        ssp["status"]["observedVersion"],
        ssp["status"]["operatorVersion"]
    );
    let message = &condition(&ssp, "Available").expect("Available")["message"];
    assert_eq!(message, "All SSP resources are available");
    assert_eq!(
        condition(&ssp, "Degraded").expect("Degraded")["status"],
        "False"
    );

    // The bundle is in the namespace with SSP's labels and owner annotations.
    let templates = platform
        .json(&["get", "templates", "-n", TEMPLATES_NAMESPACE])
        .expect("templates");
    let count = templates["items"]
        .as_array()
        .map(Vec::len)
        .unwrap_or_default();
    assert!(count >= 56, "only {count} templates");
    let fedora = platform
        .json(&[
            "get",
            "template",
            "fedora-server-small",
            "-n",
            TEMPLATES_NAMESPACE,
        ])
        .expect("fedora-server-small");
    let labels = &fedora["metadata"]["labels"];
    assert_eq!(labels["app.kubernetes.io/component"], "templating");
    assert_eq!(labels["app.kubernetes.io/name"], "common-templates");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "ssp-operator");
    assert_eq!(labels["template.kubevirt.io/type"], "base");
    let annotations = &fedora["metadata"]["annotations"];
    assert_eq!(
        annotations["operator-sdk/primary-resource"],
        "kubevirt-hyperconverged/ssp-kubevirt-hyperconverged"
    );
    assert_eq!(
        annotations["operator-sdk/primary-resource-type"],
        "SSP.ssp.kubevirt.io"
    );

    // Deleted by hand, it comes back; edited by hand, it is put back.
    platform.ok(&[
        "delete",
        "template",
        "fedora-server-small",
        "-n",
        TEMPLATES_NAMESPACE,
    ]);
    let uid = fedora["metadata"]["uid"].clone();
    let back = platform.wait_json(
        &template_args("fedora-server-small"),
        LIMIT,
        "the object to come to the expected state",
        |t| t["metadata"]["uid"] != uid,
    );
    assert_eq!(back["objects"], fedora["objects"]);
    platform.ok(&[
        "patch", "template", "fedora-server-small", "-n", TEMPLATES_NAMESPACE, "--type", "merge",
        "-p", r#"{"parameters":[{"name":"NAME"}],"metadata":{"labels":{"workload.template.kubevirt.io/server":null,"mine":"kept"}}}"#,
    ]);
    let restored = platform.wait_json(
        &template_args("fedora-server-small"),
        LIMIT,
        "the object to come to the expected state",
        |t| t["parameters"] == fedora["parameters"],
    );
    assert_eq!(
        restored["metadata"]["labels"]["workload.template.kubevirt.io/server"],
        "true"
    );
    assert_eq!(restored["metadata"]["labels"]["mine"], "kept");

    // A template of an older bundle is deprecated and no longer offered by its OS labels.
    platform.apply(&format!(
        r#"apiVersion: template.openshift.io/v1
kind: Template
metadata:
  name: fedora-server-small-v0.30.0
  namespace: {TEMPLATES_NAMESPACE}
  labels:
    template.kubevirt.io/type: base
    template.kubevirt.io/version: v0.30.0
    os.template.kubevirt.io/fedora39: "true"
    workload.template.kubevirt.io/server: "true"
objects: []
"#
    ));
    let old = platform.wait_json(
        &template_args("fedora-server-small-v0.30.0"),
        LIMIT,
        "the object to come to the expected state",
        |t| t["metadata"]["labels"]["template.kubevirt.io/deprecated"] == "true",
    );
    assert_eq!(
        old["metadata"]["annotations"]["template.kubevirt.io/deprecated"],
        "true"
    );
    assert!(
        old["metadata"]["labels"]
            .get("os.template.kubevirt.io/fedora39")
            .is_none(),
        "{old:#}"
    );

    // The boot sources the templates name exist as DataSources of their golden image PVCs.
    let source = platform.wait_json(
        &["get", "datasource", "fedora", "-n", GOLDEN],
        LIMIT,
        "the object to come to the expected state",
        |_| true,
    );
    assert_eq!(source["spec"]["source"]["pvc"]["name"], "fedora");
    assert_eq!(
        source["metadata"]["labels"]["app.kubernetes.io/name"],
        "data-sources"
    );

    // Everyone may read and clone the golden images; managing them is a ClusterRole.
    let binding = platform
        .json(&[
            "get",
            "rolebinding",
            "os-images.kubevirt.io:view",
            "-n",
            GOLDEN,
        ])
        .expect("the view RoleBinding");
    assert_eq!(binding["subjects"][0]["name"], "system:authenticated");
    assert_eq!(binding["roleRef"]["name"], "os-images.kubevirt.io:view");
    platform.ok(&["get", "clusterrole", "os-images.kubevirt.io:edit"]);

    // A cron template without a name is refused with ssp-operator's message: by admission
    // where the SSP webhook is wired, else in the SSP's status (recovering once fixed).
    const MISSING_NAME: &str =
        "dataImportCronTemplates validation error: missing name in DataImportCronTemplate";
    let nameless = ssp_yaml(
        r#"[{"spec": {"schedule": "0 0 * * *", "managedDataSource": "x", "template": {"spec": {"source": {"registry": {"url": "docker://localhost/x"}}, "storage": {}}}}}]"#,
    );
    let out = platform.kubectl(&["apply", "-f", "-"], Some(&nameless));
    if out.status.success() {
        let failing = platform.wait_json(
            &ssp_args(),
            LIMIT,
            "the object to come to the expected state",
            |s| condition(s, "Degraded").is_some_and(|c| c["status"] == "True"),
        );
        assert_eq!(
            condition(&failing, "Degraded").expect("Degraded")["message"],
            format!("Error: {MISSING_NAME}")
        );
        assert_eq!(failing["status"]["phase"], "Deploying");
        platform.apply(&ssp_yaml("[]"));
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(MISSING_NAME), "{stderr}");
    }
    platform.wait_json(
        &ssp_args(),
        LIMIT,
        "the object to come to the expected state",
        is_deployed,
    );

    // Deleting the SSP removes its templates, the deprecated ones and its DataSources.
    platform.ok(&[
        "delete",
        "ssp",
        "ssp-kubevirt-hyperconverged",
        "-n",
        SSP_NAMESPACE,
        "--wait=false",
    ]);
    wait_gone(&platform, &ssp_args(), LIMIT);
    wait_gone(&platform, &template_args("fedora-server-small"), LIMIT);
    wait_gone(
        &platform,
        &template_args("fedora-server-small-v0.30.0"),
        LIMIT,
    );
    wait_gone(
        &platform,
        &["get", "datasource", "fedora", "-n", GOLDEN],
        LIMIT,
    );
    wait_gone(
        &platform,
        &["get", "clusterrole", "os-images.kubevirt.io:edit"],
        LIMIT,
    );
}

#[test]
fn boot_sources_import_from_a_local_registry_and_a_vm_clones_from_them() {
    let registry = RegistryServer::start(RegistryServerOptions::default());
    let image = "v3.qcow2";
    let spec = ImageSpec::new(
        "linux/amd64",
        vec![LayerSpec::disk(LayerCompression::Gzip, image)],
    );
    registry.push(&OciLayout::image(&spec), "containerdisks/fedora:latest");
    let platform = Platform::start("ssp-boot-sources");
    platform.patch_cdi_config(&format!(
        r#"{{"spec":{{"insecureRegistries":["{}"]}}}}"#,
        registry.host()
    ));
    namespaces(&platform);
    let crons = format!(
        r#"
    - metadata:
        name: fedora-image-cron
        annotations:
          cdi.kubevirt.io/storage.bind.immediate.requested: "true"
      spec:
        schedule: "0 */12 * * *"
        managedDataSource: fedora
        garbageCollect: Outdated
        template:
          spec:
            source:
              registry:
                url: "{}"
            storage:
              resources:
                requests:
                  storage: 64Mi"#,
        registry.reference("containerdisks/fedora:latest")
    );
    platform.apply(&ssp_yaml(&crons));

    // The cron is SSP's, in the golden images namespace; CDI imports the image and points
    // SSP's DataSource at it.
    let cron = platform.wait_json(
        &["get", "dataimportcron", "fedora-image-cron", "-n", GOLDEN],
        LIMIT,
        "the object to come to the expected state",
        |_| true,
    );
    assert_eq!(
        cron["metadata"]["labels"]["app.kubernetes.io/name"],
        "data-sources"
    );
    assert_eq!(
        cron["metadata"]["labels"]["app.kubernetes.io/component"],
        "templating"
    );
    assert_eq!(
        cron["metadata"]["annotations"]["operator-sdk/primary-resource-type"],
        "SSP.ssp.kubevirt.io"
    );
    let source = platform.wait_json(
        &["get", "datasource", "fedora", "-n", GOLDEN],
        LIMIT,
        "the object to come to the expected state",
        |ds| condition(ds, "Ready").is_some_and(|c| c["status"] == "True"),
    );
    assert_eq!(
        source["metadata"]["labels"]["cdi.kubevirt.io/dataImportCron"],
        "fedora-image-cron"
    );
    let imported = source["spec"]["source"]["pvc"]["name"]
        .as_str()
        .expect("a PVC")
        .to_owned();
    assert!(imported.starts_with("fedora-"), "{source:#}");
    platform.assert_volume_holds(GOLDEN, &imported, image);
    platform.wait_json(
        &ssp_args(),
        LIMIT,
        "the object to come to the expected state",
        is_deployed,
    );

    // A VM's dataVolumeTemplate takes its disk from the boot source.
    platform.apply(
        r#"apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: fedora-vm
spec:
  runStrategy: Halted
  dataVolumeTemplates:
  - metadata:
      name: fedora-vm-root
    spec:
      sourceRef:
        kind: DataSource
        name: fedora
        namespace: kubevirt-os-images
      storage:
        resources:
          requests:
            storage: 64Mi
  template:
    spec:
      domain:
        resources:
          requests:
            memory: 128Mi
        devices:
          disks:
          - name: root
            disk:
              bus: virtio
      volumes:
      - name: root
        dataVolume:
          name: fedora-vm-root
"#,
    );
    platform.wait_phase("default", "fedora-vm-root", "Succeeded", LIMIT);
    platform.assert_volume_holds("default", "fedora-vm-root", image);

    // Without the cron template, SSP deletes its cron.
    platform.apply(&ssp_yaml("[]"));
    wait_gone(
        &platform,
        &["get", "dataimportcron", "fedora-image-cron", "-n", GOLDEN],
        LIMIT,
    );
}
