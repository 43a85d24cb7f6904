//! Running real guests with `ferrovirt vmi run` and talking to them: the serial output on
//! the command's stdout, a shell over the launcher's console socket, and the control
//! socket for launcher commands.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrovirt_tests::TempDir;

/// A `ferrovirt vmi run` in the background; killed (and its QEMU with it) on drop.
pub struct RunningVmi {
    child: Child,
    serial: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    pub state: TempDir,
    pub run_dir: PathBuf,
    pub started: Instant,
}

impl RunningVmi {
    /// Starts `manifest` (a VMI in YAML) with extra `vmi run` arguments.
    pub fn start(name: &str, manifest: &str, args: &[String]) -> Self {
        Self::start_with(name, manifest, args, &[])
    }

    /// Like [`RunningVmi::start`], run under `wrapper` (such as `ip netns exec NS`).
    pub fn start_with(name: &str, manifest: &str, args: &[String], wrapper: &[&str]) -> Self {
        let state = TempDir::new(&format!("vmi-{name}"));
        let file = state.join("vmi.yaml");
        std::fs::write(&file, manifest).expect("writing the manifest");
        let binary = env!("CARGO_BIN_EXE_ferrovirt");
        let mut command = match wrapper.split_first() {
            None => Command::new(binary),
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(binary);
                c
            }
        };
        let mut child = command
            .args(["vmi", "run"])
            .arg(&file)
            .arg("--state-dir")
            .arg(state.path())
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting ferrovirt vmi run");
        let serial = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        collect(child.stdout.take().expect("stdout"), serial.clone());
        collect(child.stderr.take().expect("stderr"), stderr.clone());
        let namespace = "default";
        let run_dir = state
            .path()
            .join("vmis")
            .join(format!("{namespace}_{name}"));
        RunningVmi {
            child,
            serial,
            stderr,
            state,
            run_dir,
            started: Instant::now(),
        }
    }

    /// The serial output so far.
    pub fn serial(&self) -> String {
        String::from_utf8_lossy(&self.serial.lock().expect("lock")).into_owned()
    }

    /// The launcher's log so far.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().expect("lock")).into_owned()
    }

    /// Waits until the serial output holds `needle`; returns the time since the start.
    pub fn wait_for_serial(&mut self, needle: &str, timeout: Duration) -> Duration {
        let deadline = Instant::now() + timeout;
        loop {
            if self.serial().contains(needle) {
                return self.started.elapsed();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "vmi run exited ({status}) before {needle:?} appeared\n--- serial\n{}\n--- log\n{}",
                    self.serial(),
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{needle:?} did not appear within {timeout:?}\n--- serial\n{}\n--- log\n{}",
                self.serial(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The launcher's child processes (its QEMU).
    pub fn children(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let tasks = format!("/proc/{}/task", self.child.id());
        for task in std::fs::read_dir(tasks).into_iter().flatten().flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                out.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
        out
    }

    /// Kills the launcher with SIGKILL, as the OOM killer would.
    pub fn kill_launcher(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM, as a pod deletion or Ctrl-C would.
    pub fn terminate(&self) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).expect("pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    }

    /// Waits for `vmi run` to exit; returns its status and log.
    pub fn wait_exit(&mut self, timeout: Duration) -> (ExitStatus, String) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // Let the readers drain the pipes.
                std::thread::sleep(Duration::from_millis(100));
                return (status, self.log());
            }
            assert!(
                Instant::now() < deadline,
                "vmi run did not exit within {timeout:?}\n--- log\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A shell on the serial console, logged in as root.
    pub fn login(&self) -> GuestShell {
        let mut shell = GuestShell::connect(&self.run_dir.join("virt-serial0"));
        shell.login();
        shell
    }

    /// The launcher's control socket.
    pub fn control_socket(&self) -> PathBuf {
        api::kubevirt::pod_contract::control_socket(&self.run_dir)
    }
}

impl Drop for RunningVmi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn collect(mut pipe: impl Read + Send + 'static, into: Arc<Mutex<Vec<u8>>>) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock().expect("lock").extend_from_slice(&buf[..n]);
        }
    });
}

/// A shell on a guest's serial console socket.
pub struct GuestShell {
    stream: UnixStream,
    seen: Arc<Mutex<Vec<u8>>>,
    counter: u32,
}

impl GuestShell {
    pub fn connect(socket: &Path) -> Self {
        let stream = UnixStream::connect(socket).expect("connecting to the console socket");
        let seen = Arc::new(Mutex::new(Vec::new()));
        collect(stream.try_clone().expect("clone"), seen.clone());
        GuestShell {
            stream,
            seen,
            counter: 0,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().expect("lock")).into_owned()
    }

    fn wait_for(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.text();
            if let Some(at) = text.rfind(needle) {
                return text[..at].to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "{needle:?} did not appear on the console within {timeout:?}; it shows:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Logs in as root (the fast guest asks no password), retrying the prompt.
    fn login(&mut self) {
        for _ in 0..20 {
            self.stream.write_all(b"\n").expect("write");
            std::thread::sleep(Duration::from_millis(500));
            if self.text().contains("login:") {
                break;
            }
        }
        self.stream.write_all(b"root\n").expect("write");
        self.wait_for("# ", Duration::from_secs(30));
        // No line wrapping in the echo of long commands.
        self.run(
            "stty cols 1000 2>/dev/null || true",
            Duration::from_secs(30),
        );
    }

    /// Runs `command` in the guest; returns its output and exit status.
    pub fn run(&mut self, command: &str, timeout: Duration) -> (String, i32) {
        self.counter += 1;
        let n = self.counter;
        self.seen.lock().expect("lock").clear();
        // The marker is assembled by the shell so the echoed command line cannot match it.
        let line = format!("{command}; echo \"@@END{n}\"\"@@ $?\"\n");
        self.stream.write_all(line.as_bytes()).expect("write");
        let marker = format!("@@END{n}@@ ");
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.text();
            if let Some(at) = text.find(&marker) {
                let status: i32 = text[at + marker.len()..]
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(-1);
                if text[at + marker.len()..].contains('\n') {
                    // The output starts after the echo of the command line, which ends
                    // with the marker's unassembled form: after the last echo, as a line
                    // typed before the prompt is echoed by the terminal and again by the
                    // shell's line editor once it starts.
                    let echoed = "\"@@ $?\"";
                    let start = text[..at]
                        .rfind(echoed)
                        .and_then(|e| text[e..at].find('\n').map(|n| e + n + 1))
                        .unwrap_or(at);
                    return (text[start..at].replace('\r', ""), status);
                }
            }
            assert!(
                Instant::now() < deadline,
                "{command:?} did not finish within {timeout:?}; the console shows:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `command` and expects it to succeed; returns its output.
    pub fn ok(&mut self, command: &str) -> String {
        let (output, status) = self.run(command, Duration::from_secs(60));
        assert_eq!(status, 0, "{command:?} failed in the guest:\n{output}");
        output
    }

    /// Sends raw bytes.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Whether `needle` shows up within `timeout`.
    pub fn shows_within(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.text().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

/// A claim directory holding a copy of `image` as `disk.img`.
pub fn claim_with(image: &Path, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("claim dir");
    let status = Command::new("cp")
        .args(["--sparse=always"])
        .arg(image)
        .arg(dir.join("disk.img"))
        .status()
        .expect("cp");
    assert!(status.success());
    dir.to_path_buf()
}

/// A one-shot HTTP server on 127.0.0.1 answering every GET with `body`.
pub fn serve_http(body: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            while reader.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                line.clear();
            }
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// A TCP port free on 127.0.0.1 now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
