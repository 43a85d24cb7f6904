//! A typed QMP client: the commands the launcher sends and the events it acts on. QMP is a
//! line-delimited JSON protocol on a unix socket: a greeting, `qmp_capabilities`, then
//! commands answered by `return` or `error` with the command's `id`, and events at any
//! time. A reader task routes answers to their callers and events to one channel. The
//! available Rust crate (`qapi`) generates bindings for all of QEMU's schema; the seven
//! commands used here do not justify it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{Mutex, mpsc, oneshot};

/// How long a command may take to be answered.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest line accepted from QEMU; answers here are a few hundred bytes.
const MAX_LINE: usize = 1 << 20;

/// Why a QMP exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum QmpError {
    #[error("connecting to QMP at {path}: {source}")]
    Connect {
        path: String,
        source: std::io::Error,
    },
    #[error("QMP I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("QMP protocol: {0}")]
    Protocol(String),
    #[error("QMP {command} failed: {class}: {desc}")]
    Command {
        command: String,
        class: String,
        desc: String,
    },
    #[error("QMP {0} was not answered within {secs}s", secs = COMMAND_TIMEOUT.as_secs())]
    Timeout(String),
    #[error("QMP connection closed (QEMU exited)")]
    Closed,
}

/// The run state of the VM (`query-status`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct StatusInfo {
    pub running: bool,
    /// `running`, `paused`, `prelaunch`, `shutdown`, `guest-panicked`, `io-error`, …
    pub status: String,
}

/// The events the launcher acts on; the rest arrive as [`Event::Other`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The guest powered off (`guest: true`) or QEMU was asked to quit.
    Shutdown {
        guest: bool,
        reason: String,
    },
    /// The guest rebooted or was reset.
    Reset {
        guest: bool,
        reason: String,
    },
    /// The VM was paused.
    Stop,
    /// The VM resumed.
    Resume,
    /// The guest's kernel panicked (pvpanic).
    GuestPanicked {
        action: String,
    },
    /// The power button was pressed (`system_powerdown`).
    Powerdown,
    /// An I/O error paused or stopped the VM.
    BlockIoError {
        device: String,
        action: String,
    },
    /// The watchdog fired.
    Watchdog {
        action: String,
    },
    Other(String),
}

impl Event {
    fn parse(name: &str, data: &Value) -> Self {
        let text = |key: &str| {
            data.get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let guest = data.get("guest").and_then(Value::as_bool).unwrap_or(false);
        match name {
            "SHUTDOWN" => Self::Shutdown {
                guest,
                reason: text("reason"),
            },
            "RESET" => Self::Reset {
                guest,
                reason: text("reason"),
            },
            "STOP" => Self::Stop,
            "RESUME" => Self::Resume,
            "GUEST_PANICKED" => Self::GuestPanicked {
                action: text("action"),
            },
            "POWERDOWN" => Self::Powerdown,
            "BLOCK_IO_ERROR" => Self::BlockIoError {
                device: text("device"),
                action: text("action"),
            },
            "WATCHDOG" => Self::Watchdog {
                action: text("action"),
            },
            other => Self::Other(other.to_owned()),
        }
    }
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, QmpError>>>>>;

/// A QMP connection with capabilities negotiated.
pub struct Qmp {
    writer: Mutex<OwnedWriteHalf>,
    pending: Pending,
    next_id: AtomicU64,
}

impl Qmp {
    /// Connects to the QMP socket at `path`, negotiates capabilities and returns the
    /// connection and the stream of its events.
    pub async fn connect(path: &Path) -> Result<(Self, mpsc::UnboundedReceiver<Event>), QmpError> {
        let stream = UnixStream::connect(path)
            .await
            .map_err(|source| QmpError::Connect {
                path: path.display().to_string(),
                source,
            })?;
        let (read, write) = stream.into_split();
        let mut lines = BufReader::new(read);
        let greeting = tokio::time::timeout(COMMAND_TIMEOUT, read_message(&mut lines))
            .await
            .map_err(|_| QmpError::Timeout("the greeting".into()))??
            .ok_or(QmpError::Closed)?;
        if greeting.get("QMP").is_none() {
            return Err(QmpError::Protocol(format!(
                "expected a greeting, got {greeting}"
            )));
        }
        let pending: Pending = Arc::default();
        let (events_tx, events) = mpsc::unbounded_channel();
        tokio::spawn(route_messages(lines, pending.clone(), events_tx));
        let qmp = Self {
            writer: Mutex::new(write),
            pending,
            next_id: AtomicU64::new(1),
        };
        qmp.execute::<Value>("qmp_capabilities", None).await?;
        Ok((qmp, events))
    }

    /// Runs `command` with `arguments` and decodes its return value.
    pub async fn execute<T: DeserializeOwned>(
        &self,
        command: &str,
        arguments: Option<Value>,
    ) -> Result<T, QmpError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({"execute": command, "id": id});
        if let Some(arguments) = arguments {
            message["arguments"] = arguments;
        }
        let (tx, rx) = oneshot::channel();
        self.pending.lock().await.insert(id, tx);
        let mut line = message.to_string();
        line.push('\n');
        {
            let mut writer = self.writer.lock().await;
            if let Err(e) = writer.write_all(line.as_bytes()).await {
                self.pending.lock().await.remove(&id);
                return Err(e.into());
            }
        }
        let answer = match tokio::time::timeout(COMMAND_TIMEOUT, rx).await {
            Err(_) => {
                self.pending.lock().await.remove(&id);
                return Err(QmpError::Timeout(command.to_owned()));
            }
            Ok(Err(_)) => return Err(QmpError::Closed),
            Ok(Ok(answer)) => answer,
        };
        match answer {
            Ok(value) => serde_json::from_value(value)
                .map_err(|e| QmpError::Protocol(format!("unexpected answer to {command}: {e}"))),
            Err(QmpError::Command { class, desc, .. }) => Err(QmpError::Command {
                command: command.to_owned(),
                class,
                desc,
            }),
            Err(e) => Err(e),
        }
    }

    pub async fn query_status(&self) -> Result<StatusInfo, QmpError> {
        self.execute("query-status", None).await
    }

    /// Pauses the vCPUs.
    pub async fn stop(&self) -> Result<(), QmpError> {
        self.unit("stop").await
    }

    /// Resumes (or, after `-S`, starts) the vCPUs.
    pub async fn cont(&self) -> Result<(), QmpError> {
        self.unit("cont").await
    }

    /// Presses the ACPI power button.
    pub async fn system_powerdown(&self) -> Result<(), QmpError> {
        self.unit("system_powerdown").await
    }

    /// Resets the machine, as the reset button does.
    pub async fn system_reset(&self) -> Result<(), QmpError> {
        self.unit("system_reset").await
    }

    /// Asks QEMU to exit at once.
    pub async fn quit(&self) -> Result<(), QmpError> {
        match self.unit("quit").await {
            // QEMU may close the socket before its answer is read.
            Err(QmpError::Closed) => Ok(()),
            other => other,
        }
    }

    async fn unit(&self, command: &str) -> Result<(), QmpError> {
        self.execute::<Value>(command, None).await.map(drop)
    }
}

async fn read_message(
    lines: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
) -> Result<Option<Value>, QmpError> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut *lines)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return Ok(None);
        }
        if line.last() != Some(&b'\n') && n == MAX_LINE {
            return Err(QmpError::Protocol(format!(
                "a line longer than {MAX_LINE} bytes"
            )));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        return serde_json::from_slice(&line)
            .map(Some)
            .map_err(|e| QmpError::Protocol(format!("not JSON: {e}")));
    }
}

use tokio::io::AsyncReadExt as _;

/// Routes answers to their waiting callers and events to `events` until the socket closes;
/// then fails every pending command with [`QmpError::Closed`].
async fn route_messages(
    mut lines: BufReader<tokio::net::unix::OwnedReadHalf>,
    pending: Pending,
    events: mpsc::UnboundedSender<Event>,
) {
    loop {
        let message = match read_message(&mut lines).await {
            Ok(Some(message)) => message,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(error = %e, "QMP: dropping the connection");
                break;
            }
        };
        if let Some(name) = message.get("event").and_then(Value::as_str) {
            let data = message.get("data").cloned().unwrap_or(Value::Null);
            let _ = events.send(Event::parse(name, &data));
            continue;
        }
        let Some(id) = message.get("id").and_then(Value::as_u64) else {
            tracing::warn!(%message, "QMP: a message with neither event nor id");
            continue;
        };
        let Some(waiter) = pending.lock().await.remove(&id) else {
            continue;
        };
        let answer = if let Some(value) = message.get("return") {
            Ok(value.clone())
        } else if let Some(error) = message.get("error") {
            let text = |k: &str| {
                error
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            Err(QmpError::Command {
                command: String::new(),
                class: text("class"),
                desc: text("desc"),
            })
        } else {
            Err(QmpError::Protocol(format!(
                "an answer with neither return nor error: {message}"
            )))
        };
        let _ = waiter.send(answer);
    }
    for (_, waiter) in pending.lock().await.drain() {
        let _ = waiter.send(Err(QmpError::Closed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncBufReadExt;
    use tokio::net::UnixListener;

    /// A QMP peer on a socket that answers from a script, as QEMU would.
    async fn fake_qemu(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("qmp.sock");
        let listener = UnixListener::bind(&path).expect("bind");
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.expect("accept");
            let (read, mut write) = stream.into_split();
            write
                .write_all(b"{\"QMP\": {\"version\": {}, \"capabilities\": []}}\r\n")
                .await
                .expect("greet");
            let mut lines = BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let request: Value = serde_json::from_str(&line).expect("json");
                let id = request["id"].clone();
                let reply = match request["execute"].as_str() {
                    Some("query-status") => {
                        json!({"return": {"running": true, "status": "running"}, "id": id})
                    }
                    Some("system_powerdown") => {
                        write
                            .write_all(
                                b"{\"event\": \"POWERDOWN\", \"data\": {}, \"timestamp\": {}}\r\n",
                            )
                            .await
                            .expect("event");
                        json!({"return": {}, "id": id})
                    }
                    Some("cont") => {
                        json!({"error": {"class": "GenericError", "desc": "no"}, "id": id})
                    }
                    _ => json!({"return": {}, "id": id}),
                };
                let mut text = reply.to_string();
                text.push_str("\r\n");
                write.write_all(text.as_bytes()).await.expect("reply");
            }
        });
        path
    }

    #[tokio::test]
    async fn commands_events_and_errors_are_typed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = fake_qemu(dir.path()).await;
        let (qmp, mut events) = Qmp::connect(&socket).await.expect("connect");
        let status = qmp.query_status().await.expect("status");
        assert_eq!(status.status, "running");
        qmp.system_powerdown().await.expect("powerdown");
        assert_eq!(events.recv().await, Some(Event::Powerdown));
        match qmp.cont().await {
            Err(QmpError::Command {
                command,
                class,
                desc,
            }) => {
                assert_eq!(
                    (command.as_str(), class.as_str(), desc.as_str()),
                    ("cont", "GenericError", "no")
                );
            }
            other => panic!("expected a command error, got {other:?}"),
        }
    }

    #[test]
    fn events_parse_with_their_data() {
        assert_eq!(
            Event::parse(
                "SHUTDOWN",
                &json!({"guest": true, "reason": "guest-shutdown"})
            ),
            Event::Shutdown {
                guest: true,
                reason: "guest-shutdown".into()
            }
        );
        assert_eq!(
            Event::parse("GUEST_PANICKED", &json!({"action": "pause"})),
            Event::GuestPanicked {
                action: "pause".into()
            }
        );
        assert_eq!(
            Event::parse("NIC_RX_FILTER_CHANGED", &json!({})),
            Event::Other("NIC_RX_FILTER_CHANGED".into())
        );
    }
}
