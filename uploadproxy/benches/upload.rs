//! Upload throughput: the same image written directly (the import pipeline reading the local
//! file) against uploaded with curl through the proxy to an upload server (two TLS hops, the
//! second with mTLS), and straight to the upload server (one hop), all on loopback.
//!
//! Run with `cargo bench -p ferrovirt-uploadproxy [FILTER]`. FILTER keeps the images whose
//! name contains it; `FV_BENCH_ROUNDS` sets the rounds (default 5; the median of each is
//! reported: the local write's time varies with the page cache's writeback, so the best
//! round would flatter whichever case got lucky). The images come from `fixtures/perf-image.sh` in `target/perf-fixtures` (a
//! 1 GiB disk with ~560 MB of data). Every output is checked against the image's raw digest
//! once. Server and proxy run in this process on a two-thread runtime; curl is the client.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrovirt_tests::pki::Ca;
use importer::ImportRequest;
use tokio::net::TcpListener;
use uploadproxy::tls::{self, Identity};
use uploadproxy::{
    StaticResolver, UploadProxy, UploadProxyConfig, UploadServer, UploadServerConfig, UploadTarget,
    UploadTokenIssuer,
};

const IMAGES: &[&str] = &["perf.raw", "perf.qcow2", "perf.qcow2.xz"];

/// Certificates and files of the run.
struct Setup {
    dir: PathBuf,
    proxy_ca: Ca,
    server_ca: Ca,
    client_ca: Ca,
    issuer: UploadTokenIssuer,
    /// The proxy's client certificate, also given to curl for the direct-to-server case.
    client: (String, String),
}

impl Setup {
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// A fresh upload server (one per upload) and a proxy routing `bench/disk` to it.
async fn start(setup: &Setup, target: &Path) -> (String, String, Vec<tokio::task::JoinHandle<()>>) {
    let server = UploadServer::new(UploadServerConfig::new(target));
    let (cert, key) = setup.server_ca.leaf("upload-server");
    let identity = Identity::from_pem(cert.as_bytes(), key.as_bytes()).unwrap();
    let roots = tls::roots_from_pem(setup.client_ca.pem.as_bytes()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server_url = format!(
        "https://localhost:{}",
        listener.local_addr().unwrap().port()
    );
    let server_task = server.serve(
        listener,
        tls::server_config(&identity, Some(roots)).unwrap(),
    );

    let resolver = Arc::new(StaticResolver::new());
    resolver.insert(
        "bench",
        "disk",
        UploadTarget {
            base_url: server_url.clone(),
            content_type: importer::ContentType::Kubevirt,
        },
    );
    let client = Identity::from_pem(setup.client.0.as_bytes(), setup.client.1.as_bytes()).unwrap();
    let proxy = UploadProxy::new(UploadProxyConfig {
        validator: setup.issuer.validator(),
        resolver,
        upstream_tls: tls::client_config(
            tls::roots_from_pem(setup.server_ca.pem.as_bytes()).unwrap(),
            &client,
        )
        .unwrap(),
        ready_timeout: Duration::from_secs(10),
    })
    .unwrap();
    let (cert, key) = setup.proxy_ca.leaf("upload-proxy");
    let identity = Identity::from_pem(cert.as_bytes(), key.as_bytes()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!(
        "https://localhost:{}",
        listener.local_addr().unwrap().port()
    );
    let proxy_task = proxy.serve(listener, tls::server_config(&identity, None).unwrap());
    (proxy_url, server_url, vec![server_task, proxy_task])
}

/// curl uploads `image` to `url` (sync route: it returns once the volume is complete).
async fn curl(image: &Path, url: &str, extra: &[PathBuf], token: &str) -> f64 {
    let mut command = Command::new("curl");
    command
        .args(["-sS", "--fail-with-body", "-X", "POST", "-o", "/dev/null"])
        .arg("-H")
        .arg(format!("Authorization: Bearer {token}"))
        .arg("-T")
        .arg(image)
        .args(extra)
        .arg(url)
        .stdin(Stdio::null());
    let started = Instant::now();
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        output.status.success(),
        "curl failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    started.elapsed().as_secs_f64()
}

/// Reads `path` into page cache and writes out every dirty page, so that each timed run
/// starts from the same state.
fn warm(path: &Path) {
    let _ = Command::new("sync").status();
    let _ = Command::new("cat").arg(path).stdout(Stdio::null()).status();
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let rounds: usize = std::env::var("FV_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let fixtures = root.join("target/perf-fixtures");
    if !fixtures.join("perf.raw").exists() {
        eprintln!(
            "no benchmark images: run `bash fixtures/perf-image.sh target/perf-fixtures` first"
        );
        return;
    }
    let expected = std::fs::read_to_string(fixtures.join("perf.raw.sha256"))
        .unwrap()
        .trim()
        .to_string();
    let dir = root.join("target/bench-tmp/upload");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let client_ca = Ca::new("client CA");
    let client = client_ca.leaf("cdi-uploadproxy");
    let setup = Setup {
        issuer: UploadTokenIssuer::load_or_create(&dir.join("keys")).unwrap(),
        dir: dir.clone(),
        proxy_ca: Ca::new("proxy CA"),
        server_ca: Ca::new("server CA"),
        client_ca,
        client,
    };
    let proxy_ca = setup.write("proxy-ca.pem", &setup.proxy_ca.pem);
    let server_ca = setup.write("server-ca.pem", &setup.server_ca.pem);
    let client_cert = setup.write("client.pem", &setup.client.0);
    let client_key = setup.write("client-key.pem", &setup.client.1);
    let token = setup.issuer.issue("bench", "disk").unwrap();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "upload benchmark: median of {rounds} rounds, MB/s of image bytes (1 MB = 10^6 bytes)"
    );
    println!(
        "{:<16} {:>9} {:>12} {:>12} {:>12} {:>15} {:>15}",
        "image",
        "size MB",
        "direct MB/s",
        "server MB/s",
        "proxy MB/s",
        "proxy/direct",
        "proxy/server"
    );
    let target = dir.join("disk.img");
    for name in IMAGES {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let image = fixtures.join(name);
        if !image.exists() {
            eprintln!("skipping {name}: not in {}", fixtures.display());
            continue;
        }
        let size = std::fs::metadata(&image).unwrap().len() as f64;
        let (mut direct, mut server, mut proxy) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let _ = std::fs::remove_file(&target);
            warm(&image);
            let started = Instant::now();
            runtime
                .block_on(importer::import(ImportRequest::new(
                    image.to_str().unwrap(),
                    &target,
                )))
                .unwrap();
            direct.push(started.elapsed().as_secs_f64());
            if round == 0 {
                assert_eq!(sha256(&target), expected, "direct import of {name}");
            }

            let _ = std::fs::remove_file(&target);
            warm(&image);
            let secs = runtime.block_on(async {
                let (_, server_url, tasks) = start(&setup, &target).await;
                let extra = vec![
                    "--cacert".into(),
                    server_ca.clone(),
                    "--cert".into(),
                    client_cert.clone(),
                    "--key".into(),
                    client_key.clone(),
                ];
                let url = format!("{server_url}/v1beta1/upload");
                let secs = curl(&image, &url, &extra, &token).await;
                tasks.iter().for_each(|t| t.abort());
                secs
            });
            server.push(secs);
            if round == 0 {
                assert_eq!(sha256(&target), expected, "upload of {name} to the server");
            }

            let _ = std::fs::remove_file(&target);
            warm(&image);
            let secs = runtime.block_on(async {
                let (proxy_url, _, tasks) = start(&setup, &target).await;
                let extra = vec!["--cacert".into(), proxy_ca.clone()];
                let url = format!("{proxy_url}/v1beta1/upload");
                let secs = curl(&image, &url, &extra, &token).await;
                tasks.iter().for_each(|t| t.abort());
                secs
            });
            proxy.push(secs);
            if round == 0 {
                assert_eq!(
                    sha256(&target),
                    expected,
                    "upload of {name} through the proxy"
                );
            }
        }
        let (direct, server, proxy) = (median(direct), median(server), median(proxy));
        let rate = |secs: f64| size / secs / 1e6;
        println!(
            "{:<16} {:>9.0} {:>12.0} {:>12.0} {:>12.0} {:>14.0}% {:>14.0}%",
            name,
            size / 1e6,
            rate(direct),
            rate(server),
            rate(proxy),
            100.0 * direct / proxy,
            100.0 * server / proxy
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
