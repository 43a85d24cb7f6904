//! A server per test: its own data directory under a tempdir and a port picked by the
//! kernel, so tests run in parallel; helpers to run kubectl against it with a deadline.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use ferrovirt_tests::kubectl::Kubectl;
use serde_json::Value;
use standalone::apiserver::{ApiServer, ApiServerConfig};

/// How long one kubectl invocation may take before the test fails.
pub const KUBECTL_DEADLINE: Duration = Duration::from_secs(60);

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate sits in the workspace")
        .to_path_buf()
}

pub fn crds_dir() -> PathBuf {
    workspace_root().join("deploy/crds")
}

pub fn data_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The CRDs the api crate generates, as JSON objects.
pub fn crds() -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(crds_dir())
        .expect("deploy/crds exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no CRDs in deploy/crds");
    files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect()
}

pub fn config(dir: &Path, crds: Vec<Value>) -> ApiServerConfig {
    ApiServerConfig {
        data_dir: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        crds,
        admission: vec![],
        virtual_creates: HashMap::new(),
    }
}

pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A kube-rs client built from the kubeconfig the server wrote.
pub async fn client(kubeconfig: &Path) -> kube::Client {
    install_crypto();
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("kubeconfig is usable");
    kube::Client::try_from(config).expect("client")
}

/// A server on its own runtime, for tests that drive blocking clients (kubectl, python).
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub server: ApiServer,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Cluster {
    pub fn start(crds: Vec<Value>) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime
            .block_on(ApiServer::start(config(&dir.path().join("data"), crds)))
            .expect("server starts");
        // HCO's conversion of the HyperConverged (stored at v1), as `ferrovirt up` registers it.
        server.register_converter(standalone::apiserver::Converter::new(
            api::hco::GROUP,
            api::hco::conversion::KIND,
            api::hco::conversion::webhook,
        ));
        Cluster {
            dir,
            server,
            runtime: Some(runtime),
        }
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.server.kubeconfig
    }

    /// A kubectl command with this cluster's kubeconfig and a private discovery cache.
    pub fn kubectl_command(&self, args: &[&str]) -> Command {
        kubectl_command(self.kubeconfig(), &self.dir.path().join("kube-cache"), args)
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        run(self.kubectl_command(args), None)
    }

    /// Runs kubectl, panicking with its stderr unless it succeeds; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        expect_ok(args, self.kubectl(args))
    }

    /// Runs kubectl with `input` on stdin; returns stdout.
    pub fn ok_stdin(&self, args: &[&str], input: &str) -> String {
        expect_ok(args, run(self.kubectl_command(args), Some(input)))
    }

    /// Runs kubectl expecting it to fail; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} succeeded unexpectedly:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// `kubectl get ... -o json`, parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all)).expect("kubectl -o json prints JSON")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.server.stop();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

pub fn kubectl_command(kubeconfig: &Path, cache: &Path, args: &[&str]) -> Command {
    Kubectl::new(kubeconfig).with_cache_dir(cache).command(args)
}

fn expect_ok(args: &[&str], out: Output) -> String {
    assert!(
        out.status.success(),
        "kubectl {args:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `command` to completion, killing it (and failing) after [`KUBECTL_DEADLINE`].
pub fn run(mut command: Command, input: Option<&str>) -> Output {
    command
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawning kubectl");
    if let Some(input) = input {
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).unwrap();
    }
    wait_with_deadline(child, KUBECTL_DEADLINE, &format!("{command:?}"))
}

/// Waits for `child`, collecting its output; kills it and panics after `deadline`.
pub fn wait_with_deadline(mut child: Child, deadline: Duration, what: &str) -> Output {
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stderr.as_mut() {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}
