//! DataVolumes with an `s3` source end to end on one machine: `ferrovirt up`, an upstream-style
//! Secret (`accessKeyId`, `secretKey`) and DataVolume applied with kubectl, and the object
//! served by a real S3 server on loopback (moto), named by its path-style URL
//! (`http://127.0.0.1:PORT/BUCKET/KEY`) as the DataVolume's `spec.source.s3.url`.
//!
//! moto accepts any signature by default; here it is switched to verify them (its IAM
//! authentication, `/moto-api/reset-auth`) against the access key of an IAM user allowed only
//! `s3:GetObject`. So a successful import proves the Secret reached the importer and its
//! SigV4 signature is right, and a wrong secret key is refused as it is by AWS.

use crate::platform;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferrovirt_tests::TempDir;
use ferrovirt_tests::s3::S3Server;
use platform::{Platform, condition, phase_of};

const IMPORT_LIMIT: Duration = Duration::from_secs(60);
const BUCKET: &str = "disks";
const KEY: &str = "images/disk.qcow2";

/// An access key of moto's IAM user `importer`.
struct AccessKey {
    id: String,
    secret: String,
}

/// Runs a command, panicking with its stderr when it fails; returns its stdout.
fn run(command: &mut Command) -> String {
    let out = command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The text of the first `<tag>` element of an XML response.
fn xml_element<'a>(xml: &'a str, tag: &str) -> &'a str {
    let open = format!("<{tag}>");
    let start = xml
        .find(&open)
        .unwrap_or_else(|| panic!("no <{tag}> in {xml}"))
        + open.len();
    let end = xml[start..]
        .find(&format!("</{tag}>"))
        .unwrap_or_else(|| panic!("no </{tag}> in {xml}"))
        + start;
    &xml[start..end]
}

/// An IAM call (query protocol) to moto. The request is signed only so that moto routes it
/// to IAM: authentication is not on yet, so any key does.
fn iam(server: &S3Server, params: &[(&str, &str)]) -> String {
    let mut command = Command::new("curl");
    command.args([
        "-sSf",
        "--max-time",
        "10",
        "--aws-sigv4",
        "aws:amz:us-east-1:iam",
        "--user",
        "AKIASETUP:setup",
    ]);
    for (name, value) in params.iter().chain(&[("Version", "2010-05-08")]) {
        command
            .arg("--data-urlencode")
            .arg(format!("{name}={value}"));
    }
    run(command.arg(format!("{}/", server.endpoint())))
}

/// Creates the IAM user `importer`, allowed to read objects and nothing else, and its key;
/// then makes moto verify the signature and permissions of every later request.
fn require_authentication(server: &S3Server) -> AccessKey {
    iam(
        server,
        &[("Action", "CreateUser"), ("UserName", "importer")],
    );
    iam(
        server,
        &[
            ("Action", "PutUserPolicy"),
            ("UserName", "importer"),
            ("PolicyName", "read-objects"),
            (
                "PolicyDocument",
                r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}"#,
            ),
        ],
    );
    let created = iam(
        server,
        &[("Action", "CreateAccessKey"), ("UserName", "importer")],
    );
    let key = AccessKey {
        id: xml_element(&created, "AccessKeyId").to_string(),
        secret: xml_element(&created, "SecretAccessKey").to_string(),
    };
    // The number of requests still let through unauthenticated: none.
    run(Command::new("curl").args([
        "-sSf",
        "--max-time",
        "10",
        "-H",
        "Content-Type: text/plain",
        "--data-binary",
        "0",
        &format!("{}/moto-api/reset-auth", server.endpoint()),
    ]));
    key
}

/// A 6 MiB qcow2 with data in three places, holes between them, and its `qemu-img convert
/// -O raw` (the reference).
fn make_image(dir: &TempDir) -> (PathBuf, PathBuf) {
    let qcow2 = dir.join("disk.qcow2");
    let raw = dir.join("disk.raw");
    run(Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2"])
        .arg(&qcow2)
        .arg("6M"));
    run(Command::new("qemu-io")
        .args(["-f", "qcow2"])
        .args(["-c", "write -P 0xab 0 1M"])
        .args(["-c", "write -P 0x5c 2560k 320k"])
        .args(["-c", "write -P 0x01 6080k 64k"])
        .arg(&qcow2));
    run(Command::new("qemu-img")
        .args(["convert", "-f", "qcow2", "-O", "raw"])
        .arg(&qcow2)
        .arg(&raw));
    (qcow2, raw)
}

/// Starts moto with the image as `BUCKET/KEY` and authentication on.
fn s3_with_image(dir: &TempDir) -> (S3Server, AccessKey, PathBuf) {
    let (qcow2, raw) = make_image(dir);
    let server = S3Server::start();
    server.put(BUCKET, KEY, &qcow2);
    let key = require_authentication(&server);
    (server, key, raw)
}

/// The Secret and DataVolume, as a CDI user writes them.
fn s3_manifests(name: &str, url: &str, key_id: &str, secret_key: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Secret
metadata:
  name: {name}-s3
type: Opaque
stringData:
  accessKeyId: "{key_id}"
  secretKey: "{secret_key}"
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: {name}
spec:
  source:
    s3:
      url: "{url}"
      secretRef: {name}-s3
  storage:
    resources:
      requests:
        storage: 32Mi
"#
    )
}

/// `disk` starts with the bytes of `reference` and holds only zeros after them.
fn assert_same_then_zeros(disk: &Path, reference: &Path) {
    let disk = std::fs::read(disk).expect("reading disk.img");
    let reference = std::fs::read(reference).expect("reading the reference");
    assert!(
        disk.len() >= reference.len(),
        "disk.img has {} bytes, the image {}",
        disk.len(),
        reference.len()
    );
    if let Some(at) = disk.iter().zip(&reference).position(|(a, b)| a != b) {
        panic!(
            "disk.img differs from qemu-img convert at byte {at}: {:#04x} != {:#04x}",
            disk[at], reference[at]
        );
    }
    assert!(
        disk[reference.len()..].iter().all(|b| *b == 0),
        "disk.img has data after the image's end"
    );
}

/// Deletes the DataVolume before the platform stops, pass or fail: `ferrovirt up` stopped
/// while an importer pod is in back-off leaves its volume mounted (a loop device per run).
struct DeleteOnDrop<'a>(&'a Platform, &'static str);

impl Drop for DeleteOnDrop<'_> {
    fn drop(&mut self) {
        let DeleteOnDrop(platform, name) = *self;
        platform.kubectl(&["delete", "datavolume", name, "--ignore-not-found"], None);
        let deadline = Instant::now() + Duration::from_secs(20);
        let pod = format!("importer-{name}");
        while Instant::now() < deadline
            && (platform.json(&["get", "pod", &pod]).is_some()
                || platform.json(&["get", "pvc", name]).is_some())
        {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The message of an importer pod that failed on an HTTP client error (4xx) from the object
/// store, reported on the Running condition as CDI does. Retrying does not cure those; other
/// failures may be transient, so the tests wait through them.
fn client_error(dv: &serde_json::Value) -> Option<&str> {
    condition(dv, "Running")
        .filter(|c| c["reason"] == "Error")
        .and_then(|c| c["message"].as_str())
        .filter(|m| m.contains("HTTP 4"))
}

#[test]
fn s3_qcow2_import_with_a_secret_succeeds_with_the_converted_image() {
    let dir = TempDir::new("dv-s3");
    let (server, key, raw) = s3_with_image(&dir);
    let platform = Platform::start("dv-s3");
    let _cleanup = DeleteOnDrop(&platform, "s3disk");
    let url = format!("{}/{BUCKET}/{KEY}", server.endpoint());
    platform.apply(&s3_manifests("s3disk", &url, &key.id, &key.secret));
    let dv = platform.wait_dv("default", "s3disk", IMPORT_LIMIT, |dv| {
        ["Succeeded", "Failed"].contains(&phase_of(dv)) || client_error(dv).is_some()
    });
    assert_eq!(phase_of(&dv), "Succeeded", "{dv}");
    assert_eq!(dv["status"]["progress"], "100.0%", "{dv}");
    let ready = condition(&dv, "Ready").expect("a Ready condition");
    assert_eq!(ready["status"], "True", "{dv}");
    let disk = dir.join("disk.img");
    platform.extract_disk("default", "s3disk", &disk);
    assert_same_then_zeros(&disk, &raw);
}

#[test]
fn s3_import_with_a_wrong_secret_key_is_refused_with_403_until_the_secret_is_fixed() {
    let dir = TempDir::new("dv-s3-denied");
    let (server, key, _) = s3_with_image(&dir);
    let platform = Platform::start("dv-s3-denied");
    let _cleanup = DeleteOnDrop(&platform, "denied");
    let url = format!("{}/{BUCKET}/{KEY}", server.endpoint());
    let wrong = format!("{}x", key.secret);
    platform.apply(&s3_manifests("denied", &url, &key.id, &wrong));
    // The importer reached moto, which refused the signature (SignatureDoesNotMatch is a 403;
    // a missing object would be a 404). The import is retried as CDI does, never succeeds.
    let dv = platform.wait_dv("default", "denied", IMPORT_LIMIT, |dv| {
        assert_ne!(phase_of(dv), "Succeeded", "{dv}");
        client_error(dv).is_some() && dv["status"]["restartCount"].as_i64() >= Some(1)
    });
    let message = client_error(&dv).unwrap_or_default();
    assert!(
        message.contains("HTTP 403 Forbidden") && message.contains(&url),
        "{dv}"
    );
    let running = condition(&dv, "Running").expect("a Running condition");
    assert_eq!(running["status"], "False", "{dv}");
    let ready = condition(&dv, "Ready").expect("a Ready condition");
    assert_eq!(ready["status"], "False", "{dv}");
    // Fixing the Secret fixes the next attempt: a restarted importer reads it again, as a
    // kubelet's new container does.
    platform.apply(&s3_manifests("denied", &url, &key.id, &key.secret));
    platform.wait_phase("default", "denied", "Succeeded", IMPORT_LIMIT);
}
