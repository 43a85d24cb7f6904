//! The registry source against a real registry on loopback (Debian's `docker-registry`) and
//! OCI archives: containerDisks pulled by tag and by digest, anonymously and with basic auth
//! over TLS with a custom CA, a multi-platform index, and the failures a user must be able to
//! read (401, unknown platform, no /disk file, a tampered layer).

use std::io::Read;
use std::time::Duration;

use ferrovirt_tests::registry::{
    ImageSpec, LayerCompression, LayerSpec, OciLayout, RegistryServer, RegistryServerOptions,
};
use ferrovirt_tests::{TempDir, fixture, reference_sha256, sha256_file};
use importer::source::http::Credentials;
use importer::source::registry::{RegistryOptions, open};
use importer::{ImportError, ImportRequest, import};
use sha2::{Digest, Sha256};

/// Every test is bounded: a hung registry or reader fails the test instead of CI.
const TEST_TIMEOUT: Duration = Duration::from_secs(120);

fn insecure() -> RegistryOptions {
    RegistryOptions {
        insecure: true,
        ..Default::default()
    }
}

/// Opens `reference` and reads the disk stream to its end: its size and sha256.
async fn pull(reference: &str, options: &RegistryOptions) -> Result<(u64, String), ImportError> {
    let source = open(reference, options).await?;
    let declared = source.size.expect("the tar entry's size");
    assert!(source.random_access.is_none());
    let mut stream = source.stream;
    let (read, hash) = tokio::task::spawn_blocking(move || {
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            let n = stream.read(&mut buf)?;
            if n == 0 {
                return Ok::<_, std::io::Error>((total, hex::encode(hasher.finalize())));
            }
            hasher.update(&buf[..n]);
            total += n as u64;
        }
    })
    .await
    .unwrap()
    .map_err(|e| match e.downcast::<ImportError>() {
        Ok(inner) => inner,
        Err(e) => ImportError::ReadSource(e),
    })?;
    assert_eq!(read, declared, "stream length vs tar entry size");
    Ok((read, hash))
}

fn fixture_digest(name: &str) -> (u64, String) {
    let path = fixture(name);
    (
        std::fs::metadata(&path).unwrap().len(),
        sha256_file(&path).unwrap(),
    )
}

async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("test timed out")
}

/// A containerDisk with the disk in a middle layer: a base layer below, an unrelated layer
/// above (so the scan reads past a layer without a disk).
fn container_disk(platform: &str, disk: &str, compression: LayerCompression) -> ImageSpec {
    ImageSpec::new(
        platform,
        vec![
            LayerSpec::new(LayerCompression::Gzip).file("etc/os-release", b"ID=test\n".to_vec()),
            LayerSpec::disk(compression, disk),
            LayerSpec::new(LayerCompression::Zstd).file("etc/motd", b"hello\n".to_vec()),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_pull_of_containerdisks_with_every_layer_compression() {
    bounded(async {
        let registry = RegistryServer::start(RegistryServerOptions::default());
        for (i, compression) in [
            LayerCompression::Gzip,
            LayerCompression::Zstd,
            LayerCompression::None,
        ]
        .into_iter()
        .enumerate()
        {
            let layout = OciLayout::image(&container_disk("linux/amd64", "v3.qcow2", compression));
            let repo = format!("disk{i}:v1");
            registry.push(&layout, &repo);
            let got = pull(&registry.reference(&repo), &insecure())
                .await
                .unwrap_or_else(|e| panic!("{compression:?}: {e}"));
            assert_eq!(got, fixture_digest("v3.qcow2"), "{compression:?}");
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_by_digest() {
    bounded(async {
        let registry = RegistryServer::start(RegistryServerOptions::default());
        let layout = OciLayout::image(&container_disk(
            "linux/amd64",
            "zstd.qcow2",
            LayerCompression::Gzip,
        ));
        registry.push(&layout, "disk:v1");
        let reference = registry.reference(&format!("disk@{}", layout.digest));
        let got = pull(&reference, &insecure()).await.unwrap();
        assert_eq!(got, fixture_digest("zstd.qcow2"));

        // A digest that is not the image's is refused by the registry.
        let wrong = registry.reference(&format!(
            "disk@sha256:{}",
            hex::encode(Sha256::digest(b"nothing"))
        ));
        let err = open(&wrong, &insecure())
            .await
            .err()
            .expect("unknown digest");
        assert!(matches!(err, ImportError::Registry { .. }), "{err}");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_basic_auth_with_a_ca_dir() {
    bounded(async {
        let registry = RegistryServer::start(RegistryServerOptions {
            tls: true,
            auth: Some(("cdi".into(), "s3cret".into())),
            bearer: false,
        });
        let layout = OciLayout::image(&container_disk(
            "linux/amd64",
            "v3.qcow2",
            LayerCompression::Gzip,
        ));
        registry.push(&layout, "private/disk:v1");
        let reference = registry.reference("private/disk:v1");
        let credentials = |password: &str| Credentials {
            username: "cdi".into(),
            password: password.into(),
        };

        let options = RegistryOptions {
            credentials: Some(credentials("s3cret")),
            cert_dir: Some(fixture("tls/ca-dir")),
            ..Default::default()
        };
        assert_eq!(
            pull(&reference, &options).await.unwrap(),
            fixture_digest("v3.qcow2")
        );

        let anonymous = RegistryOptions {
            credentials: None,
            ..options.clone()
        };
        let err = open(&reference, &anonymous).await.err().expect("401");
        let text = err.to_string();
        assert!(text.contains("401 Unauthorized"), "{text}");
        assert!(text.contains("requires credentials"), "{text}");

        let wrong = RegistryOptions {
            credentials: Some(credentials("wrong")),
            ..options.clone()
        };
        let text = open(&reference, &wrong)
            .await
            .err()
            .expect("401")
            .to_string();
        assert!(text.contains("credentials were refused"), "{text}");

        // Without the CA the certificate does not verify; `insecure` accepts it.
        let no_ca = RegistryOptions {
            cert_dir: None,
            ..options.clone()
        };
        assert!(open(&reference, &no_ca).await.is_err());
        let unverified = RegistryOptions {
            cert_dir: None,
            insecure: true,
            ..options.clone()
        };
        assert_eq!(
            pull(&reference, &unverified).await.unwrap(),
            fixture_digest("v3.qcow2")
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_token_auth() {
    bounded(async {
        let registry = RegistryServer::start(RegistryServerOptions {
            auth: Some(("cdi".into(), "t0ken".into())),
            bearer: true,
            ..Default::default()
        });
        let layout = OciLayout::index(&[
            container_disk("linux/amd64", "v3.qcow2", LayerCompression::Gzip),
            container_disk("linux/arm64", "zstd.qcow2", LayerCompression::Gzip),
        ]);
        registry.push(&layout, "team/disk:v1");
        let reference = registry.reference("team/disk:v1");
        let options = RegistryOptions {
            credentials: Some(Credentials {
                username: "cdi".into(),
                password: "t0ken".into(),
            }),
            platform: Some("linux/arm64".into()),
            ..insecure()
        };
        assert_eq!(
            pull(&reference, &options).await.unwrap(),
            fixture_digest("zstd.qcow2")
        );
        let anonymous = RegistryOptions {
            credentials: None,
            ..options.clone()
        };
        let text = open(&reference, &anonymous)
            .await
            .err()
            .expect("401")
            .to_string();
        assert!(text.contains("401 Unauthorized"), "{text}");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_registry_needs_insecure() {
    bounded(async {
        let registry = RegistryServer::start(RegistryServerOptions::default());
        let layout = OciLayout::image(&container_disk(
            "linux/amd64",
            "v3.qcow2",
            LayerCompression::Gzip,
        ));
        registry.push(&layout, "disk:v1");
        let err = open(&registry.reference("disk:v1"), &RegistryOptions::default())
            .await
            .err()
            .expect("HTTPS to a plain-HTTP registry fails");
        assert!(matches!(err, ImportError::Registry { .. }), "{err}");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_platform_index_picks_the_platform() {
    bounded(async {
        let registry = RegistryServer::start(RegistryServerOptions::default());
        let layout = OciLayout::index(&[
            container_disk("linux/amd64", "v3.qcow2", LayerCompression::Gzip),
            container_disk("linux/arm64/v8", "zlib.qcow2", LayerCompression::Zstd),
        ]);
        registry.push(&layout, "multi:v1");
        let reference = registry.reference("multi:v1");
        let with_platform = |platform: &str| RegistryOptions {
            platform: Some(platform.into()),
            ..insecure()
        };

        let host_disk = match std::env::consts::ARCH {
            "aarch64" => Some("zlib.qcow2"),
            "x86_64" => Some("v3.qcow2"),
            _ => None,
        };
        if let Some(disk) = host_disk {
            assert_eq!(
                pull(&reference, &insecure()).await.unwrap(),
                fixture_digest(disk),
                "default platform"
            );
        }
        assert_eq!(
            pull(&reference, &with_platform("linux/arm64"))
                .await
                .unwrap(),
            fixture_digest("zlib.qcow2")
        );
        assert_eq!(
            pull(&reference, &with_platform("amd64")).await.unwrap(),
            fixture_digest("v3.qcow2")
        );
        // By the index's digest too.
        let by_digest = registry.reference(&format!("multi@{}", layout.digest));
        assert_eq!(
            pull(&by_digest, &with_platform("linux/arm64/v8"))
                .await
                .unwrap(),
            fixture_digest("zlib.qcow2")
        );

        let text = open(&reference, &with_platform("linux/s390x"))
            .await
            .err()
            .expect("no s390x image")
            .to_string();
        assert!(
            text.contains("no manifest for platform linux/s390x")
                && text.contains("available: linux/amd64, linux/arm64/v8"),
            "{text}"
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_without_a_disk_file_fails_clearly() {
    bounded(async {
        let registry = RegistryServer::start(RegistryServerOptions::default());
        let layout = OciLayout::image(&ImageSpec::new(
            "linux/amd64",
            vec![
                LayerSpec::new(LayerCompression::Gzip).file("etc/hostname", b"x\n".to_vec()),
                // Not directly under disk/: not a containerDisk's disk.
                LayerSpec::new(LayerCompression::None)
                    .file("disk/sub/nested.img", vec![1; 4096])
                    .file("data/disk.img", vec![2; 4096]),
            ],
        ));
        registry.push(&layout, "nodisk:v1");
        let text = open(&registry.reference("nodisk:v1"), &insecure())
            .await
            .err()
            .expect("no disk")
            .to_string();
        assert!(text.contains("has no file under /disk"), "{text}");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_layer_fails_digest_verification() {
    bounded(async {
        let registry = RegistryServer::start(RegistryServerOptions::default());
        for (i, compression) in [LayerCompression::None, LayerCompression::Gzip]
            .into_iter()
            .enumerate()
        {
            let layout = OciLayout::image(&container_disk("linux/amd64", "v3.qcow2", compression));
            let repo = format!("tampered{i}:v1");
            registry.push(&layout, &repo);
            let disk_layer = &layout.layers[0][1];
            // Half way through the blob: inside the disk file's data, so an uncompressed tar
            // still parses and only the digest can tell.
            let size = std::fs::metadata(registry.blob_path(disk_layer))
                .unwrap()
                .len();
            registry.tamper_blob(disk_layer, size / 2);
            let err = pull(&registry.reference(&repo), &insecure())
                .await
                .err()
                .unwrap_or_else(|| panic!("{compression:?}: a tampered layer was accepted"));
            let text = err.to_string();
            assert!(
                text.contains(&format!("layer {disk_layer} digest mismatch")),
                "{compression:?}: {text}"
            );
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oci_archive_holds_a_containerdisk() {
    bounded(async {
        let dir = TempDir::new("oci-archive");
        let layout = OciLayout::index(&[
            container_disk("linux/amd64", "v3.qcow2", LayerCompression::Gzip),
            container_disk("linux/arm64", "zlib.qcow2", LayerCompression::None),
        ]);
        let archive = dir.join("image.tar");
        layout.write_archive(&archive);
        let reference = format!("oci-archive://{}", archive.display());
        let arm = RegistryOptions {
            platform: Some("linux/arm64".into()),
            ..Default::default()
        };
        assert_eq!(
            pull(&reference, &arm).await.unwrap(),
            fixture_digest("zlib.qcow2")
        );
        let amd = RegistryOptions {
            platform: Some("linux/amd64".into()),
            ..Default::default()
        };
        assert_eq!(
            pull(&format!("{reference}:{}", OciLayout::TAG), &amd)
                .await
                .unwrap(),
            fixture_digest("v3.qcow2")
        );

        let missing = format!("oci-archive://{}", dir.join("missing.tar").display());
        assert!(matches!(
            open(&missing, &amd).await.err(),
            Some(ImportError::OpenSource { .. })
        ));
    })
    .await
}

/// The whole pipeline from a registry: the converted disk is byte-identical to
/// `qemu-img convert -O raw`, also when the disk file in the image is itself compressed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_import_from_a_registry_matches_qemu_img() {
    bounded(async {
        let registry = RegistryServer::start(RegistryServerOptions::default());
        for (i, disk) in ["v3.qcow2", "zstd.qcow2", "raw.img.xz"]
            .into_iter()
            .enumerate()
        {
            let layout =
                OciLayout::image(&container_disk("linux/amd64", disk, LayerCompression::Gzip));
            let repo = format!("full{i}:v1");
            registry.push(&layout, &repo);
            let dir = TempDir::new("registry-import");
            let mut request = ImportRequest::new(registry.reference(&repo), dir.join("disk.img"));
            request.http.insecure_tls = true;
            import(request)
                .await
                .unwrap_or_else(|e| panic!("{disk}: {e}"));
            assert_eq!(
                sha256_file(&dir.join("disk.img")).unwrap(),
                reference_sha256(disk),
                "{disk}: differs from qemu-img"
            );
        }
    })
    .await
}

/// A tampered layer fails the import and leaves no target behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_import_of_a_tampered_layer_fails() {
    bounded(async {
        let registry = RegistryServer::start(RegistryServerOptions::default());
        let layout = OciLayout::image(&container_disk(
            "linux/amd64",
            "v3.qcow2",
            LayerCompression::None,
        ));
        registry.push(&layout, "tampered:v1");
        let disk_layer = &layout.layers[0][1];
        let size = std::fs::metadata(registry.blob_path(disk_layer))
            .unwrap()
            .len();
        registry.tamper_blob(disk_layer, size / 2);
        let dir = TempDir::new("registry-import");
        let mut request =
            ImportRequest::new(registry.reference("tampered:v1"), dir.join("disk.img"));
        request.http.insecure_tls = true;
        let text = import(request).await.expect_err("tampered").to_string();
        assert!(
            text.contains(&format!("layer {disk_layer} digest mismatch")),
            "{text}"
        );
        assert!(
            !dir.join("disk.img").exists(),
            "a failed import left a target"
        );
    })
    .await
}

#[tokio::test]
async fn other_schemes_are_refused() {
    let err = open("https://example.invalid/disk", &RegistryOptions::default())
        .await
        .err()
        .expect("not a registry reference");
    assert!(matches!(err, ImportError::InvalidSource(..)), "{err}");
}

/// Throughput of a pull of the benchmark image (fixtures/perf-image.sh) from the local
/// registry, against `skopeo copy` of the same image to a directory (the download CDI does
/// before its conversion). Run with `--ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: needs target/perf-fixtures (fixtures/perf-image.sh)"]
async fn registry_pull_throughput() {
    let image = ferrovirt_tests::repo_root().join("target/perf-fixtures/perf.qcow2");
    let registry = RegistryServer::start(RegistryServerOptions::default());
    let layout = OciLayout::image(&ImageSpec::new(
        "linux/amd64",
        vec![LayerSpec::disk_file(LayerCompression::Gzip, &image)],
    ));
    registry.push(&layout, "perf:v1");
    let reference = registry.reference("perf:v1");
    for run in 0..3 {
        let started = std::time::Instant::now();
        let (size, _) = pull(&reference, &insecure()).await.unwrap();
        let ours = started.elapsed();
        let dir = TempDir::new("skopeo-dir");
        let started = std::time::Instant::now();
        let status = std::process::Command::new("skopeo")
            .args([
                "copy",
                "--quiet",
                "--src-tls-verify=false",
                "--insecure-policy",
            ])
            .arg(format!("docker://{}/perf:v1", registry.host()))
            .arg(format!("dir:{}", dir.path().display()))
            .status()
            .unwrap();
        assert!(status.success());
        let skopeo = started.elapsed();
        println!(
            "run {run}: {size} bytes: ferrovirt open+read {ours:.2?}, skopeo copy to dir {skopeo:.2?}"
        );
    }
}
