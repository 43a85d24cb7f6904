//! Faults injected into an import, each of which must end in a clear error and no target
//! that looks complete: a server that stalls, one that lies about Content-Length, a
//! registry blob that does not match its digest, and a target filesystem that fills up.
//! (Dropped connections, with and without Range, are in `import_http.rs`.)

use std::time::{Duration, Instant};

use ferrovirt_tests::faulty_http::{Fault, FaultyHttpServer};
use ferrovirt_tests::loopfs::LoopFilesystem;
use ferrovirt_tests::registry::{
    ImageSpec, LayerCompression, LayerSpec, OciLayout, RegistryServer, RegistryServerOptions,
};
use ferrovirt_tests::{TempDir, fixture, noise, reference_sha256, sha256_file};
use importer::source::http::RetryPolicy;
use importer::{ImportError, ImportOutcome, ImportRequest, import};

/// Every test is bounded: an import that hangs fails the test instead of the suite.
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("test timed out: the import hung")
}

fn quick_retries() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        first_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(200),
    }
}

/// Imports `url` into a new directory with a short idle timeout; the result and the target.
async fn import_url(url: &str) -> (Result<ImportOutcome, ImportError>, TempDir) {
    let dir = TempDir::new("faults");
    let mut request = ImportRequest::new(url, dir.join("out.raw"));
    request.http.retry = quick_retries();
    request.http.idle_timeout = Duration::from_secs(1);
    (bounded(import(request)).await, dir)
}

/// The import failed with a message containing `needle`, leaving no target and no
/// staging file behind.
fn assert_failed(result: Result<ImportOutcome, ImportError>, dir: &TempDir, needle: &str) {
    let err = match result {
        Ok(outcome) => panic!("the import succeeded ({outcome:?}); expected \"{needle}\""),
        Err(err) => err.to_string(),
    };
    assert!(err.contains(needle), "expected \"{needle}\" in: {err}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "a failed import left {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stalls_without_range_support_fails_after_the_idle_timeout() {
    let body = std::fs::read(fixture("raw.img")).unwrap();
    let server = FaultyHttpServer::start(body, Fault::StallAt(3 << 20), false);
    let started = Instant::now();
    let (result, dir) = import_url(&server.url("raw.img")).await;
    assert_failed(
        result,
        &dir,
        "for 1s after 3145728 bytes: the server stalled, giving up",
    );
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stalls_at_the_same_byte_is_given_up_on_after_the_retries() {
    // Range support: each resumption gets its headers and then nothing again. Unbounded,
    // this loops forever; the retry policy's attempts end it.
    for name in ["raw.img", "v3.qcow2.xz"] {
        let body = std::fs::read(fixture(name)).unwrap();
        let at = body.len() as u64 / 2;
        let server = FaultyHttpServer::start(body, Fault::StallAt(at), true);
        let (result, dir) = import_url(&server.url(name)).await;
        assert_failed(
            result,
            &dir,
            &format!("after {at} bytes: the server stalled, giving up"),
        );
        // The first GET, then one Range request per attempt.
        assert_eq!(server.requests(), 1 + 3, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_content_length_shorter_than_the_body_is_a_truncated_image() {
    // Streamed (no Range): the compressed stream and the qcow2 both end before they are
    // whole. (A raw image cut short cannot be told from a smaller one without a checksum;
    // see the checksum case below.)
    for (name, needle) in [
        ("v3.qcow2.xz", "xz"),
        ("zstd.qcow2.gz", "gz"),
        ("v3.qcow2", "truncated"),
    ] {
        let body = std::fs::read(fixture(name)).unwrap();
        let server = FaultyHttpServer::start(body, Fault::ShortContentLength(100_000), false);
        let (result, dir) = import_url(&server.url(name)).await;
        assert_failed(result, &dir, needle);
    }
    // Read by offset (Range): clusters past the announced end are not there.
    let body = std::fs::read(fixture("v3.qcow2")).unwrap();
    let server = FaultyHttpServer::start(body, Fault::ShortContentLength(100_000), true);
    let (result, dir) = import_url(&server.url("v3.qcow2")).await;
    assert!(result.is_err(), "a qcow2 cut short was imported");
    assert_failed(result, &dir, "");
    // A raw image with a checksum: the mismatch is caught.
    let body = std::fs::read(fixture("raw.img")).unwrap();
    let digest = ferrovirt_tests::sha256_file(&fixture("raw.img")).unwrap();
    let server = FaultyHttpServer::start(body, Fault::ShortContentLength(4096), false);
    let dir = TempDir::new("faults");
    let mut request = ImportRequest::new(server.url("raw.img"), dir.join("out.raw"));
    request.http.idle_timeout = Duration::from_secs(1);
    request.checksum = Some(format!("sha256:{digest}").parse().unwrap());
    let result = bounded(import(request)).await;
    assert_failed(result, &dir, "checksum mismatch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_content_length_longer_than_the_body_fails_or_is_never_needed() {
    for name in ["raw.img", "v3.qcow2.xz", "v3.qcow2"] {
        let body = std::fs::read(fixture(name)).unwrap();
        let len = body.len();
        // Without Range the transfer cannot resume.
        let server = FaultyHttpServer::start(body.clone(), Fault::LongContentLength(4096), false);
        let (result, dir) = import_url(&server.url(name)).await;
        assert_failed(
            result,
            &dir,
            &format!("dropped after {len} bytes and the server does not support Range"),
        );
        // With Range, a stream's resumption past the real end is refused. A qcow2 read by
        // offset never asks for the bytes that are not there: it is converted whole.
        let server = FaultyHttpServer::start(body, Fault::LongContentLength(4096), true);
        let (result, dir) = import_url(&server.url(name)).await;
        if name.ends_with(".qcow2") {
            let outcome = result.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(outcome.random_access, "{name}");
            assert_eq!(
                sha256_file(&dir.join("out.raw")).unwrap(),
                reference_sha256(name),
                "{name}: differs from qemu-img"
            );
        } else {
            assert_failed(result, &dir, "416 Range Not Satisfiable");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_blob_that_does_not_match_its_digest_fails_and_leaves_no_target() {
    bounded(async {
        let registry = RegistryServer::start(RegistryServerOptions::default());
        for (i, compression) in [LayerCompression::None, LayerCompression::Gzip]
            .into_iter()
            .enumerate()
        {
            let layout = OciLayout::image(&ImageSpec::new(
                "linux/amd64",
                vec![LayerSpec::disk(compression, "v3.qcow2")],
            ));
            let disk_layer = layout.layers[0][0].clone();
            let size = {
                let repo = format!("probe{i}:v1");
                registry.push(&layout, &repo);
                std::fs::metadata(registry.blob_path(&disk_layer))
                    .unwrap()
                    .len()
            };
            // One byte flipped in the disk's data, and one in the blob's last byte: after
            // the disk file has been read whole (tar padding, or the gzip trailer).
            for (j, offset) in [size / 2, size - 1].into_iter().enumerate() {
                let repo = format!("bad{i}x{j}:v1");
                registry.push(&layout, &repo);
                registry.tamper_blob(&disk_layer, offset);
                let dir = TempDir::new("faults");
                let mut request =
                    ImportRequest::new(registry.reference(&repo), dir.join("disk.img"));
                request.http.insecure_tls = true;
                let result = import(request).await;
                assert_failed(result, &dir, "digest mismatch");
                // Repair it for the next push of the same blob.
                registry.tamper_blob(&disk_layer, offset);
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_target_filesystem_fails_naming_no_space_and_leaves_nothing() {
    let fs = LoopFilesystem::new("enospc", 64);
    let free = fs.available();
    // 96 MiB of data in a zstd stream: its size is unknown until the end, so nothing can
    // refuse it up front and the writes run into the full disk.
    let dir = TempDir::new("enospc-src");
    let source = dir.join("big.raw.zst");
    let data = noise(96 << 20, 0x5eed);
    std::fs::write(&source, zstd::encode_all(&data[..], 1).unwrap()).unwrap();
    drop(data);
    let target_dir = fs.path().join("vol");
    std::fs::create_dir(&target_dir).unwrap();
    let request = ImportRequest::new(source.to_string_lossy(), target_dir.join("disk.img"));
    let result = bounded(import(request)).await;
    let err = result.expect_err("96 MiB cannot fit in 64").to_string();
    assert!(
        err.contains("No space left on device"),
        "the error must name the full disk: {err}"
    );
    assert!(
        std::fs::read_dir(&target_dir).unwrap().next().is_none(),
        "nothing is left on the full filesystem"
    );
    assert!(
        fs.available() + (1 << 20) >= free,
        "the space is given back: {} of {free}",
        fs.available()
    );
}
