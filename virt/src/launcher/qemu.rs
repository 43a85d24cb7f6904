//! The QEMU process: spawned with the parent-death signal set to SIGKILL (if the launcher
//! dies, QEMU dies with it), its stderr kept (the last lines explain a failure), reaped by
//! a task of its own, and connected to over QMP before anything else happens.

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::{mpsc, watch};

use super::LauncherError;
use crate::domain::Domain;
use crate::qmp::{Event, Qmp};

/// How long QEMU may take to open its QMP socket.
const QMP_TIMEOUT: Duration = Duration::from_secs(30);
/// Lines of QEMU's stderr kept for error messages.
const STDERR_LINES: usize = 20;

pub struct QemuProcess {
    pid: Option<u32>,
    exit: watch::Receiver<Option<ExitStatus>>,
    /// Asks the reaper task to kill QEMU (it owns the child, so no stale pid is hit).
    kill: mpsc::UnboundedSender<()>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Drop for QemuProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

impl QemuProcess {
    /// Starts QEMU for `domain` (paused, as the domain's `-S` asks) and connects to QMP.
    pub async fn start(
        domain: &Domain,
    ) -> Result<(Self, Qmp, mpsc::UnboundedReceiver<Event>), LauncherError> {
        let sockets = &domain.sockets;
        for socket in [
            Some(&sockets.qmp),
            sockets.serial.as_ref(),
            sockets.vnc.as_ref(),
            Some(&sockets.guest_agent),
        ]
        .into_iter()
        .flatten()
        {
            let _ = std::fs::remove_file(socket);
        }
        let (program, args) = domain
            .argv
            .split_first()
            .ok_or_else(|| LauncherError::QemuStart("empty command line".into()))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Its own process group: a Ctrl-C meant for the launcher must not reach QEMU,
            // which would quit at once instead of shutting the guest down.
            .process_group(0)
            .kill_on_drop(true);
        // SAFETY: the closure runs in the forked child before exec and only makes the
        // async-signal-safe prctl(PR_SET_PDEATHSIG) system call.
        unsafe {
            command.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(std::io::Error::from)
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| LauncherError::QemuStart(format!("cannot run {program}: {e}")))?;
        let pid = child.id();
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(pipe) = child.stderr.take() {
            tokio::spawn(keep_stderr(pipe, stderr.clone()));
        }
        let (exit_tx, exit) = watch::channel(None);
        let (kill, mut kill_rx) = mpsc::unbounded_channel::<()>();
        tokio::spawn(async move {
            let status = loop {
                tokio::select! {
                    status = child.wait() => {
                        break status.unwrap_or_else(|_| ExitStatus::from_raw(-1));
                    }
                    Some(()) = kill_rx.recv() => {
                        let _ = child.start_kill();
                    }
                }
            };
            let _ = exit_tx.send(Some(status));
        });
        let mut process = Self {
            pid,
            exit,
            kill,
            stderr,
        };
        match process.connect_qmp(&sockets.qmp).await {
            Ok((qmp, events)) => Ok((process, qmp, events)),
            Err(e) => {
                process.kill();
                process.exited().await;
                Err(e)
            }
        }
    }

    async fn connect_qmp(
        &mut self,
        socket: &std::path::Path,
    ) -> Result<(Qmp, mpsc::UnboundedReceiver<Event>), LauncherError> {
        let deadline = Instant::now() + QMP_TIMEOUT;
        loop {
            if self.exit.borrow().is_some() {
                // Give the stderr reader a moment to collect QEMU's last words.
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Err(LauncherError::QemuStart(self.failure_message()));
            }
            if socket.exists() {
                match Qmp::connect(socket).await {
                    Ok(connected) => return Ok(connected),
                    Err(e) if Instant::now() >= deadline => return Err(e.into()),
                    Err(_) => {}
                }
            } else if Instant::now() >= deadline {
                return Err(LauncherError::QemuStart(format!(
                    "QEMU did not open its QMP socket within {}s",
                    QMP_TIMEOUT.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Kills QEMU with SIGKILL, unless it has exited already.
    pub fn kill(&self) {
        let _ = self.kill.send(());
    }

    /// Whether QEMU exited with status 0.
    pub fn exited_cleanly(&self) -> bool {
        self.exit.borrow().is_some_and(|s| s.success())
    }

    /// Waits until QEMU has exited (at once if it has).
    pub async fn exited(&mut self) {
        let _ = self.exit.wait_for(Option::is_some).await;
    }

    /// How QEMU exited, with its last stderr lines.
    pub fn failure_message(&self) -> String {
        let status = match *self.exit.borrow() {
            Some(status) => match (status.code(), status.signal()) {
                (Some(code), _) => format!("exit code {code}"),
                (None, Some(signal)) => format!("killed by signal {signal}"),
                _ => "exited".to_owned(),
            },
            None => "still running".to_owned(),
        };
        let lines = self
            .stderr
            .lock()
            .map(|l| l.iter().cloned().collect::<Vec<_>>().join("; "))
            .unwrap_or_default();
        if lines.is_empty() {
            status
        } else {
            format!("{lines} ({status})")
        }
    }
}

async fn keep_stderr(pipe: tokio::process::ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = BufReader::new(pipe).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::warn!(target: "qemu", "{line}");
        if let Ok(mut tail) = tail.lock() {
            if tail.len() == STDERR_LINES {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    }
}
