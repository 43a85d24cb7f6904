//! State to disk and back: one JSON file per record in a directory, each written to a
//! temporary name, fsynced, renamed into place and the directory fsynced. A kill -9 at any point
//! leaves every record either fully old or fully new; temporary files left behind are removed
//! on load.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, IoContext, Result};

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
        let tmp = self.dir.join(format!(".{id}.json.tmp"));
        let mut file = File::create(&tmp).at("create", &tmp)?;
        file.write_all(&bytes).at("write", &tmp)?;
        file.sync_all().at("fsync", &tmp)?;
        drop(file);
        let path = self.path(id);
        fs::rename(&tmp, &path).at("rename", &path)?;
        sync_dir(&self.dir)
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
            if name.ends_with(".tmp") {
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
}
