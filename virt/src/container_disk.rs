//! containerDisks: the disk image inside a container image, pulled by the importer's
//! registry source into a node cache keyed by the manifest digest, so every VMI of the same
//! image shares one raw copy (each writes to its own qcow2 overlay). An image is imported
//! into a temporary directory of the cache and renamed into place whole, so a pull killed
//! half-way leaves nothing a later VMI would use.

use std::path::{Path, PathBuf};

use importer::ImportRequest;
use importer::source::registry::{RegistryOptions, manifest_digest};
use sha2::Digest;

/// Why a containerDisk could not be pulled.
#[derive(Debug, thiserror::Error)]
pub enum ContainerDiskError {
    #[error("containerDisk {image}: {source}")]
    Pull {
        image: String,
        source: importer::ImportError,
    },
    #[error("containerDisk: {0}")]
    Policy(String),
    #[error("containerDisk cache {path}: {source}")]
    Cache {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The node's cache of pulled containerDisks.
#[derive(Debug, Clone)]
pub struct ContainerDiskCache {
    dir: PathBuf,
    /// Registries reached over plain HTTP or with unverified TLS (`host[:port]`).
    insecure_registries: Vec<String>,
}

impl ContainerDiskCache {
    pub fn new(dir: PathBuf, insecure_registries: Vec<String>) -> Self {
        Self {
            dir,
            insecure_registries,
        }
    }

    /// The raw image of `image` (`host/repository:tag` or `@sha256:…`) under Kubernetes'
    /// pull policy (`Always`, `IfNotPresent`, `Never`; by default `Always` for `:latest`
    /// and untagged images, else `IfNotPresent`): pulled unless the cache holds the digest
    /// the tag names now, or, without `Always`, the digest it named at the last pull.
    pub async fn image(
        &self,
        image: &str,
        policy: Option<&str>,
    ) -> Result<PathBuf, ContainerDiskError> {
        let reference = format!("docker://{image}");
        let host = image.split('/').next().unwrap_or_default();
        let options = RegistryOptions {
            insecure: self.insecure_registries.iter().any(|h| h == host),
            ..RegistryOptions::default()
        };
        let pull_err = |source| ContainerDiskError::Pull {
            image: image.to_owned(),
            source,
        };
        let always = match policy {
            Some("Always") => true,
            Some("IfNotPresent") | Some("Never") => false,
            Some(other) => {
                return Err(ContainerDiskError::Policy(format!(
                    "unsupported imagePullPolicy {other:?}; supported: Always, IfNotPresent, Never"
                )));
            }
            None => is_latest(image),
        };
        let tag_record = self
            .dir
            .join("tags")
            .join(hex::encode(sha2::Sha256::digest(image.as_bytes())));
        if !always && let Ok(digest) = std::fs::read_to_string(&tag_record) {
            let disk = self
                .dir
                .join(digest.trim().replace(':', "-"))
                .join("disk.img");
            if disk.exists() {
                return Ok(disk);
            }
        }
        if policy == Some("Never") {
            return Err(ContainerDiskError::Policy(format!(
                "{image} is not in the node's cache and imagePullPolicy is Never"
            )));
        }
        let digest = manifest_digest(&reference, &options)
            .await
            .map_err(pull_err)?;
        let entry = self.dir.join(digest.replace(':', "-"));
        let disk = entry.join("disk.img");
        record_tag(&tag_record, &digest);
        if disk.exists() {
            return Ok(disk);
        }
        let cache_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ContainerDiskError::Cache { path, source }
        };
        std::fs::create_dir_all(&self.dir).map_err(cache_err(&self.dir))?;
        let staging = tempfile::Builder::new()
            .prefix(".pull-")
            .tempdir_in(&self.dir)
            .map_err(cache_err(&self.dir))?;
        let pinned = format!("docker://{}@{digest}", repository(image));
        let mut request = ImportRequest::new(pinned, staging.path().join("disk.img"));
        request.http.insecure_tls = options.insecure;
        tracing::info!(%image, %digest, "pulling containerDisk");
        importer::import(request).await.map_err(pull_err)?;
        let staged = staging.keep();
        match std::fs::rename(&staged, &entry) {
            Ok(()) => Ok(disk),
            // Another VMI pulled the same digest meanwhile: use theirs.
            Err(_) if disk.exists() => {
                let _ = std::fs::remove_dir_all(&staged);
                Ok(disk)
            }
            Err(source) => Err(ContainerDiskError::Cache {
                path: entry,
                source,
            }),
        }
    }
}

/// Remembers which digest `image` named (best effort: it only saves a registry round trip).
fn record_tag(record: &Path, digest: &str) {
    if let Some(dir) = record.parent()
        && std::fs::create_dir_all(dir).is_ok()
    {
        let staging = record.with_extension("staging");
        if std::fs::write(&staging, digest).is_ok() {
            let _ = std::fs::rename(&staging, record);
        }
    }
}

/// Whether Kubernetes' default pull policy for `image` is `Always`: a `:latest` or untagged
/// image not pinned by digest.
fn is_latest(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let repo = repository(image);
    repo.len() == image.len() || image.ends_with(":latest")
}

/// `host/repo:tag` or `host/repo@sha256:…` without its tag or digest.
fn repository(image: &str) -> &str {
    if let Some((repo, _)) = image.split_once('@') {
        return repo;
    }
    match image.rfind(':') {
        Some(colon) if !image[colon..].contains('/') => &image[..colon],
        _ => image,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_and_untagged_images_are_pulled_always() {
        assert!(is_latest("127.0.0.1:5000/disks/fast"));
        assert!(is_latest("127.0.0.1:5000/disks/fast:latest"));
        assert!(!is_latest("127.0.0.1:5000/disks/fast:1.0"));
        assert!(!is_latest("quay.io/c/fedora@sha256:abc"));
    }

    #[test]
    fn tags_and_digests_are_stripped_but_ports_kept() {
        assert_eq!(
            repository("127.0.0.1:5000/disks/cirros:latest"),
            "127.0.0.1:5000/disks/cirros"
        );
        assert_eq!(
            repository("127.0.0.1:5000/disks/cirros"),
            "127.0.0.1:5000/disks/cirros"
        );
        assert_eq!(
            repository("quay.io/c/fedora@sha256:abc"),
            "quay.io/c/fedora"
        );
    }
}
