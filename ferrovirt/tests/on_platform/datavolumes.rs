//! DataVolumes end to end on one machine: `ferrovirt up`, upstream-style DataVolume YAML
//! applied with kubectl, images served by a real HTTP server on loopback, and the volume's
//! contents compared with `qemu-img convert -O raw` of the source.

use crate::platform;

use std::time::Duration;

use ferrovirt_tests::{HttpServer, HttpServerOptions, TempDir};
use platform::{Platform, condition, digest_prefix, http_datavolume, phase_of};

const IMPORT_LIMIT: Duration = Duration::from_secs(120);

#[test]
fn http_qcow2_xz_import_succeeds_with_the_converted_image() {
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("dv-http");
    let image = "v3.qcow2.xz";
    platform.apply(&http_datavolume("fedora", &server.url(image), "64Mi", ""));
    let dv = platform.wait_phase("default", "fedora", "Succeeded", IMPORT_LIMIT);
    assert_eq!(dv["status"]["progress"], "100.0%");
    let ready = condition(&dv, "Ready").expect("a Ready condition");
    assert_eq!(ready["status"], "True", "{dv}");
    let bound = condition(&dv, "Bound").expect("a Bound condition");
    assert_eq!(bound["status"], "True", "{dv}");
    platform.assert_volume_holds("default", "fedora", image);
    // The importer pod is gone once the import succeeded.
    let pods = platform.ok(&["get", "pods", "-o", "name"]);
    assert!(!pods.contains("importer-fedora"), "{pods}");
    assert_import_events(&platform, "fedora");
}

/// A DataVolume's Events as kubectl lists them, oldest first: (time, type, reason, message).
fn dv_events(platform: &Platform, dv: &str) -> Vec<(String, String, String, String)> {
    let selector =
        format!("--field-selector=involvedObject.name={dv},involvedObject.kind=DataVolume");
    let listed = platform
        .json(&["get", "events", &selector])
        .expect("events");
    let mut events: Vec<_> = listed["items"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| {
            let text = |field: &str| e[field].as_str().unwrap_or_default().to_string();
            (
                text("eventTime"),
                text("type"),
                text("reason"),
                text("message"),
            )
        })
        .collect();
    events.sort();
    events
}

/// The DataVolume's Events once one of them is `reason`: an event is published just after
/// the status write a test waits for.
fn dv_events_up_to(
    platform: &Platform,
    dv: &str,
    reason: &str,
) -> Vec<(String, String, String, String)> {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let events = dv_events(platform, dv);
        if events.iter().any(|e| e.2 == reason) || std::time::Instant::now() > deadline {
            return events;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The DataVolume's Events as kubectl lists them (core Events, though the controller
/// publishes through `events.k8s.io`): CDI's reasons and messages, in CDI's order, each
/// once, and the same in `kubectl describe`.
fn assert_import_events(platform: &Platform, dv: &str) {
    let events: Vec<(String, String, String)> = dv_events_up_to(platform, dv, "ImportSucceeded")
        .into_iter()
        .map(|(time, _, reason, message)| (time, reason, message))
        .collect();
    let reasons: Vec<&str> = events
        .iter()
        .map(|(_, reason, _)| reason.as_str())
        .collect();
    // A claim may be bound before the DataVolume first looks, and a quick import may finish
    // between two looks: those steps can be missing, never out of order or twice.
    let order = [
        "Pending",
        "Bound",
        "ImportScheduled",
        "ImportInProgress",
        "ImportSucceeded",
    ];
    let positions: Vec<usize> = reasons
        .iter()
        .map(|r| {
            order
                .iter()
                .position(|o| o == r)
                .unwrap_or_else(|| panic!("{r} in {events:?}"))
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{events:?}");
    for (reason, message) in [
        ("Bound", format!("PVC {dv} Bound")),
        (
            "ImportSucceeded",
            format!("Successfully imported into PVC {dv}"),
        ),
    ] {
        assert!(
            events.iter().any(|(_, r, m)| r == reason && *m == message),
            "{reason}: {events:?}"
        );
    }
    let described = platform.ok(&["describe", "datavolume", dv]);
    let tail = described.split("Events:").nth(1).unwrap_or_default();
    assert!(tail.contains("ImportSucceeded"), "{described}");
}

#[test]
fn bad_checksum_and_too_small_volume_fail_with_upstream_messages() {
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("dv-fail");
    let image = "v3.qcow2";
    let wrong = format!("sha256:{}", "0".repeat(64));
    platform.apply(&http_datavolume(
        "checksum",
        &server.url(image),
        "64Mi",
        &format!("\n      checksum: \"{wrong}\""),
    ));
    platform.apply(&http_datavolume("small", &server.url(image), "1Mi", ""));
    for (name, expected) in [("checksum", "checksum mismatch"), ("small", "too small")] {
        let dv = platform.wait_phase("default", name, "Failed", IMPORT_LIMIT);
        let running = condition(&dv, "Running").expect("a Running condition");
        let message = running["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{name}: {dv}");
    }
}

#[test]
fn unreachable_url_is_retried_and_reported() {
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("dv-404");
    platform.apply(&http_datavolume(
        "missing",
        &server.url("no-such-image.qcow2"),
        "64Mi",
        "",
    ));
    let dv = platform.wait_dv("default", "missing", IMPORT_LIMIT, |dv| {
        dv["status"]["restartCount"].as_i64().unwrap_or(0) >= 1
            && condition(dv, "Running")
                .and_then(|c| c["message"].as_str())
                .is_some_and(|m| m.contains("404"))
    });
    assert_ne!(phase_of(&dv), "Succeeded", "{dv}");
    // `kubectl describe dv` says why: a warning with the importer's error.
    let events = dv_events_up_to(&platform, "missing", "Error");
    assert!(
        events
            .iter()
            .any(|(_, kind, reason, message)| kind == "Warning"
                && reason == "Error"
                && message.contains("404")),
        "{events:?}"
    );
    assert_importer_logs(&platform, "importer-missing");
    // Stopped while its importer waits to be restarted, the platform unpublishes the
    // importer's volume: no mount is left behind.
    let mut platform = platform;
    assert!(
        !platform.mounts().is_empty(),
        "the importer's volume is published"
    );
    platform.stop();
    assert_eq!(platform.mounts(), Vec::<String>::new());
}

/// CDIConfig's status is kept to what is in effect (CDI's defaults, then the spec's
/// overrides), and the worker pods take their container resources from it, as CDI's do.
#[test]
fn worker_pods_take_their_resources_from_cdiconfigs_status() {
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("dv-resources");
    let status_of = |done: &dyn Fn(&serde_json::Value) -> bool| {
        let started = std::time::Instant::now();
        loop {
            let config = platform
                .json(&["get", "cdiconfig", "config"])
                .expect("CDIConfig config");
            if done(&config["status"]) {
                return config["status"].clone();
            }
            assert!(
                started.elapsed() < IMPORT_LIMIT,
                "CDIConfig status: {config:#}"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    let defaults = status_of(&|s| !s["defaultPodResourceRequirements"].is_null());
    assert_eq!(
        defaults["defaultPodResourceRequirements"],
        serde_json::json!({"limits": {"cpu": "750m", "memory": "600M"},
                           "requests": {"cpu": "100m", "memory": "60M"}})
    );
    assert_eq!(
        defaults["filesystemOverhead"]["storageClass"]["hostpath-csi"], "0.06",
        "every class has its overhead: {defaults:#}"
    );
    assert_eq!(defaults["scratchSpaceStorageClass"], "hostpath-csi");
    // A class made later gets its figure too.
    platform.apply(&platform::other_storage_class(&platform));
    status_of(&|s| s["filesystemOverhead"]["storageClass"]["hostpath-copy"] == "0.06");
    assert!(
        defaults["uploadProxyURL"]
            .as_str()
            .is_some_and(|u| u.starts_with("https://")),
        "the published upload proxy URL is kept: {defaults:#}"
    );
    assert!(
        defaults["uploadProxyCA"]
            .as_str()
            .is_some_and(|ca| ca.starts_with("-----BEGIN CERTIFICATE-----")),
        "and its CA: {defaults:#}"
    );
    platform.patch_cdi_config(r#"{"spec":{"podResourceRequirements":{"limits":{"cpu":"1"}}}}"#);
    status_of(&|s| s["defaultPodResourceRequirements"]["limits"]["cpu"] == "1");
    // An importer that keeps failing stays for us to read.
    platform.apply(&http_datavolume(
        "limited",
        &server.url("no-such-image.qcow2"),
        "64Mi",
        "",
    ));
    platform.wait_dv("default", "limited", IMPORT_LIMIT, |dv| {
        dv["status"]["restartCount"].as_i64().unwrap_or(0) >= 1
    });
    let pod = platform
        .json(&["get", "pod", "importer-limited"])
        .expect("the importer pod");
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        serde_json::json!({"limits": {"cpu": "1", "memory": "600M"},
                           "requests": {"cpu": "100m", "memory": "60M"}})
    );
}

/// `kubectl logs` of a failing importer, as users read it first: the current run, the one
/// before (`--previous`), `--tail`, and refusals naming what is wrong.
fn assert_importer_logs(platform: &Platform, pod: &str) {
    // The run before the current one is there once the importer has been started again.
    let deadline = std::time::Instant::now() + IMPORT_LIMIT;
    let previous = loop {
        let out = platform.kubectl(&["logs", pod, "--previous"], None);
        if out.status.success() {
            break String::from_utf8_lossy(&out.stdout).into_owned();
        }
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("previous terminated container"), "{said}");
        assert!(
            std::time::Instant::now() < deadline,
            "no previous run: {said}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(previous.contains("404"), "previous run's log: {previous}");
    assert!(
        !previous.contains('\u{1b}'),
        "colour codes in a log: {previous}"
    );
    let last = platform.ok(&["logs", pod, "--previous", "--tail=1"]);
    assert_eq!(last.trim_end().lines().count(), 1, "{last}");
    assert!(previous.trim_end().ends_with(last.trim_end()), "{last}");
    // With the times the lines were written, and from a time on.
    let timed = platform.ok(&["logs", pod, "--previous", "--timestamps"]);
    for line in timed.lines() {
        let (time, rest) = line.split_once(' ').unwrap_or((line, ""));
        assert!(
            time.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
            "not a time at the start of {line:?}"
        );
        assert!(previous.contains(rest), "{rest:?} is not in the log");
    }
    let recent = platform.ok(&["logs", pod, "--previous", "--since=1h"]);
    assert_eq!(recent, previous, "everything is from the last hour");
    let future = platform.ok(&[
        "logs",
        pod,
        "--previous",
        "--since-time=2999-01-01T00:00:00Z",
    ]);
    assert_eq!(future, "", "nothing is from after 2999");
    let wrong = platform.kubectl(&["logs", pod, "-c", "nope"], None);
    let said = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        !wrong.status.success() && said.contains("container nope is not valid"),
        "{said}"
    );
    // Followed, the log ends when the container does (it fails within seconds).
    let followed = platform.kubectl(&["logs", "-f", pod, "--request-timeout=60s"], None);
    assert!(followed.status.success(), "{followed:?}");
}

#[test]
fn blank_datavolumes_with_and_without_preallocation() {
    let platform = Platform::start("dv-blank");
    for (name, preallocation) in [("blank", false), ("blank-prealloc", true)] {
        platform.apply(&format!(
            r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: {name}
spec:
  preallocation: {preallocation}
  source:
    blank: {{}}
  storage:
    resources:
      requests:
        storage: 32Mi
"#
        ));
    }
    for name in ["blank", "blank-prealloc"] {
        platform.wait_phase("default", name, "Succeeded", IMPORT_LIMIT);
        let scratch = TempDir::new("dv-blank");
        let disk = scratch.join("disk.img");
        platform.extract_disk("default", name, &disk);
        let size = std::fs::metadata(&disk).expect("disk.img").len();
        // 32 MiB less the filesystem overhead, aligned down to 1 MiB, as CDI sizes it.
        assert!((20 << 20..=32 << 20).contains(&size), "{name}: {size}");
        let (_, zero) = digest_prefix(&disk, 0);
        assert!(zero, "{name} is not blank");
    }
    // Deleting a DataVolume deletes its PVC (owner reference), as the README says.
    platform.ok(&["delete", "datavolume", "blank"]);
    let deadline = std::time::Instant::now() + IMPORT_LIMIT;
    while platform.json(&["get", "pvc", "blank"]).is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "PVC blank outlived its DataVolume"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Unless it is retained: an orphaning delete keeps the PVC, with its contents.
    platform.ok(&["delete", "datavolume", "blank-prealloc", "--cascade=orphan"]);
    let deadline = std::time::Instant::now() + IMPORT_LIMIT;
    while platform
        .json(&["get", "datavolume", "blank-prealloc"])
        .is_some()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the DataVolume stayed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(1));
    let kept = platform
        .json(&["get", "pvc", "blank-prealloc"])
        .expect("the orphaned PVC is kept");
    assert!(kept["metadata"]["ownerReferences"].is_null(), "{kept}");
    let scratch = TempDir::new("dv-blank-kept");
    platform.extract_disk("default", "blank-prealloc", &scratch.join("disk.img"));
}

/// Pushes a containerDisk holding `image` (gzip layer) to `registry` as `repo_tag`.
fn push_disk(registry: &ferrovirt_tests::registry::RegistryServer, image: &str, repo_tag: &str) {
    use ferrovirt_tests::registry::{ImageSpec, LayerCompression, LayerSpec, OciLayout};
    let spec = ImageSpec::new(
        "linux/amd64",
        vec![LayerSpec::disk(LayerCompression::Gzip, image)],
    );
    registry.push(&OciLayout::image(&spec), repo_tag);
}

/// Lets the platform pull from a plain-HTTP registry: CDIConfig must list it, as in CDI.
fn allow_insecure_registry(platform: &Platform, host: &str) {
    platform.patch_cdi_config(&format!(
        r#"{{"spec":{{"insecureRegistries":["{host}"]}}}}"#
    ));
}

#[test]
fn registry_import_of_a_container_disk_from_an_insecure_registry() {
    use ferrovirt_tests::registry::{RegistryServer, RegistryServerOptions};
    let registry = RegistryServer::start(RegistryServerOptions::default());
    let image = "v3.qcow2";
    push_disk(&registry, image, "disk:v1");
    let platform = Platform::start("dv-registry");
    allow_insecure_registry(&platform, &registry.host());
    platform.apply(&format!(
        r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: containerdisk
spec:
  source:
    registry:
      url: "{}"
  storage:
    resources:
      requests:
        storage: 64Mi
"#,
        registry.reference("disk:v1")
    ));
    platform.wait_phase("default", "containerdisk", "Succeeded", IMPORT_LIMIT);
    platform.assert_volume_holds("default", "containerdisk", image);
}

/// `status.progress` as a number ("45.21%" -> 45.21), if it is one.
fn progress_of(dv: &serde_json::Value) -> Option<f64> {
    dv["status"]["progress"]
        .as_str()?
        .strip_suffix('%')?
        .parse()
        .ok()
}

/// An HTTP server paced so that importing `image` takes about `seconds`.
fn slow_server(image: &str, seconds: u64) -> HttpServer {
    let size = std::fs::metadata(ferrovirt_tests::fixture(image))
        .expect("fixture")
        .len();
    HttpServer::start(HttpServerOptions {
        rate: Some((size / seconds).max(1)),
        ..Default::default()
    })
}

#[test]
fn progress_moves_monotonically_during_a_slow_import() {
    let image = "raw.img.xz";
    let server = slow_server(image, 15);
    let platform = Platform::start("dv-progress");
    platform.apply(&http_datavolume("slow", &server.url(image), "128Mi", ""));
    let mut seen = Vec::new();
    let dv = platform.wait_dv("default", "slow", IMPORT_LIMIT, |dv| {
        if let Some(p) = progress_of(dv)
            && seen.last() != Some(&p)
        {
            seen.push(p);
        }
        phase_of(dv) == "Succeeded"
    });
    assert_eq!(dv["status"]["progress"], "100.0%");
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "progress went back: {seen:?}"
    );
    let between = seen.iter().filter(|p| **p > 0.0 && **p < 100.0).count();
    assert!(
        between >= 2,
        "progress did not move during the import: {seen:?}"
    );
    platform.assert_volume_holds("default", "slow", image);
}

#[test]
fn an_import_interrupted_by_killing_the_control_plane_completes_after_restart() {
    let image = "v3.qcow2.gz";
    let server = slow_server(image, 12);
    let mut platform = Platform::start("dv-restart");
    platform.apply(&http_datavolume("survivor", &server.url(image), "64Mi", ""));
    platform.wait_dv("default", "survivor", IMPORT_LIMIT, |dv| {
        progress_of(dv).is_some_and(|p| p > 0.0)
    });
    platform.kill_and_restart();
    platform.wait_phase("default", "survivor", "Succeeded", IMPORT_LIMIT);
    platform.assert_volume_holds("default", "survivor", image);
}

/// Runs `ferrovirt image-upload ARGS` against the platform: the proxy's URL and CA are
/// found in the cluster (CDIConfig status, CDI's CA bundle ConfigMap).
fn image_upload(platform: &Platform, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ferrovirt"));
    command
        .arg("image-upload")
        .args(args)
        .env("KUBECONFIG", platform.kubeconfig())
        .env("HOME", platform.data_dir());
    for proxy in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
        command.env_remove(proxy);
    }
    command.output().expect("running ferrovirt image-upload")
}

#[test]
fn image_upload_creates_an_upload_datavolume_and_fills_it() {
    let platform = Platform::start("dv-upload");
    let image = "v3.qcow2";
    let path = ferrovirt_tests::fixture(image);
    let out = image_upload(
        &platform,
        &[
            "dv",
            "uploaded",
            "--size",
            "64Mi",
            "--image-path",
            path.to_str().expect("a UTF-8 path"),
        ],
    );
    assert!(
        out.status.success(),
        "image-upload failed: {}\n{}\n--- log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        platform.log()
    );
    let dv = platform.wait_phase("default", "uploaded", "Succeeded", IMPORT_LIMIT);
    let ready = condition(&dv, "Ready").expect("a Ready condition");
    assert_eq!(ready["status"], "True", "{dv}");
    platform.assert_volume_holds("default", "uploaded", image);
    // The upload server pod is gone once the upload succeeded.
    let pods = platform.ok(&["get", "pods", "-o", "name"]);
    assert!(!pods.contains("cdi-upload-uploaded"), "{pods}");
}

/// Polls claim `name` until `done` holds for it; returns it.
fn wait_claim(
    platform: &Platform,
    name: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    wait_claim_in(platform, "default", name, done)
}

/// Polls claim `namespace/name` until `done` holds for it; returns it.
fn wait_claim_in(
    platform: &Platform,
    namespace: &str,
    name: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + IMPORT_LIMIT;
    let mut last = serde_json::Value::Null;
    while std::time::Instant::now() < deadline {
        if let Some(claim) = platform.json(&["get", "pvc", "-n", namespace, name]) {
            if done(&claim) {
                return claim;
            }
            last = claim;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "claim {name} did not get there:\n{last:#}\n--- log:\n{}",
        platform.log()
    );
}

fn pod_phase_of(claim: &serde_json::Value) -> &str {
    claim["metadata"]["annotations"]["cdi.kubevirt.io/storage.pod.phase"]
        .as_str()
        .unwrap_or_default()
}

/// CDI's annotation API on claims without a DataVolume: `image-upload pvc` (what `virtctl
/// image-upload pvc` does) gets an upload server, a claim annotated with an http endpoint an
/// importer; both report on the claim's annotations as CDI's controllers do and leave no pod
/// behind.
#[test]
fn bare_claims_are_filled_through_cdis_annotations() {
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("bare-claims");
    let image = "v3.qcow2";
    let path = ferrovirt_tests::fixture(image);
    let path = path.to_str().expect("a UTF-8 path");
    let out = image_upload(
        &platform,
        &["pvc", "uploaded", "--size", "64Mi", "--image-path", path],
    );
    assert!(
        out.status.success(),
        "image-upload pvc failed: {}\n{}\n--- log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        platform.log()
    );
    let uploaded = wait_claim(&platform, "uploaded", |c| pod_phase_of(c) == "Succeeded");
    assert_eq!(
        uploaded["metadata"]["annotations"]["cdi.kubevirt.io/storage.condition.running.reason"],
        "Completed",
        "{uploaded:#}"
    );
    platform.assert_volume_holds("default", "uploaded", image);

    platform.apply(&format!(
        "apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: imported
  annotations:
    cdi.kubevirt.io/storage.import.endpoint: {}
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 64Mi}}}}
",
        server.url(image)
    ));
    let imported = wait_claim(&platform, "imported", |c| pod_phase_of(c) == "Succeeded");
    assert_eq!(
        imported["metadata"]["annotations"]["cdi.kubevirt.io/storage.import.importPodName"],
        "importer-imported"
    );
    platform.assert_volume_holds("default", "imported", image);
    let pods = platform.ok(&["get", "pods", "-o", "name"]);
    assert!(
        !pods.contains("cdi-upload-uploaded") && !pods.contains("importer-imported"),
        "{pods}"
    );
}

/// The Events on `namespace/object` as (reason, message), once one has `reason`.
fn wait_event(
    platform: &Platform,
    namespace: &str,
    object: &str,
    reason: &str,
) -> Vec<(String, String)> {
    let deadline = std::time::Instant::now() + IMPORT_LIMIT;
    let selector = format!("--field-selector=involvedObject.name={object}");
    loop {
        let listed = platform
            .json(&["get", "events", "-n", namespace, &selector])
            .unwrap_or_default();
        let events: Vec<(String, String)> = listed["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                let text = |key: &str| e[key].as_str().unwrap_or_default().to_string();
                (text("reason"), text("message"))
            })
            .collect();
        if events.iter().any(|(r, _)| r == reason) {
            return events;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {reason} event on {namespace}/{object}: {events:?}\n--- log:\n{}",
            platform.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The message of the first Event on `namespace/object` with `reason`.
fn event_message(platform: &Platform, namespace: &str, object: &str, reason: &str) -> String {
    wait_event(platform, namespace, object, reason)
        .into_iter()
        .find(|(r, _)| r == reason)
        .map(|(_, message)| message)
        .unwrap_or_default()
}

/// A bare claim in `copies` asking for a clone of `default/golden`, with `more` annotations.
fn clone_request(name: &str, value: &str, size: &str, more: &str) -> String {
    format!(
        "apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {name}
  namespace: copies
  annotations:
    k8s.io/CloneRequest: {value}{more}
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: {size}}}}}
"
    )
}

/// CDI's clone controller on claims without a DataVolume: a claim annotated
/// `k8s.io/CloneRequest: default/golden` in another namespace, with a clone token for that
/// source and itself (signed with the platform's key, as CDI's API server signs them), gets
/// a host-assisted copy (upload server, source pod) and ends with CDI's annotations and
/// event and no pod left; without a token, with a value that is not NAMESPACE/NAME, or too
/// small for the source, a claim is refused in an Event naming why and nothing is made.
#[test]
fn a_bare_claim_with_a_clone_request_gets_a_copy_of_its_source() {
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("bare-clone");
    let image = "v3.qcow2";
    platform.apply(&http_datavolume("golden", &server.url(image), "64Mi", ""));
    platform.ok(&["create", "namespace", "copies"]);
    let issuer = uploadproxy::UploadTokenIssuer::load_or_create(platform.data_dir())
        .expect("the platform's token signing key");
    let token = |target: &str| {
        let token = issuer
            .issue_clone(("default", "golden"), ("copies", target))
            .expect("a clone token");
        format!("\n    cdi.kubevirt.io/storage.clone.token: {token}")
    };
    platform.wait_phase("default", "golden", "Succeeded", IMPORT_LIMIT);
    // The source's claim is 64Mi and the filesystem's overhead: a 64Mi claim is too small.
    let claims = [
        clone_request("copy", "default/golden", "128Mi", &token("copy")),
        clone_request("no-token", "default/golden", "128Mi", ""),
        clone_request("not-a-name", "golden", "128Mi", &token("not-a-name")),
        clone_request("too-small", "default/golden", "64Mi", &token("too-small")),
    ];
    platform.apply(&claims.join("---\n"));

    let copied = wait_claim_in(&platform, "copies", "copy", |c| {
        pod_phase_of(c) == "Succeeded" && c["metadata"]["annotations"]["k8s.io/CloneOf"] == "true"
    });
    let annotations = &copied["metadata"]["annotations"];
    assert_eq!(
        annotations["cdi.kubevirt.io/uploadClientName"],
        "default/golden-copies/copy"
    );
    let uid = copied["metadata"]["uid"].as_str().expect("a uid");
    assert_eq!(
        annotations["cdi.kubevirt.io/storage.sourceClonePodName"],
        format!("{uid}-source-pod")
    );
    assert!(
        copied["metadata"]["finalizers"]
            .as_array()
            .is_none_or(|f| !f.iter().any(|f| f == "cdi.kubevirt.io/cloneSource")),
        "{copied:#}"
    );
    let done = event_message(&platform, "copies", "copy", "CloneSucceeded");
    assert_eq!(done, "Clone Complete");
    // Byte for byte: the copy holds the source's disk, then zeros.
    platform.assert_volume_holds("copies", "copy", image);
    let scratch = TempDir::new("bare-clone");
    let (source_disk, copy_disk) = (scratch.join("golden.img"), scratch.join("copy.img"));
    platform.extract_disk("default", "golden", &source_disk);
    platform.extract_disk("copies", "copy", &copy_disk);
    let source_len = std::fs::metadata(&source_disk)
        .expect("the source disk")
        .len();
    let (digest, zero_tail) = digest_prefix(&copy_disk, source_len);
    assert_eq!(digest, digest_prefix(&source_disk, source_len).0);
    assert!(zero_tail, "the copy has data after the source's end");
    // No worker is left: the source pod (in the source's namespace) nor the upload server.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let pods = platform.ok(&["get", "pods", "-A", "-o", "name"]);
        if !pods.contains("-source-pod") && !pods.contains("cdi-upload-copy") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "pods left: {pods}");
        std::thread::sleep(Duration::from_millis(200));
    }

    let refused = event_message(&platform, "copies", "no-token", "CloneValidationFailed");
    assert!(
        refused.starts_with("The clone doesn't meet the validation requirements")
            && refused.contains("no clone token"),
        "{refused}"
    );
    let malformed = event_message(&platform, "copies", "not-a-name", "ErrClaimNotValid");
    assert!(
        malformed.contains("error parsing clone request annotation")
            && malformed.contains("\"golden\""),
        "{malformed}"
    );
    let small = event_message(&platform, "copies", "too-small", "ErrIncompatiblePVC");
    assert!(small.contains("smaller than the source"), "{small}");
    let held = platform
        .json(&["get", "pvc", "-n", "copies", "no-token"])
        .expect("the claim");
    assert_eq!(
        held["metadata"]["annotations"]["cdi.kubevirt.io/storage.condition.source.running.reason"],
        "CloneValidationFailed",
        "{held:#}"
    );
    let pods = platform.ok(&["get", "pods", "-n", "copies", "-o", "name"]);
    assert!(pods.trim().is_empty(), "refused claims got workers: {pods}");
}

/// Polls DataSource `name` until its Ready condition has `reason`; returns the DataSource.
fn wait_datasource(platform: &Platform, name: &str, reason: &str) -> serde_json::Value {
    let deadline = std::time::Instant::now() + IMPORT_LIMIT;
    let mut last = serde_json::Value::Null;
    while std::time::Instant::now() < deadline {
        if let Some(ds) = platform.json(&["get", "datasource", name]) {
            if condition(&ds, "Ready").is_some_and(|c| c["reason"] == reason) {
                return ds;
            }
            last = ds;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "DataSource {name} never had reason {reason}: {last}\n{}",
        platform.log()
    );
}

#[test]
fn clones_of_a_pvc_directly_and_through_a_datasource_hold_the_source_contents() {
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("dv-clone");
    let image = "v3.qcow2";
    platform.apply(
        r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataSource
metadata:
  name: golden-image
spec:
  source:
    pvc:
      namespace: default
      name: golden
"#,
    );
    let ds = wait_datasource(&platform, "golden-image", "NotFound");
    let ready = condition(&ds, "Ready").expect("Ready");
    assert_eq!(ready["status"], "False", "{ds}");
    assert_eq!(ready["message"], "PVC not found", "{ds}");

    platform.apply(&http_datavolume("golden", &server.url(image), "64Mi", ""));
    platform.wait_phase("default", "golden", "Succeeded", IMPORT_LIMIT);
    let ds = wait_datasource(&platform, "golden-image", "Ready");
    assert_eq!(condition(&ds, "Ready").expect("Ready")["status"], "True");
    assert_eq!(ds["status"]["source"]["pvc"]["name"], "golden", "{ds}");

    platform.apply(
        r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: copy
spec:
  source:
    pvc:
      namespace: default
      name: golden
  storage: {}
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: from-ref
spec:
  sourceRef:
    kind: DataSource
    name: golden-image
  storage: {}
"#,
    );
    for clone in ["copy", "from-ref"] {
        platform.wait_phase("default", clone, "Succeeded", IMPORT_LIMIT);
        platform.assert_volume_holds("default", clone, image);
        // Each clone is a volume of its own.
        assert_ne!(
            platform.volume_image("default", clone),
            platform.volume_image("default", "golden")
        );
    }
    platform.assert_volume_holds("default", "golden", image);
}

const SNAPSHOT_AND_RESTORES: &str = r#"apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: golden-snap
spec:
  source:
    persistentVolumeClaimName: golden
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataSource
metadata:
  name: golden-snapshot
spec:
  source:
    snapshot:
      namespace: default
      name: golden-snap
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: restored
spec:
  source:
    snapshot:
      namespace: default
      name: golden-snap
  storage: {}
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: restored-from-ref
spec:
  sourceRef:
    kind: DataSource
    name: golden-snapshot
  storage: {}
"#;

#[test]
fn datavolumes_restore_a_volume_snapshot_directly_and_through_a_datasource() {
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("dv-snapshot");
    let image = "v3.qcow2";
    platform.apply(&http_datavolume("golden", &server.url(image), "64Mi", ""));
    platform.wait_phase("default", "golden", "Succeeded", IMPORT_LIMIT);
    platform.apply(SNAPSHOT_AND_RESTORES);
    let ds = wait_datasource(&platform, "golden-snapshot", "Ready");
    assert_eq!(
        ds["status"]["source"]["snapshot"]["name"], "golden-snap",
        "{ds}"
    );
    let snapshot = platform
        .json(&["get", "volumesnapshot", "golden-snap"])
        .expect("the VolumeSnapshot");
    assert_eq!(snapshot["status"]["readyToUse"], true, "{snapshot}");
    let content = snapshot["status"]["boundVolumeSnapshotContentName"]
        .as_str()
        .expect("a bound content")
        .to_string();
    for restore in ["restored", "restored-from-ref"] {
        platform.wait_phase("default", restore, "Succeeded", IMPORT_LIMIT);
        platform.assert_volume_holds("default", restore, image);
        assert_ne!(
            platform.volume_image("default", restore),
            platform.volume_image("default", "golden")
        );
    }
    // Deleting the VolumeSnapshot deletes its content (deletionPolicy Delete).
    platform.ok(&["delete", "volumesnapshot", "golden-snap"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while platform
        .json(&["get", "volumesnapshotcontent", &content])
        .is_some()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{content} was not deleted"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    platform.assert_volume_holds("default", "restored", image);
}

/// RBAC of the cross-namespace clone test: alice manages DataVolumes in `team` only; the
/// ClusterRole `datavolume-cloner` is what CDI's docs tell users to bind in a source namespace.
const TEAM_RBAC: &str = r#"apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: datavolume-editor
  namespace: team
rules:
- apiGroups: ["cdi.kubevirt.io"]
  resources: ["datavolumes"]
  verbs: ["get", "list", "watch", "create", "delete"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: alice-edits-datavolumes
  namespace: team
subjects:
- kind: User
  name: alice
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: datavolume-editor
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: datavolume-cloner
rules:
- apiGroups: ["cdi.kubevirt.io"]
  resources: ["datavolumes/source"]
  verbs: ["create"]
"#;

const CLONE_PERMISSION: &str = r#"apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: alice-clones-golden-images
  namespace: golden-images
subjects:
- kind: User
  name: alice
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: datavolume-cloner
"#;

const CAN_CLONE_FROM_GOLDEN_IMAGES: &str = r#"apiVersion: authorization.k8s.io/v1
kind: SelfSubjectAccessReview
spec:
  resourceAttributes:
    namespace: golden-images
    verb: create
    group: cdi.kubevirt.io
    resource: datavolumes
    subresource: source
"#;

const CROSS_NAMESPACE_CLONE: &str = r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: copy
  namespace: team
spec:
  source:
    pvc:
      namespace: golden-images
      name: golden
  storage: {}
"#;

/// A snapshot of the golden image (applied by the admin) and its restore into `team`.
const CROSS_NAMESPACE_RESTORE: (&str, &str) = (
    r#"apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: golden-snap
  namespace: golden-images
spec:
  source:
    persistentVolumeClaimName: golden
"#,
    r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: restored
  namespace: team
spec:
  source:
    snapshot:
      namespace: golden-images
      name: golden-snap
  storage: {}
"#,
);

/// What a cross-namespace clone's DataVolume holds until its target claim is bound.
const CROSS_NAMESPACE_FINALIZER: &str = "cdi.kubevirt.io/crossNamespaceClone";

/// A claim in golden-images that nothing consumes: its WaitForFirstConsumer class never
/// gives it (or a clone's temporary claim of it) a node, so neither is ever provisioned; and a
/// clone of it into team, stuck before the hand-over.
const CROSS_NAMESPACE_CLONE_NEVER_BOUND: (&str, &str) = (
    r#"apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: unconsumed
  namespace: golden-images
spec:
  storageClassName: hostpath-csi
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 64Mi
"#,
    r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: abandoned
  namespace: team
spec:
  source:
    pvc:
      namespace: golden-images
      name: unconsumed
  storage: {}
"#,
);

#[test]
fn a_cross_namespace_clone_needs_permission_in_the_source_namespace() {
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("dv-clone-xns");
    let image = "v3.qcow2";
    platform.apply(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: golden-images}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n",
    );
    let golden = http_datavolume("golden", &server.url(image), "64Mi", "");
    platform.ok_stdin(&["apply", "-n", "golden-images", "-f", "-"], Some(&golden));
    platform.wait_phase("golden-images", "golden", "Succeeded", IMPORT_LIMIT);
    platform.apply(TEAM_RBAC);
    let as_alice = |args: &[&str], stdin: Option<&str>| {
        let mut all = vec!["--as", "alice"];
        all.extend_from_slice(args);
        platform.kubectl(&all, stdin)
    };
    // What `kubectl auth can-i` asks; created from YAML because can-i sends protobuf.
    let can_clone = || {
        let answer = as_alice(
            &[
                "create",
                "--validate=false",
                "-o",
                "jsonpath={.status.allowed}",
                "-f",
                "-",
            ],
            Some(CAN_CLONE_FROM_GOLDEN_IMAGES),
        );
        assert!(answer.status.success(), "{answer:?}");
        String::from_utf8_lossy(&answer.stdout).trim().to_string()
    };

    // Without permission in golden-images: refused at admission, nothing created.
    assert_eq!(can_clone(), "false");
    let denied = as_alice(&["get", "datavolumes", "-n", "golden-images"], None);
    assert!(!denied.status.success());
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains(
            r#"User "alice" cannot list resource "datavolumes" in API group "cdi.kubevirt.io" in the namespace "golden-images""#
        ),
        "{denied:?}"
    );
    let refused = as_alice(&["apply", "-f", "-"], Some(CROSS_NAMESPACE_CLONE));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{refused:?}");
    assert!(
        stderr.contains(
            "User alice has insufficient permissions in clone source namespace golden-images"
        ),
        "{stderr}"
    );
    assert!(
        platform
            .json(&["get", "dv", "-n", "team", "copy"])
            .is_none()
    );

    // With datavolumes/source granted there, the clone is admitted and completes.
    platform.apply(CLONE_PERMISSION);
    assert_eq!(can_clone(), "true");
    let admitted = as_alice(&["apply", "-f", "-"], Some(CROSS_NAMESPACE_CLONE));
    assert!(admitted.status.success(), "{admitted:?}");
    let dv = platform.wait_phase("team", "copy", "Succeeded", IMPORT_LIMIT);
    assert!(
        dv["metadata"]["annotations"]["cdi.kubevirt.io/storage.clone.token"].is_string(),
        "{dv}"
    );
    platform.assert_volume_holds("team", "copy", image);
    assert_ne!(
        platform.volume_image("team", "copy"),
        platform.volume_image("golden-images", "golden")
    );
    // The temporary claim is gone and the volume has its reclaim policy back.
    let claims = platform.ok(&["get", "pvc", "-n", "golden-images", "-o", "name"]);
    assert_eq!(claims.trim(), "persistentvolumeclaim/golden", "{claims}");
    let claim = platform
        .json(&["get", "pvc", "-n", "team", "copy"])
        .expect("the clone's PVC");
    let pv_name = claim["spec"]["volumeName"].as_str().expect("bound");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let pv = platform.json(&["get", "pv", pv_name]).expect("the PV");
        if pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete" {
            assert_eq!(pv["spec"]["claimRef"]["namespace"], "team", "{pv}");
            assert_eq!(
                pv["spec"]["claimRef"]["uid"], claim["metadata"]["uid"],
                "{pv}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "reclaim policy not restored: {pv}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Nothing is left to clean up: the DataVolume's finalizer is off.
    platform.wait_dv("team", "copy", Duration::from_secs(30), |dv| {
        !dv["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == CROSS_NAMESPACE_FINALIZER))
    });
    platform.assert_volume_holds("golden-images", "golden", image);

    // A VolumeSnapshot in golden-images is restored into team the same way.
    platform.apply(CROSS_NAMESPACE_RESTORE.0);
    let admitted = as_alice(&["apply", "-f", "-"], Some(CROSS_NAMESPACE_RESTORE.1));
    assert!(admitted.status.success(), "{admitted:?}");
    platform.wait_phase("team", "restored", "Succeeded", IMPORT_LIMIT);
    platform.assert_volume_holds("team", "restored", image);

    // A clone deleted before the hand-over takes its temporary claim in golden-images with it.
    platform.apply(CROSS_NAMESPACE_CLONE_NEVER_BOUND.0);
    let admitted = as_alice(
        &["apply", "-f", "-"],
        Some(CROSS_NAMESPACE_CLONE_NEVER_BOUND.1),
    );
    assert!(admitted.status.success(), "{admitted:?}");
    let dv = platform
        .json(&["get", "dv", "-n", "team", "abandoned"])
        .expect("the DataVolume");
    let uid = dv["metadata"]["uid"].as_str().expect("a uid");
    let temporary = format!("cdi-tmp-{uid}");
    let deadline = std::time::Instant::now() + IMPORT_LIMIT;
    let claim = loop {
        if let Some(claim) = platform.json(&["get", "pvc", "-n", "golden-images", &temporary]) {
            break claim;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no temporary claim {temporary}: {}\n{}",
            platform
                .json(&["get", "dv", "-n", "team", "abandoned"])
                .unwrap_or_default(),
            platform.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_ne!(claim["status"]["phase"], "Bound", "{claim}");
    let dv = platform.wait_dv("team", "abandoned", Duration::from_secs(30), |dv| {
        dv["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == CROSS_NAMESPACE_FINALIZER))
    });
    assert_eq!(dv["metadata"]["uid"], uid, "{dv}");
    let started = std::time::Instant::now();
    let deleted = as_alice(
        &[
            "delete",
            "datavolume",
            "-n",
            "team",
            "abandoned",
            "--wait",
            "--timeout=60s",
        ],
        None,
    );
    assert!(deleted.status.success(), "{deleted:?}\n{}", platform.log());
    eprintln!("deleting the abandoned clone took {:?}", started.elapsed());
    assert!(
        platform
            .json(&["get", "dv", "-n", "team", "abandoned"])
            .is_none()
    );
    let leftover = platform.json(&["get", "pvc", "-n", "golden-images", &temporary]);
    assert!(leftover.is_none(), "left behind: {leftover:?}");
    let claims = platform.ok(&["get", "pvc", "-n", "golden-images", "-o", "name"]);
    assert!(!claims.contains("cdi-tmp-"), "{claims}");
}

#[test]
fn a_dataimportcron_imports_each_new_digest_and_moves_its_datasource() {
    use ferrovirt_tests::registry::{RegistryServer, RegistryServerOptions};
    let registry = RegistryServer::start(RegistryServerOptions::default());
    push_disk(&registry, "v3.qcow2", "golden:latest");
    let platform = Platform::start("dv-cron");
    allow_insecure_registry(&platform, &registry.host());
    platform.apply(&format!(
        r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataImportCron
metadata:
  name: golden-cron
spec:
  schedule: "* * * * *"
  managedDataSource: golden
  importsToKeep: 1
  template:
    spec:
      source:
        registry:
          url: "{}"
      storage:
        resources:
          requests:
            storage: 64Mi
"#,
        registry.reference("golden:latest")
    ));
    let up_to_date = |cron: &serde_json::Value| {
        condition(cron, "UpToDate").is_some_and(|c| c["status"] == "True")
    };
    let cron = platform.wait_cron("golden-cron", IMPORT_LIMIT, up_to_date);
    let first = cron["status"]["lastImportedPVC"]["name"]
        .as_str()
        .expect("a last imported PVC")
        .to_string();
    assert!(first.starts_with("golden-"), "{cron}");
    let ds = wait_datasource(&platform, "golden", "Ready");
    assert_eq!(ds["spec"]["source"]["pvc"]["name"], first.as_str(), "{ds}");
    platform.assert_volume_holds("default", &first, "v3.qcow2");

    // A new image under the same tag is imported at the next minute's poll.
    push_disk(&registry, "dynamic.vhdx", "golden:latest");
    let cron = platform.wait_cron("golden-cron", Duration::from_secs(150), |cron| {
        up_to_date(cron) && cron["status"]["lastImportedPVC"]["name"] != first.as_str()
    });
    let second = cron["status"]["lastImportedPVC"]["name"]
        .as_str()
        .expect("a last imported PVC")
        .to_string();
    platform.assert_volume_holds("default", &second, "dynamic.vhdx");
    let ds = platform
        .json(&["get", "datasource", "golden"])
        .expect("the DataSource");
    assert_eq!(ds["spec"]["source"]["pvc"]["name"], second.as_str(), "{ds}");
    // importsToKeep: 1, so the first import is collected.
    let deadline = std::time::Instant::now() + IMPORT_LIMIT;
    while platform.json(&["get", "datavolume", &first]).is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "{first} was not collected"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The README's first command: examples/demo.sh starts `ferrovirt up`, serves the fast
/// guest's disk over HTTP, follows a VM whose dataVolumeTemplate imports it to Running and
/// shows its console's login prompt.
#[test]
fn the_readme_demo_boots_a_vm_from_an_imported_disk() {
    let dir = TempDir::new("dv-demo");
    let binary = env!("CARGO_BIN_EXE_ferrovirt");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // As the README runs it: no image given, the script builds the fast guest.
    let out = std::process::Command::new("bash")
        .arg(repo.join("examples/demo.sh"))
        .env("FERROVIRT", binary)
        .env("FERROVIRT_DATA_DIR", dir.path())
        .env("FERROVIRT_LISTEN", "127.0.0.1:0")
        .env("HOME", dir.path())
        // The script's own default: a disk boot under TCG beside the rest of the suite can
        // take minutes.
        .env("DEMO_TIMEOUT", "300")
        .output()
        .expect("running examples/demo.sh");
    let down = std::process::Command::new(binary)
        .args(["down", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("running ferrovirt down");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed: {stdout}\n{}\n--- log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(dir.join("ferrovirt.log")).unwrap_or_default()
    );
    for shown in [
        "datavolume/demo-root: Succeeded 100.0%",
        "virtualmachine/demo: Running",
        "--- serial console of vm/demo ---",
        "fastguest login:",
    ] {
        assert!(stdout.contains(shown), "{shown:?} not shown:\n{stdout}");
    }
    assert!(down.status.success(), "ferrovirt down failed: {down:?}");
}

/// A demo that fails after starting the platform (here: the VM cannot run within a one-second
/// limit) stops what it started.
#[test]
fn a_demo_that_fails_midway_leaves_nothing_running() {
    let dir = TempDir::new("dv-demo-fails");
    let binary = env!("CARGO_BIN_EXE_ferrovirt");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let image = dir.join("tiny.raw");
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let out = std::process::Command::new("bash")
        .arg(repo.join("examples/demo.sh"))
        .arg(&image)
        .current_dir(&repo)
        .env("FERROVIRT", binary)
        .env("FERROVIRT_DATA_DIR", dir.path())
        .env("FERROVIRT_LISTEN", "127.0.0.1:0")
        .env("HOME", dir.path())
        .env("DEMO_TIMEOUT", "1")
        .output()
        .expect("running examples/demo.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the demo should have failed: {stderr}"
    );
    assert!(
        stderr.contains("stopping the platform it started"),
        "{stderr}"
    );
    let down = std::process::Command::new(binary)
        .args(["down", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("running ferrovirt down");
    let said = String::from_utf8_lossy(&down.stderr);
    assert!(
        !down.status.success() && said.contains("not running"),
        "the platform still runs: {said}"
    );
}
