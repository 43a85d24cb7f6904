//! Host-assisted clones on one machine: a DataVolume cloning a PVC of another storage class
//! gets an upload server on its target and a `ferrovirt clone-source` pod streaming the
//! source to it over mutual TLS, as CDI's host-assisted clone does.

use crate::platform;

use std::process::Command;
use std::time::Duration;

use ferrovirt_tests::{HttpServer, HttpServerOptions, TempDir, reference_sha256, reference_size};
use platform::{Platform, condition, digest_prefix, other_storage_class};

const LIMIT: Duration = Duration::from_secs(120);

/// DataVolume `golden` in `namespace`, importing `url` into 64Mi of the default class.
fn golden_datavolume(namespace: &str, url: &str) -> String {
    format!(
        r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: golden
  namespace: {namespace}
spec:
  source:
    http:
      url: "{url}"
  storage:
    resources:
      requests:
        storage: 64Mi
"#
    )
}

fn clone_datavolume(name: &str, source: &str) -> String {
    format!(
        r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: {name}
spec:
  source:
    pvc:
      namespace: default
      name: {source}
  storage:
    storageClassName: hostpath-copy
"#
    )
}

#[test]
fn a_clone_into_another_storage_class_is_copied_by_a_source_pod() {
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("host-clone");
    let image = "v3.qcow2";
    platform.apply(&other_storage_class(&platform));
    platform.apply(&golden_datavolume("default", &server.url(image)));
    platform.wait_phase("default", "golden", "Succeeded", LIMIT);

    // A pod using the source (a VM, say) holds the copy back: it would not be consistent.
    platform.apply(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: vm-using-golden
spec:
  containers:
  - name: compute
    image: quay.io/kubevirt/virt-launcher:v1.5.0
  volumes:
  - name: disk
    persistentVolumeClaim:
      claimName: golden
"#,
    );
    platform.apply(&clone_datavolume("copy", "golden"));
    let dv = platform.wait_dv("default", "copy", LIMIT, |dv| {
        condition(dv, "Bound").is_some_and(|c| c["reason"] == "CloneSourceInUse")
    });
    let message = condition(&dv, "Bound").expect("Bound")["message"].to_string();
    assert!(message.contains("vm-using-golden"), "{dv}");
    platform.ok(&["delete", "pod", "vm-using-golden", "--wait=false"]);
    let dv = platform.wait_phase("default", "copy", "Succeeded", LIMIT);
    assert_eq!(dv["status"]["progress"], "100.0%", "{dv}");
    assert_eq!(
        condition(&dv, "Ready").expect("Ready")["reason"],
        "CloneSucceeded",
        "{dv}"
    );
    let pvc = platform
        .json(&["get", "pvc", "copy"])
        .expect("the target PVC");
    assert_eq!(pvc["spec"]["storageClassName"], "hostpath-copy");
    assert_eq!(
        pvc["metadata"]["annotations"]["cdi.kubevirt.io/cloneType"],
        "copy"
    );
    assert!(
        pvc["spec"]["dataSource"].is_null(),
        "a host-assisted clone is no CSI clone: {pvc}"
    );

    // The target holds the source's image, and stayed sparse: the copy wrote no zeros.
    let scratch = TempDir::new("host-clone");
    let (source_disk, target_disk) = (scratch.join("source.img"), scratch.join("target.img"));
    platform.extract_disk("default", "golden", &source_disk);
    platform.extract_disk("default", "copy", &target_disk);
    let (digest, zero_tail) = digest_prefix(&target_disk, reference_size(image));
    assert_eq!(digest, reference_sha256(image), "contents of the clone");
    assert!(zero_tail, "the clone has data after the image's end");
    let metadata = std::fs::metadata(&target_disk).expect("the clone's image");
    assert_eq!(
        metadata.len(),
        std::fs::metadata(&source_disk).expect("source").len()
    );

    // Another volume mode is a host-assisted copy too, even in the same storage class:
    // filesystem to block, and back. The copy back is asked for before its source is
    // filled: it waits for the source's DataVolume to succeed (or it would copy zeros).
    platform.apply(
        r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: as-block
spec:
  source:
    pvc:
      namespace: default
      name: golden
  storage:
    volumeMode: Block
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: back-to-file
spec:
  source:
    pvc:
      namespace: default
      name: as-block
  storage:
    volumeMode: Filesystem
"#,
    );
    platform.wait_phase("default", "as-block", "Succeeded", LIMIT);
    let block = platform.volume_image("default", "as-block");
    let (digest, zero_tail) = digest_prefix(&block, reference_size(image));
    assert_eq!(
        digest,
        reference_sha256(image),
        "contents of the block clone"
    );
    assert!(zero_tail, "the block clone has data after the image's end");
    platform.wait_phase("default", "back-to-file", "Succeeded", LIMIT);
    platform.assert_volume_holds("default", "back-to-file", image);

    // A VolumeSnapshot restored into another class: restored into a claim of its own class
    // first, which is copied, then deleted.
    platform.apply(
        r#"apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: golden-snap
spec:
  source:
    persistentVolumeClaimName: golden
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: from-snapshot
spec:
  source:
    snapshot:
      namespace: default
      name: golden-snap
  storage:
    storageClassName: hostpath-copy
"#,
    );
    let dv = platform.wait_phase("default", "from-snapshot", "Succeeded", LIMIT);
    let pvc = platform
        .json(&["get", "pvc", "from-snapshot"])
        .expect("the restore's PVC");
    assert_eq!(
        pvc["metadata"]["annotations"]["cdi.kubevirt.io/cloneType"],
        "copy"
    );
    platform.assert_volume_holds("default", "from-snapshot", image);
    let uid = dv["metadata"]["uid"].as_str().expect("a uid");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while platform
        .json(&["get", "pvc", &format!("cdi-tmp-{uid}")])
        .is_some()
        || !platform
            .json(&["get", "datavolume", "from-snapshot"])
            .expect("the DataVolume")["metadata"]["finalizers"]
            .is_null()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the restore claim or the finalizer stayed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The workers are gone: the upload servers, their services, the source pods.
    let pods = platform.ok(&["get", "pods", "-o", "name"]);
    assert!(
        !pods.contains("cdi-upload-") && !pods.contains("source-pod"),
        "{pods}"
    );
    let (source_blocks, target_blocks) = (
        allocated_blocks(&platform, "golden"),
        allocated_blocks(&platform, "copy"),
    );
    assert!(
        target_blocks <= source_blocks + source_blocks / 4 + 64,
        "the clone allocated {target_blocks} blocks, its source {source_blocks}"
    );
    assert!(
        target_blocks * 512 < metadata.len() / 2,
        "the clone is not sparse: {target_blocks} blocks for {} bytes",
        metadata.len()
    );
}

/// The blocks `disk.img` takes in the volume of `pvc` (debugfs's Blockcount, 512-byte units).
fn allocated_blocks(platform: &Platform, pvc: &str) -> u64 {
    let image = platform.volume_image("default", pvc);
    let output = Command::new("debugfs")
        .arg("-R")
        .arg("stat /disk.img")
        .arg(&image)
        .output()
        .expect("running debugfs");
    let text = String::from_utf8_lossy(&output.stdout);
    text.split_once("Blockcount:")
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no Blockcount for {pvc}: {text}"))
}

#[test]
fn a_clone_of_a_volume_without_a_disk_image_fails_with_the_reason() {
    let platform = Platform::start("host-clone-empty");
    platform.apply(&other_storage_class(&platform));
    // A claim nobody filled: its filesystem has no disk.img.
    platform.apply(
        r#"apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: empty
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 16Mi
"#,
    );
    platform.apply(&clone_datavolume("copy", "empty"));
    let dv = platform.wait_phase("default", "copy", "Failed", LIMIT);
    let ready = condition(&dv, "Ready").expect("Ready");
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("has no disk.img") && message.contains("only disk images are cloned"),
        "{dv}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let pods = platform.ok(&["get", "pods", "-o", "name"]);
        if !pods.contains("cdi-upload-copy") && !pods.contains("source-pod") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "workers left: {pods}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Across namespaces, as CDI: the admitted DataVolume carries its clone token, the source
/// pod runs in the source namespace, and a finalizer holds the DataVolume until that pod,
/// which nothing in the target namespace can own, is gone.
#[test]
fn a_host_assisted_clone_across_namespaces_runs_its_source_pod_in_the_source_namespace() {
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("host-clone-ns");
    let image = "v3.qcow2";
    platform.apply(&other_storage_class(&platform));
    platform.apply(
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: golden-images
"#,
    );
    platform.apply(&golden_datavolume("golden-images", &server.url(image)));
    platform.wait_phase("golden-images", "golden", "Succeeded", LIMIT);
    platform.apply(
        r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: copy
spec:
  source:
    pvc:
      namespace: golden-images
      name: golden
  storage:
    storageClassName: hostpath-copy
"#,
    );
    let dv = platform.wait_phase("default", "copy", "Succeeded", LIMIT);
    assert!(
        dv["metadata"]["annotations"]["cdi.kubevirt.io/storage.clone.token"].is_string(),
        "{dv}"
    );
    let pvc = platform
        .json(&["get", "pvc", "copy"])
        .expect("the target PVC");
    assert_eq!(
        pvc["metadata"]["annotations"]["cdi.kubevirt.io/cloneType"],
        "copy"
    );
    platform.assert_volume_holds("default", "copy", image);
    // The source pod is gone from the source namespace, and the finalizer with it.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let pods = platform.ok(&["get", "pods", "-n", "golden-images", "-o", "name"]);
        let dv = platform
            .json(&["get", "datavolume", "copy"])
            .expect("the DataVolume");
        if !pods.contains("source-pod") && dv["metadata"]["finalizers"].is_null() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left behind: {pods} {}",
            dv["metadata"]
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
