//! kubectl, the real client, against a test's API server: the one way the end-to-end tests
//! run it. Each test's cluster (`ferrovirt up`, an in-process API server) holds a [`Kubectl`]
//! with its kubeconfig and a discovery cache of its own.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// kubectl bound to one API server.
#[derive(Debug, Clone)]
pub struct Kubectl {
    kubeconfig: PathBuf,
    cache_dir: Option<PathBuf>,
}

impl Kubectl {
    /// kubectl with `kubeconfig` and kubectl's own discovery cache.
    pub fn new(kubeconfig: impl Into<PathBuf>) -> Kubectl {
        Kubectl {
            kubeconfig: kubeconfig.into(),
            cache_dir: None,
        }
    }

    /// The same, with a discovery cache of its own in `dir` (so that a test's CRDs are
    /// discovered afresh, whatever another test's server served at the same address).
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Kubectl {
        self.cache_dir = Some(dir.into());
        self
    }

    /// `kubectl ARGS`, not started, for a test that sets more of it (env, stdio).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("kubectl");
        command.arg("--kubeconfig").arg(&self.kubeconfig);
        if let Some(dir) = &self.cache_dir {
            command.arg("--cache-dir").arg(dir);
        }
        command.args(args);
        command
    }

    /// Runs `kubectl ARGS` with `stdin` (or an empty one) to its end.
    pub fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running kubectl");
        let mut pipe = child.stdin.take().expect("kubectl's stdin is piped");
        pipe.write_all(stdin.unwrap_or_default().as_bytes())
            .expect("writing to kubectl");
        drop(pipe);
        child.wait_with_output().expect("kubectl ends")
    }

    /// Runs `kubectl ARGS`, which must succeed; its stdout.
    pub fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl ARGS -o json`, parsed; `None` when kubectl fails (the object is not there).
    pub fn json(&self, args: &[&str]) -> Option<Value> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let out = self.run(&all, None);
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// [`Kubectl::run`] on a blocking thread, for tests whose API server shares their runtime.
    pub async fn run_async(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let (kubectl, args, stdin) = (self.clone(), owned(args), stdin.map(str::to_string));
        on_blocking_thread(move || kubectl.run(&borrowed(&args), stdin.as_deref())).await
    }

    /// [`Kubectl::ok`] on a blocking thread.
    pub async fn ok_async(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (kubectl, args, stdin) = (self.clone(), owned(args), stdin.map(str::to_string));
        on_blocking_thread(move || kubectl.ok(&borrowed(&args), stdin.as_deref())).await
    }

    /// [`Kubectl::json`] on a blocking thread.
    pub async fn json_async(&self, args: &[&str]) -> Option<Value> {
        let (kubectl, args) = (self.clone(), owned(args));
        on_blocking_thread(move || kubectl.json(&borrowed(&args))).await
    }
}

/// Runs `work` off the runtime's threads; its panic (a failed kubectl) goes on in the caller.
async fn on_blocking_thread<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|join| std::panic::resume_unwind(join.into_panic()))
}

fn borrowed(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}
