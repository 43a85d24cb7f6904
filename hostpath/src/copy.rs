//! Copying a volume image: a reflink (FICLONE) where the filesystem shares extents (XFS with
//! reflink, btrfs), otherwise a sparse copy that moves only the data extents (SEEK_DATA /
//! SEEK_HOLE) with copy_file_range, so holes stay holes and the kernel does the copying.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rustix::fs::{SeekFrom, copy_file_range, ioctl_ficlone, seek};
use rustix::io::Errno;

use crate::error::{IoContext, Result};

/// How a copy was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyMethod {
    /// The destination shares the source's extents (copy-on-write); instant, no space used.
    Reflink,
    /// Data extents were copied; holes were preserved.
    SparseCopy,
}

/// Copies `src` to a new file `dst` (which must not exist) and fsyncs it. The destination has the
/// source's length.
pub fn copy_image(src: &Path, dst: &Path) -> Result<CopyMethod> {
    let source = File::open(src).at("open", src)?;
    let dest = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o660)
        .open(dst)
        .at("create", dst)?;
    let method = match ioctl_ficlone(&dest, &source) {
        Ok(()) => CopyMethod::Reflink,
        // Not supported by this filesystem, or across filesystems: copy the data instead.
        Err(Errno::OPNOTSUPP | Errno::XDEV | Errno::INVAL | Errno::NOTTY | Errno::PERM) => {
            sparse_copy(&source, src, &dest, dst)?;
            CopyMethod::SparseCopy
        }
        Err(errno) => return Err(errno).at("reflink", dst),
    };
    dest.sync_all().at("fsync", dst)?;
    Ok(method)
}

fn sparse_copy(source: &File, src: &Path, dest: &File, dst: &Path) -> Result<()> {
    let len = source.metadata().at("stat", src)?.len();
    dest.set_len(len).at("truncate", dst)?;
    let mut offset = 0u64;
    while offset < len {
        let data = match seek(source, SeekFrom::Data(offset)) {
            Ok(data) => data,
            // ENXIO: no data at or after `offset`, the rest is a hole.
            Err(Errno::NXIO) => break,
            Err(errno) => return Err(errno).at("seek data in", src),
        };
        let hole = seek(source, SeekFrom::Hole(data)).at("seek hole in", src)?;
        let mut src_off = data;
        let mut dst_off = data;
        while src_off < hole {
            let want = usize::try_from(hole - src_off)
                .unwrap_or(usize::MAX)
                .min(1 << 30);
            let copied =
                copy_file_range(source, Some(&mut src_off), dest, Some(&mut dst_off), want)
                    .at("copy_file_range to", dst)?;
            if copied == 0 {
                break;
            }
        }
        offset = hole;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, Write};
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn sparse_copy_keeps_data_and_holes() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src.img");
        let mut file = File::create(&src).unwrap();
        file.set_len(64 << 20).unwrap();
        file.seek(std::io::SeekFrom::Start(1 << 20)).unwrap();
        file.write_all(&[0xab; 8192]).unwrap();
        file.seek(std::io::SeekFrom::Start(40 << 20)).unwrap();
        file.write_all(b"tail data").unwrap();
        file.sync_all().unwrap();
        let dst = tmp.path().join("dst.img");
        copy_image(&src, &dst).unwrap();
        assert_eq!(std::fs::read(&src).unwrap(), std::fs::read(&dst).unwrap());
        // Only the two data extents were written: far less than the 64 MiB length.
        assert!(std::fs::metadata(&dst).unwrap().blocks() * 512 < 4 << 20);
        // The destination must not exist yet.
        assert!(copy_image(&src, &dst).is_err());
    }
}
