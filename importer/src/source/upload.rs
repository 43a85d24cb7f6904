//! An upload body as an import source: chunks pushed by an HTTP handler on the async side and
//! read by the pipeline on its blocking thread. The feed outlives any one request, so when a
//! connection drops the pipeline simply waits for more bytes, and a later request (a resumed
//! upload) continues the same stream from the committed offset. A feed that gets no bytes for
//! its idle timeout fails the import as abandoned.

use std::io::{self, Read};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::mpsc;

use crate::error::ImportError;
use crate::source::OpenedSource;

/// How many chunks may wait between the HTTP handler and the pipeline. With hyper's reads
/// (at most a few hundred KiB each) this bounds the memory of an upload to a few MiB.
const DEPTH: usize = 16;

/// A chunk of upload bytes, in whatever buffer type the HTTP stack hands out (no copy).
pub type UploadChunk = Box<dyn AsRef<[u8]> + Send>;

type Item = Result<UploadChunk, io::Error>;

/// The producing end: where request bodies are pushed.
pub struct UploadFeed {
    sender: Mutex<Option<mpsc::Sender<Item>>>,
    committed: AtomicU64,
}

/// The pipeline has stopped reading (it finished or failed); its result says which.
#[derive(Debug, thiserror::Error)]
#[error("the import is no longer reading the upload")]
pub struct FeedClosed;

impl UploadFeed {
    /// Bytes accepted so far: every one of them will reach the pipeline, whatever happens to
    /// the connection that carried it. A resumed upload continues from here.
    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// Hands a chunk to the pipeline, waiting while the pipeline is behind.
    pub async fn push(&self, chunk: impl AsRef<[u8]> + Send + 'static) -> Result<(), FeedClosed> {
        let len = chunk.as_ref().len() as u64;
        if len == 0 {
            return Ok(());
        }
        let sender = self.sender().ok_or(FeedClosed)?;
        sender
            .send(Ok(Box::new(chunk)))
            .await
            .map_err(|_| FeedClosed)?;
        self.committed.fetch_add(len, Ordering::AcqRel);
        Ok(())
    }

    /// The upload is complete: the pipeline sees the end of the stream.
    pub fn finish(&self) {
        self.sender.lock().expect("feed lock").take();
    }

    /// Ends the stream with an error (for example, the upload was cancelled).
    pub async fn abort(&self, reason: impl Into<String>) {
        let sender = self.sender.lock().expect("feed lock").take();
        if let Some(sender) = sender {
            let _ = sender.send(Err(io::Error::other(reason.into()))).await;
        }
    }

    /// Whether the pipeline still reads (false once it finished or failed).
    pub fn is_open(&self) -> bool {
        self.sender().is_some_and(|s| !s.is_closed())
    }

    fn sender(&self) -> Option<mpsc::Sender<Item>> {
        self.sender.lock().expect("feed lock").clone()
    }
}

/// Creates a feed and the source that reads it. `size` is the upload's length when the
/// client announced it; `idle_timeout` is how long the source waits for bytes before it
/// fails the import as abandoned. Must be called inside a Tokio runtime.
pub fn channel(size: Option<u64>, idle_timeout: Duration) -> (UploadFeed, OpenedSource) {
    let (tx, rx) = mpsc::channel(DEPTH);
    let feed = UploadFeed {
        sender: Mutex::new(Some(tx)),
        committed: AtomicU64::new(0),
    };
    let reader = UploadBodyReader {
        receiver: rx,
        runtime: Handle::current(),
        idle_timeout,
        current: None,
        offset: 0,
        done: false,
    };
    let source = OpenedSource {
        stream: Box::new(reader),
        size,
        random_access: None,
    };
    (feed, source)
}

/// The consuming end, read by the pipeline's blocking thread.
struct UploadBodyReader {
    receiver: mpsc::Receiver<Item>,
    runtime: Handle,
    idle_timeout: Duration,
    current: Option<UploadChunk>,
    offset: usize,
    done: bool,
}

impl UploadBodyReader {
    fn next_chunk(&mut self) -> io::Result<Option<UploadChunk>> {
        // Most of the time the next chunk is already queued: take it without parking.
        match self.receiver.try_recv() {
            Ok(item) => return item.map(Some),
            Err(mpsc::error::TryRecvError::Disconnected) => return Ok(None),
            Err(mpsc::error::TryRecvError::Empty) => {}
        }
        let receiver = &mut self.receiver;
        let idle = self.idle_timeout;
        let waited = self
            .runtime
            .block_on(async { tokio::time::timeout(idle, receiver.recv()).await });
        match waited {
            Ok(Some(Ok(chunk))) => Ok(Some(chunk)),
            Ok(Some(Err(err))) => Err(err),
            Ok(None) => Ok(None),
            Err(_) => Err(ImportError::ReadSource(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "upload abandoned: no bytes received for {} s",
                    idle.as_secs()
                ),
            ))
            .into_io()),
        }
    }
}

impl Read for UploadBodyReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if let Some(chunk) = &self.current {
                let bytes: &[u8] = (**chunk).as_ref();
                if self.offset < bytes.len() {
                    let n = buf.len().min(bytes.len() - self.offset);
                    buf[..n].copy_from_slice(&bytes[self.offset..self.offset + n]);
                    self.offset += n;
                    return Ok(n);
                }
                self.current = None;
            }
            if self.done {
                return Ok(0);
            }
            match self.next_chunk() {
                Ok(Some(chunk)) => {
                    self.current = Some(chunk);
                    self.offset = 0;
                }
                Ok(None) => self.done = true,
                Err(err) => {
                    self.done = true;
                    return Err(err);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn chunks_from_several_pushers_arrive_in_order() {
        let (feed, source) = channel(None, Duration::from_secs(5));
        let reader = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            let mut stream = source.stream;
            stream.read_to_end(&mut out).map(|_| out)
        });
        feed.push(b"hello ".to_vec()).await.unwrap();
        // A dropped connection: nothing for a while, then a resumed request.
        tokio::time::sleep(Duration::from_millis(50)).await;
        feed.push(&b"world"[..]).await.unwrap();
        assert_eq!(feed.committed(), 11);
        feed.finish();
        assert_eq!(reader.await.unwrap().unwrap(), b"hello world");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_feed_fails_as_abandoned() {
        let (feed, source) = channel(None, Duration::from_millis(100));
        feed.push(b"partial".to_vec()).await.unwrap();
        let err = tokio::task::spawn_blocking(move || {
            let mut stream = source.stream;
            stream.read_to_end(&mut Vec::new())
        })
        .await
        .unwrap()
        .unwrap_err();
        let err = ImportError::from_read(err);
        assert!(err.to_string().contains("upload abandoned"), "{err}");
        assert!(!feed.is_open());
        assert!(feed.push(b"late".to_vec()).await.is_err());
    }
}
