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
    /// The VMI's instancetype (a cluster instancetype's name before a namespaced one's), as
    /// the metadata's `instance-type`.
    pub instance_type: Option<String>,
    /// Mounted Secrets of the access credentials this data source propagates: each file of
    /// each directory is one public key of the metadata, numbered in order from `"0"`.
    pub ssh_key_dirs: Vec<PathBuf>,
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
    #[error("Unable to read public keys found at volume: {path}: {source}")]
    PublicKeys {
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
    let keys = public_keys(&data.ssh_key_dirs)?;
    let mut files = Vec::new();
    match data.kind {
        CloudInitKind::NoCloud => {
            let mut meta =
                json!({"instance-id": data.instance_id, "local-hostname": data.hostname});
            add_optional(&mut meta, "instance-type", data.instance_type.as_ref());
            add_keys(&mut meta, "public-keys", &keys);
            files.push(IsoFile::new("meta-data", meta.to_string().into_bytes()));
            files.push(IsoFile::new("user-data", user.unwrap_or_default()));
            if let Some(network) = network {
                files.push(IsoFile::new("network-config", network));
            }
        }
        CloudInitKind::ConfigDrive => {
            let mut meta = json!({
                "instance_id": data.instance_id,
                "hostname": data.hostname,
                "uuid": data.uuid,
            });
            add_optional(&mut meta, "instance_type", data.instance_type.as_ref());
            add_keys(&mut meta, "public_keys", &keys);
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

/// The public keys in `dirs` as KubeVirt numbers them: every file (not a directory, not the
/// `..data`-style entries of a mounted Secret), by name within each directory in turn,
/// empty ones skipped.
fn public_keys(dirs: &[PathBuf]) -> Result<Vec<String>, CloudInitError> {
    let mut keys = Vec::new();
    for dir in dirs {
        let failed = |source| CloudInitError::PublicKeys {
            path: dir.clone(),
            source,
        };
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .map_err(failed)?
            .collect::<Result<_, _>>()
            .map_err(failed)?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with("..") || path.is_dir() {
                continue;
            }
            let key = std::fs::read_to_string(&path)
                .map_err(|source| CloudInitError::PublicKeys { path, source })?;
            if !key.is_empty() {
                keys.push(key);
            }
        }
    }
    Ok(keys)
}

fn add_optional(meta: &mut serde_json::Value, name: &str, value: Option<&String>) {
    if let Some(value) = value.filter(|v| !v.is_empty()) {
        meta[name] = json!(value);
    }
}

fn add_keys(meta: &mut serde_json::Value, name: &str, keys: &[String]) {
    if !keys.is_empty() {
        let numbered: serde_json::Map<String, serde_json::Value> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| (i.to_string(), json!(key)))
            .collect();
        meta[name] = serde_json::Value::Object(numbered);
    }
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
            instance_type: None,
            ssh_key_dirs: Vec::new(),
        }
    }

    fn metadata(data: &CloudInitData) -> serde_json::Value {
        let files = files(data).expect("files");
        serde_json::from_slice(&files[0].contents).expect("json")
    }

    #[test]
    fn access_credential_keys_are_numbered_in_the_metadata_as_kubevirt_numbers_them() {
        let first = tempfile::tempdir().expect("tempdir");
        let second = tempfile::tempdir().expect("tempdir");
        std::fs::write(first.path().join("b"), "ssh-ed25519 BBB").expect("write");
        std::fs::write(first.path().join("a"), "ssh-ed25519 AAA").expect("write");
        std::fs::write(first.path().join("empty"), "").expect("write");
        std::fs::create_dir(first.path().join("..2026_data")).expect("mkdir");
        std::fs::write(second.path().join("key"), "ssh-rsa CCC").expect("write");
        let mut no_cloud = data(CloudInitKind::NoCloud);
        no_cloud.ssh_key_dirs = vec![first.path().into(), second.path().into()];
        no_cloud.instance_type = Some("u1.small".into());
        let meta = metadata(&no_cloud);
        assert_eq!(
            meta["public-keys"],
            serde_json::json!({"0": "ssh-ed25519 AAA", "1": "ssh-ed25519 BBB", "2": "ssh-rsa CCC"})
        );
        assert_eq!(meta["instance-type"], "u1.small");
        let mut config_drive = no_cloud.clone();
        config_drive.kind = CloudInitKind::ConfigDrive;
        let meta = metadata(&config_drive);
        assert_eq!(meta["public_keys"]["2"], "ssh-rsa CCC");
        assert_eq!(meta["instance_type"], "u1.small");
        assert!(
            metadata(&data(CloudInitKind::NoCloud))
                .get("public-keys")
                .is_none()
        );
    }

    #[test]
    fn a_missing_key_directory_is_named() {
        let mut d = data(CloudInitKind::NoCloud);
        d.ssh_key_dirs = vec!["/nonexistent/keys-access-cred".into()];
        let error = files(&d).expect_err("refused").to_string();
        assert!(error.contains("/nonexistent/keys-access-cred"), "{error}");
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
