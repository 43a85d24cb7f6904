//! What the fuzz targets in `fuzz/` run, kept here so that the inputs they found are replayed
//! by ordinary tests (`uploadproxy/tests/fuzz_regressions.rs`) through the same code. Each
//! entry point panics only when an invariant is broken; a clean refusal is a pass.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::form::{self, FilePart};
use crate::token::{UploadTokenIssuer, UploadTokenValidator};

/// Reads `bytes` as a form upload: the first line is the `Content-Type` header, the rest the
/// body, delivered in chunks of a size taken from the first byte (forms are parsed as they
/// arrive, and chunk edges are where parsers slip).
pub fn form(bytes: &[u8]) {
    let (header, body) = match bytes.iter().position(|&b| b == b'\n') {
        Some(at) => (&bytes[..at], &bytes[at + 1..]),
        None => (bytes, &[][..]),
    };
    let Ok(boundary) = form::boundary(std::str::from_utf8(header).ok()) else {
        return;
    };
    let chunk = usize::from(body.first().copied().unwrap_or(1)).max(1);
    let chunks: Vec<Result<Bytes, std::io::Error>> = body
        .chunks(chunk)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let mut file = FilePart::new(futures_util::stream::iter(chunks), boundary);
    let read = runtime().block_on(async {
        let mut total = 0usize;
        while let Some(data) = file.next_chunk().await? {
            total += data.len();
        }
        Ok::<_, form::FormError>(total)
    });
    if let Ok(total) = read {
        assert!(total <= body.len(), "a file part longer than its form");
    }
}

/// Checks `bytes` as an upload token, and also as the claims of a token signed with the
/// right key: whatever a validator accepts must name a PVC upload that has not expired.
pub fn token(bytes: &[u8]) {
    let (issuer, validator) = keys();
    if let Ok(text) = std::str::from_utf8(bytes) {
        let _ = validator.validate(text);
    }
    let Ok(claims) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return;
    };
    let Ok(token) = issuer.sign(&claims) else {
        return;
    };
    if let Ok(valid) = validator.validate(&token) {
        assert_eq!(valid.operation, "Upload");
        assert!(!valid.name.is_empty() && !valid.namespace.is_empty());
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        assert!(
            valid.exp.saturating_add(10) >= now,
            "an expired token passed: {valid:?}"
        );
        assert!(
            valid.nbf <= now + 10,
            "a token not yet valid passed: {valid:?}"
        );
    }
}

fn keys() -> &'static (UploadTokenIssuer, UploadTokenValidator) {
    static KEYS: OnceLock<(UploadTokenIssuer, UploadTokenValidator)> = OnceLock::new();
    KEYS.get_or_init(|| {
        // Made once and kept: generating an RSA key takes seconds, longer than the fuzzer
        // waits for one input when the machine is busy.
        let dir = std::env::temp_dir().join("ferrovirt-fuzz-upload-token");
        std::fs::create_dir_all(&dir).expect("a directory for the fuzzing key");
        let issuer = UploadTokenIssuer::load_or_create(&dir).expect("an RSA key");
        let validator = issuer.validator();
        (issuer, validator)
    })
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a tokio runtime")
    })
}
