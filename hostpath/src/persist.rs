//! State to disk and back. [`write_file`] is the project's one way to replace a file that
//! must survive a crash (records, keys, certificates): written to a temporary name, fsynced,
//! renamed into place and the directory fsynced, so a kill -9 or a power cut at any point
//! leaves it either fully old or fully new. [`RecordDir`] keeps one JSON file per record that
//! way; temporary files left behind are removed on load.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use atomic_write_file::AtomicWriteFile;
use atomic_write_file::unix::OpenOptionsExt as _;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, IoContext, Result};

/// Who may read a file [`write_file`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readers {
    /// Its owner only (mode 0600): keys, tokens, credentials.
    Owner,
    /// Anyone (mode 0644).
    Anyone,
}

/// Replaces `path` with `bytes` atomically and durably, creating its directory if needed; the
/// file has the mode `readers` asks for from before its first byte is written.
pub fn write_file(path: &Path, bytes: &[u8], readers: Readers) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)?;
    }
    let mode = match readers {
        Readers::Owner => 0o600,
        Readers::Anyone => 0o644,
    };
    let mut file = AtomicWriteFile::options()
        .preserve_mode(false)
        .mode(mode)
        .open(path)?;
    file.write_all(bytes)?;
    // Commits with an fsync of the file, the rename and an fsync of the directory.
    file.commit()
}

/// A directory of JSON records keyed by id (ids are path-safe by construction).
#[derive(Debug, Clone)]
pub struct RecordDir {
    dir: PathBuf,
}

impl RecordDir {
    /// Opens (creating if needed) the record directory.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        fs::create_dir_all(&dir).at("create", &dir)?;
        Ok(Self { dir })
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Writes the record atomically and durably.
    pub fn save<T: Serialize>(&self, id: &str, record: &T) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(record).map_err(|err| Error::State {
            path: self.path(id),
            detail: err.to_string(),
        })?;
        let path = self.path(id);
        write_file(&path, &bytes, Readers::Owner).at("write", &path)
    }

    /// Removes the record durably; removing a missing record is not an error.
    pub fn remove(&self, id: &str) -> Result<()> {
        let path = self.path(id);
        match fs::remove_file(&path) {
            Ok(()) => sync_dir(&self.dir),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(Error::io("remove", path, err)),
        }
    }

    /// Reads every record, removing temporary files an interrupted save left behind.
    pub fn load_all<T: DeserializeOwned>(&self) -> Result<Vec<T>> {
        let mut records = Vec::new();
        for entry in fs::read_dir(&self.dir).at("read directory", &self.dir)? {
            let entry = entry.at("read directory", &self.dir)?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') {
                // A temporary file of a save that never committed.
                fs::remove_file(&path).at("remove", &path)?;
                continue;
            }
            if !name.ends_with(".json") {
                continue;
            }
            let bytes = fs::read(&path).at("read", &path)?;
            let record = serde_json::from_slice(&bytes).map_err(|err| Error::State {
                path: path.clone(),
                detail: err.to_string(),
            })?;
            records.push(record);
        }
        Ok(records)
    }
}

/// fsyncs a directory so that a rename or unlink in it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).at("fsync", dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_load_remove_and_stale_temporaries() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RecordDir::open(tmp.path().join("records")).unwrap();
        dir.save("a", &vec![1u32, 2]).unwrap();
        dir.save("b", &vec![3u32]).unwrap();
        dir.save("a", &vec![4u32]).unwrap();
        fs::write(tmp.path().join("records/.c.json.tmp"), b"{partial").unwrap();
        let mut all: Vec<Vec<u32>> = dir.load_all().unwrap();
        all.sort();
        assert_eq!(all, vec![vec![3], vec![4]]);
        assert!(!tmp.path().join("records/.c.json.tmp").exists());
        dir.remove("a").unwrap();
        dir.remove("a").unwrap();
        assert_eq!(dir.load_all::<Vec<u32>>().unwrap(), vec![vec![3]]);
    }

    #[test]
    fn written_files_replace_the_old_content_with_the_mode_asked_for() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let key = tmp.path().join("keys/tls.key");
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
        write_file(&key, b"first", Readers::Anyone).unwrap();
        assert_eq!(mode(&key), 0o644);
        write_file(&key, b"second", Readers::Owner).unwrap();
        assert_eq!(fs::read(&key).unwrap(), b"second");
        assert_eq!(
            mode(&key),
            0o600,
            "a secret is never left readable by others"
        );
        let left: Vec<_> = fs::read_dir(tmp.path().join("keys")).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
    }
}
