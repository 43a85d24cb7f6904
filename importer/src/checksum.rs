//! Checksums over the bytes as transferred (`sha256:<hex>` and friends), computed by a tee
//! that sits between the source and the decompressors.

use std::io::{self, Read};

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

use crate::error::ImportError;

/// The algorithms a checksum may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumAlgorithm {
    Md5,
    Sha1,
    Sha256,
    Sha512,
}

impl ChecksumAlgorithm {
    pub fn name(self) -> &'static str {
        match self {
            Self::Md5 => "md5",
            Self::Sha1 => "sha1",
            Self::Sha256 => "sha256",
            Self::Sha512 => "sha512",
        }
    }

    fn digest_len(self) -> usize {
        match self {
            Self::Md5 => 16,
            Self::Sha1 => 20,
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }
}

/// An expected checksum, parsed from `algo:hex`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checksum {
    pub algorithm: ChecksumAlgorithm,
    pub digest: Vec<u8>,
}

impl std::str::FromStr for Checksum {
    type Err = ImportError;

    fn from_str(text: &str) -> Result<Self, ImportError> {
        let invalid = |why: String| ImportError::InvalidChecksum(text.to_string(), why);
        let (algo, hex_digest) = text
            .split_once(':')
            .ok_or_else(|| invalid("expected ALGORITHM:HEX, e.g. sha256:9f86...".into()))?;
        let algorithm = match algo.to_ascii_lowercase().as_str() {
            "md5" => ChecksumAlgorithm::Md5,
            "sha1" => ChecksumAlgorithm::Sha1,
            "sha256" => ChecksumAlgorithm::Sha256,
            "sha512" => ChecksumAlgorithm::Sha512,
            other => {
                return Err(invalid(format!(
                    "unknown algorithm {other:?} (md5, sha1, sha256, sha512)"
                )));
            }
        };
        let digest = hex::decode(hex_digest.trim()).map_err(|e| invalid(e.to_string()))?;
        if digest.len() != algorithm.digest_len() {
            return Err(invalid(format!(
                "a {} digest has {} hex digits, this one has {}",
                algorithm.name(),
                algorithm.digest_len() * 2,
                hex_digest.trim().len()
            )));
        }
        Ok(Checksum { algorithm, digest })
    }
}

enum Hasher {
    Md5(Md5),
    Sha1(Sha1),
    Sha256(Sha256),
    Sha512(Sha512),
}

impl Hasher {
    fn new(algorithm: ChecksumAlgorithm) -> Self {
        match algorithm {
            ChecksumAlgorithm::Md5 => Self::Md5(Md5::new()),
            ChecksumAlgorithm::Sha1 => Self::Sha1(Sha1::new()),
            ChecksumAlgorithm::Sha256 => Self::Sha256(Sha256::new()),
            ChecksumAlgorithm::Sha512 => Self::Sha512(Sha512::new()),
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Md5(h) => h.update(bytes),
            Self::Sha1(h) => h.update(bytes),
            Self::Sha256(h) => h.update(bytes),
            Self::Sha512(h) => h.update(bytes),
        }
    }

    fn finish(self) -> Vec<u8> {
        match self {
            Self::Md5(h) => h.finalize().to_vec(),
            Self::Sha1(h) => h.finalize().to_vec(),
            Self::Sha256(h) => h.finalize().to_vec(),
            Self::Sha512(h) => h.finalize().to_vec(),
        }
    }
}

/// A `Read` adapter that hashes every byte read through it and, at end of stream, compares
/// the digest with the expected one. A mismatch surfaces as a read error, so nothing
/// downstream can mistake a corrupted transfer for a finished one.
pub struct ChecksumTee<R> {
    inner: R,
    expected: Checksum,
    hasher: Option<Hasher>,
}

impl<R: Read> ChecksumTee<R> {
    pub fn new(inner: R, expected: Checksum) -> Self {
        let hasher = Some(Hasher::new(expected.algorithm));
        Self {
            inner,
            expected,
            hasher,
        }
    }

    fn verify(&mut self) -> io::Result<()> {
        let Some(hasher) = self.hasher.take() else {
            return Ok(());
        };
        let actual = hasher.finish();
        if actual == self.expected.digest {
            return Ok(());
        }
        Err(ImportError::ChecksumMismatch {
            algorithm: self.expected.algorithm.name(),
            expected: hex::encode(&self.expected.digest),
            actual: hex::encode(actual),
        }
        .into_io())
    }
}

impl<R: Read> Read for ChecksumTee<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        match (&mut self.hasher, n) {
            (Some(_), 0) if !buf.is_empty() => self.verify()?,
            (Some(hasher), n) => hasher.update(&buf[..n]),
            (None, _) => {}
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO_SHA256: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

    #[test]
    fn parses_and_rejects() {
        let ok: Checksum = format!("sha256:{HELLO_SHA256}").parse().unwrap();
        assert_eq!(ok.algorithm, ChecksumAlgorithm::Sha256);
        assert!("sha256:abcd".parse::<Checksum>().is_err());
        assert!("crc32:abcd".parse::<Checksum>().is_err());
        assert!(HELLO_SHA256.parse::<Checksum>().is_err());
    }

    #[test]
    fn tee_verifies_at_end() {
        let good: Checksum = format!("sha256:{HELLO_SHA256}").parse().unwrap();
        let mut out = Vec::new();
        ChecksumTee::new(&b"hello"[..], good.clone())
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, b"hello");

        let err = ChecksumTee::new(&b"hellO"[..], good)
            .read_to_end(&mut out)
            .unwrap_err();
        let err = ImportError::from_read(err);
        assert!(matches!(err, ImportError::ChecksumMismatch { .. }), "{err}");
        assert!(err.to_string().contains("checksum mismatch"));
    }

    #[test]
    fn md5_sha1_sha512() {
        for (spec, data) in [
            ("md5:5d41402abc4b2a76b9719d911017c592", b"hello"),
            ("sha1:aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d", b"hello"),
        ] {
            let sum: Checksum = spec.parse().unwrap();
            let mut out = Vec::new();
            ChecksumTee::new(&data[..], sum)
                .read_to_end(&mut out)
                .unwrap();
        }
        let sha512: Checksum = "sha512:9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca72323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e5c3adef46f73bcdec043".parse().unwrap();
        let mut out = Vec::new();
        ChecksumTee::new(&b"hello"[..], sha512)
            .read_to_end(&mut out)
            .unwrap();
    }
}
