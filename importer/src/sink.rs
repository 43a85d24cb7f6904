//! The target of an import: a regular file or a block device, written at virtual offsets
//! from several threads at once. All-zero blocks are never written, so a file target stays
//! sparse; a block device is discarded (punched) up front so skipped blocks read as zeros.
//!
//! A file target is written under a temporary name beside it and renamed into place only
//! after everything, checksum included, succeeded: a failed import never leaves a target
//! that looks complete.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::FallocateFlags;

use crate::error::ImportError;

/// Zero detection granularity, and so the smallest hole: qemu-img's default (`-S 4k`).
pub const ZERO_GRANULE: u64 = 4096;

/// The target as found before anything is written.
#[derive(Debug)]
pub enum Target {
    File { path: PathBuf, available: u64 },
    BlockDevice { path: PathBuf, size: u64 },
}

impl Target {
    /// Looks at `path`: an existing block device, or a file to create or replace. The space
    /// available to a file counts what the file it replaces holds now, and what the staging
    /// file of an earlier import that was killed holds (it is truncated when writing starts).
    pub fn inspect(path: &Path) -> Result<Self, ImportError> {
        let err = |source: io::Error| ImportError::Target {
            path: path.to_path_buf(),
            source,
        };
        let stale = fs::symlink_metadata(staging_path(path))
            .ok()
            .filter(|meta| meta.is_file())
            .map_or(0, |meta| meta.blocks() * 512);
        match fs::metadata(path) {
            Ok(meta) if meta.file_type().is_block_device() => {
                let mut device = File::open(path).map_err(err)?;
                let size = device.seek(SeekFrom::End(0)).map_err(err)?;
                Ok(Target::BlockDevice {
                    path: path.to_path_buf(),
                    size,
                })
            }
            Ok(meta) if meta.is_dir() => Err(err(io::Error::other("is a directory"))),
            Ok(meta) => {
                let reclaimable = meta.blocks() * 512;
                Ok(Target::File {
                    path: path.to_path_buf(),
                    available: free_space(path)? + reclaimable + stale,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Target::File {
                path: path.to_path_buf(),
                available: free_space(path)? + stale,
            }),
            Err(e) => Err(err(e)),
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            Target::File { path, .. } | Target::BlockDevice { path, .. } => path,
        }
    }

    /// The most bytes this target can hold.
    pub fn capacity(&self) -> u64 {
        match self {
            Target::File { available, .. } => *available,
            Target::BlockDevice { size, .. } => *size,
        }
    }
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

fn free_space(path: &Path) -> Result<u64, ImportError> {
    let dir = parent_dir(path);
    let stat = rustix::fs::statvfs(dir).map_err(|e| ImportError::Target {
        path: dir.to_path_buf(),
        source: e.into(),
    })?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// A target opened for writing.
pub struct SparseSink {
    file: File,
    target: Target,
    /// The temporary name of a file target, renamed to the target's path on success.
    staging: Option<PathBuf>,
    /// Writes past this offset are an error ("image larger than the requested size").
    limit: Option<u64>,
    preallocated: bool,
    end: AtomicU64,
    committed: bool,
}

impl SparseSink {
    /// Opens the target. `size` is the final size when already known; `limit` bounds writes.
    pub fn create(
        target: Target,
        size: Option<u64>,
        limit: Option<u64>,
        preallocate: bool,
    ) -> Result<Self, ImportError> {
        let path = target.path().to_path_buf();
        let err = |source: io::Error| ImportError::Target {
            path: path.clone(),
            source,
        };
        let (file, staging) = match &target {
            Target::BlockDevice {
                size: device_size, ..
            } => {
                let file = OpenOptions::new().write(true).open(&path).map_err(err)?;
                zero_block_device(&file, *device_size).map_err(err)?;
                (file, None)
            }
            Target::File { .. } => {
                let staging = staging_path(&path);
                let file = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o660)
                    .open(&staging)
                    .map_err(err)?;
                // The mode is part of the contract (the importer runs with a umask of its own).
                file.set_permissions(fs::Permissions::from_mode(0o660))
                    .map_err(err)?;
                if let Some(needed) = size.or(limit) {
                    make_room(&path, needed)?;
                }
                if let Some(size) = size {
                    file.set_len(size).map_err(err)?;
                    if preallocate && size > 0 {
                        rustix::fs::fallocate(&file, FallocateFlags::empty(), 0, size)
                            .map_err(|e| err(e.into()))?;
                    }
                }
                (file, Some(staging))
            }
        };
        Ok(Self {
            file,
            target,
            staging,
            limit,
            preallocated: preallocate,
            end: AtomicU64::new(0),
            committed: false,
        })
    }

    /// Writes `data` at `offset`, leaving out every all-zero, granule-aligned block.
    pub fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), ImportError> {
        let end = offset + data.len() as u64;
        if let Some(limit) = self.limit.filter(|&limit| end > limit) {
            return Err(ImportError::ImageLargerThanTarget {
                limit,
                offset: limit.max(offset),
            });
        }
        for (start, stop) in nonzero_runs(offset, data) {
            self.file
                .write_all_at(&data[start..stop], offset + start as u64)
                .map_err(|source| ImportError::Target {
                    path: self.target.path().to_path_buf(),
                    source,
                })?;
        }
        self.end.fetch_max(end, Ordering::Relaxed);
        Ok(())
    }

    /// The end of the furthest write so far: the image size of a stream of unknown length.
    pub fn written_end(&self) -> u64 {
        self.end.load(Ordering::Relaxed)
    }

    /// Sets the final size, makes everything durable and puts the file in place.
    pub fn commit(mut self, size: u64) -> Result<(), ImportError> {
        let path = self.target.path().to_path_buf();
        let err = |source: io::Error| ImportError::Target {
            path: path.clone(),
            source,
        };
        if let Some(staging) = self.staging.take() {
            let current = self.file.metadata().map_err(err)?.len();
            if current != size {
                self.file.set_len(size).map_err(err)?;
            }
            if self.preallocated && size > current {
                rustix::fs::fallocate(&self.file, FallocateFlags::empty(), current, size - current)
                    .map_err(|e| err(e.into()))?;
            }
            self.file.sync_all().map_err(err)?;
            fs::rename(&staging, &path).map_err(err)?;
            File::open(parent_dir(&path))
                .and_then(|dir| dir.sync_all())
                .map_err(err)?;
        } else {
            self.file.flush().map_err(err)?;
            self.file.sync_all().map_err(err)?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for SparseSink {
    /// An uncommitted sink is a failed import: remove the staging file, or wipe the start of a
    /// block device so that what was written cannot pass for a complete disk.
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        if let Some(staging) = self.staging.take() {
            let _ = fs::remove_file(staging);
        } else if let Target::BlockDevice { size, .. } = self.target {
            let _ = zero_block_device(&self.file, size.min(1 << 20));
            let _ = self.file.sync_all();
        }
    }
}

/// Removes the file at `path` that the image being staged beside it replaces, when the image
/// (up to `needed` bytes) might not fit beside it. [`Target::inspect`] counts that file's space
/// as available, and it must be: a volume sized for one image holds no second copy, so an
/// import run again over a complete image (its pod restarted before its success was recorded)
/// would otherwise fail with "No space left on device" at every attempt. With room for both,
/// the old file stays untouched until the new one is renamed over it.
fn make_room(path: &Path, needed: u64) -> Result<(), ImportError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() && meta.blocks() > 0 => {}
        _ => return Ok(()),
    }
    if free_space(path)? >= needed {
        return Ok(());
    }
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(ImportError::Target {
            path: path.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}

fn staging_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    parent_dir(path).join(format!(".{name}.importing"))
}

/// Makes `[0, len)` of a block device read as zeros, cheaply where the device can discard.
fn zero_block_device(device: &File, len: u64) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let punch = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
    if rustix::fs::fallocate(device, punch, 0, len).is_ok() {
        return Ok(());
    }
    if rustix::fs::fallocate(
        device,
        FallocateFlags::ZERO_RANGE | FallocateFlags::KEEP_SIZE,
        0,
        len,
    )
    .is_ok()
    {
        return Ok(());
    }
    let zeros = vec![0u8; 1 << 20];
    let mut offset = 0;
    while offset < len {
        let n = zeros.len().min((len - offset) as usize);
        device.write_all_at(&zeros[..n], offset)?;
        offset += n as u64;
    }
    Ok(())
}

/// The byte ranges of `data` (which starts at absolute `offset`) that hold a non-zero byte,
/// at the granularity of absolute, granule-aligned blocks.
fn nonzero_runs(offset: u64, data: &[u8]) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut start = 0usize;
    while start < data.len() {
        let boundary = (offset + start as u64) / ZERO_GRANULE * ZERO_GRANULE + ZERO_GRANULE;
        let stop = data.len().min((boundary - offset) as usize);
        if !is_zero(&data[start..stop]) {
            match runs.last_mut() {
                Some(last) if last.1 == start => last.1 = stop,
                _ => runs.push((start, stop)),
            }
        }
        start = stop;
    }
    runs
}

/// Whether every byte is zero; word-at-a-time so the compiler vectorises it.
pub fn is_zero(buf: &[u8]) -> bool {
    let mut blocks = buf.chunks_exact(64);
    for block in &mut blocks {
        let mut acc = 0u64;
        for word in block.chunks_exact(8) {
            acc |= u64::from_ne_bytes(word.try_into().expect("8-byte chunk"));
        }
        if acc != 0 {
            return false;
        }
    }
    blocks.remainder().iter().all(|&b| b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_skip_zero_granules() {
        let mut data = vec![0u8; 5 * 4096];
        data[10] = 1;
        data[2 * 4096 + 5] = 1;
        data[3 * 4096] = 1;
        assert_eq!(
            nonzero_runs(0, &data),
            vec![(0, 4096), (2 * 4096, 4 * 4096)]
        );
        // Misaligned start: granules follow absolute offsets.
        assert_eq!(nonzero_runs(4000, &data[..200]), vec![(0, 96)]);
        assert!(nonzero_runs(0, &vec![0u8; 100_000]).is_empty());
    }

    #[test]
    fn a_killed_imports_staging_file_counts_as_available() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.img");
        let before = Target::inspect(&path).unwrap().capacity();
        // What an importer killed with SIGKILL leaves: its staging file, full of data.
        fs::write(staging_path(&path), vec![1u8; 16 << 20]).unwrap();
        File::open(staging_path(&path)).unwrap().sync_all().unwrap();
        let after = Target::inspect(&path).unwrap().capacity();
        // Other writers on the filesystem make this approximate; 16 MiB would be lost.
        assert!(
            after + (4 << 20) >= before,
            "the staging file's space is reclaimable: {before} before, {after} after"
        );
    }

    #[test]
    fn the_target_replaced_stays_untouched_while_there_is_room_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.img");
        fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        let sink = SparseSink::create(Target::inspect(&path).unwrap(), Some(8 << 20), None, false)
            .unwrap();
        assert_eq!(
            fs::read(&path).unwrap(),
            vec![1u8; 1 << 20],
            "replaced before commit"
        );
        sink.write_at(0, &[2u8; 4096]).unwrap();
        sink.commit(8 << 20).unwrap();
        assert_eq!(fs::read(&path).unwrap()[..4096], [2u8; 4096]);
    }

    #[test]
    fn the_target_replaced_goes_first_when_the_image_may_not_fit_beside_it() {
        // A volume sized for one image, holding a complete one (an import or clone run again
        // after a restart that lost its success): the space counted as available must be.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.img");
        fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        let target = Target::inspect(&path).unwrap();
        let free = free_space(&path).unwrap();
        // An image of unknown size bounded by more than the filesystem has free.
        let sink = SparseSink::create(target, None, Some(free + (2 << 20)), false).unwrap();
        assert!(!path.exists(), "the old image still holds its space");
        sink.write_at(0, &[2u8; 4096]).unwrap();
        sink.commit(4096).unwrap();
        assert_eq!(fs::read(&path).unwrap(), vec![2u8; 4096]);
        assert!(!staging_path(&path).exists());
    }

    #[test]
    fn file_target_is_staged_sparse_and_0660() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.img");
        let target = Target::inspect(&path).unwrap();
        let sink = SparseSink::create(target, Some(8 << 20), None, false).unwrap();
        assert!(!path.exists(), "target must not appear before commit");
        let mut block = vec![0u8; 1 << 20];
        block[12345] = 7;
        sink.write_at(4 << 20, &block).unwrap();
        sink.commit(8 << 20).unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), 8 << 20);
        assert_eq!(meta.mode() & 0o777, 0o660);
        assert!(meta.blocks() * 512 <= 64 * 1024, "zero blocks were written");
        let content = fs::read(&path).unwrap();
        assert_eq!(content[(4 << 20) + 12345], 7);
        assert_eq!(content.iter().filter(|&&b| b != 0).count(), 1);
    }

    #[test]
    fn dropped_sink_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.img");
        let sink =
            SparseSink::create(Target::inspect(&path).unwrap(), Some(4096), None, false).unwrap();
        sink.write_at(0, &[1u8; 4096]).unwrap();
        drop(sink);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn limit_is_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.img");
        let sink =
            SparseSink::create(Target::inspect(&path).unwrap(), None, Some(4096), false).unwrap();
        let err = sink.write_at(4000, &[1u8; 200]).unwrap_err();
        assert!(
            err.to_string()
                .contains("larger than the requested size 4096"),
            "{err}"
        );
    }
}
