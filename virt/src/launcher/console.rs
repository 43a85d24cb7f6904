//! The serial console: the launcher holds QEMU's end of the serial port from before the
//! guest starts (so no output is lost), keeps a bounded scroll-back log on disk, and
//! serves the live console on a unix socket of its own (`virt-serial0`, KubeVirt's name)
//! to any number of clients, whose input goes to the guest.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, mpsc, watch};

/// Output chunks kept for a slow client before it starts losing them.
const CLIENT_BACKLOG: usize = 1024;

/// A console attached to QEMU's serial port.
#[derive(Clone)]
pub struct Console {
    input: mpsc::Sender<Vec<u8>>,
    output: broadcast::Sender<Arc<[u8]>>,
    /// Becomes true when QEMU's end of the port closes: clients are then let go.
    ended: watch::Receiver<bool>,
}

impl Console {
    /// Connects to QEMU's serial socket `qemu_socket`, logs its output to `log` (at most
    /// about twice `log_limit` bytes: the current file and the one before) and serves it on
    /// `public_socket`.
    pub async fn attach(
        qemu_socket: &Path,
        public_socket: &Path,
        log: PathBuf,
        log_limit: u64,
    ) -> std::io::Result<Self> {
        let stream = UnixStream::connect(qemu_socket).await?;
        let (mut read, mut write) = stream.into_split();
        let (output, _) = broadcast::channel::<Arc<[u8]>>(CLIENT_BACKLOG);
        let (input, mut input_rx) = mpsc::channel::<Vec<u8>>(64);
        let mut scrollback = ScrollbackLog::open(log, log_limit)?;
        let out = output.clone();
        let (ended_tx, ended) = watch::channel(false);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match read.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        scrollback.append(&buf[..n]);
                        let _ = out.send(Arc::from(&buf[..n]));
                    }
                }
            }
            let _ = ended_tx.send(true);
        });
        tokio::spawn(async move {
            while let Some(bytes) = input_rx.recv().await {
                if write.write_all(&bytes).await.is_err() {
                    break;
                }
            }
        });
        let _ = std::fs::remove_file(public_socket);
        let listener = UnixListener::bind(public_socket)?;
        let console = Self {
            input,
            output,
            ended,
        };
        let serving = console.clone();
        tokio::spawn(async move {
            let mut ended = serving.ended.clone();
            loop {
                tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((client, _)) => {
                            tokio::spawn(serving.clone().serve(client));
                        }
                        Err(_) => break,
                    },
                    _ = ended.wait_for(|e| *e) => break,
                }
            }
        });
        Ok(console)
    }

    /// Copies the console's output to stdout and stdin to the console, until either ends.
    pub fn attach_stdio(&self) {
        let mut output = self.subscribe();
        tokio::spawn(async move {
            let mut stdout = tokio::io::stdout();
            loop {
                match output.recv().await {
                    Ok(bytes) => {
                        if stdout.write_all(&bytes).await.is_err() || stdout.flush().await.is_err()
                        {
                            break;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        });
        let input = self.input.clone();
        // A plain thread, not tokio's stdin: a read blocked on a terminal would hold up the
        // runtime's shutdown after the guest is gone.
        std::thread::spawn(move || {
            use std::io::Read;
            let mut stdin = std::io::stdin();
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = stdin.read(&mut buf) {
                if n == 0 || input.blocking_send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
    }

    /// The live output from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<[u8]>> {
        self.output.subscribe()
    }

    /// Sends `bytes` to the guest's serial port.
    pub async fn send(&self, bytes: Vec<u8>) {
        let _ = self.input.send(bytes).await;
    }

    async fn serve(self, client: UnixStream) {
        let (mut read, mut write) = client.into_split();
        let mut output = self.subscribe();
        let to_client = async move {
            loop {
                match output.recv().await {
                    Ok(bytes) => {
                        if write.write_all(&bytes).await.is_err() {
                            break;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        };
        let input = self.input.clone();
        let from_client = async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = read.read(&mut buf).await {
                if n == 0 || input.send(buf[..n].to_vec()).await.is_err() {
                    break;
                }
            }
        };
        let mut ended = self.ended.clone();
        tokio::select! {
            () = to_client => {}
            () = from_client => {}
            _ = ended.wait_for(|e| *e) => {}
        }
    }
}

/// The console's output on disk, bounded: when the file reaches the limit it becomes
/// `NAME.1` (replacing the one before) and a new file starts.
struct ScrollbackLog {
    path: PathBuf,
    file: File,
    written: u64,
    limit: u64,
}

impl ScrollbackLog {
    fn open(path: PathBuf, limit: u64) -> std::io::Result<Self> {
        let file = File::create(&path)?;
        Ok(Self {
            path,
            file,
            written: 0,
            limit,
        })
    }

    fn append(&mut self, bytes: &[u8]) {
        if self.written + bytes.len() as u64 > self.limit && self.rotate().is_err() {
            return;
        }
        if self.file.write_all(bytes).is_ok() {
            self.written += bytes.len() as u64;
        }
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let mut previous = self.path.clone().into_os_string();
        previous.push(".1");
        std::fs::rename(&self.path, previous)?;
        self.file = File::create(&self.path)?;
        self.written = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scrollback_log_stays_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let mut log = ScrollbackLog::open(path.clone(), 100).expect("open");
        for _ in 0..50 {
            log.append(&[b'x'; 30]);
        }
        let current = std::fs::metadata(&path).expect("log").len();
        let previous = std::fs::metadata(dir.path().join("log.1"))
            .expect("log.1")
            .len();
        assert!(current <= 100 && previous <= 100, "{current} {previous}");
        assert!(current + previous >= 100);
    }
}
