//! What the benchmarks share: page-cache warming, output digests, clean-up, the machine's
//! load, and best/median of a run's times.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Reads `path` once so the timed run starts from page cache.
pub fn warm(path: &Path) {
    let mut file = fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut buf = vec![0u8; 1 << 20];
    while file.read(&mut buf).expect("read input") > 0 {}
}

/// `sha256sum` of `path`, the reference every output is checked against.
pub fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("run sha256sum");
    assert!(out.status.success(), "sha256sum {} failed", path.display());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_string()
}

/// Removes `path` if it exists.
pub fn remove(path: &Path) {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("remove {}: {e}", path.display()),
    }
}

/// The first three fields of /proc/loadavg.
pub fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_string())
}

/// The best and the median of `secs`.
pub fn best_median(secs: &[f64]) -> (f64, f64) {
    let mut t = secs.to_vec();
    t.sort_by(|a, b| a.total_cmp(b));
    let n = t.len();
    let median = if n % 2 == 1 {
        t[n / 2]
    } else {
        (t[n / 2 - 1] + t[n / 2]) / 2.0
    };
    (t[0], median)
}

/// `FV_BENCH_ROUNDS`, 3 by default.
pub fn rounds() -> usize {
    match std::env::var("FV_BENCH_ROUNDS") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .expect("FV_BENCH_ROUNDS: a positive integer"),
        Err(_) => 3,
    }
}

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("workspace root")
}

/// `target/perf-fixtures`, made (or brought up to date) by `fixtures/perf-image.sh`.
pub fn perf_fixtures(root: &Path) -> PathBuf {
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
    fixtures
}
