//! containerDisks: the disk image inside a container image, pulled by the importer's
//! registry source into a node cache keyed by the manifest digest, so every VMI of the same
//! image shares one raw copy (each writes to its own qcow2 overlay). An image is imported
//! into a temporary directory of the cache and renamed into place whole, so a pull killed
//! half-way leaves nothing a later VMI would use.

use std::path::{Path, PathBuf};

use importer::ImportRequest;
use importer::source::registry::{RegistryOptions, manifest_digest};

/// Why a containerDisk could not be pulled.
#[derive(Debug, thiserror::Error)]
pub enum ContainerDiskError {
    #[error("containerDisk {image}: {source}")]
    Pull {
        image: String,
        source: importer::ImportError,
    },
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

    /// The raw image of `image` (`host/repository:tag` or `@sha256:…`), pulled unless the
    /// cache holds its current digest.
    pub async fn image(&self, image: &str) -> Result<PathBuf, ContainerDiskError> {
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
        let digest = manifest_digest(&reference, &options)
            .await
            .map_err(pull_err)?;
        let entry = self.dir.join(digest.replace(':', "-"));
        let disk = entry.join("disk.img");
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
