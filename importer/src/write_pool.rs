//! The stage that puts converted data on the target: a few worker threads take batches of
//! blocks, decode compressed qcow2 clusters, skip zeros and write at virtual offsets in
//! parallel. Batches travel in buffers from a fixed pool, which is what bounds the pipeline's
//! memory: a producer waits for a free buffer rather than allocating another.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

use crate::error::ImportError;
use crate::format::cluster::{BlockCodec, BlockDecoder};
use crate::sink::SparseSink;

/// Size of one pooled buffer; large enough for coalesced reads, small enough to stay
/// within the memory budget with `POOL_BUFFERS` of them.
pub const BATCH_BYTES: usize = 4 << 20;
const POOL_BUFFERS: usize = 4;

/// One piece of a batch: bytes of `buf[range]` that belong at virtual offset `offset`.
#[derive(Debug, Clone)]
pub struct Block {
    pub range: Range<usize>,
    pub offset: u64,
    pub kind: BlockKind,
}

#[derive(Debug, Clone, Copy)]
pub enum BlockKind {
    /// Bytes to write as they are.
    Data,
    /// A compressed block (qcow2 cluster, VMDK grain) that decodes to `block_size` bytes;
    /// only the first `len` are written (the last block may extend past the virtual size).
    Compressed {
        codec: BlockCodec,
        block_size: usize,
        len: usize,
    },
}

/// A buffer and the blocks in it.
pub struct Batch {
    pub buf: Vec<u8>,
    pub blocks: Vec<Block>,
}

struct Shared {
    sink: Arc<SparseSink>,
    failure: Mutex<Option<ImportError>>,
    failed: AtomicBool,
}

impl Shared {
    fn fail(&self, err: ImportError) {
        let mut slot = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(err);
        self.failed.store(true, Ordering::Release);
    }
}

/// Worker threads over a sink, fed with [`Batch`]es.
pub struct WritePool {
    shared: Arc<Shared>,
    work: Option<SyncSender<Batch>>,
    free: Receiver<Vec<u8>>,
    workers: Vec<JoinHandle<()>>,
}

impl WritePool {
    pub fn new(sink: Arc<SparseSink>) -> Self {
        let threads = thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(2, 8);
        let (work_tx, work_rx) = sync_channel::<Batch>(POOL_BUFFERS);
        let (free_tx, free_rx) = sync_channel::<Vec<u8>>(POOL_BUFFERS);
        for _ in 0..POOL_BUFFERS {
            free_tx
                .send(Vec::with_capacity(BATCH_BYTES))
                .expect("pool channel has room");
        }
        let shared = Arc::new(Shared {
            sink,
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
        });
        let work_rx = Arc::new(Mutex::new(work_rx));
        let workers = (0..threads)
            .map(|i| {
                let (shared, work_rx, free_tx) = (shared.clone(), work_rx.clone(), free_tx.clone());
                thread::Builder::new()
                    .name(format!("fv-write-{i}"))
                    .spawn(move || worker(&shared, &work_rx, &free_tx))
                    .expect("spawning a writer thread")
            })
            .collect();
        Self {
            shared,
            work: Some(work_tx),
            free: free_rx,
            workers,
        }
    }

    /// A free buffer with at least [`BATCH_BYTES`] of capacity, holding whatever it held
    /// last (callers resize it; not clearing saves re-zeroing 4 MiB per batch). Waits for one.
    pub fn buffer(&self) -> Result<Vec<u8>, ImportError> {
        self.check()?;
        self.free.recv().map_err(|_| self.take_failure())
    }

    pub fn submit(&self, batch: Batch) -> Result<(), ImportError> {
        self.check()?;
        let work = self.work.as_ref().expect("pool is open until finish");
        work.send(batch).map_err(|_| self.take_failure())
    }

    /// Waits for every submitted batch to be written; the first error any worker met.
    pub fn finish(mut self) -> Result<(), ImportError> {
        self.work.take();
        for worker in self.workers.drain(..) {
            if worker.join().is_err() {
                self.shared.fail(ImportError::Target {
                    path: "writer thread".into(),
                    source: std::io::Error::other("a writer thread panicked"),
                });
            }
        }
        match self
            .shared
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    fn check(&self) -> Result<(), ImportError> {
        if self.shared.failed.load(Ordering::Acquire) {
            Err(self.take_failure())
        } else {
            Ok(())
        }
    }

    fn take_failure(&self) -> ImportError {
        self.shared
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or(ImportError::Cancelled)
    }
}

fn worker(shared: &Shared, work: &Mutex<Receiver<Batch>>, free: &SyncSender<Vec<u8>>) {
    let mut decoder = BlockDecoder::default();
    loop {
        let next = work.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(batch) = next else { return };
        // After a failure, batches are only drained so that producers never wait forever.
        if !shared.failed.load(Ordering::Acquire)
            && let Err(err) = write_batch(&shared.sink, &mut decoder, &batch)
        {
            shared.fail(err);
        }
        let _ = free.send(batch.buf);
    }
}

fn write_batch(
    sink: &SparseSink,
    decoder: &mut BlockDecoder,
    batch: &Batch,
) -> Result<(), ImportError> {
    for block in &batch.blocks {
        let bytes = &batch.buf[block.range.clone()];
        match block.kind {
            BlockKind::Data => sink.write_at(block.offset, bytes)?,
            BlockKind::Compressed {
                codec,
                block_size,
                len,
            } => {
                let cluster = decoder.decode(codec, bytes, block_size, block.offset)?;
                sink.write_at(block.offset, &cluster[..len])?;
            }
        }
    }
    Ok(())
}
