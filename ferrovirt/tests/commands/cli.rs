//! The `ferrovirt` binary as users and pods run it: `import` on the command line, and the
//! `importer` entrypoint with CDI's environment contract and termination message.

use std::path::Path;
use std::process::{Command, Output};

use ferrovirt_tests::{
    HttpServer, HttpServerOptions, TempDir, fixture, reference_sha256, reference_size, sha256_file,
};

fn ferrovirt() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferrovirt"));
    command.env_remove("RUST_LOG");
    command
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn import_succeeds_and_reports() {
    let dir = TempDir::new("cli-ok");
    let target = dir.join("disk.img");
    let output = ferrovirt()
        .args(["import"])
        .arg(fixture("zstd.qcow2.xz"))
        .arg(&target)
        .args(["--size", "64Mi"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.starts_with("imported qcow2 (xz) image of virtual size"),
        "{stdout}"
    );
    assert_eq!(std::fs::metadata(&target).unwrap().len(), 64 << 20);
}

#[test]
fn failures_exit_non_zero_with_one_line_on_stderr() {
    let dir = TempDir::new("cli-fail");
    let cases: &[(&[&str], &str)] = &[
        (
            &["bad-l1.qcow2"],
            "error: invalid qcow2 image: L1 table size",
        ),
        (
            &["backing.qcow2"],
            "error: unsupported qcow2 image: it has a backing file",
        ),
        (
            &["v3.qcow2", "--size", "1Mi"],
            "error: requested size 1048576 is too small for the image's virtual size",
        ),
        (
            &[
                "v3.qcow2",
                "--checksum",
                "sha1:0000000000000000000000000000000000000000",
            ],
            "error: checksum mismatch: expected sha1:0000",
        ),
    ];
    for (args, expected) in cases {
        let output = ferrovirt()
            .arg("import")
            .arg(fixture(args[0]))
            .arg(dir.join("out.img"))
            .args(&args[1..])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = stderr_of(&output);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
        assert!(!dir.join("out.img").exists());
    }
    let output = ferrovirt()
        .args(["import", "x", "y", "--size", "lots"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_of(&output).contains("\"lots\" is not a valid quantity: no number"));
}

#[test]
fn credentials_come_from_the_environment_or_a_secret_directory() {
    let server = HttpServer::start(HttpServerOptions {
        auth: Some(("bob".into(), "pw".into())),
        ..Default::default()
    });
    let dir = TempDir::new("cli-auth");
    let output = ferrovirt()
        .args(["import", &server.url("v2.qcow2")])
        .arg(dir.join("a.img"))
        .env("FERROVIRT_ACCESS_KEY_ID", "bob")
        .env("FERROVIRT_SECRET_KEY", "pw")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert_eq!(
        sha256_file(&dir.join("a.img")).unwrap(),
        reference_sha256("v2.qcow2")
    );

    let secret = dir.join("secret");
    std::fs::create_dir(&secret).unwrap();
    std::fs::write(secret.join("accessKeyId"), "bob\n").unwrap();
    std::fs::write(secret.join("secretKey"), "pw").unwrap();
    let output = ferrovirt()
        .args(["import", &server.url("v2.qcow2")])
        .arg(dir.join("b.img"))
        .arg("--secret-dir")
        .arg(&secret)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
}

/// Runs `ferrovirt importer` as a pod would, with the volume paths redirected into `dir`.
fn run_importer_pod(dir: &Path, env: &[(&str, &str)]) -> (Output, String) {
    let log = dir.join("termination-log");
    let mut command = ferrovirt();
    command
        .arg("importer")
        .env("FERROVIRT_IMPORTER_WRITE_PATH", dir.join("disk.img"))
        .env("FERROVIRT_IMPORTER_BLOCK_PATH", dir.join("no-block-device"))
        .env("FERROVIRT_TERMINATION_LOG", &log)
        .env(
            "FERROVIRT_IMPORTER_SECRET_HEADERS_DIR",
            dir.join("extraheaders"),
        );
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    (output, std::fs::read_to_string(&log).unwrap_or_default())
}

#[test]
fn importer_pod_follows_cdis_contract() {
    let server = HttpServer::start(HttpServerOptions {
        auth: Some(("user".into(), "pass".into())),
        require_header: Some("X-Secret: 42".into()),
        ..Default::default()
    });
    let dir = TempDir::new("pod");
    std::fs::create_dir_all(dir.join("extraheaders/0")).unwrap();
    std::fs::write(dir.join("extraheaders/0/secretHeader"), "X-Secret: 42").unwrap();
    let url = server.url("zlib.qcow2.gz");
    let (output, message) = run_importer_pod(
        dir.path(),
        &[
            ("IMPORTER_SOURCE", "http"),
            ("IMPORTER_ENDPOINT", &url),
            ("IMPORTER_CONTENTTYPE", "kubevirt"),
            ("IMPORTER_IMAGE_SIZE", "100Mi"),
            ("FILESYSTEM_OVERHEAD", "0.055"),
            ("IMPORTER_ACCESS_KEY_ID", "user"),
            ("IMPORTER_SECRET_KEY", "pass"),
            ("IMPORTER_EXTRA_HEADER_0", "X-Extra: 1"),
            ("PREALLOCATION", "false"),
            ("OWNER_UID", "1234"),
        ],
    );
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert_eq!(
        message,
        r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}"#
    );
    // 100Mi less 5.5% overhead, aligned down to 1 MiB: 94 MiB.
    let disk = dir.join("disk.img");
    assert_eq!(std::fs::metadata(&disk).unwrap().len(), 94 << 20);
    let reference = reference_size("zlib.qcow2.gz") as usize;
    let content = std::fs::read(&disk).unwrap();
    let prefix = dir.join("prefix");
    std::fs::write(&prefix, &content[..reference]).unwrap();
    assert_eq!(
        sha256_file(&prefix).unwrap(),
        reference_sha256("zlib.qcow2.gz")
    );

    let (output, message) = run_importer_pod(
        dir.path(),
        &[
            ("IMPORTER_SOURCE", "http"),
            ("IMPORTER_ENDPOINT", &server.url("nothing-here")),
            ("PREALLOCATION", "false"),
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        message.starts_with("Unable to process data: HTTP 401"),
        "{message}"
    );

    let (output, message) = run_importer_pod(
        dir.path(),
        &[("IMPORTER_SOURCE", "http"), ("PREALLOCATION", "maybe")],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        message.contains("PREALLOCATION has a wrong value"),
        "{message}"
    );
}

#[test]
fn importer_pod_creates_blank_images() {
    let dir = TempDir::new("pod-blank");
    let (output, message) = run_importer_pod(
        dir.path(),
        &[
            ("IMPORTER_SOURCE", "none"),
            ("IMPORTER_IMAGE_SIZE", "16Mi"),
            ("PREALLOCATION", "true"),
        ],
    );
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(
        message.contains(r#""preallocationApplied":true"#),
        "{message}"
    );
    assert_eq!(
        std::fs::metadata(dir.join("disk.img")).unwrap().len(),
        16 << 20
    );
}

/// A loop device over a sparse file of `size` bytes; detached on drop.
struct LoopDevice {
    device: String,
}

impl LoopDevice {
    fn new(backing: &Path, size: u64) -> Self {
        let file = std::fs::File::create(backing).unwrap();
        file.set_len(size).unwrap();
        // Garbage where the image will have holes: the import must zero it.
        use std::os::unix::fs::FileExt;
        file.write_all_at(&vec![0xaa; 1 << 20], 4 << 20).unwrap();
        let output = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(backing)
            .output()
            .expect("losetup");
        assert!(output.status.success(), "losetup: {}", stderr_of(&output));
        LoopDevice {
            device: String::from_utf8(output.stdout).unwrap().trim().to_string(),
        }
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
    }
}

#[test]
fn block_device_targets() {
    let dir = TempDir::new("block");
    let name = "zeroclusters.qcow2";
    let reference = reference_size(name);
    let device = LoopDevice::new(&dir.join("backing"), reference + (8 << 20));
    let output = ferrovirt()
        .arg("import")
        .arg(fixture(name))
        .arg(&device.device)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let content = std::fs::read(&device.device).unwrap();
    let prefix = dir.join("prefix");
    std::fs::write(&prefix, &content[..reference as usize]).unwrap();
    assert_eq!(sha256_file(&prefix).unwrap(), reference_sha256(name));
    assert!(
        content[reference as usize..].iter().all(|&b| b == 0),
        "the device's tail was not zeroed"
    );

    let small = LoopDevice::new(&dir.join("small"), 8 << 20);
    let output = ferrovirt()
        .arg("import")
        .arg(fixture(name))
        .arg(&small.device)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = stderr_of(&output);
    assert!(
        stderr.starts_with(&format!(
            "error: target too small to contain image: needs {reference} bytes, 8388608 available"
        )),
        "{stderr}"
    );
}

/// A containerDisk (the disk under /disk/) pushed to a real registry on loopback.
fn registry_with_disk(disk: &str) -> ferrovirt_tests::registry::RegistryServer {
    use ferrovirt_tests::registry::{
        ImageSpec, LayerCompression, LayerSpec, OciLayout, RegistryServer, RegistryServerOptions,
    };
    let registry = RegistryServer::start(RegistryServerOptions::default());
    let image = ImageSpec::new(
        "linux/amd64",
        vec![LayerSpec::disk_file(LayerCompression::Gzip, &fixture(disk))],
    );
    registry.push(&OciLayout::image(&image), "containerdisk:v1");
    registry
}

#[test]
fn registry_images_import_from_the_command_line_and_the_pod() {
    let registry = registry_with_disk("zstd.qcow2");
    let reference = registry.reference("containerdisk:v1");
    let dir = TempDir::new("cli-registry");
    let output = ferrovirt()
        .args(["import", &reference])
        .arg(dir.join("disk.img"))
        .arg("--insecure-tls")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert_eq!(
        sha256_file(&dir.join("disk.img")).unwrap(),
        reference_sha256("zstd.qcow2")
    );

    let output = ferrovirt()
        .args(["import", &registry.reference("missing:v1")])
        .arg(dir.join("x.img"))
        .arg("--insecure-tls")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr_of(&output).lines().count(),
        1,
        "{}",
        stderr_of(&output)
    );

    let (output, message) = run_importer_pod(
        dir.path(),
        &[
            ("IMPORTER_SOURCE", "registry"),
            ("IMPORTER_ENDPOINT", &reference),
            ("INSECURE_TLS", "true"),
            ("IMPORTER_REGISTRY_IMAGE_ARCHITECTURE", "amd64"),
            ("IMPORTER_IMAGE_SIZE", "64Mi"),
            ("PREALLOCATION", "false"),
        ],
    );
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(message.contains("Import Complete"), "{message}");
    assert_eq!(
        std::fs::metadata(dir.join("disk.img")).unwrap().len(),
        64 << 20
    );
}

#[test]
fn archive_content_type_from_the_command_line() {
    let dir = TempDir::new("cli-archive");
    let output = ferrovirt()
        .args(["import", "--content-type", "archive"])
        .arg(fixture("small.tar.gz"))
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert_eq!(
        std::fs::read_to_string(dir.join("hello.txt")).unwrap(),
        "hello from ferrovirt\n"
    );
    let output = ferrovirt()
        .args(["import", "--content-type", "archive"])
        .arg(fixture("evil.tar"))
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr_of(&output).starts_with("error: archive entry ../evil.txt refused"),
        "{}",
        stderr_of(&output)
    );
}

#[test]
fn down_where_nothing_runs_says_so_and_fails() {
    let dir = TempDir::new("cli-down");
    let output = ferrovirt()
        .arg("down")
        .arg("--data-dir")
        .arg(dir.join("never-started"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains("ferrovirt is not running from") && stderr.contains("never-started"),
        "{stderr}"
    );
}

#[test]
fn an_up_that_cannot_listen_fails_clearly_and_leaves_no_data_directory() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let dir = TempDir::new("cli-up-port");
    let data = dir.join("data");
    let output = ferrovirt()
        .arg("up")
        .arg("--data-dir")
        .arg(&data)
        .args(["--listen", &address])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains(&format!("listening on {address}")) && stderr.contains("in use"),
        "{stderr}"
    );
    assert!(
        !data.exists(),
        "a failed first start left {}",
        data.display()
    );
}
