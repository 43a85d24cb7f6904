//! Storage pools: named directories on the node, configured by `--pool NAME=PATH` or by the
//! HostPathProvisioner's `--datadir` JSON (`[{"name":"local","path":"/var/hpvolumes"}]`), or
//! added and removed at runtime (the HostPathProvisioner CR's `storagePools` on one machine),
//! and the set of them a store serves.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::persist::{Readers, write_file};

/// The file in the state directory that keeps the pools added at runtime.
pub const POOLS_FILE: &str = "pools.json";

/// One storage pool: a name and the directory that holds its volumes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    pub name: String,
    pub path: PathBuf,
}

/// Parses `NAME=PATH`.
pub fn parse_pool_flag(flag: &str) -> Result<Pool> {
    let (name, path) = flag.split_once('=').ok_or_else(|| {
        Error::InvalidArgument(format!("pool {flag:?} is not of the form NAME=PATH"))
    })?;
    validate(Pool {
        name: name.to_string(),
        path: PathBuf::from(path),
    })
}

/// Parses the HostPathProvisioner CSI driver's `--datadir` form: a JSON list of
/// `{"name": ..., "path": ...}` objects.
pub fn parse_pools_json(json: &str) -> Result<Vec<Pool>> {
    let pools: Vec<Pool> = serde_json::from_str(json)
        .map_err(|err| Error::InvalidArgument(format!("pools JSON: {err}")))?;
    pools.into_iter().map(validate).collect()
}

/// Checks a pool's name and path.
pub fn validate(pool: Pool) -> Result<Pool> {
    let name_ok = !pool.name.is_empty()
        && pool.name.len() <= 63
        && pool
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if !name_ok {
        return Err(Error::InvalidArgument(format!(
            "pool name {:?} must be 1-63 characters of letters, digits, '-', '_' or '.'",
            pool.name
        )));
    }
    if !pool.path.is_absolute() {
        return Err(Error::InvalidArgument(format!(
            "pool {:?} path {} must be absolute",
            pool.name,
            pool.path.display()
        )));
    }
    Ok(pool)
}

/// Where a pool's entry came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolOrigin {
    /// Given when the store was opened (`--pool`, `--datadir`): fixed for the store's life.
    Configured,
    /// Added at runtime (from a HostPathProvisioner CR); persisted, reopened at the next open.
    Added,
}

/// A pool as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolEntry {
    pub pool: Pool,
    pub origin: PoolOrigin,
    /// Taken out of the configuration while it still held volumes: it serves those, and takes
    /// no new ones; it is forgotten once it is empty.
    pub retired: bool,
}

/// How an added pool is persisted.
#[derive(Serialize, Deserialize)]
struct AddedPool {
    name: String,
    path: PathBuf,
    #[serde(default)]
    retired: bool,
}

/// The pools of a store: those configured at open, then those added at runtime, which are
/// persisted in `pools.json` of the state directory so a restart serves their volumes before
/// anything configures them again. The first pool is the default.
#[derive(Debug)]
pub struct PoolSet {
    entries: Vec<PoolEntry>,
    file: PathBuf,
}

impl PoolSet {
    /// The configured pools (at least one, names unique) and the added ones persisted under
    /// `state_dir`. A persisted pool whose name is configured is dropped: flags win.
    pub fn open(configured: Vec<Pool>, state_dir: &Path) -> Result<Self> {
        if configured.is_empty() {
            return Err(Error::InvalidArgument(
                "at least one storage pool is needed".into(),
            ));
        }
        let mut set = PoolSet {
            entries: Vec::new(),
            file: state_dir.join(POOLS_FILE),
        };
        for pool in configured {
            if set.find(&pool.name).is_some() {
                return Err(Error::InvalidArgument(format!(
                    "storage pool {:?} is configured twice",
                    pool.name
                )));
            }
            set.entries.push(PoolEntry {
                pool,
                origin: PoolOrigin::Configured,
                retired: false,
            });
        }
        for added in set.load()? {
            if let Some(existing) = set.find(&added.name) {
                tracing::warn!(pool = %added.name, path = %existing.pool.path.display(),
                    "an added storage pool is now configured by flag; the flag wins");
                continue;
            }
            set.entries.push(PoolEntry {
                pool: validate(Pool {
                    name: added.name,
                    path: added.path,
                })?,
                origin: PoolOrigin::Added,
                retired: added.retired,
            });
        }
        Ok(set)
    }

    fn load(&self) -> Result<Vec<AddedPool>> {
        match fs::read(&self.file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|err| Error::State {
                path: self.file.clone(),
                detail: err.to_string(),
            }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(err) => Err(err).at("read", &self.file),
        }
    }

    /// Writes the added pools, atomically and durably.
    pub fn save(&self) -> Result<()> {
        let added: Vec<AddedPool> = self
            .entries
            .iter()
            .filter(|e| e.origin == PoolOrigin::Added)
            .map(|e| AddedPool {
                name: e.pool.name.clone(),
                path: e.pool.path.clone(),
                retired: e.retired,
            })
            .collect();
        let bytes = serde_json::to_vec_pretty(&added).map_err(|err| Error::State {
            path: self.file.clone(),
            detail: err.to_string(),
        })?;
        write_file(&self.file, &bytes, Readers::Owner).at("write", &self.file)
    }

    /// The entry of pool `name`.
    pub fn find(&self, name: &str) -> Option<&PoolEntry> {
        self.entries.iter().find(|e| e.pool.name == name)
    }

    fn find_mut(&mut self, name: &str) -> Option<&mut PoolEntry> {
        self.entries.iter_mut().find(|e| e.pool.name == name)
    }

    /// Every entry; the first is the default pool.
    pub fn entries(&self) -> &[PoolEntry] {
        &self.entries
    }

    /// Pool `name` (the default for `None` or ""), retired or not.
    pub fn get(&self, name: Option<&str>) -> Result<&Pool> {
        match name {
            None | Some("") => Ok(&self.entries[0].pool),
            Some(name) => self
                .find(name)
                .map(|e| &e.pool)
                .ok_or_else(|| Error::InvalidArgument(format!("unknown storage pool {name:?}"))),
        }
    }

    /// Pool `name` for a new volume: refused when it is retired.
    pub fn for_new_volume(&self, name: Option<&str>) -> Result<&Pool> {
        let pool = self.get(name)?;
        if self.find(&pool.name).is_some_and(|e| e.retired) {
            return Err(Error::InvalidArgument(format!(
                "storage pool {:?} was removed from the configuration; it serves the volumes \
                 it holds and takes no new ones",
                pool.name
            )));
        }
        Ok(pool)
    }

    /// Checks that `pool` may be added: a valid pool whose directory no other pool uses.
    /// Returns the entry it would replace, if any.
    pub fn check_add(&self, pool: &Pool) -> Result<Option<&PoolEntry>> {
        validate(pool.clone())?;
        if let Some(other) = self
            .entries
            .iter()
            .find(|e| e.pool.name != pool.name && e.pool.path == pool.path)
        {
            return Err(Error::InvalidArgument(format!(
                "storage pool {:?}: directory {} is already storage pool {:?}",
                pool.name,
                pool.path.display(),
                other.pool.name
            )));
        }
        let existing = self.find(&pool.name);
        if let Some(e) = existing
            && e.origin == PoolOrigin::Configured
            && e.pool.path != pool.path
        {
            return Err(Error::InvalidArgument(format!(
                "storage pool {:?} is configured at {}; it cannot be added at {}",
                pool.name,
                e.pool.path.display(),
                pool.path.display()
            )));
        }
        Ok(existing)
    }

    /// Adds `pool`, or puts a retired one back in service, or moves an added one (the caller
    /// checked it holds nothing). Returns whether anything changed.
    pub fn add(&mut self, pool: Pool) -> Result<bool> {
        self.check_add(&pool)?;
        let changed = match self.find_mut(&pool.name) {
            Some(entry) if entry.pool == pool && !entry.retired => false,
            Some(entry) => {
                entry.pool = pool;
                entry.retired = false;
                true
            }
            None => {
                self.entries.push(PoolEntry {
                    pool,
                    origin: PoolOrigin::Added,
                    retired: false,
                });
                true
            }
        };
        Ok(changed)
    }

    /// Marks added pool `name` retired, or forgets it when `empty`. Configured pools cannot be
    /// removed.
    pub fn remove(&mut self, name: &str, empty: bool) -> Result<()> {
        let Some(entry) = self.find_mut(name) else {
            return Ok(());
        };
        if entry.origin == PoolOrigin::Configured {
            return Err(Error::InvalidArgument(format!(
                "storage pool {name:?} is configured by flag and cannot be removed"
            )));
        }
        if empty {
            self.entries.retain(|e| e.pool.name != name);
        } else {
            entry.retired = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str, path: &str) -> Pool {
        Pool {
            name: name.into(),
            path: path.into(),
        }
    }

    #[test]
    fn added_pools_are_persisted_and_flags_win_a_name() {
        let state = tempfile::tempdir().unwrap();
        let mut set = PoolSet::open(vec![pool("local", "/data/local")], state.path()).unwrap();
        assert!(set.add(pool("fast", "/mnt/fast")).unwrap());
        assert!(
            set.add(pool("dup", "/mnt/fast")).is_err(),
            "one directory, one pool"
        );
        assert!(set.add(pool("local", "/elsewhere")).is_err());
        assert!(set.add(pool("bad name", "/x")).is_err());
        set.add(pool("slow", "/mnt/slow")).unwrap();
        set.remove("slow", false).unwrap();
        assert!(set.for_new_volume(Some("slow")).is_err(), "retired");
        assert!(set.get(Some("slow")).is_ok(), "still serves what it holds");
        assert!(set.remove("local", true).is_err(), "configured pools stay");
        set.save().unwrap();
        // Reopened with a flag now naming fast: the flag's path wins.
        let set = PoolSet::open(
            vec![pool("local", "/data/local"), pool("fast", "/flag/fast")],
            state.path(),
        )
        .unwrap();
        let entries: Vec<_> = set
            .entries()
            .iter()
            .map(|e| (e.pool.name.as_str(), e.origin, e.retired))
            .collect();
        assert_eq!(
            entries,
            vec![
                ("local", PoolOrigin::Configured, false),
                ("fast", PoolOrigin::Configured, false),
                ("slow", PoolOrigin::Added, true),
            ]
        );
        assert_eq!(set.get(None).unwrap().name, "local");
        assert!(PoolSet::open(vec![], state.path()).is_err());
    }

    #[test]
    fn flag_and_json_forms() {
        let pool = parse_pool_flag("fast=/mnt/nvme").unwrap();
        assert_eq!(pool.name, "fast");
        assert_eq!(pool.path, PathBuf::from("/mnt/nvme"));
        assert!(parse_pool_flag("nopath").is_err());
        assert!(parse_pool_flag("x=relative/dir").is_err());
        assert!(parse_pool_flag("bad name=/x").is_err());
        let pools = parse_pools_json(
            r#"[{"name":"legacy","path":"/var/hpvolumes"},{"name":"b","path":"/b"}]"#,
        )
        .unwrap();
        assert_eq!(pools.len(), 2);
        assert_eq!(pools[0].name, "legacy");
        assert!(parse_pools_json("{").is_err());
    }
}
