//! The container's process: started as `ferrovirt <args>` with the pod's environment and its
//! output relayed into the pod's log, and stopped within the pod's grace period.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::ResourceExt;
use tokio::process::{Child, Command};
use tokio::sync::watch as stop_signal;

use api::pod_contract::under_root;
use k8s_openapi::api::core::v1::Container;

use super::{AgentError, DEFAULT_STOP_GRACE, DEFAULT_TERMINATION_MESSAGE_PATH, PodRun};
use crate::cri_log;
use crate::pod_files::container_log;

pub(super) enum Exit {
    Stopped,
    Exited { code: i32, message: String },
}

impl PodRun {
    pub(super) fn spawn(
        &self,
        container: &Container,
        env: &[(String, String)],
    ) -> Result<Child, AgentError> {
        let args = container.args.clone().unwrap_or_default();
        let uid = self.pod.uid().unwrap_or_default();
        let state_dir = &self.agent().state_dir;
        let log_path = container_log(state_dir, &uid, &container.name, false);
        if let Some(dir) = log_path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| AgentError::Io {
                what: "creating",
                path: dir.to_path_buf(),
                source,
            })?;
        }
        // Each run gets a log of its own; the one before stays for `--previous`.
        if log_path.exists() {
            let previous = container_log(state_dir, &uid, &container.name, true);
            std::fs::rename(&log_path, &previous).map_err(|source| AgentError::Io {
                what: "keeping the previous log",
                path: previous,
                source,
            })?;
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|source| AgentError::Io {
                what: "opening",
                path: log_path.clone(),
                source,
            })?;
        let log = Arc::new(Mutex::new(log));
        let pipe_error = |source: rustix::io::Errno| AgentError::Io {
            what: "making a pipe for the output to",
            path: log_path.clone(),
            source: source.into(),
        };
        let (stdout, stdout_writer) = rustix::pipe::pipe().map_err(pipe_error)?;
        let (stderr, stderr_writer) = rustix::pipe::pipe().map_err(pipe_error)?;
        // The kubelet's record per line, with its time, so that `kubectl logs` can show
        // times and start from one; the threads end when the container's output closes.
        for (output, stream) in [(stdout, "stdout"), (stderr, "stderr")] {
            let log = log.clone();
            std::thread::spawn(move || {
                if let Err(err) = cri_log::relay(std::fs::File::from(output), stream, &log) {
                    tracing::warn!(%err, stream, "writing a container's log");
                }
            });
        }
        let mut command = Command::new(&self.agent().executable);
        command
            .args(&args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout_writer))
            .stderr(Stdio::from(stderr_writer))
            .kill_on_drop(true);
        // SAFETY: only calls prctl, which is async-signal-safe, between fork and exec.
        unsafe {
            command.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(std::io::Error::from)
            });
        }
        command.spawn().map_err(|source| AgentError::Io {
            what: "starting",
            path: self.agent().executable.clone(),
            source,
        })
    }

    pub(super) async fn wait(
        &self,
        container: &Container,
        mut child: Child,
        stopped: &mut stop_signal::Receiver<bool>,
    ) -> Result<Exit, AgentError> {
        tokio::select! {
            status = child.wait() => {
                let code = status.map(|s| s.code().unwrap_or(137)).unwrap_or(1);
                let path = container
                    .termination_message_path
                    .as_deref()
                    .unwrap_or(DEFAULT_TERMINATION_MESSAGE_PATH);
                let log = under_root(&self.root(), path);
                let message = std::fs::read_to_string(&log).unwrap_or_default();
                let _ = std::fs::remove_file(&log);
                Ok(Exit::Exited { code, message: message.trim().to_string() })
            }
            _ = stopped.changed() => {
                if let Some(pid) = child.id().and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
                }
                if tokio::time::timeout(self.stop_grace(), child.wait()).await.is_err() {
                    let _ = child.kill().await;
                }
                Ok(Exit::Stopped)
            }
        }
    }

    /// The pod's `terminationGracePeriodSeconds`, capped by the node's shutdown.
    pub(super) fn stop_grace(&self) -> Duration {
        let grace = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_STOP_GRACE);
        match self.shared.shutdown_grace.get() {
            Some(cap) => grace.min(*cap),
            None => grace,
        }
    }
}
