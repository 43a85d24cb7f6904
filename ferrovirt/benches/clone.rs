//! Host-assisted clone benchmark: Ferrovirt's clone data path against local copies, side by
//! side.
//!
//! Run with `cargo bench -p ferrovirt --bench clone`. `FV_BENCH_ROUNDS` sets the number of
//! rounds (default 3). The source is `perf.raw` from `fixtures/perf-image.sh` (made into
//! `target/perf-fixtures` if needed: a sparse 1 GiB disk with ~554 MB of data; see
//! docs/performance.md).
//!
//! Ferrovirt's path is the two processes of a host-assisted clone, both the `ferrovirt`
//! binary of this build: `ferrovirt upload-server` writing a file, started first and waited
//! for until its port accepts connections (not timed), then `ferrovirt clone-source
//! --content-type blockdevice-clone --mount perf.raw` streaming the file to it over mutual
//! TLS on loopback (zstd on the wire). The time runs from spawning clone-source until both
//! processes have exited; peak RSS is the larger of the two.
//!
//! The references are local copies that end with a flush, as the upload server's sink
//! does: `cp --sparse=always SRC DST && sync DST`, and CDI's cloner archive step without
//! its snappy compression and HTTPS: `tar -cS -C DIR perf.raw | tar -x -C OUTDIR && sync`.
//!
//! Each round runs every path once (the order reverses every other round), with perf.raw
//! warmed in page cache first and all outputs deleted between runs. Wall time and peak RSS
//! (`ru_maxrss` from `wait4`, which covers a child and the descendants it waited for) are
//! measured per child process. Every output must hash (sha256) to `perf.raw.sha256` and
//! stay sparse (allocated blocks well below its size).

mod common;

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrovirt_tests::pki::Ca;

use common::{best_median, loadavg, perf_fixtures, remove, rounds, sha256, warm, workspace_root};

const FERROVIRT: &str = env!("CARGO_BIN_EXE_ferrovirt");
/// The client certificate's common name, as CDI names a clone's client.
const CLIENT_NAME: &str = "default/src-default/dst";

/// The copies compared.
#[derive(Clone, Copy)]
enum Copier {
    Ferrovirt,
    CpSparse,
    TarSparse,
}

const COPIERS: [Copier; 3] = [Copier::Ferrovirt, Copier::CpSparse, Copier::TarSparse];

impl Copier {
    fn label(self) -> &'static str {
        match self {
            Copier::Ferrovirt => "ferrovirt clone-source -> upload-server (mTLS, zstd)",
            Copier::CpSparse => "cp --sparse=always && sync",
            Copier::TarSparse => "tar -cS piped to tar -x && sync",
        }
    }
}

/// One measured run.
#[derive(Clone, Copy, Debug)]
struct Sample {
    secs: f64,
    maxrss_kib: i64,
}

/// Reaps `child` with `wait4`: (wait status, peak RSS in KiB).
fn reap(child: Child, what: &str) -> (libc::c_int, i64) {
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: a zeroed rusage is a valid value; wait4 fills it in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pid is our own, not yet reaped child; the pointers are valid.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            panic!("wait4({what}): {err}");
        }
    }
    // The child is reaped: std must not wait for it again (it does not on drop).
    drop(child);
    (status, usage.ru_maxrss)
}

fn succeeded(status: libc::c_int) -> bool {
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// Spawns `cmd` with stdin and stdout closed and stderr into `log`.
fn spawn_logged(mut cmd: Command, log: &Path, what: &str) -> Child {
    let err_file = fs::File::create(log).expect("create stderr log");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err_file);
    cmd.spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"))
}

/// Spawns `cmd` and waits for it, measuring wall time and peak RSS. Panics (with the
/// captured stderr) if it fails.
fn measure(cmd: Command, what: &str, scratch: &Path) -> Sample {
    let log = scratch.join("stderr.log");
    let start = Instant::now();
    let child = spawn_logged(cmd, &log, what);
    let (status, maxrss_kib) = reap(child, what);
    let secs = start.elapsed().as_secs_f64();
    if !succeeded(status) {
        let stderr = fs::read_to_string(&log).unwrap_or_default();
        panic!("{what} failed (wait status {status:#x}):\n{stderr}");
    }
    Sample { secs, maxrss_kib }
}

/// The certificates of a clone, written once into the scratch directory.
struct Pki {
    server_cert: PathBuf,
    server_key: PathBuf,
    client_ca: PathBuf,
    server_ca_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        let server_ca = Ca::new("bench upload server CA");
        let client_ca = Ca::new("bench upload client CA");
        let (server_cert_pem, server_key_pem) = server_ca.leaf("localhost");
        let (client_cert_pem, client_key_pem) = client_ca.leaf(CLIENT_NAME);
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
            path
        };
        Pki {
            server_cert: write("tls.crt", &server_cert_pem),
            server_key: write("tls.key", &server_key_pem),
            client_ca: write("client-ca.crt", &client_ca.pem),
            server_ca_pem: server_ca.pem,
            client_cert_pem,
            client_key_pem,
        }
    }
}

/// A command for the `ferrovirt` binary with a clean environment: nothing of the caller's
/// (no FERROVIRT_POD_ROOT, UPLOAD_IMAGE_SIZE, ...) but PATH.
fn ferrovirt(subcommand: &str) -> Command {
    let mut cmd = Command::new(FERROVIRT);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .arg(subcommand);
    cmd
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("find a free port")
        .port()
}

/// One clone: starts the upload server, waits until it accepts connections, then times
/// clone-source from its spawn until both processes have exited. Returns the sample and
/// the time at which clone-source alone had exited.
fn ferrovirt_clone(pki: &Pki, source: &Path, out: &Path, scratch: &Path) -> (Sample, f64) {
    let port = free_port();
    let server_log = scratch.join("upload-server.log");
    let clone_log = scratch.join("clone-source.log");
    let logs = || {
        format!(
            "upload-server:\n{}\nclone-source:\n{}",
            fs::read_to_string(&server_log).unwrap_or_default(),
            fs::read_to_string(&clone_log).unwrap_or_default()
        )
    };

    let mut server = ferrovirt("upload-server");
    server
        .env("TLS_CERT_FILE", &pki.server_cert)
        .env("TLS_KEY_FILE", &pki.server_key)
        .env("CLIENT_CERT_FILE", &pki.client_ca)
        .env("CLIENT_NAME", CLIENT_NAME)
        .env("DESTINATION", out)
        .env("LISTEN_ADDRESS", "127.0.0.1")
        .env("LISTEN_PORT", port.to_string())
        .env("FERROVIRT_UPLOAD_HEALTHZ_ADDR", "off")
        .env(
            "FERROVIRT_TERMINATION_LOG",
            scratch.join("upload-server.termination-log"),
        );
    let mut server = spawn_logged(server, &server_log, "ferrovirt upload-server");
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = server.try_wait() {
            panic!("ferrovirt upload-server exited early: {status}\n{}", logs());
        }
        if Instant::now() >= deadline {
            let _ = server.kill();
            let _ = server.wait();
            panic!(
                "ferrovirt upload-server did not listen on {port}\n{}",
                logs()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }

    let mut clone = ferrovirt("clone-source");
    clone
        .args(["--content-type", "blockdevice-clone", "--mount"])
        .arg(source)
        .env("CLIENT_KEY", &pki.client_key_pem)
        .env("CLIENT_CERT", &pki.client_cert_pem)
        .env("SERVER_CA_CERT", &pki.server_ca_pem)
        .env(
            "UPLOAD_URL",
            format!("https://localhost:{port}/v1beta1/upload"),
        )
        .env("OWNER_UID", "bench")
        .env(
            "FERROVIRT_TERMINATION_LOG",
            scratch.join("clone-source.termination-log"),
        );
    let start = Instant::now();
    let clone = spawn_logged(clone, &clone_log, "ferrovirt clone-source");
    let (clone_status, clone_rss) = reap(clone, "ferrovirt clone-source");
    let clone_secs = start.elapsed().as_secs_f64();
    if !succeeded(clone_status) {
        let _ = server.kill();
        let _ = server.wait();
        panic!(
            "ferrovirt clone-source failed (wait status {clone_status:#x})\n{}",
            logs()
        );
    }
    let (server_status, server_rss) = reap(server, "ferrovirt upload-server");
    let secs = start.elapsed().as_secs_f64();
    if !succeeded(server_status) {
        panic!(
            "ferrovirt upload-server failed (wait status {server_status:#x})\n{}",
            logs()
        );
    }
    (
        Sample {
            secs,
            maxrss_kib: clone_rss.max(server_rss),
        },
        clone_secs,
    )
}

/// `cp --sparse=always SRC DST && sync DST`.
fn cp_cmd(source: &Path, out: &Path) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"cp --sparse=always "$1" "$2" && exec sync "$2""#)
        .arg("sh")
        .arg(source)
        .arg(out);
    cmd
}

/// `tar -cS -C DIR NAME | tar -x -C OUTDIR && sync OUTDIR/NAME`.
fn tar_cmd(source: &Path, out_dir: &Path) -> Command {
    let dir = source.parent().expect("source directory");
    let name = source.file_name().expect("source name");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"tar -cS -C "$1" "$2" | tar -x -C "$3" && exec sync "$3/$2""#)
        .arg("sh")
        .arg(dir)
        .arg(name)
        .arg(out_dir);
    cmd
}

fn allocated(path: &Path) -> u64 {
    fs::metadata(path)
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
        .blocks()
        * 512
}

/// Checks `out` against the source: same size, same sha256, and sparse (no more than 3/4
/// of its size allocated; the source has about half). Returns the allocated bytes.
fn verify(out: &Path, size: u64, want: &str, what: &str, round: usize) -> u64 {
    let len = fs::metadata(out)
        .unwrap_or_else(|e| panic!("{what} round {round}: no output {}: {e}", out.display()))
        .len();
    assert_eq!(len, size, "{what} round {round}: output size");
    let got = sha256(out);
    assert_eq!(
        got, want,
        "OUTPUT MISMATCH: {what} round {round}: sha256 {got}, perf.raw {want}"
    );
    let blocks = allocated(out);
    assert!(
        blocks <= size / 4 * 3,
        "{what} round {round}: output not sparse: {blocks} of {size} bytes allocated"
    );
    blocks
}

fn main() {
    let rounds = rounds();

    let root = workspace_root();
    let fixtures = perf_fixtures(&root);
    let source = fixtures.join("perf.raw");
    let want = fs::read_to_string(fixtures.join("perf.raw.sha256"))
        .expect("perf.raw.sha256")
        .trim()
        .to_string();
    let size = fs::metadata(&source).expect("perf.raw").len();
    let source_allocated = allocated(&source);

    let scratch_dir = tempfile::Builder::new()
        .prefix("perf-clone-")
        .tempdir_in(root.join("target"))
        .expect("scratch directory");
    let scratch = scratch_dir.path();
    let pki = Pki::new(scratch);
    let out_fv = scratch.join("out.img");
    let out_cp = scratch.join("out-cp.raw");
    let out_tar_dir = scratch.join("tar-out");
    fs::create_dir(&out_tar_dir).expect("tar output directory");
    let out_tar = out_tar_dir.join("perf.raw");
    let clean = || {
        for path in [&out_fv, &out_cp, &out_tar] {
            remove(path);
        }
    };
    let load_before = loadavg();

    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); COPIERS.len()];
    let mut clone_only: Vec<f64> = Vec::new();
    let mut out_allocated: Vec<u64> = vec![0; COPIERS.len()];
    for round in 0..rounds {
        // Reverse the order every other round, so drift favours none.
        let mut order: Vec<usize> = (0..COPIERS.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let path = COPIERS[i];
            clean();
            warm(&source);
            let (sample, out) = match path {
                Copier::Ferrovirt => {
                    let (s, clone_secs) = ferrovirt_clone(&pki, &source, &out_fv, scratch);
                    clone_only.push(clone_secs);
                    (s, &out_fv)
                }
                Copier::CpSparse => (measure(cp_cmd(&source, &out_cp), "cp", scratch), &out_cp),
                Copier::TarSparse => (
                    measure(tar_cmd(&source, &out_tar_dir), "tar | tar", scratch),
                    &out_tar,
                ),
            };
            eprintln!(
                "  round {} {:<54} {:7.3} s {:6.1} MiB",
                round + 1,
                path.label(),
                sample.secs,
                sample.maxrss_kib as f64 / 1024.0
            );
            out_allocated[i] =
                out_allocated[i].max(verify(out, size, &want, path.label(), round + 1));
            samples[i].push(sample);
            clean();
        }
    }

    let secs = |i: usize| samples[i].iter().map(|s| s.secs).collect::<Vec<_>>();
    let (_, fv_median) = best_median(&secs(0));
    println!();
    println!(
        "host-assisted clone of perf.raw ({:.0} MiB virtual, {:.0} MiB allocated), {rounds} round(s), \
         input warm in page cache, outputs sha256-verified and sparse",
        size as f64 / 1048576.0,
        source_allocated as f64 / 1048576.0
    );
    println!();
    println!(
        "| path | best / median (s) | MB/s (virtual size, median) | peak RSS (MiB) | output allocated (MiB) | ferrovirt / this (median) |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (i, path) in COPIERS.iter().enumerate() {
        let (best, median) = best_median(&secs(i));
        let peak = samples[i].iter().map(|s| s.maxrss_kib).max().unwrap_or(0) as f64 / 1024.0;
        println!(
            "| {} | {best:.2} / {median:.2} | {:.0} | {peak:.1} | {:.0} | {:.2} |",
            path.label(),
            size as f64 / median / 1e6,
            out_allocated[i] as f64 / 1048576.0,
            fv_median / median,
        );
    }
    let (cb, cm) = best_median(&clone_only);
    println!();
    println!(
        "ferrovirt: clone-source alone exited after {cb:.2} / {cm:.2} s (best / median); the \
         upload server exits ~0.1 s after answering. Times run from spawning clone-source \
         (the upload server already listening) until both have exited; peak RSS is the larger \
         of the two processes."
    );
    println!("ratio = ferrovirt median / reference median (below 1 means Ferrovirt is faster).");
    println!(
        "load average (1/5/15 min) before: {load_before}, after: {} on {} CPUs; \
         anything above ~0.5 means other work shared the machine",
        loadavg(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("all outputs: sha256 {want}");
}
