//! End-to-end import benchmark: Ferrovirt against what CDI runs today, side by side.
//!
//! Run with `cargo bench -p ferrovirt --bench import [FILTER]`. FILTER (optional) keeps
//! only the cases whose name contains it; arguments starting with `--` are ignored.
//! `FV_BENCH_ROUNDS` sets the number of rounds (default 3).
//!
//! The images are made by `fixtures/perf-image.sh` into `target/perf-fixtures` (a 1 GiB
//! disk with ~560 MB of data; see /work/shared/MEASUREMENTS.md and docs/performance.md).
//! For every case, each round runs Ferrovirt and the reference one after the other (the
//! order alternates between rounds), each with its input warmed in page cache first and
//! all outputs and scratch files deleted between runs. Wall time and peak RSS
//! (`ru_maxrss` from `wait4`, which covers the child and the descendants it waited for) are
//! measured per child process. Every Ferrovirt output must hash (sha256) to the reference
//! output's digest.

use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const FERROVIRT: &str = env!("CARGO_BIN_EXE_ferrovirt");

/// How the input of a case is reached.
#[derive(Clone, Copy)]
enum Via {
    Local,
    Http,
}

/// What the reference does (CDI's path for that source).
#[derive(Clone, Copy)]
enum Reference {
    /// `qemu-img convert -O raw INPUT OUT`.
    QemuImg,
    /// `DECOMPRESSOR -dc INPUT > scratch.qcow2 && qemu-img convert -O raw scratch.qcow2 OUT`.
    DecompressThenQemuImg(&'static str),
    /// `curl -s -o scratch.qcow2 URL && qemu-img convert -O raw scratch.qcow2 OUT`.
    CurlThenQemuImg,
}

struct Case {
    name: &'static str,
    file: &'static str,
    via: Via,
    reference: Reference,
    reference_label: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "local perf.qcow2",
        file: "perf.qcow2",
        via: Via::Local,
        reference: Reference::QemuImg,
        reference_label: "qemu-img convert",
    },
    Case {
        name: "local perfc.qcow2 (zlib)",
        file: "perfc.qcow2",
        via: Via::Local,
        reference: Reference::QemuImg,
        reference_label: "qemu-img convert",
    },
    Case {
        name: "local perf.qcow2.xz",
        file: "perf.qcow2.xz",
        via: Via::Local,
        reference: Reference::DecompressThenQemuImg("xz"),
        reference_label: "xz -dc > scratch; qemu-img convert",
    },
    Case {
        name: "local perf.qcow2.gz",
        file: "perf.qcow2.gz",
        via: Via::Local,
        reference: Reference::DecompressThenQemuImg("gzip"),
        reference_label: "gzip -dc > scratch; qemu-img convert",
    },
    Case {
        name: "http perf.qcow2",
        file: "perf.qcow2",
        via: Via::Http,
        reference: Reference::CurlThenQemuImg,
        reference_label: "curl -o scratch; qemu-img convert",
    },
    Case {
        name: "http perfc.qcow2 (zlib)",
        file: "perfc.qcow2",
        via: Via::Http,
        reference: Reference::CurlThenQemuImg,
        reference_label: "curl -o scratch; qemu-img convert",
    },
];

/// One measured child process.
#[derive(Clone, Copy, Debug)]
struct Sample {
    secs: f64,
    maxrss_kib: i64,
}

/// Spawns `cmd` and waits for it with `wait4`, measuring wall time and peak RSS.
/// Panics (with the captured stderr) if it fails.
fn measure(mut cmd: Command, what: &str, scratch: &Path) -> Sample {
    let err_path = scratch.join("stderr.log");
    let err_file = fs::File::create(&err_path).expect("create stderr log");
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(err_file);
    let start = Instant::now();
    let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
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
    let secs = start.elapsed().as_secs_f64();
    // The child is reaped: std must not wait for it again (it does not on drop).
    drop(child);
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    if !ok {
        let stderr = fs::read_to_string(&err_path).unwrap_or_default();
        panic!("{what} failed (wait status {status:#x}):\n{stderr}");
    }
    Sample { secs, maxrss_kib: usage.ru_maxrss }
}

/// Reads `path` once so the timed run starts from page cache.
fn warm(path: &Path) {
    let mut file = fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut buf = vec![0u8; 1 << 20];
    while file.read(&mut buf).expect("read input") > 0 {}
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().expect("run sha256sum");
    assert!(out.status.success(), "sha256sum {} failed", path.display());
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or("").to_string()
}

fn remove(path: &Path) {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("remove {}: {e}", path.display()),
    }
}

/// The HTTP server serving the fixture directory; killed on drop.
struct Server {
    child: Child,
    port: u16,
    ranges: bool,
}

impl Server {
    fn start(root: &Path, fixtures: &Path, scratch: &Path) -> Server {
        let helper = root.join("fixtures/httpserver.py");
        if helper.exists() {
            let port_file = scratch.join("http.port");
            let child = Command::new("python3")
                .arg(&helper)
                .arg("--root")
                .arg(fixtures)
                .arg("--port-file")
                .arg(&port_file)
                .arg("--quiet")
                .stdin(Stdio::null())
                .spawn()
                .expect("start fixtures/httpserver.py");
            let mut server = Server { child, port: 0, ranges: true };
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if let Ok(text) = fs::read_to_string(&port_file) {
                    if let Ok(port) = text.trim().parse() {
                        server.port = port;
                        break;
                    }
                }
                if let Ok(Some(status)) = server.child.try_wait() {
                    panic!("httpserver.py exited early: {status}");
                }
                assert!(Instant::now() < deadline, "httpserver.py did not write its port");
                std::thread::sleep(Duration::from_millis(50));
            }
            server
        } else {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("find a free port")
                .port();
            let child = Command::new("python3")
                .args(["-m", "http.server", "--bind", "127.0.0.1"])
                .arg(port.to_string())
                .arg("--directory")
                .arg(fixtures)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start python3 -m http.server");
            let server = Server { child, port, ranges: false };
            let deadline = Instant::now() + Duration::from_secs(20);
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(Instant::now() < deadline, "http.server did not start listening");
                std::thread::sleep(Duration::from_millis(50));
            }
            server
        }
    }

    fn url(&self, file: &str) -> String {
        format!("http://127.0.0.1:{}/{file}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ferrovirt_cmd(source: &str, out: &Path) -> Command {
    let mut cmd = Command::new(FERROVIRT);
    cmd.arg("import").arg(source).arg(out);
    cmd
}

fn reference_cmd(case: &Case, source: &str, scratch_img: &Path, out: &Path) -> Command {
    match case.reference {
        Reference::QemuImg => {
            let mut cmd = Command::new("qemu-img");
            cmd.args(["convert", "-O", "raw"]).arg(source).arg(out);
            cmd
        }
        Reference::DecompressThenQemuImg(tool) => {
            let mut cmd = Command::new("sh");
            cmd.arg("-c")
                .arg(format!(r#"{tool} -dc "$1" > "$2" && qemu-img convert -O raw "$2" "$3""#))
                .arg("sh")
                .arg(source)
                .arg(scratch_img)
                .arg(out);
            cmd
        }
        Reference::CurlThenQemuImg => {
            let mut cmd = Command::new("sh");
            cmd.arg("-c")
                .arg(r#"curl -sSf -o "$2" "$1" && qemu-img convert -O raw "$2" "$3""#)
                .arg("sh")
                .arg(source)
                .arg(scratch_img)
                .arg(out);
            cmd
        }
    }
}

fn best_median(samples: &[Sample]) -> (f64, f64) {
    let mut t: Vec<f64> = samples.iter().map(|s| s.secs).collect();
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = t.len();
    let median = if n % 2 == 1 { t[n / 2] } else { (t[n / 2 - 1] + t[n / 2]) / 2.0 };
    (t[0], median)
}

fn peak_mib(samples: &[Sample]) -> f64 {
    samples.iter().map(|s| s.maxrss_kib).max().unwrap_or(0) as f64 / 1024.0
}

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let rounds: usize = match std::env::var("FV_BENCH_ROUNDS") {
        Ok(v) => v.parse().ok().filter(|&n| n >= 1).expect("FV_BENCH_ROUNDS: a positive integer"),
        Err(_) => 3,
    };
    let cases: Vec<&Case> = CASES
        .iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.name.contains(f.as_str())))
        .collect();
    if cases.is_empty() {
        eprintln!("no case matches {filters:?}; cases are:");
        for c in CASES {
            eprintln!("  {}", c.name);
        }
        return;
    }

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("workspace root");
    let fixtures = root.join("target/perf-fixtures");
    let gen_start = Instant::now();
    let status = Command::new("bash")
        .arg(root.join("fixtures/perf-image.sh"))
        .arg(&fixtures)
        .status()
        .expect("run fixtures/perf-image.sh");
    assert!(status.success(), "fixtures/perf-image.sh failed: {status}");
    let gen_secs = gen_start.elapsed().as_secs_f64();
    if gen_secs > 1.0 {
        eprintln!("perf images ready after {gen_secs:.1} s");
    }

    let scratch_dir = tempfile::Builder::new()
        .prefix("perf-scratch-")
        .tempdir_in(root.join("target"))
        .expect("scratch directory");
    let scratch = scratch_dir.path();
    let server = if cases.iter().any(|c| matches!(c.via, Via::Http)) {
        Some(Server::start(&root, &fixtures, scratch))
    } else {
        None
    };
    if let Some(s) = &server {
        eprintln!(
            "serving {} on 127.0.0.1:{} ({})",
            fixtures.display(),
            s.port,
            if s.ranges { "fixtures/httpserver.py, Range supported" } else { "python3 -m http.server, no Range" }
        );
    }

    let out_fv = scratch.join("out-ferrovirt.raw");
    let out_ref = scratch.join("out-reference.raw");
    let scratch_img = scratch.join("scratch.qcow2");
    let mut rows = Vec::new();
    for case in &cases {
        let input = fixtures.join(case.file);
        let source = match case.via {
            Via::Local => input.to_str().expect("utf-8 path").to_string(),
            Via::Http => server.as_ref().expect("server").url(case.file),
        };
        let mut fv = Vec::new();
        let mut rf = Vec::new();
        let mut ref_digest: Option<String> = None;
        let mut fv_digests: Vec<String> = Vec::new();
        for round in 0..rounds {
            // Alternate which tool goes first, so drift favours neither.
            let order: [bool; 2] = if round % 2 == 0 { [true, false] } else { [false, true] };
            for is_fv in order {
                remove(&out_fv);
                remove(&out_ref);
                remove(&scratch_img);
                warm(&input);
                if is_fv {
                    let s = measure(ferrovirt_cmd(&source, &out_fv), "ferrovirt import", scratch);
                    eprintln!("  {:<26} round {} ferrovirt {:7.3} s {:6.1} MiB", case.name, round + 1, s.secs, s.maxrss_kib as f64 / 1024.0);
                    fv.push(s);
                    fv_digests.push(sha256(&out_fv));
                    remove(&out_fv);
                } else {
                    let s = measure(reference_cmd(case, &source, &scratch_img, &out_ref), case.reference_label, scratch);
                    eprintln!("  {:<26} round {} reference {:7.3} s {:6.1} MiB", case.name, round + 1, s.secs, s.maxrss_kib as f64 / 1024.0);
                    rf.push(s);
                    if ref_digest.is_none() {
                        ref_digest = Some(sha256(&out_ref));
                    }
                    remove(&out_ref);
                    remove(&scratch_img);
                }
            }
        }
        let want = ref_digest.expect("reference ran");
        for (i, got) in fv_digests.iter().enumerate() {
            if *got != want {
                panic!(
                    "OUTPUT MISMATCH in case '{}' round {}: ferrovirt sha256 {got}, reference sha256 {want}",
                    case.name,
                    i + 1
                );
            }
        }
        rows.push((case, fv, rf));
    }
    drop(server);

    let raw_sha = fs::read_to_string(fixtures.join("perf.raw.sha256")).unwrap_or_default();
    println!();
    println!("ferrovirt import vs reference, {rounds} round(s), inputs warm in page cache, outputs sha256-verified");
    println!();
    println!("| case | ferrovirt best / median (s) | reference best / median (s) | ratio (median) | ferrovirt peak RSS (MiB) | reference peak RSS (MiB) | reference |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (case, fv, rf) in &rows {
        let (fb, fm) = best_median(fv);
        let (rb, rm) = best_median(rf);
        println!(
            "| {} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} | {:.1} | {:.1} | {} |",
            case.name,
            fb,
            fm,
            rb,
            rm,
            fm / rm,
            peak_mib(fv),
            peak_mib(rf),
            case.reference_label
        );
    }
    println!();
    println!("ratio = ferrovirt median / reference median (below 1 means Ferrovirt is faster).");
    if !raw_sha.is_empty() {
        println!("all outputs: sha256 {}", raw_sha.trim());
    }
}
