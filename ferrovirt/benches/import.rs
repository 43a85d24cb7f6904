//! End-to-end import benchmark: Ferrovirt against what CDI runs today, side by side.
//!
//! Run with `cargo bench -p ferrovirt --bench import [FILTER]`. FILTER (optional) keeps
//! only the cases whose name contains it; arguments starting with `--` are ignored.
//! `FV_BENCH_ROUNDS` sets the number of rounds (default 3); `FV_BENCH_QEMU_CACHE=writeback`
//! makes the reference run `qemu-img convert -t writeback` (as CDI does) instead of qemu-img's
//! convert default (`unsafe`, no flush).
//!
//! The images are made by `fixtures/perf-image.sh` into `target/perf-fixtures` (a 1 GiB
//! disk with ~560 MB of data; see /work/shared/MEASUREMENTS.md and docs/performance.md).
//! For every case, each round runs Ferrovirt and the reference one after the other (the
//! order alternates between rounds), each with its input warmed in page cache first and
//! all outputs and scratch files deleted between runs. Wall time and peak RSS
//! (`ru_maxrss` from `wait4`, which covers the child and the descendants it waited for) are
//! measured per child process. Every Ferrovirt output must hash (sha256) to the reference
//! output's digest.

mod common;

use std::fs;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{loadavg, perf_fixtures, remove, rounds, sha256, warm, workspace_root};

const FERROVIRT: &str = env!("CARGO_BIN_EXE_ferrovirt");

/// How the input of a case is reached.
#[derive(Clone, Copy)]
enum Via {
    Local,
    /// The HTTP server, honouring Range (when fixtures/httpserver.py exists).
    Http,
    /// The HTTP server without Range support: Ferrovirt has to stream sequentially.
    HttpNoRange,
}

/// What the reference does (CDI's path for that source).
#[derive(Clone, Copy)]
enum Reference {
    /// `qemu-img convert -O raw INPUT OUT`.
    Convert,
    /// `DECOMPRESSOR -dc INPUT > scratch.qcow2 && qemu-img convert -O raw scratch.qcow2 OUT`.
    DecompressThenConvert(&'static str),
    /// `curl -s -o scratch.qcow2 URL && qemu-img convert -O raw scratch.qcow2 OUT`.
    DownloadThenConvert,
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
        reference: Reference::Convert,
        reference_label: "qemu-img convert",
    },
    Case {
        name: "local perfc.qcow2 (zlib)",
        file: "perfc.qcow2",
        via: Via::Local,
        reference: Reference::Convert,
        reference_label: "qemu-img convert",
    },
    Case {
        name: "local perf.qcow2.xz",
        file: "perf.qcow2.xz",
        via: Via::Local,
        reference: Reference::DecompressThenConvert("xz"),
        reference_label: "xz -dc > scratch; qemu-img convert",
    },
    Case {
        name: "local perf.qcow2.gz",
        file: "perf.qcow2.gz",
        via: Via::Local,
        reference: Reference::DecompressThenConvert("gzip"),
        reference_label: "gzip -dc > scratch; qemu-img convert",
    },
    Case {
        name: "local perf.vmdk (streamOptimized)",
        file: "perf.vmdk",
        via: Via::Local,
        reference: Reference::Convert,
        reference_label: "qemu-img convert",
    },
    Case {
        name: "local perf.vhdx",
        file: "perf.vhdx",
        via: Via::Local,
        reference: Reference::Convert,
        reference_label: "qemu-img convert",
    },
    Case {
        name: "http perf.qcow2",
        file: "perf.qcow2",
        via: Via::Http,
        reference: Reference::DownloadThenConvert,
        reference_label: "curl -o scratch; qemu-img convert",
    },
    Case {
        name: "http perfc.qcow2 (zlib)",
        file: "perfc.qcow2",
        via: Via::Http,
        reference: Reference::DownloadThenConvert,
        reference_label: "curl -o scratch; qemu-img convert",
    },
    Case {
        name: "http-norange perf.qcow2",
        file: "perf.qcow2",
        via: Via::HttpNoRange,
        reference: Reference::DownloadThenConvert,
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
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err_file);
    let start = Instant::now();
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
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
    Sample {
        secs,
        maxrss_kib: usage.ru_maxrss,
    }
}

/// The HTTP server serving the fixture directory; killed on drop.
struct Server {
    child: Child,
    port: u16,
    ranges: bool,
}

impl Server {
    /// Serves `fixtures` with fixtures/httpserver.py when it exists (with Range support
    /// unless `no_range`), else with `python3 -m http.server` (never Range).
    fn start(root: &Path, fixtures: &Path, scratch: &Path, no_range: bool) -> Server {
        let helper = root.join("fixtures/httpserver.py");
        if helper.exists() {
            let port_file = scratch.join(if no_range {
                "http-norange.port"
            } else {
                "http.port"
            });
            let mut cmd = Command::new("python3");
            cmd.arg(&helper)
                .arg("--root")
                .arg(fixtures)
                .arg("--port-file")
                .arg(&port_file)
                .arg("--quiet")
                .stdin(Stdio::null());
            if no_range {
                cmd.arg("--no-range");
            }
            let child = cmd.spawn().expect("start fixtures/httpserver.py");
            let mut server = Server {
                child,
                port: 0,
                ranges: !no_range,
            };
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if let Ok(text) = fs::read_to_string(&port_file)
                    && let Ok(port) = text.trim().parse()
                {
                    server.port = port;
                    break;
                }
                if let Ok(Some(status)) = server.child.try_wait() {
                    panic!("httpserver.py exited early: {status}");
                }
                assert!(
                    Instant::now() < deadline,
                    "httpserver.py did not write its port"
                );
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
            let server = Server {
                child,
                port,
                ranges: false,
            };
            let deadline = Instant::now() + Duration::from_secs(20);
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "http.server did not start listening"
                );
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

/// `qemu-img convert` with the cache mode of `FV_BENCH_QEMU_CACHE`, if set. Unset, qemu-img
/// uses its convert default, `unsafe`: no flush at the end. CDI runs `-t writeback`
/// (or `-t none` where O_DIRECT works), which fdatasyncs the target as Ferrovirt does.
fn qemu_convert() -> String {
    match std::env::var("FV_BENCH_QEMU_CACHE") {
        Ok(mode) if !mode.is_empty() => format!("qemu-img convert -t {mode} -O raw"),
        _ => "qemu-img convert -O raw".to_string(),
    }
}

fn reference_cmd(case: &Case, source: &str, scratch_img: &Path, out: &Path) -> Command {
    let convert = qemu_convert();
    let mut cmd = Command::new("sh");
    cmd.arg("-c");
    match case.reference {
        Reference::Convert => {
            cmd.arg(format!(r#"exec {convert} "$1" "$3""#));
        }
        Reference::DecompressThenConvert(tool) => {
            cmd.arg(format!(
                r#"{tool} -dc "$1" > "$2" && exec {convert} "$2" "$3""#
            ));
        }
        Reference::DownloadThenConvert => {
            cmd.arg(format!(
                r#"curl -sSf -o "$2" "$1" && exec {convert} "$2" "$3""#
            ));
        }
    }
    cmd.arg("sh").arg(source).arg(scratch_img).arg(out);
    cmd
}

fn best_median(samples: &[Sample]) -> (f64, f64) {
    let secs: Vec<f64> = samples.iter().map(|s| s.secs).collect();
    common::best_median(&secs)
}

fn peak_mib(samples: &[Sample]) -> f64 {
    samples.iter().map(|s| s.maxrss_kib).max().unwrap_or(0) as f64 / 1024.0
}

fn main() {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let rounds = rounds();
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

    let root = workspace_root();
    let fixtures = perf_fixtures(&root);

    let scratch_dir = tempfile::Builder::new()
        .prefix("perf-scratch-")
        .tempdir_in(root.join("target"))
        .expect("scratch directory");
    let scratch = scratch_dir.path();
    let have_helper = root.join("fixtures/httpserver.py").exists();
    let start_server = |no_range: bool| {
        let s = Server::start(&root, &fixtures, scratch, no_range);
        eprintln!(
            "serving {} on 127.0.0.1:{} ({})",
            fixtures.display(),
            s.port,
            match (s.ranges, have_helper) {
                (true, _) => "fixtures/httpserver.py, Range supported",
                (false, true) => "fixtures/httpserver.py --no-range",
                (false, false) => "python3 -m http.server, no Range",
            }
        );
        s
    };
    let wants = |via: fn(&Via) -> bool| cases.iter().any(|c| via(&c.via));
    let server = wants(|v| matches!(v, Via::Http)).then(|| start_server(false));
    let server_norange = wants(|v| matches!(v, Via::HttpNoRange)).then(|| start_server(true));
    eprintln!("reference converts with: {}", qemu_convert());
    let load_before = loadavg();

    let out_fv = scratch.join("out-ferrovirt.raw");
    let out_ref = scratch.join("out-reference.raw");
    let scratch_img = scratch.join("scratch.qcow2");
    let mut rows = Vec::new();
    for case in &cases {
        let input = fixtures.join(case.file);
        let source = match case.via {
            Via::Local => input.to_str().expect("utf-8 path").to_string(),
            Via::Http => server.as_ref().expect("server").url(case.file),
            Via::HttpNoRange => server_norange.as_ref().expect("server").url(case.file),
        };
        let mut fv = Vec::new();
        let mut rf = Vec::new();
        let mut ref_digest: Option<String> = None;
        let mut fv_digests: Vec<String> = Vec::new();
        for round in 0..rounds {
            // Alternate which tool goes first, so drift favours neither.
            let order: [bool; 2] = if round % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for is_fv in order {
                remove(&out_fv);
                remove(&out_ref);
                remove(&scratch_img);
                warm(&input);
                if is_fv {
                    let s = measure(ferrovirt_cmd(&source, &out_fv), "ferrovirt import", scratch);
                    eprintln!(
                        "  {:<26} round {} ferrovirt {:7.3} s {:6.1} MiB",
                        case.name,
                        round + 1,
                        s.secs,
                        s.maxrss_kib as f64 / 1024.0
                    );
                    fv.push(s);
                    fv_digests.push(sha256(&out_fv));
                    remove(&out_fv);
                } else {
                    let s = measure(
                        reference_cmd(case, &source, &scratch_img, &out_ref),
                        case.reference_label,
                        scratch,
                    );
                    eprintln!(
                        "  {:<26} round {} reference {:7.3} s {:6.1} MiB",
                        case.name,
                        round + 1,
                        s.secs,
                        s.maxrss_kib as f64 / 1024.0
                    );
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
        if let Ok(raw) = fs::read_to_string(fixtures.join("perf.raw.sha256"))
            && raw.trim() != want
        {
            eprintln!(
                "warning: reference output of '{}' ({want}) differs from perf.raw ({})",
                case.name,
                raw.trim()
            );
        }
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
    drop(server_norange);

    let raw_sha = fs::read_to_string(fixtures.join("perf.raw.sha256")).unwrap_or_default();
    println!();
    println!(
        "ferrovirt import vs reference, {rounds} round(s), inputs warm in page cache, \
         outputs sha256-verified; the reference converts with `{}`",
        qemu_convert()
    );
    println!();
    println!(
        "| case | ferrovirt best / median (s) | reference best / median (s) | ratio (median) | ferrovirt peak RSS (MiB) | reference peak RSS (MiB) | reference |"
    );
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
    println!(
        "load average (1/5/15 min) before: {load_before}, after: {} on {} CPUs; \
         anything above ~0.5 means other work shared the machine",
        loadavg(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    if !raw_sha.is_empty() {
        println!("all outputs: sha256 {}", raw_sha.trim());
    }
}
