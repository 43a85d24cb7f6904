//! A local file (or block device) as a source.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::{OpenedSource, RandomAccess};
use crate::error::ImportError;

pub fn open(path: &Path) -> Result<OpenedSource, ImportError> {
    let err = |source: io::Error| ImportError::OpenSource {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(err)?;
    if file.metadata().map_err(err)?.is_dir() {
        return Err(err(io::Error::other("is a directory")));
    }
    // Seeking to the end also sizes block devices, whose metadata says 0.
    let size = file.seek(SeekFrom::End(0)).map_err(err)?;
    file.seek(SeekFrom::Start(0)).map_err(err)?;
    let random = FileRandomAccess {
        file: file.try_clone().map_err(err)?,
        size,
    };
    Ok(OpenedSource {
        stream: Box::new(file),
        size: Some(size),
        random_access: Some(Arc::new(random)),
    })
}

struct FileRandomAccess {
    file: File,
    size: u64,
}

impl RandomAccess for FileRandomAccess {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_range(&self, offset: u64, len: u64) -> io::Result<Box<dyn Read + Send + '_>> {
        Ok(Box::new(PreadReader {
            file: &self.file,
            pos: offset,
            end: offset.saturating_add(len),
        }))
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
}

/// Reads a byte range with positioned reads, leaving the file's cursor alone.
struct PreadReader<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for PreadReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len().min((self.end - self.pos) as usize);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}
