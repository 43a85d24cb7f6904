//! Finding the disk in an image's layers and streaming it out. Layers are read from the top
//! down; the first one (so the last in the manifest) holding a regular file under `disk/`
//! is streamed entry by entry, never written anywhere. Every byte of a layer passes a digest
//! check over the compressed blob, and the disk stream ends only once that check passed:
//! a tampered layer makes the import fail, it never completes with bad data.
//!
//! Threads: the blob is read (network or file) and hashed on one thread, decompressed on a
//! second (when compressed), and walked as a tar on a third, which hands the disk entry's
//! bytes to the pipeline over a bounded channel. Memory is bounded by the channels' depth.

use std::io::{self, Read};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Component, Path};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread;

use sha2::{Digest, Sha256, Sha512};

use super::manifest::Descriptor;
use crate::decompress::{Decompressed, decompress};
use crate::error::ImportError;
use crate::source::OpenedSource;
use crate::stream::{ChannelReader, Chunk, ThreadedReader, read_full};

/// Size of the chunks of the disk file handed to the pipeline, and how many may wait.
const DISK_CHUNK: usize = 1 << 20;
const DISK_CHANNEL_DEPTH: usize = 4;

/// Opens a blob's raw (still compressed, not yet verified) bytes. Called from a blocking
/// thread.
pub(super) trait BlobOpener: Send + Sync {
    fn open(&self, layer: &Descriptor) -> Result<Box<dyn Read + Send>, ImportError>;
}

/// The disk file, once its tar header is seen.
struct DiskFound {
    name: String,
    size: u64,
    layer: String,
}

/// Starts reading the layers and returns once the disk file is found, or the reason it
/// cannot be.
pub(super) async fn extract_disk(
    reference: &str,
    layers: Vec<Descriptor>,
    blobs: Arc<dyn BlobOpener>,
) -> Result<OpenedSource, ImportError> {
    let (found_tx, found_rx) = tokio::sync::oneshot::channel();
    let (data_tx, data_rx) = sync_channel::<Chunk>(DISK_CHANNEL_DEPTH);
    let extraction = Extraction {
        reference: reference.to_string(),
        layers,
        blobs,
    };
    thread::Builder::new()
        .name("fv-registry".into())
        .spawn(move || extraction.run(found_tx, data_tx))
        .map_err(ImportError::ReadSource)?;
    let found = found_rx.await.map_err(|_| ImportError::Registry {
        reference: reference.to_string(),
        reason: "the layer reader stopped without an answer".into(),
    })??;
    tracing::info!(
        reference,
        file = %format!("/disk/{}", found.name),
        size = found.size,
        layer = %found.layer,
        "disk file found"
    );
    Ok(OpenedSource {
        stream: Box::new(ChannelReader::new(data_rx)),
        size: Some(found.size),
        random_access: None,
    })
}

struct Extraction {
    reference: String,
    layers: Vec<Descriptor>,
    blobs: Arc<dyn BlobOpener>,
}

/// How the walk through one layer ended.
enum Scan {
    /// The disk file was in it and has been handed over whole.
    Streamed,
    /// No regular file under `disk/`.
    Absent,
    /// The pipeline stopped reading (it failed or was cancelled): nothing more to do.
    Abandoned,
}

type FoundSender = tokio::sync::oneshot::Sender<Result<DiskFound, ImportError>>;

impl Extraction {
    fn run(self, found_tx: FoundSender, data_tx: SyncSender<Chunk>) {
        let mut found_tx = Some(found_tx);
        // A panic must not look like the end of the stream (a hung-up channel does).
        let scanned = panic::catch_unwind(AssertUnwindSafe(|| {
            self.scan_layers(&mut found_tx, &data_tx)
        }))
        .unwrap_or_else(|_| Err(self.error("the layer reader failed unexpectedly".into())));
        if let Err(err) = scanned {
            match found_tx.take() {
                Some(tx) => {
                    let _ = tx.send(Err(err));
                }
                None => {
                    let _ = data_tx.send(Err(err.into_io()));
                }
            }
        }
        // Dropping `data_tx` now is the end of the disk stream: only reached once the layer
        // it came from was verified.
    }

    fn error(&self, reason: String) -> ImportError {
        ImportError::Registry {
            reference: self.reference.clone(),
            reason,
        }
    }

    fn scan_layers(
        &self,
        found_tx: &mut Option<FoundSender>,
        data_tx: &SyncSender<Chunk>,
    ) -> Result<(), ImportError> {
        for layer in self.layers.iter().rev() {
            let expected = LayerDigest::parse(&layer.digest).map_err(|e| self.error(e))?;
            let raw = self.blobs.open(layer)?;
            let blob = SharedBlob::new(VerifiedBlob::new(
                raw,
                expected,
                layer.size,
                self.reference.clone(),
            ));
            let scanned = self.scan_layer(&blob, layer, found_tx, data_tx);
            if matches!(scanned, Ok(Scan::Abandoned)) {
                return Ok(());
            }
            // A digest mismatch (or a broken download) explains whatever the tar reader made
            // of the bytes, so it is the error reported.
            blob.drain()?;
            match scanned? {
                Scan::Streamed | Scan::Abandoned => return Ok(()),
                Scan::Absent => tracing::debug!(layer = %layer.digest, "no disk file in layer"),
            }
        }
        Err(self.error(
            "image has no file under /disk (a containerDisk holds its disk image as /disk/<name>)"
                .into(),
        ))
    }

    fn scan_layer(
        &self,
        blob: &SharedBlob,
        layer: &Descriptor,
        found_tx: &mut Option<FoundSender>,
        data_tx: &SyncSender<Chunk>,
    ) -> Result<Scan, ImportError> {
        let hashed: Box<dyn Read + Send> =
            Box::new(ThreadedReader::spawn("layer-blob", blob.clone()));
        let Decompressed { reader, .. } = decompress(hashed)?;
        let mut archive = tar::Archive::new(reader);
        let tar_error = |e: io::Error| self.read_error(layer, e);
        let mut streamed: Option<String> = None;
        for entry in archive.entries().map_err(tar_error)? {
            let mut entry = entry.map_err(tar_error)?;
            let path = entry.path().map_err(tar_error)?.into_owned();
            let Some(name) = disk_file_name(&path) else {
                continue;
            };
            let kind = entry.header().entry_type();
            if !(kind.is_file() || kind == tar::EntryType::Continuous) {
                continue;
            }
            if let Some(first) = &streamed {
                return Err(self.error(format!(
                    "image has more than one file under /disk ({first} and {name})"
                )));
            }
            let size = entry.size();
            if let Some(tx) = found_tx.take() {
                let found = DiskFound {
                    name: name.clone(),
                    size,
                    layer: layer.digest.clone(),
                };
                if tx.send(Ok(found)).is_err() {
                    return Ok(Scan::Abandoned);
                }
            }
            match pump(&mut entry, data_tx).map_err(tar_error)? {
                None => return Ok(Scan::Abandoned),
                Some(sent) if sent != size => {
                    return Err(self.error(format!(
                        "layer {}: /disk/{name} ends after {sent} of its {size} bytes",
                        layer.digest
                    )));
                }
                Some(_) => streamed = Some(name),
            }
        }
        Ok(match streamed {
            Some(_) => Scan::Streamed,
            None => Scan::Absent,
        })
    }

    /// An error from reading a layer: the pipeline's own errors pass through as they are.
    fn read_error(&self, layer: &Descriptor, err: io::Error) -> ImportError {
        match err.downcast::<ImportError>() {
            Ok(inner) => inner,
            Err(err) => self.error(format!("layer {}: {err}", layer.digest)),
        }
    }
}

/// Sends the entry's bytes down the channel; `None` when the receiver has gone away.
fn pump(entry: &mut impl Read, data_tx: &SyncSender<Chunk>) -> io::Result<Option<u64>> {
    let mut sent = 0u64;
    loop {
        let mut chunk = vec![0u8; DISK_CHUNK];
        let n = read_full(entry, &mut chunk)?;
        if n == 0 {
            return Ok(Some(sent));
        }
        chunk.truncate(n);
        sent += n as u64;
        if data_tx.send(Ok(chunk)).is_err() {
            return Ok(None);
        }
        if n < DISK_CHUNK {
            return Ok(Some(sent));
        }
    }
}

/// `Some(name)` for `disk/<name>` (also `./disk/<name>` and `/disk/<name>`), not counting
/// whiteouts.
fn disk_file_name(path: &Path) -> Option<String> {
    let mut parts = path
        .components()
        .filter(|c| !matches!(c, Component::CurDir | Component::RootDir));
    match (parts.next(), parts.next(), parts.next()) {
        (Some(Component::Normal(dir)), Some(Component::Normal(name)), None) if dir == "disk" => {
            let name = name.to_string_lossy().into_owned();
            (!name.starts_with(".wh.")).then_some(name)
        }
        _ => None,
    }
}

/// A digest from a descriptor: `sha256:<64 hex>` or `sha512:<128 hex>`.
#[derive(Debug, Clone)]
pub(super) struct LayerDigest {
    algorithm: &'static str,
    hex: String,
}

impl LayerDigest {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (algorithm, hex) = text
            .split_once(':')
            .ok_or_else(|| format!("invalid digest {text:?}"))?;
        let (algorithm, len) = match algorithm {
            "sha256" => ("sha256", 64),
            "sha512" => ("sha512", 128),
            other => return Err(format!("digest algorithm {other:?} is not supported")),
        };
        if hex.len() != len || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(format!("invalid digest {text:?}"));
        }
        Ok(Self {
            algorithm,
            hex: hex.to_string(),
        })
    }

    fn hasher(&self) -> Hasher {
        match self.algorithm {
            "sha512" => Hasher::Sha512(Box::default()),
            _ => Hasher::Sha256(Sha256::new()),
        }
    }

    /// Whether `bytes` have this digest (for manifests, read whole).
    pub fn matches(&self, bytes: &[u8]) -> bool {
        let mut hasher = self.hasher();
        hasher.update(bytes);
        hasher.finish() == self.hex
    }
}

impl std::fmt::Display for LayerDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.algorithm, self.hex)
    }
}

enum Hasher {
    Sha256(Sha256),
    Sha512(Box<Sha512>),
}

impl Hasher {
    fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha512(h) => h.update(bytes),
        }
    }

    fn finish(self) -> String {
        match self {
            Hasher::Sha256(h) => hex::encode(h.finalize()),
            Hasher::Sha512(h) => hex::encode(h.finalize()),
        }
    }
}

/// A blob's bytes, hashed as they are read; at the end, the digest and size are compared
/// with the descriptor's. The outcome sticks: once failed, every later read fails the same
/// way, whichever thread reads.
struct VerifiedBlob {
    inner: Box<dyn Read + Send>,
    hasher: Option<Hasher>,
    expected: LayerDigest,
    expected_size: u64,
    read: u64,
    outcome: Option<Result<(), String>>,
    reference: String,
}

impl VerifiedBlob {
    fn new(
        inner: Box<dyn Read + Send>,
        expected: LayerDigest,
        expected_size: u64,
        reference: String,
    ) -> Self {
        Self {
            hasher: Some(expected.hasher()),
            inner,
            expected,
            expected_size,
            read: 0,
            outcome: None,
            reference,
        }
    }

    fn failure(&self, reason: &str) -> io::Error {
        ImportError::Registry {
            reference: self.reference.clone(),
            reason: reason.to_string(),
        }
        .into_io()
    }

    fn conclude(&mut self) -> Result<(), String> {
        let actual = self.hasher.take().map(Hasher::finish).unwrap_or_default();
        if actual != self.expected.hex {
            let sizes = if self.read != self.expected_size {
                format!(
                    "; {} bytes received, the manifest says {}",
                    self.read, self.expected_size
                )
            } else {
                String::new()
            };
            return Err(format!(
                "layer {} digest mismatch: calculated {}:{actual}{sizes}",
                self.expected, self.expected.algorithm
            ));
        }
        Ok(())
    }

    fn settle(&mut self, outcome: Result<(), String>) -> io::Result<usize> {
        let result = match &outcome {
            Ok(()) => Ok(0),
            Err(reason) => Err(self.failure(reason)),
        };
        self.outcome = Some(outcome);
        result
    }
}

impl Read for VerifiedBlob {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(outcome) = &self.outcome {
            return match outcome {
                Ok(()) => Ok(0),
                Err(reason) => Err(self.failure(reason)),
            };
        }
        match self.inner.read(buf) {
            Ok(0) => {
                let outcome = self.conclude();
                self.settle(outcome)
            }
            Ok(n) => {
                self.read += n as u64;
                if let Some(hasher) = &mut self.hasher {
                    hasher.update(&buf[..n]);
                }
                if self.read > self.expected_size {
                    let reason = format!(
                        "layer {} digest mismatch: more than the {} bytes the manifest says",
                        self.expected, self.expected_size
                    );
                    return self.settle(Err(reason));
                }
                Ok(n)
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => Err(err),
            // oci-client checks a whole-blob answer itself; ours is the check that counts.
            Err(err)
                if err
                    .get_ref()
                    .is_some_and(|e| e.is::<oci_client::errors::DigestError>()) =>
            {
                let outcome = self.conclude();
                self.settle(outcome)
            }
            Err(err) => {
                let reason = format!("layer {}: {err}", self.expected);
                self.settle(Err(reason))
            }
        }
    }
}

/// A [`VerifiedBlob`] shared between the thread that feeds the tar reader and the one that
/// reads what is left after the tar's end, so every byte is hashed exactly once.
#[derive(Clone)]
struct SharedBlob(Arc<Mutex<VerifiedBlob>>);

impl SharedBlob {
    fn new(blob: VerifiedBlob) -> Self {
        Self(Arc::new(Mutex::new(blob)))
    }

    /// Reads the rest of the blob and returns the verdict on it.
    fn drain(&self) -> Result<(), ImportError> {
        let mut buf = vec![0u8; 256 * 1024];
        let mut blob = self.0.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match blob.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(_) => continue,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(ImportError::from_read(err)),
            }
        }
    }
}

impl Read for SharedBlob {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha256(bytes: &[u8]) -> String {
        format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
    }

    #[test]
    fn disk_file_names() {
        let name = |p: &str| disk_file_name(Path::new(p));
        assert_eq!(name("disk/a.qcow2").as_deref(), Some("a.qcow2"));
        assert_eq!(name("./disk/a.img").as_deref(), Some("a.img"));
        assert_eq!(name("/disk/a.img").as_deref(), Some("a.img"));
        assert_eq!(name("disk/"), None);
        assert_eq!(name("disk/sub/a.img"), None);
        assert_eq!(name("other/a.img"), None);
        assert_eq!(name("disk/.wh.a.img"), None);
    }

    #[test]
    fn verified_blob_passes_good_bytes_and_sticks_to_a_mismatch() {
        let data = b"layer bytes".to_vec();
        let good = LayerDigest::parse(&sha256(&data)).unwrap();
        let mut blob = VerifiedBlob::new(
            Box::new(io::Cursor::new(data.clone())),
            good,
            data.len() as u64,
            "test".into(),
        );
        let mut out = Vec::new();
        blob.read_to_end(&mut out).unwrap();
        assert_eq!(out, data);

        let other = LayerDigest::parse(&sha256(b"other")).unwrap();
        let shared = SharedBlob::new(VerifiedBlob::new(
            Box::new(io::Cursor::new(data.clone())),
            other.clone(),
            data.len() as u64,
            "test".into(),
        ));
        let err = shared.clone().read_to_end(&mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("digest mismatch"), "{err}");
        let again = shared.drain().unwrap_err().to_string();
        assert!(
            again.contains(&format!("layer {other} digest mismatch")),
            "{again}"
        );
    }

    #[test]
    fn oversized_blob_is_cut_off() {
        let data = vec![7u8; 1000];
        let digest = LayerDigest::parse(&sha256(&data)).unwrap();
        let blob = SharedBlob::new(VerifiedBlob::new(
            Box::new(io::Cursor::new(data)),
            digest,
            10,
            "test".into(),
        ));
        let err = blob.drain().unwrap_err().to_string();
        assert!(err.contains("more than the 10 bytes"), "{err}");
    }

    #[test]
    fn digests_are_checked_for_shape() {
        assert!(LayerDigest::parse("sha256:abc").is_err());
        assert!(LayerDigest::parse("md5:00").is_err());
        assert!(LayerDigest::parse(&sha256(b"x")).unwrap().matches(b"x"));
    }
}
