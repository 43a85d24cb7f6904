//! Storage pools: named directories on the node, configured by `--pool NAME=PATH` or by the
//! HostPathProvisioner's `--datadir` JSON (`[{"name":"local","path":"/var/hpvolumes"}]`).

use std::path::PathBuf;

use serde::Deserialize;

use crate::error::{Error, Result};

/// One storage pool: a name and the directory that holds its volumes.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
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

fn validate(pool: Pool) -> Result<Pool> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
