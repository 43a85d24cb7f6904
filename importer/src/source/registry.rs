//! OCI images as a source: `docker://host[:port]/repo:tag` (or `@sha256:...`) from a
//! registry, and `oci-archive://path` from a local OCI layout tarball. The disk is the one
//! regular file under `disk/` in the image's layers (CDI's containerDisk layout); its bytes
//! are streamed straight out of the layer tarball while the layer's digest is computed over
//! the compressed bytes, so a tampered layer fails the import instead of completing it.

mod archive;
mod distribution;
mod layer;
mod manifest;

use std::path::PathBuf;
use std::sync::Arc;

use super::OpenedSource;
use super::http::Credentials;
use crate::error::ImportError;
use layer::BlobOpener;
use manifest::PlatformSpec;

/// How to reach the registry and which image of a multi-platform index to take.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Basic credentials (CDI's secretRef `accessKeyId` / `secretKey`), also used to obtain
    /// a bearer token when the registry asks for one.
    pub credentials: Option<Credentials>,
    /// A directory whose files hold PEM CA certificates, trusted besides the system's.
    pub cert_dir: Option<PathBuf>,
    /// Allows a registry that speaks plain HTTP, or HTTPS with a certificate that does not
    /// verify.
    pub insecure: bool,
    /// `os/arch[/variant]` (or just `arch`, for Linux) to pick from a multi-platform index;
    /// this machine's architecture when unset.
    pub platform: Option<String>,
}

/// The digest (`sha256:...`) of the manifest or index `reference` (`docker://...`) names
/// now: what a DataImportCron compares to decide whether the image changed.
pub async fn manifest_digest(
    reference: &str,
    options: &RegistryOptions,
) -> Result<String, ImportError> {
    let Some(image) = reference.strip_prefix("docker://") else {
        return Err(ImportError::InvalidSource(
            reference.to_string(),
            "expected docker://host/repository:tag or docker://host/repository@sha256:...".into(),
        ));
    };
    let registry = distribution::Distribution::connect(reference, image, options).await?;
    registry.digest().await
}

/// Reads a registry's answer to a manifest request as [`open`] does: the layers' digests of
/// an image manifest, or the digest of this machine's entry of an index. For the fuzz targets.
#[doc(hidden)]
pub fn read_manifest(bytes: &[u8]) -> Result<Vec<String>, String> {
    let digests = match manifest::parse(bytes)? {
        manifest::Manifest::Image(layers) => layers.into_iter().map(|l| l.digest).collect(),
        manifest::Manifest::Index(entries) => {
            let entry = manifest::select_platform(&entries, &PlatformSpec::host())?;
            vec![entry.digest.clone()]
        }
    };
    for digest in &digests {
        layer::LayerDigest::parse(digest)?;
    }
    Ok(digests)
}

/// Opens the disk file of the image named by `reference` (`docker://...` or
/// `oci-archive://...`). Returns once the disk file's tar entry is found, with its size;
/// the stream ends only after the whole layer has been read and its digest verified.
pub async fn open(reference: &str, options: &RegistryOptions) -> Result<OpenedSource, ImportError> {
    let platform = match &options.platform {
        Some(text) => PlatformSpec::parse(text).map_err(|reason| ImportError::Registry {
            reference: reference.to_string(),
            reason,
        })?,
        None => PlatformSpec::host(),
    };
    let (layers, blobs): (Vec<manifest::Descriptor>, Arc<dyn BlobOpener>) = if let Some(image) =
        reference.strip_prefix("docker://")
    {
        let registry = distribution::Distribution::connect(reference, image, options).await?;
        let layers = registry.resolve(&platform).await?;
        (layers, Arc::new(registry))
    } else if let Some(path) = reference.strip_prefix("oci-archive://") {
        let reference = reference.to_string();
        let path = path.to_string();
        let platform = platform.clone();
        crate::blocking::run(move || {
            let archive = archive::OciArchive::open(&reference, &path)?;
            let layers = archive.resolve(&platform)?;
            Ok((layers, Arc::new(archive) as Arc<dyn BlobOpener>))
        })
        .await?
    } else {
        return Err(ImportError::InvalidSource(
                reference.to_string(),
                "expected docker://host/repository:tag, docker://host/repository@sha256:..., or oci-archive://path".into(),
            ));
    };
    tracing::info!(reference, layers = layers.len(), %platform, "image manifest resolved");
    layer::extract_disk(reference, layers, blobs).await
}
