//! cloud-init data sources as KubeVirt presents them to the guest: a NoCloud ISO (volume
//! label `cidata`: `meta-data`, `user-data`, `network-config`) or a ConfigDrive ISO (label
//! `config-2`: `openstack/latest/{meta_data.json,user_data,network_data.json}`). Both
//! metadata files are JSON, as KubeVirt writes them.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::iso::{IsoError, IsoFile, write_iso};

/// Which cloud-init data source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloudInitKind {
    NoCloud,
    ConfigDrive,
}

impl CloudInitKind {
    /// KubeVirt's name of the ISO file.
    pub fn iso_name(self) -> &'static str {
        match self {
            Self::NoCloud => "noCloud.iso",
            Self::ConfigDrive => "configdrive.iso",
        }
    }

    /// The ISO's volume label cloud-init looks for.
    pub fn volume_label(self) -> &'static str {
        match self {
            Self::NoCloud => "cidata",
            Self::ConfigDrive => "config-2",
        }
    }
}

/// Where user or network data comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataSource {
    /// Given in the VMI (text, or base64 already decoded).
    Inline(Vec<u8>),
    /// A key of a Secret mounted as a directory: the first of `keys` that exists.
    SecretFile {
        dir: PathBuf,
        keys: &'static [&'static str],
    },
}

/// Everything a cloud-init ISO holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudInitData {
    pub kind: CloudInitKind,
    /// NoCloud: the firmware UUID; ConfigDrive: `name.namespace`.
    pub instance_id: String,
    pub hostname: String,
    pub uuid: String,
    pub user_data: Option<DataSource>,
    pub network_data: Option<DataSource>,
}

/// Why a cloud-init ISO could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CloudInitError {
    #[error("no cloud-init data-source found in {dir}: none of the keys {keys} is there")]
    SecretKeyMissing { dir: PathBuf, keys: String },
    #[error("reading cloud-init data from {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("generating local cloud-init data failed: {0}")]
    Iso(#[from] IsoError),
}

/// The files of the ISO, by their path inside it.
pub fn files(data: &CloudInitData) -> Result<Vec<IsoFile>, CloudInitError> {
    let user = data.user_data.as_ref().map(resolve).transpose()?;
    let network = data
        .network_data
        .as_ref()
        .map(resolve)
        .transpose()?
        .filter(|n| !n.is_empty());
    let mut files = Vec::new();
    match data.kind {
        CloudInitKind::NoCloud => {
            let meta = json!({"instance-id": data.instance_id, "local-hostname": data.hostname});
            files.push(IsoFile::new("meta-data", meta.to_string().into_bytes()));
            files.push(IsoFile::new("user-data", user.unwrap_or_default()));
            if let Some(network) = network {
                files.push(IsoFile::new("network-config", network));
            }
        }
        CloudInitKind::ConfigDrive => {
            let meta = json!({
                "instance_id": data.instance_id,
                "hostname": data.hostname,
                "uuid": data.uuid,
            });
            let dir = "openstack/latest";
            files.push(IsoFile::new(
                &format!("{dir}/meta_data.json"),
                meta.to_string().into_bytes(),
            ));
            files.push(IsoFile::new(
                &format!("{dir}/user_data"),
                user.unwrap_or_default(),
            ));
            if let Some(network) = network {
                files.push(IsoFile::new(&format!("{dir}/network_data.json"), network));
            }
        }
    }
    Ok(files)
}

/// Writes the ISO of `data` at `iso`.
pub async fn write(data: &CloudInitData, iso: &Path) -> Result<(), CloudInitError> {
    let files = files(data)?;
    write_iso(iso, data.kind.volume_label(), &files).await?;
    Ok(())
}

fn resolve(source: &DataSource) -> Result<Vec<u8>, CloudInitError> {
    match source {
        DataSource::Inline(bytes) => Ok(bytes.clone()),
        DataSource::SecretFile { dir, keys } => {
            for key in *keys {
                let path = dir.join(key);
                match std::fs::read(&path) {
                    Ok(bytes) => return Ok(bytes),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(source) => return Err(CloudInitError::Read { path, source }),
                }
            }
            Err(CloudInitError::SecretKeyMissing {
                dir: dir.clone(),
                keys: keys.join(", "),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(kind: CloudInitKind) -> CloudInitData {
        CloudInitData {
            kind,
            instance_id: "id-1".into(),
            hostname: "vm1".into(),
            uuid: "u".into(),
            user_data: Some(DataSource::Inline(b"#cloud-config\n".to_vec())),
            network_data: None,
        }
    }

    #[test]
    fn nocloud_has_kubevirts_file_names_and_json_metadata() {
        let files = files(&data(CloudInitKind::NoCloud)).expect("files");
        let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["meta-data", "user-data"]);
        let meta: serde_json::Value = serde_json::from_slice(&files[0].contents).expect("json");
        assert_eq!(meta["instance-id"], "id-1");
        assert_eq!(meta["local-hostname"], "vm1");
    }

    #[test]
    fn config_drive_uses_the_openstack_layout() {
        let mut d = data(CloudInitKind::ConfigDrive);
        d.network_data = Some(DataSource::Inline(b"{}".to_vec()));
        let files = files(&d).expect("files");
        let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            names,
            [
                "openstack/latest/meta_data.json",
                "openstack/latest/user_data",
                "openstack/latest/network_data.json"
            ]
        );
    }

    #[test]
    fn secret_keys_are_tried_in_kubevirts_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("userData"), "camel").expect("write");
        let source = DataSource::SecretFile {
            dir: dir.path().to_path_buf(),
            keys: &["userdata", "userData"],
        };
        assert_eq!(resolve(&source).expect("read"), b"camel");
        std::fs::write(dir.path().join("userdata"), "lower").expect("write");
        assert_eq!(resolve(&source).expect("read"), b"lower");
        let missing = DataSource::SecretFile {
            dir: dir.path().to_path_buf(),
            keys: &["networkdata", "networkData"],
        };
        assert!(matches!(
            resolve(&missing),
            Err(CloudInitError::SecretKeyMissing { .. })
        ));
    }
}
