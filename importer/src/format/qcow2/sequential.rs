//! qcow2 from a stream, decoded in file order. Tables are read as the stream passes them and
//! every cluster they map is written when its bytes go by. qemu writes a table before the
//! clusters it maps, so usually nothing waits; but an image can hold data before its table
//! (after an internal snapshot, tables are copied to the end of the file). While some table
//! is still ahead, passed bytes are held back: in memory up to a limit, then in a spill file.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::Qcow2Header;
use super::header::invalid;
use super::table;
use crate::error::ImportError;
use crate::format::extent::{BatchBuilder, Extent, ExtentKind};
use crate::stream::read_full;
use crate::write_pool::WritePool;

/// Where and how much a sequential conversion may hold back.
#[derive(Debug, Clone)]
pub struct HoldLimits {
    /// Bytes held in memory before spilling to a file.
    pub memory: usize,
    /// Directory for the spill file; the system temporary directory if unset.
    pub spill_dir: Option<PathBuf>,
}

impl Default for HoldLimits {
    fn default() -> Self {
        Self {
            memory: 16 << 20,
            spill_dir: None,
        }
    }
}

/// Reads the image in chunks of this size (or of one cluster, if larger).
const MIN_CHUNK: u64 = 1 << 20;

pub fn convert(
    reader: &mut dyn Read,
    header: &Qcow2Header,
    pool: &WritePool,
    limits: &HoldLimits,
) -> Result<(), ImportError> {
    let chunk_size = header.cluster_size().max(MIN_CHUNK);
    let mut converter = SequentialConverter {
        header,
        window: Window {
            chunk_size,
            prev: None,
            cur: None,
            held: HeldChunks::new(limits.clone()),
        },
        l1: Vec::with_capacity(header.l1_bytes() as usize),
        l1_done: header.l1_bytes() == 0,
        tables_ahead: 0,
        wants: BTreeMap::new(),
        batch: BatchBuilder::new(pool),
    };
    converter.run(reader, chunk_size)
}

/// Something the converter is waiting to see in the stream.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// An L2 table mapping virtual offsets from the key's virtual offset.
    Table,
    Extent(Extent),
}

struct SequentialConverter<'a> {
    header: &'a Qcow2Header,
    window: Window,
    l1: Vec<u8>,
    l1_done: bool,
    tables_ahead: usize,
    /// Keyed by (host offset, virtual offset): the same host bytes may be wanted twice.
    wants: BTreeMap<(u64, u64), Want>,
    batch: BatchBuilder<'a>,
}

impl SequentialConverter<'_> {
    fn run(&mut self, reader: &mut dyn Read, chunk_size: u64) -> Result<(), ImportError> {
        let mut start = 0u64;
        let mut at_eof = false;
        while !(self.metadata_complete() && self.wants.is_empty()) {
            let mut data = self.window.recycled_buffer(chunk_size as usize);
            let n = read_full(reader, &mut data).map_err(ImportError::from_read)?;
            data.truncate(n);
            if n > 0 {
                let hold = self.must_hold(start);
                self.window.push(start, data, hold)?;
                self.feed_l1()?;
                self.process_ready(start + n as u64)?;
                start += n as u64;
            }
            if (n as u64) < chunk_size {
                at_eof = true;
                break;
            }
        }
        if at_eof {
            self.finish_at_eof(start)?;
        } else {
            // Everything is written; the rest still has to pass the checksum and counters.
            io::copy(reader, &mut io::sink()).map_err(ImportError::from_read)?;
        }
        self.batch.flush()
    }

    fn metadata_complete(&self) -> bool {
        self.l1_done && self.tables_ahead == 0
    }

    /// Whether the chunk about to leave the window (it ends at `evicted_end`) may still be
    /// needed: by a table not yet seen, or by a want that starts in it.
    fn must_hold(&self, evicted_end: u64) -> bool {
        !self.metadata_complete()
            || self
                .wants
                .keys()
                .next()
                .is_some_and(|&(host, _)| host < evicted_end)
    }

    fn feed_l1(&mut self) -> Result<(), ImportError> {
        if self.l1_done {
            return Ok(());
        }
        let want_start = self.header.l1_offset + self.l1.len() as u64;
        let want_end = self.header.l1_offset + self.header.l1_bytes();
        let (chunk_start, chunk) = self.window.current();
        let chunk_end = chunk_start + chunk.len() as u64;
        if want_start < chunk_end && chunk_start < want_end {
            let from = (want_start.max(chunk_start) - chunk_start) as usize;
            let to = (want_end.min(chunk_end) - chunk_start) as usize;
            self.l1.extend_from_slice(&chunk[from..to]);
        }
        if self.l1.len() as u64 == self.header.l1_bytes() {
            self.l1_done = true;
            for (offset, first_virt) in table::l2_tables(self.header, &self.l1)? {
                self.wants.insert((offset, first_virt), Want::Table);
                self.tables_ahead += 1;
            }
        }
        Ok(())
    }

    /// Handles every want whose bytes have all gone by (`stream_end` is where the window
    /// ends). Tables add wants, which may themselves be ready, so this repeats.
    fn process_ready(&mut self, stream_end: u64) -> Result<(), ImportError> {
        loop {
            let ready: Vec<((u64, u64), Want)> = self
                .wants
                .range(..(stream_end, 0))
                .filter(|&(&(host, _), want)| host + self.want_len(want) <= stream_end)
                .map(|(k, w)| (*k, *w))
                .collect();
            if ready.is_empty() {
                break;
            }
            for (key, want) in ready {
                self.wants.remove(&key);
                self.process(key, want)?;
            }
        }
        if self.metadata_complete() {
            let keep_from = self.wants.keys().next().map_or(u64::MAX, |&(host, _)| host);
            self.window
                .held
                .release_before(keep_from, self.window.chunk_size);
        }
        Ok(())
    }

    fn want_len(&self, want: &Want) -> u64 {
        match want {
            Want::Table => self.header.cluster_size(),
            Want::Extent(extent) => extent.host_len,
        }
    }

    fn process(&mut self, (host, virt): (u64, u64), want: Want) -> Result<(), ImportError> {
        match want {
            Want::Table => {
                let mut table = Vec::with_capacity(self.header.cluster_size() as usize);
                self.window
                    .append(host, self.header.cluster_size(), &mut table)?;
                let mut extents = Vec::new();
                table::l2_extents(self.header, &table, virt, &mut extents)?;
                self.tables_ahead -= 1;
                for extent in extents {
                    self.wants
                        .insert((extent.host, extent.virt), Want::Extent(extent));
                }
                Ok(())
            }
            Want::Extent(extent) => {
                let window = &self.window;
                self.batch.add(&extent, |out| {
                    window.append(extent.host, extent.host_len, out)
                })
            }
        }
    }

    /// At the end of the stream: compressed clusters may claim sectors past it (qemu reads
    /// those as zeros); anything else still wanted means the image is truncated.
    fn finish_at_eof(&mut self, stream_end: u64) -> Result<(), ImportError> {
        if !self.l1_done {
            return Err(ImportError::Truncated(format!(
                "the L1 table at {:#x} lies beyond the end of the image ({stream_end} bytes)",
                self.header.l1_offset
            )));
        }
        let remaining: Vec<((u64, u64), Want)> =
            std::mem::take(&mut self.wants).into_iter().collect();
        for ((host, virt), want) in remaining {
            match want {
                Want::Extent(
                    mut extent @ Extent {
                        kind: ExtentKind::Compressed { .. },
                        ..
                    },
                ) if host < stream_end => {
                    extent.host_len = stream_end - host;
                    self.process((host, virt), Want::Extent(extent))?;
                }
                _ => {
                    return Err(ImportError::Truncated(format!(
                        "data for virtual offset {virt:#x} is at host offset {host:#x}, beyond the end of the image ({stream_end} bytes)"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The last two chunks of the stream, and the chunks held back before them.
struct Window {
    chunk_size: u64,
    prev: Option<(u64, Vec<u8>)>,
    cur: Option<(u64, Vec<u8>)>,
    held: HeldChunks,
}

impl Window {
    fn recycled_buffer(&mut self, len: usize) -> Vec<u8> {
        let mut buf = self.held.take_spare().unwrap_or_default();
        buf.resize(len, 0);
        buf
    }

    fn push(&mut self, start: u64, data: Vec<u8>, hold: bool) -> Result<(), ImportError> {
        if let Some((evicted_start, evicted)) = self.prev.take() {
            if hold {
                self.held.put(evicted_start, evicted)?;
            } else {
                self.held.give_spare(evicted);
            }
        }
        self.prev = self.cur.take();
        self.cur = Some((start, data));
        Ok(())
    }

    fn current(&self) -> (u64, &[u8]) {
        let (start, data) = self.cur.as_ref().expect("a chunk was pushed");
        (*start, data)
    }

    /// Appends the stream's bytes `[host, host + len)` to `out`, from the window or from
    /// what was held back.
    fn append(&self, host: u64, len: u64, out: &mut Vec<u8>) -> Result<(), ImportError> {
        let mut pos = host;
        let end = host + len;
        while pos < end {
            let chunk_start = pos / self.chunk_size * self.chunk_size;
            let within = (pos - chunk_start) as usize;
            let from_window = [&self.prev, &self.cur]
                .into_iter()
                .flatten()
                .find(|(start, _)| *start == chunk_start)
                .map(|(_, data)| data);
            let copied = match from_window {
                Some(data) => {
                    let n = data.len().saturating_sub(within).min((end - pos) as usize);
                    out.extend_from_slice(&data[within..within + n]);
                    n
                }
                None => self
                    .held
                    .append(chunk_start, within, (end - pos) as usize, out)?,
            };
            if copied == 0 {
                return Err(invalid(format!(
                    "a table maps host offset {pos:#x}, which the stream passed before any table was known"
                )));
            }
            pos += copied as u64;
        }
        Ok(())
    }
}

/// Chunks held back while some table is still ahead in the stream.
struct HeldChunks {
    limits: HoldLimits,
    memory: BTreeMap<u64, Vec<u8>>,
    memory_bytes: usize,
    spill: Option<File>,
    spilled: BTreeMap<u64, (u64, usize)>,
    spill_end: u64,
    spare: Option<Vec<u8>>,
}

impl HeldChunks {
    fn new(limits: HoldLimits) -> Self {
        Self {
            limits,
            memory: BTreeMap::new(),
            memory_bytes: 0,
            spill: None,
            spilled: BTreeMap::new(),
            spill_end: 0,
            spare: None,
        }
    }

    fn take_spare(&mut self) -> Option<Vec<u8>> {
        self.spare.take()
    }

    fn give_spare(&mut self, buf: Vec<u8>) {
        self.spare = Some(buf);
    }

    fn put(&mut self, start: u64, data: Vec<u8>) -> Result<(), ImportError> {
        if self.memory_bytes + data.len() <= self.limits.memory {
            self.memory_bytes += data.len();
            self.memory.insert(start, data);
            return Ok(());
        }
        if self.spill.is_none() {
            tracing::info!(
                "qcow2 clusters precede their tables; spilling held data to a temporary file"
            );
            let file = match &self.limits.spill_dir {
                Some(dir) => tempfile::tempfile_in(dir),
                None => tempfile::tempfile(),
            };
            self.spill = Some(file.map_err(ImportError::Spill)?);
        }
        let file = self.spill.as_ref().expect("created above");
        file.write_all_at(&data, self.spill_end)
            .map_err(ImportError::Spill)?;
        self.spilled.insert(start, (self.spill_end, data.len()));
        self.spill_end += data.len() as u64;
        self.give_spare(data);
        Ok(())
    }

    /// Appends up to `len` bytes of the chunk at `start`, from `within` on; returns how many
    /// (0 if that chunk was not held).
    fn append(
        &self,
        start: u64,
        within: usize,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<usize, ImportError> {
        if let Some(data) = self.memory.get(&start) {
            let n = data.len().saturating_sub(within).min(len);
            out.extend_from_slice(&data[within..within + n]);
            return Ok(n);
        }
        let (Some(file), Some(&(at, size))) = (&self.spill, self.spilled.get(&start)) else {
            return Ok(0);
        };
        let n = size.saturating_sub(within).min(len);
        let old = out.len();
        out.resize(old + n, 0);
        file.read_exact_at(&mut out[old..], at + within as u64)
            .map_err(ImportError::Spill)?;
        Ok(n)
    }

    /// Forgets chunks that end before `offset`: once every table is known, no one else
    /// can want them.
    fn release_before(&mut self, offset: u64, chunk_size: u64) {
        let keep = offset / chunk_size * chunk_size;
        let kept = self.memory.split_off(&keep);
        self.memory = kept;
        self.memory_bytes = self.memory.values().map(Vec::len).sum();
        self.spilled = self.spilled.split_off(&keep);
        if self.spilled.is_empty() {
            self.spill = None;
            self.spill_end = 0;
        }
    }
}
