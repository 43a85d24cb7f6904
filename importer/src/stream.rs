//! Plumbing between pipeline stages: a reader whose head can be inspected before it is
//! consumed, and a reader that runs its inner reader on a thread of its own so that two
//! stages (say, xz decoding and qcow2 conversion) use two cores.

use std::io::{self, Read};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread;

/// A reader whose first bytes were read ahead for detection and are replayed on read.
pub struct PeekedReader<R> {
    head: Vec<u8>,
    replayed: usize,
    inner: R,
}

impl<R: Read> PeekedReader<R> {
    /// Reads up to `len` bytes ahead (fewer only at end of stream).
    pub fn new(mut inner: R, len: usize) -> io::Result<Self> {
        let mut head = Vec::with_capacity(len);
        (&mut inner).take(len as u64).read_to_end(&mut head)?;
        Ok(Self {
            head,
            replayed: 0,
            inner,
        })
    }

    /// The bytes read ahead; the whole stream if it was shorter than the probe.
    pub fn head(&self) -> &[u8] {
        &self.head
    }
}

impl<R: Read> Read for PeekedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.replayed < self.head.len() {
            let n = buf.len().min(self.head.len() - self.replayed);
            buf[..n].copy_from_slice(&self.head[self.replayed..self.replayed + n]);
            self.replayed += n;
            if self.replayed == self.head.len() {
                self.head = Vec::new();
                self.replayed = 0;
            }
            return Ok(n);
        }
        self.inner.read(buf)
    }
}

/// A chunk moving between stages, or the error that ended the producer.
pub type Chunk = io::Result<Vec<u8>>;

/// Reads chunks off a channel: the consuming end of a stage boundary. `recv` yields the
/// next chunk, or `None` once the producer hung up.
pub struct ChannelReader {
    recv: Box<dyn FnMut() -> Option<Chunk> + Send>,
    current: Vec<u8>,
    offset: usize,
    done: bool,
}

impl ChannelReader {
    pub fn new(rx: Receiver<Chunk>) -> Self {
        Self::from_fn(move || rx.recv().ok())
    }

    /// Over an async producer: the consumer is a blocking thread.
    pub fn from_tokio(mut rx: tokio::sync::mpsc::Receiver<Chunk>) -> Self {
        Self::from_fn(move || rx.blocking_recv())
    }

    fn from_fn(recv: impl FnMut() -> Option<Chunk> + Send + 'static) -> Self {
        Self {
            recv: Box::new(recv),
            current: Vec::new(),
            offset: 0,
            done: false,
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.offset == self.current.len() {
            if self.done {
                return Ok(0);
            }
            match (self.recv)() {
                Some(Ok(chunk)) => {
                    self.current = chunk;
                    self.offset = 0;
                }
                Some(Err(err)) => {
                    self.done = true;
                    return Err(err);
                }
                // The producer finished and hung up: end of stream.
                None => self.done = true,
            }
        }
        let n = buf.len().min(self.current.len() - self.offset);
        buf[..n].copy_from_slice(&self.current[self.offset..self.offset + n]);
        self.offset += n;
        Ok(n)
    }
}

/// Size of the chunks a [`ThreadedReader`] moves, and how many may be in flight.
const THREAD_CHUNK: usize = 1 << 20;
const THREAD_DEPTH: usize = 4;

/// Runs a reader on its own thread; reads on this side take the chunks it produced.
/// Memory is bounded by `THREAD_CHUNK * (THREAD_DEPTH + 2)`.
pub struct ThreadedReader {
    channel: ChannelReader,
}

impl ThreadedReader {
    pub fn spawn<R: Read + Send + 'static>(name: &str, mut inner: R) -> Self {
        let (tx, rx) = sync_channel(THREAD_DEPTH);
        let spawned = thread::Builder::new()
            .name(format!("fv-{name}"))
            .spawn(move || pump(&mut inner, &tx));
        if let Err(err) = spawned {
            // Without a thread there is nothing to read; report it on first read.
            let (tx, rx) = sync_channel(1);
            let _ = tx.send(Err(err));
            return Self {
                channel: ChannelReader::new(rx),
            };
        }
        Self {
            channel: ChannelReader::new(rx),
        }
    }
}

fn pump(inner: &mut impl Read, tx: &SyncSender<Chunk>) {
    loop {
        let mut chunk = vec![0u8; THREAD_CHUNK];
        let mut filled = 0;
        while filled < chunk.len() {
            match inner.read(&mut chunk[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    let _ = tx.send(Err(err));
                    return;
                }
            }
        }
        if filled == 0 {
            return;
        }
        chunk.truncate(filled);
        // A send error means the consumer has gone away (it failed or finished early).
        if tx.send(Ok(chunk)).is_err() {
            return;
        }
    }
}

impl Read for ThreadedReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.channel.read(buf)
    }
}

/// Reads until `buf` is full or the stream ends; returns how many bytes were read.
pub fn read_full(reader: &mut (impl Read + ?Sized), buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peek_replays_head() {
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let mut peeked = PeekedReader::new(&data[..], 100).unwrap();
        assert_eq!(peeked.head(), &data[..100]);
        let mut out = Vec::new();
        peeked.read_to_end(&mut out).unwrap();
        assert_eq!(out, data);
    }

    #[test]
    fn threaded_reader_moves_everything() {
        let data: Vec<u8> = (0..=255u8).cycle().take(3 * THREAD_CHUNK + 17).collect();
        let mut reader = ThreadedReader::spawn("test", std::io::Cursor::new(data.clone()));
        let mut out = Vec::new();
        reader.read_to_end(&mut out).unwrap();
        assert_eq!(out, data);
    }
}
