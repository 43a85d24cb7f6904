//! Imports over HTTP(S) from a real server on loopback (`fixtures/httpserver.py`): with and
//! without Range support, basic auth, TLS with a custom CA, dropped connections, 5xx answers,
//! redirects, and the failures a user must be able to read.

use std::time::Duration;

use ferrovirt_tests::{
    HttpServer, HttpServerOptions, TempDir, fixture, reference_sha256, sha256_file,
};
use importer::source::http::{Credentials, RetryPolicy};
use importer::{ImportError, ImportOutcome, ImportRequest, import};

fn quick_retries() -> RetryPolicy {
    RetryPolicy {
        attempts: 4,
        first_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(200),
    }
}

async fn import_url(
    url: &str,
    configure: impl FnOnce(&mut ImportRequest),
) -> (Result<ImportOutcome, ImportError>, TempDir) {
    let dir = TempDir::new("http");
    let mut request = ImportRequest::new(url, dir.join("out.raw"));
    request.http.retry = quick_retries();
    configure(&mut request);
    (import(request).await, dir)
}

async fn assert_imports(
    server: &HttpServer,
    path: &str,
    random_access: bool,
    configure: impl FnOnce(&mut ImportRequest),
) {
    let name = path.strip_prefix("redirect/").unwrap_or(path);
    let (outcome, dir) = import_url(&server.url(path), configure).await;
    let outcome = outcome.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(outcome.random_access, random_access, "{name}: access mode");
    assert_eq!(
        sha256_file(&dir.join("out.raw")).unwrap(),
        reference_sha256(name),
        "{name}: differs from qemu-img"
    );
}

const HTTP_CASES: &[&str] = &[
    "raw.img",
    "v3.qcow2",
    "v2.qcow2",
    "zlib.qcow2",
    "zstd.qcow2",
    "zlib-big.qcow2",
    "c2m.qcow2",
    "c512.qcow2",
    "extl2.qcow2",
    "zeroclusters.qcow2",
    "reordered.qcow2",
    "v3.qcow2.xz",
    "zstd.qcow2.gz",
    "raw.img.zst",
    "sparse.vmdk",
    "stream.vmdk",
    "dynamic.vhd",
    "fixed.vhd",
    "dynamic.vhdx",
    "fixed.vhdx",
    "dynamic.vdi",
    "stream.vmdk.gz",
    "dynamic.vdi.zst",
];

/// Whether a plain file of this name is converted through its tables by offset.
fn read_by_offset(name: &str) -> bool {
    let by_tables = [".qcow2", ".vmdk", ".vhd", ".vhdx", ".vdi"]
        .iter()
        .any(|ext| name.ends_with(ext));
    by_tables && name != "stream.vmdk" && name != "fixed.vhd"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_range_support_qcow2_is_read_by_offset() {
    let server = HttpServer::start(HttpServerOptions::default());
    for name in HTTP_CASES {
        assert_imports(&server, name, read_by_offset(name), |_| {}).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_range_support_everything_streams() {
    let server = HttpServer::start(HttpServerOptions {
        no_range: true,
        ..Default::default()
    });
    for name in HTTP_CASES {
        assert_imports(&server, name, false, |request| {
            request.hold.memory = 2 << 20
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth() {
    let auth = Some(("alice".to_string(), "s3cret".to_string()));
    let server = HttpServer::start(HttpServerOptions {
        auth,
        ..Default::default()
    });
    assert_imports(&server, "zlib.qcow2", true, |request| {
        request.http.credentials = Some(Credentials {
            username: "alice".into(),
            password: "s3cret".into(),
        });
    })
    .await;
    let (result, _dir) = import_url(&server.url("zlib.qcow2"), |request| {
        request.http.credentials = Some(Credentials {
            username: "alice".into(),
            password: "wrong".into(),
        });
    })
    .await;
    let err = result.unwrap_err().to_string();
    assert!(
        err.contains("HTTP 401 Unauthorized from http://localhost"),
        "{err}"
    );
    let (result, _dir) = import_url(&server.url("zlib.qcow2"), |_| {}).await;
    assert!(result.unwrap_err().to_string().contains("401"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_custom_ca_directory() {
    let server = HttpServer::start(HttpServerOptions {
        tls: true,
        ..Default::default()
    });
    assert_imports(&server, "v3.qcow2", true, |request| {
        request.http.cert_dir = Some(fixture("tls/ca-dir"))
    })
    .await;
    assert_imports(&server, "raw.img.gz", false, |request| {
        request.http.insecure_tls = true
    })
    .await;
    let (result, _dir) = import_url(&server.url("v3.qcow2"), |_| {}).await;
    let err = result.unwrap_err().to_string();
    assert!(
        err.contains("certificate"),
        "an untrusted server must fail on its certificate: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_resumes_with_range() {
    let server = HttpServer::start(HttpServerOptions {
        drop_after: Some(3 << 20),
        ..Default::default()
    });
    // Streamed (compressed) and read by offset (plain qcow2): both pick up where they stopped.
    assert_imports(&server, "v3.qcow2.xz", false, |_| {}).await;
    assert_imports(&server, "raw.img", false, |_| {}).await;
    assert_imports(&server, "v2.qcow2", true, |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_without_range_support_fails_clearly() {
    let server = HttpServer::start(HttpServerOptions {
        no_range: true,
        drop_after: Some(1 << 20),
        ..Default::default()
    });
    let (result, dir) = import_url(&server.url("raw.img"), |_| {}).await;
    let err = result.unwrap_err().to_string();
    assert!(
        err.contains("dropped after 1048576 bytes and the server does not support Range"),
        "{err}"
    );
    assert!(!dir.join("out.raw").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried() {
    let server = HttpServer::start(HttpServerOptions {
        fail_first: Some(2),
        ..Default::default()
    });
    assert_imports(&server, "zstd.qcow2", true, |_| {}).await;
    let server = HttpServer::start(HttpServerOptions {
        fail_first: Some(10),
        ..Default::default()
    });
    let (result, _dir) = import_url(&server.url("zstd.qcow2"), |_| {}).await;
    let err = result.unwrap_err().to_string();
    assert!(err.contains("HTTP 503 Service Unavailable"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_and_redirects() {
    let server = HttpServer::start(HttpServerOptions {
        require_header: Some("X-Token: abc".into()),
        ..Default::default()
    });
    assert_imports(&server, "redirect/c2m.qcow2", true, |request| {
        request.http.headers = vec![("X-Token".into(), "abc".into())];
    })
    .await;
    let (result, _dir) = import_url(&server.url("c2m.qcow2"), |_| {}).await;
    assert!(result.unwrap_err().to_string().contains("HTTP 403"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_found_and_bad_dns_name_the_cause() {
    let server = HttpServer::start(HttpServerOptions::default());
    let (result, dir) = import_url(&server.url("missing.qcow2"), |_| {}).await;
    let err = result.unwrap_err().to_string();
    assert_eq!(
        err,
        format!("HTTP 404 Not Found from {}", server.url("missing.qcow2"))
    );
    assert!(!dir.join("out.raw").exists());

    let (result, _dir) = import_url("http://no-such-host.invalid/disk.qcow2", |_| {}).await;
    let err = result.unwrap_err().to_string();
    assert!(
        err.starts_with("cannot resolve host \"no-such-host.invalid\""),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checksum_mismatch_over_http_leaves_no_target() {
    let server = HttpServer::start(HttpServerOptions::default());
    let (result, dir) = import_url(&server.url("v3.qcow2"), |request| {
        request.checksum = Some(format!("sha512:{}", "ab".repeat(64)).parse().unwrap());
    })
    .await;
    assert!(
        result
            .unwrap_err()
            .to_string()
            .starts_with("checksum mismatch: expected sha512:abab")
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flat_vmdk_descriptor_over_http_names_its_extent() {
    let server = HttpServer::start(HttpServerOptions::default());
    let (result, _dir) = import_url(&server.url("flat.vmdk"), |_| {}).await;
    let err = result.unwrap_err().to_string();
    assert!(
        err.contains(
            "monolithicFlat descriptor whose data lives in \"flat-flat.vmdk\"; import that file"
        ),
        "{err}"
    );
}
