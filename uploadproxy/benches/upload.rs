//! Upload throughput: the same image written directly (the import pipeline reading the local
//! file, the limit), uploaded with curl through the proxy to our upload server (two TLS hops,
//! the second with mTLS), and uploaded the same way to a model of CDI's upload server, all on
//! loopback.
//!
//! The CDI model follows `pkg/importer/upload-datasource.go`: an image that needs no
//! conversion (raw, possibly compressed) is streamed into the target, zero blocks skipped; one
//! that does (qcow2) is written to a scratch file first, decompressed on the way if it came
//! compressed, and then converted with `qemu-img convert -t writeback -O raw scratch target`.
//! It runs behind the same proxy with the same TLS and HTTP stack as our server, so only what
//! the server does with the body differs. (CDI decompresses xz with a Go library; the model
//! uses `xz -dc`, which is faster, so its figures flatter CDI.)
//!
//! A fourth case, **no sink**, sends the image through the same proxy to a server that reads
//! the body and drops it: the cost of the client, the proxy and the two TLS hops alone, which
//! bounds what any upload server behind this proxy can reach on this machine.
//!
//! Run with `cargo bench -p ferrovirt-uploadproxy [FILTER]`. FILTER keeps the images whose
//! name contains it; `FV_BENCH_ROUNDS` sets the rounds (default 5; the median of each is
//! reported: the local write's time varies with the page cache's writeback, so the best
//! round would flatter whichever case got lucky). The images come from `fixtures/perf-image.sh` in `target/perf-fixtures` (a
//! 1 GiB disk with ~560 MB of data). Every output is checked against the image's raw digest
//! once. Server and proxy run in this process on a two-thread runtime; curl is the client.

use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};

use ferrovirt_tests::pki::Ca;
use importer::ImportRequest;
use tokio::net::TcpListener;
use uploadproxy::tls::{self, Identity};
use uploadproxy::{
    StaticResolver, UploadProxy, UploadProxyConfig, UploadServer, UploadServerConfig, UploadTarget,
    UploadTokenIssuer,
};

const IMAGES: &[&str] = &["perf.raw", "perf.qcow2", "perf.qcow2.xz"];

/// Bytes the no-sink server has read, checked against the image's size after each upload.
static DISCARDED: AtomicU64 = AtomicU64::new(0);

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

/// Which upload server the proxy forwards to.
#[derive(Clone, Copy, PartialEq)]
enum Server {
    Ferrovirt,
    /// The model of CDI's upload server (see the module's comment).
    Cdi,
    /// A server that reads the body and drops it: what the client, the proxy and the two TLS
    /// hops cost with no sink at all, the ceiling of any upload server behind this proxy.
    Discard,
}

/// A fresh upload server (one per upload) and a proxy routing `bench/disk` to it.
async fn start(
    setup: &Setup,
    target: &Path,
    kind: Server,
) -> (String, String, Vec<tokio::task::JoinHandle<()>>) {
    let (cert, key) = setup.server_ca.leaf("upload-server");
    let identity = Identity::from_pem(cert.as_bytes(), key.as_bytes()).unwrap();
    let roots = tls::roots_from_pem(setup.client_ca.pem.as_bytes()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server_url = format!(
        "https://localhost:{}",
        listener.local_addr().unwrap().port()
    );
    let server_tls = tls::server_config(&identity, Some(roots)).unwrap();
    let server_task = match kind {
        Server::Ferrovirt => {
            UploadServer::new(UploadServerConfig::new(target)).serve(listener, server_tls)
        }
        Server::Cdi => {
            let target = target.to_path_buf();
            tls::serve(listener, server_tls, move |request, _peer| {
                cdi_upload(request, target.clone())
            })
        }
        Server::Discard => tls::serve(listener, server_tls, |request, _peer| async move {
            let mut body = request.into_body();
            while let Some(frame) = body.frame().await {
                match frame.map(|f| f.into_data()) {
                    Ok(Ok(data)) => DISCARDED.fetch_add(data.len() as u64, Ordering::Relaxed),
                    Ok(Err(_)) => continue,
                    // A broken body answers 500, which fails curl and so the run.
                    Err(_) => {
                        let mut failed = Response::new(Full::new(Bytes::from_static(b"broken")));
                        *failed.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
                        return failed;
                    }
                };
            }
            Response::new(Full::new(Bytes::from_static(b"OK")))
        }),
    };

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

/// CDI's upload server, modelled: the body goes to a writer thread (Go's io.Copy on the
/// request body), which streams it into the target or, for an image that needs converting,
/// into a scratch file that `qemu-img convert` then turns into the target.
async fn cdi_upload(request: Request<Incoming>, target: PathBuf) -> Response<Full<Bytes>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let writer = std::thread::spawn(move || {
        cdi_process(
            ChunkReader {
                rx,
                current: Bytes::new(),
            },
            &target,
        )
    });
    let mut body = request.into_body();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        if let Ok(data) = frame.into_data()
            && tx.send(data).await.is_err()
        {
            break;
        }
    }
    drop(tx);
    let result = tokio::task::spawn_blocking(move || writer.join())
        .await
        .unwrap()
        .unwrap();
    match result {
        Ok(()) => Response::new(Full::new(Bytes::from_static(b"OK"))),
        Err(e) => {
            let mut response = Response::new(Full::new(Bytes::from(e)));
            *response.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
            response
        }
    }
}

/// The request body as a `Read`, on the writer thread.
struct ChunkReader {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.current = chunk,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}

/// Reads until `buf` is full or the stream ends; how much was read.
fn read_full(source: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match source.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// CDI's `StreamDataToFile` without preallocation: 32 KiB blocks (Go's io.Copy), all-zero
/// ones skipped, then the length set and the file synced.
fn stream_to_file(head: &[u8], source: &mut dyn Read, path: &Path) -> std::io::Result<()> {
    let file = std::fs::File::create(path)?;
    let mut offset = 0u64;
    let write = |block: &[u8], offset: &mut u64| -> std::io::Result<()> {
        if block.iter().any(|b| *b != 0) {
            file.write_all_at(block, *offset)?;
        }
        *offset += block.len() as u64;
        Ok(())
    };
    write(head, &mut offset)?;
    let mut buf = vec![0u8; 32 << 10];
    loop {
        let n = read_full(source, &mut buf)?;
        if n == 0 {
            break;
        }
        write(&buf[..n], &mut offset)?;
    }
    file.set_len(offset)?;
    file.sync_all()
}

fn cdi_process(mut body: ChunkReader, target: &Path) -> Result<(), String> {
    let err = |e: std::io::Error| e.to_string();
    let mut magic = [0u8; 6];
    let n = read_full(&mut body, &mut magic).map_err(err)?;
    // A compressed body is decompressed as it streams (CDI's format readers).
    let (mut source, decompressor): (Box<dyn Read>, _) = if magic[..n] == *b"\xfd7zXZ\0" {
        let mut child = Command::new("xz")
            .args(["-dc", "-T1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(err)?;
        let mut stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let feeder = std::thread::spawn(move || {
            stdin.write_all(&magic[..n])?;
            std::io::copy(&mut body, &mut stdin)?;
            Ok::<_, std::io::Error>(())
        });
        (Box::new(stdout), Some((child, feeder)))
    } else {
        (
            Box::new(std::io::Cursor::new(magic[..n].to_vec()).chain(body)),
            None,
        )
    };
    let mut head = [0u8; 4];
    let n = read_full(&mut source, &mut head).map_err(err)?;
    if head[..n] == *b"QFI\xfb" {
        // Needs converting: scratch space, then qemu-img.
        let scratch = target.with_extension("scratch");
        stream_to_file(&head[..n], &mut source, &scratch).map_err(err)?;
        let status = Command::new("qemu-img")
            .args(["convert", "-t", "writeback", "-O", "raw"])
            .arg(&scratch)
            .arg(target)
            .status()
            .map_err(err)?;
        let _ = std::fs::remove_file(&scratch);
        if !status.success() {
            return Err(format!("qemu-img convert: {status}"));
        }
    } else {
        stream_to_file(&head[..n], &mut source, target).map_err(err)?;
    }
    if let Some((mut child, feeder)) = decompressor {
        feeder.join().unwrap().map_err(err)?;
        let status = child.wait().map_err(err)?;
        if !status.success() {
            return Err(format!("xz: {status}"));
        }
    }
    Ok(())
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
    // A case that did not run (FV_BENCH_ONLY) has no samples: NaN prints as such.
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let rounds: usize = std::env::var("FV_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    // For profiling one case: `FV_BENCH_ONLY=ferrovirt` (or `direct`, `cdi`, `discard`) runs
    // only it.
    let only = std::env::var("FV_BENCH_ONLY").ok();
    if let Some(case) = only.as_deref()
        && !["direct", "ferrovirt", "cdi", "discard"].contains(&case)
    {
        eprintln!("FV_BENCH_ONLY={case}: expected direct, ferrovirt, cdi or discard");
        std::process::exit(2);
    }
    let runs = |case: &str| only.as_deref().is_none_or(|o| o == case);
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
    let token = setup.issuer.issue("bench", "disk").unwrap();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "upload benchmark: median [min-max] of {rounds} rounds, MB/s of image bytes (1 MB = 10^6 bytes)"
    );
    println!(
        "{:<14} {:>7} {:>20} {:>20} {:>20} {:>9} {:>9} {:>20} {:>9}",
        "image",
        "MB",
        "direct",
        "ferrovirt (proxy)",
        "CDI model (proxy)",
        "fv/CDI",
        "fv/direct",
        "no sink (proxy)",
        "ns/direct"
    );
    let target = dir.join("disk.img");
    let upload = |kind: Server, image: &Path| -> f64 {
        let _ = std::fs::remove_file(&target);
        warm(image);
        runtime.block_on(async {
            let (proxy_url, _, tasks) = start(&setup, &target, kind).await;
            let extra = vec!["--cacert".into(), proxy_ca.clone()];
            let url = format!("{proxy_url}/v1beta1/upload");
            let secs = curl(image, &url, &extra, &token).await;
            tasks.iter().for_each(|t| t.abort());
            secs
        })
    };
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
        let (mut direct, mut ferrovirt, mut cdi) = (Vec::new(), Vec::new(), Vec::new());
        let mut discard = Vec::new();
        // Interleaved, so that the machine's drifts hit every case alike.
        for round in 0..rounds {
            if runs("direct") {
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
            }
            if runs("ferrovirt") {
                ferrovirt.push(upload(Server::Ferrovirt, &image));
                if round == 0 {
                    assert_eq!(sha256(&target), expected, "upload of {name}");
                }
            }
            if runs("cdi") {
                cdi.push(upload(Server::Cdi, &image));
                if round == 0 {
                    assert_eq!(sha256(&target), expected, "CDI model's upload of {name}");
                }
            }
            if runs("discard") {
                DISCARDED.store(0, Ordering::Relaxed);
                discard.push(upload(Server::Discard, &image));
                assert_eq!(
                    DISCARDED.load(Ordering::Relaxed),
                    size as u64,
                    "the no-sink server read all of {name}"
                );
            }
        }
        let rate = |secs: f64| size / secs / 1e6;
        let cell = |samples: &[f64]| {
            let (low, high) = samples
                .iter()
                .fold((f64::MAX, 0f64), |(l, h), s| (l.min(*s), h.max(*s)));
            format!(
                "{:.0} [{:.0}-{:.0}]",
                rate(median(samples.to_vec())),
                rate(high),
                rate(low)
            )
        };
        let (d, f, c) = (
            median(direct.clone()),
            median(ferrovirt.clone()),
            median(cdi.clone()),
        );
        let n = median(discard.clone());
        println!(
            "{:<14} {:>7.0} {:>20} {:>20} {:>20} {:>8.2}x {:>8.0}% {:>20} {:>8.0}%",
            name,
            size / 1e6,
            cell(&direct),
            cell(&ferrovirt),
            cell(&cdi),
            c / f,
            100.0 * d / f,
            cell(&discard),
            100.0 * d / n
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
