//! `oci-archive://path[:tag]`: an OCI image layout (`index.json`, `blobs/<alg>/<hex>`)
//! packed in an uncompressed tar, as `skopeo copy ... oci-archive:` writes it. The archive is
//! indexed once (entry offsets only); blobs are then read in place, never unpacked.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use super::layer::{BlobOpener, LayerDigest};
use super::manifest::{
    Descriptor, MAX_INDEX_DEPTH, Manifest, PlatformSpec, parse, select_platform, select_tag,
};
use crate::error::ImportError;

/// Manifests and indexes are small; anything bigger is not one.
const MAX_MANIFEST_SIZE: u64 = 4 << 20;

pub(super) struct OciArchive {
    path: PathBuf,
    reference: String,
    tag: Option<String>,
    /// Path inside the archive to (offset of the data, size).
    entries: HashMap<String, (u64, u64)>,
}

impl OciArchive {
    /// `location` is `path` or `path:tag` (the tag is split off only when `path:tag` itself
    /// is not a file).
    pub fn open(reference: &str, location: &str) -> Result<Self, ImportError> {
        let (path, tag) = match location.rsplit_once(':') {
            Some((path, tag))
                if !Path::new(location).exists() && !tag.contains('/') && !tag.is_empty() =>
            {
                (PathBuf::from(path), Some(tag.to_string()))
            }
            _ => (PathBuf::from(location), None),
        };
        let open_error = |source| ImportError::OpenSource {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(open_error)?;
        let mut archive = tar::Archive::new(file);
        let mut entries = HashMap::new();
        let fail = |e: std::io::Error| ImportError::Registry {
            reference: reference.to_string(),
            reason: format!("reading the OCI archive: {e}"),
        };
        for entry in archive.entries_with_seek().map_err(fail)? {
            let entry = entry.map_err(fail)?;
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let name = normalize(&entry.path().map_err(fail)?);
            entries.insert(name, (entry.raw_file_position(), entry.size()));
        }
        Ok(Self {
            path,
            reference: reference.to_string(),
            tag,
            entries,
        })
    }

    fn fail(&self, reason: String) -> ImportError {
        ImportError::Registry {
            reference: self.reference.clone(),
            reason,
        }
    }

    /// The layers of the image the archive holds (of the tag, or for the platform).
    pub fn resolve(&self, platform: &PlatformSpec) -> Result<Vec<Descriptor>, ImportError> {
        let index = self.read_small("index.json")?;
        let Manifest::Index(entries) = parse(&index).map_err(|e| self.fail(e))? else {
            return Err(self.fail("index.json is not an image index".into()));
        };
        let mut entry = match &self.tag {
            Some(tag) => select_tag(&entries, tag)
                .ok_or_else(|| self.fail(format!("no image tagged {tag:?} in the archive")))?,
            None => select_platform(&entries, platform).map_err(|e| self.fail(e))?,
        }
        .clone();
        for _ in 0..MAX_INDEX_DEPTH {
            let digest = LayerDigest::parse(&entry.digest).map_err(|e| self.fail(e))?;
            let bytes = self.read_small(&blob_path(&entry.digest))?;
            if !digest.matches(&bytes) {
                return Err(self.fail(format!("manifest {digest} digest mismatch")));
            }
            match parse(&bytes).map_err(|e| self.fail(e))? {
                Manifest::Image(layers) => return Ok(layers),
                Manifest::Index(entries) => {
                    entry = select_platform(&entries, platform)
                        .map_err(|e| self.fail(e))?
                        .clone();
                }
            }
        }
        Err(self.fail(format!("indexes nested more than {MAX_INDEX_DEPTH} deep")))
    }

    fn read_small(&self, name: &str) -> Result<Vec<u8>, ImportError> {
        let (_, size) = self.locate(name)?;
        if size > MAX_MANIFEST_SIZE {
            return Err(self.fail(format!("{name} is too large ({size} bytes) for a manifest")));
        }
        let mut bytes = Vec::new();
        self.open_entry(name)?
            .read_to_end(&mut bytes)
            .map_err(|e| self.fail(format!("reading {name}: {e}")))?;
        Ok(bytes)
    }

    fn locate(&self, name: &str) -> Result<(u64, u64), ImportError> {
        self.entries
            .get(name)
            .copied()
            .ok_or_else(|| self.fail(format!("the archive has no {name}")))
    }

    fn open_entry(&self, name: &str) -> Result<Box<dyn Read + Send>, ImportError> {
        let (offset, size) = self.locate(name)?;
        let open_error = |source| ImportError::OpenSource {
            path: self.path.clone(),
            source,
        };
        let mut file = File::open(&self.path).map_err(open_error)?;
        file.seek(SeekFrom::Start(offset)).map_err(open_error)?;
        Ok(Box::new(file.take(size)))
    }
}

impl BlobOpener for OciArchive {
    fn open(&self, layer: &Descriptor) -> Result<Box<dyn Read + Send>, ImportError> {
        self.open_entry(&blob_path(&layer.digest))
    }
}

fn blob_path(digest: &str) -> String {
    format!("blobs/{}", digest.replacen(':', "/", 1))
}

/// `./blobs/sha256/ab` and `blobs/sha256/ab` are the same entry.
fn normalize(path: &Path) -> String {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}
