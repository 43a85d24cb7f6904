//! What the fuzz targets in `fuzz/` run, kept here so that the inputs they found are replayed
//! by ordinary tests (`importer/tests/fuzz_regressions.rs`) through the same code.
//!
//! Each entry point feeds untrusted bytes to one parser the way production does, and panics
//! only when an invariant of the importer is broken; a clean error is a pass. The fuzzer
//! reports panics, hangs (its `-timeout`) and memory beyond its `-rss_limit_mb`.

use std::io::{self, Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::format::DiskFormat;
use crate::format::detect::{detect_compression, detect_format};
use crate::pipeline::{ContentType, ImportRequest, import_from};
use crate::source::{OpenedSource, RandomAccess};

/// The volume every fuzzed image is imported into: images that claim more are refused
/// before anything is written, so a few input bytes cannot fill the machine.
pub const VOLUME_SIZE: u64 = 64 << 20;

/// How the image reaches the format reader: as an HTTP body does (front to back only), or as
/// a local file does (also at any offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Stream,
    Random,
}

/// Imports `bytes` as a disk image through the whole pipeline (decompression, detection,
/// the format's reader, the sparse sink), once per access mode.
pub fn image(bytes: &[u8]) {
    for access in [Access::Stream, Access::Random] {
        import_image(bytes, access);
    }
}

/// Like [`image`], for inputs that are uncompressed images of `format` only: the fuzz target
/// of one format spends its time in that format's reader.
pub fn image_of_format(bytes: &[u8], format: DiskFormat) {
    if detect_compression(bytes).is_none() && detect_format(bytes) == format {
        image(bytes);
    }
}

fn import_image(bytes: &[u8], access: Access) {
    let dir = Scratch::new();
    let target = dir.path().join("disk.img");
    let mut request = ImportRequest::new("fuzz-input", &target);
    request.size = Some(VOLUME_SIZE);
    let result = runtime().block_on(import_from(request, opened(bytes, access)));
    let left = dir.entries();
    match result {
        Ok(outcome) => {
            assert!(outcome.virtual_size <= VOLUME_SIZE, "{outcome:?}");
            let len = std::fs::metadata(&target).map(|m| m.len()).ok();
            assert_eq!(len, Some(outcome.target_size), "target size vs {outcome:?}");
            assert_eq!(left, [target], "only the target is left");
        }
        Err(_) => assert!(left.is_empty(), "a failed import left {left:?}"),
    }
}

fn opened(bytes: &[u8], access: Access) -> OpenedSource {
    let memory = Arc::new(Memory(bytes.to_vec()));
    OpenedSource {
        stream: Box::new(Cursor::new(memory.0.clone())),
        size: Some(bytes.len() as u64),
        random_access: match access {
            Access::Stream => None,
            Access::Random => Some(memory as Arc<dyn RandomAccess>),
        },
    }
}

/// An image held in memory, readable at any offset, as a local file is.
struct Memory(Vec<u8>);

impl RandomAccess for Memory {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }

    fn read_range(&self, offset: u64, len: u64) -> io::Result<Box<dyn Read + Send + '_>> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.0.len());
        let end = usize::try_from(offset.saturating_add(len))
            .unwrap_or(usize::MAX)
            .min(self.0.len());
        Ok(Box::new(&self.0[start..end]))
    }
}

/// Extracts `bytes` as a `contentType: archive` import does, and checks that nothing was
/// written outside the target directory.
pub fn archive(bytes: &[u8]) {
    let dir = Scratch::new();
    let target = dir.path().join("volume");
    std::fs::create_dir(&target).expect("create the target directory");
    let mut request = ImportRequest::new("fuzz-input", &target);
    request.content_type = ContentType::Archive;
    // The result does not matter; where the bytes went does.
    let _ = runtime().block_on(import_from(request, opened(bytes, Access::Stream)));
    assert_eq!(
        dir.entries(),
        std::slice::from_ref(&target),
        "written beside the target"
    );
    assert_stays_inside(&target, &target);
}

/// Every symlink under `dir` resolves inside `root` (or dangles there).
fn assert_stays_inside(dir: &Path, root: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            if let Ok(resolved) = std::fs::canonicalize(&path) {
                let root = std::fs::canonicalize(root).expect("the root exists");
                assert!(resolved.starts_with(&root), "{path:?} -> {resolved:?}");
            }
        } else if meta.is_dir() {
            assert_stays_inside(&path, root);
        }
    }
}

/// Imports `bytes` as an `oci-archive://` file: the OCI layout's tar, its index and
/// manifests, and the layer holding the disk.
pub fn oci_archive(bytes: &[u8]) {
    let dir = Scratch::new();
    let archive = dir.path().join("image.tar");
    std::fs::write(&archive, bytes).expect("write the archive");
    let target = dir.path().join("disk.img");
    let reference = format!("oci-archive://{}", archive.display());
    let import = async {
        let options = crate::source::registry::RegistryOptions::default();
        let source = crate::source::registry::open(&reference, &options).await?;
        let mut request = ImportRequest::new(&reference, &target);
        request.size = Some(VOLUME_SIZE);
        import_from(request, source).await
    };
    if runtime().block_on(import).is_err() {
        assert!(!target.exists(), "a failed import left its target");
    }
}

/// Reads `bytes` as a registry's answer to a manifest request.
pub fn manifest(bytes: &[u8]) {
    let _ = crate::source::registry::read_manifest(bytes);
}

/// Reads `bytes` as the text descriptor of a monolithicFlat VMDK.
pub fn vmdk_descriptor(bytes: &[u8]) {
    if let Some(extent) = crate::format::vmdk::flat_extent(bytes) {
        assert!(!extent.is_empty());
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

/// A fresh directory for one run, in memory when /dev/shm is there.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new() -> Self {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm)
        } else {
            tempfile::tempdir()
        };
        Self(dir.expect("a scratch directory"))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn entries(&self) -> Vec<PathBuf> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(self.path())
            .expect("read the scratch directory")
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        entries
    }
}
