//! The test harness: generated fixture images (with the qemu-img reference hash of each),
//! and real servers started on loopback for a test and stopped when it ends.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

pub mod faulty_http;
pub mod fuzz;
pub mod kubectl;
pub mod loopfs;
pub mod pki;
pub mod registry;
pub mod s3;
pub mod structure;
pub mod tmpfs;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repository")
        .to_path_buf()
}

/// Runs the generator `fixtures/SCRIPT` with `args`, failing the test if it fails. The
/// generators keep their output current themselves (a stamp under a lock).
pub fn run_fixture_script(script: &str, args: &[&std::ffi::OsStr]) {
    let status = Command::new("bash")
        .arg(repo_root().join("fixtures").join(script))
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("running fixtures/{script}: {e}"));
    assert!(status.success(), "fixtures/{script} {args:?} failed");
}

/// The fixture directory, generated (once per machine, guarded by a lock) by
/// `fixtures/generate.sh`.
pub fn fixtures() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = repo_root().join("target/fixtures");
        run_fixture_script("generate.sh", &[dir.as_os_str()]);
        dir
    })
}

/// The directory of a test guest (`fast` or `debian`), built once per machine (guarded by
/// a lock) by `fixtures/guests.sh`.
pub fn guest(kind: &str) -> PathBuf {
    let out = repo_root().join("target/guests");
    run_fixture_script("guests.sh", &[out.as_os_str(), kind.as_ref()]);
    out.join(kind)
}

/// The fast test guest's disk as qcow2, made once per build of the guest in the fixture
/// directory (which [`HttpServer`] serves): its file name there.
pub fn fast_guest_qcow2() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| guest_qcow2("fast"))
}

/// The Debian test guest's disk (cloud-init, qemu-guest-agent, openssh-server) as qcow2, as
/// [`fast_guest_qcow2`].
pub fn debian_guest_qcow2() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| guest_qcow2("debian"))
}

/// Converts guest `kind`'s disk to `guest-KIND-STAMP.qcow2` unless that file exists: the
/// guest's build stamp in the name, so a rebuilt guest is never served from an older copy
/// (the fixture directory may be shared by several checkouts).
fn guest_qcow2(kind: &str) -> String {
    let dir = guest(kind);
    let stamp = fs::read_to_string(dir.join(".stamp")).expect("the guest's stamp");
    let name = format!(
        "guest-{kind}-{}.qcow2",
        stamp.trim().get(..12).unwrap_or("unstamped")
    );
    let target = fixtures().join(&name);
    if !target.exists() {
        let partial = fixtures().join(format!("{name}.{}", std::process::id()));
        let status = Command::new("qemu-img")
            .args(["convert", "-O", "qcow2"])
            .arg(dir.join("disk.img"))
            .arg(&partial)
            .status()
            .expect("qemu-img");
        assert!(status.success(), "qemu-img convert failed");
        fs::rename(&partial, &target).expect("placing the qcow2");
    }
    name
}

pub fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// The images with a reference result: the names `NAME` for which `NAME.sha256` exists.
pub fn reference_images() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(fixtures())
        .expect("fixture dir")
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".sha256")
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// The sha256 of `qemu-img convert -O raw` of the image (or of its decompressed content).
pub fn reference_sha256(name: &str) -> String {
    fs::read_to_string(fixture(&format!("{name}.sha256")))
        .expect("reference hash")
        .trim()
        .to_string()
}

pub fn reference_size(name: &str) -> u64 {
    fs::read_to_string(fixture(&format!("{name}.size")))
        .expect("reference size")
        .trim()
        .parse()
        .expect("a number")
}

pub fn sha256_file(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(hex::encode(hasher.finalize()));
        }
        hasher.update(&buf[..n]);
    }
}

/// Options of the test HTTP server (`fixtures/httpserver.py`).
#[derive(Debug, Clone, Default)]
pub struct HttpServerOptions {
    pub no_range: bool,
    pub auth: Option<(String, String)>,
    pub tls: bool,
    pub drop_after: Option<u64>,
    pub fail_first: Option<u32>,
    pub require_header: Option<String>,
    /// Pace every response body to at most this many bytes per second.
    pub rate: Option<u64>,
}

/// A real HTTP file server on 127.0.0.1, serving the fixture directory; killed on drop.
pub struct HttpServer {
    child: Child,
    port: u16,
    tls: bool,
    _state: TempDir,
}

impl HttpServer {
    pub fn start(options: HttpServerOptions) -> Self {
        let state = TempDir::new("httpserver");
        let port_file = state.path().join("port");
        let mut command = Command::new("python3");
        command
            .arg(repo_root().join("fixtures/httpserver.py"))
            .arg("--root")
            .arg(fixtures())
            .arg("--port-file")
            .arg(&port_file)
            .arg("--quiet")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if options.no_range {
            command.arg("--no-range");
        }
        if let Some((user, password)) = &options.auth {
            command.arg("--auth").arg(format!("{user}:{password}"));
        }
        if options.tls {
            command.arg("--tls-cert").arg(fixture("tls/server.pem"));
            command.arg("--tls-key").arg(fixture("tls/server-key.pem"));
        }
        if let Some(bytes) = options.drop_after {
            command.arg("--drop-after").arg(bytes.to_string());
        }
        if let Some(n) = options.fail_first {
            command.arg("--fail-first").arg(n.to_string());
        }
        if let Some(header) = &options.require_header {
            command.arg("--require-header").arg(header);
        }
        if let Some(rate) = options.rate {
            command.arg("--rate").arg(rate.to_string());
        }
        let child = command.spawn().expect("starting fixtures/httpserver.py");
        let port = wait_for_port(&port_file);
        HttpServer {
            child,
            port,
            tls: options.tls,
            _state: state,
        }
    }

    /// The URL of a fixture on this server (`localhost`, so that TLS names match).
    pub fn url(&self, name: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://localhost:{}/{name}", self.port)
    }
}

fn wait_for_port(port_file: &Path) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Some(port) = fs::read_to_string(port_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return port;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the test HTTP server did not start within 15 s");
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A temporary directory under target/, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Self {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = repo_root().join(format!(
            "target/test-tmp/{label}-{}-{n}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("creating a temporary directory");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `len` pseudo-random bytes from `seed` (xorshift64*): data no filesystem or compressor can
/// shrink, and the same for the same seed.
pub fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}
