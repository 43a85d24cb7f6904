//! What the benchmarks share: page-cache warming, output digests, clean-up, the machine's
//! load, and best/median of a run's times.

use std::fs;
use std::io::Read;
use std::path::Path;
use std::process::Command;

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
