//! Decoding one compressed block: a qcow2 cluster (raw deflate or zstd) or a VMDK grain
//! (zlib). Each writer thread owns a decoder, so compressed blocks decode on every core.

use flate2::{Decompress, FlushDecompress, Status};
use zstd::stream::raw::{Decoder as ZstdDecoder, InBuffer, Operation, OutBuffer};

use crate::error::ImportError;

/// How a compressed block is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockCodec {
    /// Raw deflate, no header: qcow2 compression type 0 (and every version 2 image).
    Deflate,
    /// Deflate in a zlib wrapper: VMDK compressed grains.
    Zlib,
    Zstd,
}

/// Reusable per-thread decoding state.
#[derive(Default)]
pub struct BlockDecoder {
    out: Vec<u8>,
    inflate: Option<Decompress>,
    inflate_zlib: Option<Decompress>,
    zstd: Option<ZstdDecoder<'static>>,
}

impl BlockDecoder {
    /// Decodes `input` into exactly `block_size` bytes. The input may run on past the
    /// compressed data (it is rounded up to sectors); a stream that ends early is corrupt.
    pub fn decode(
        &mut self,
        codec: BlockCodec,
        input: &[u8],
        block_size: usize,
        virt: u64,
    ) -> Result<&[u8], ImportError> {
        self.out.resize(block_size, 0);
        let result = match codec {
            BlockCodec::Deflate => inflate(
                self.inflate.get_or_insert_with(|| Decompress::new(false)),
                false,
                input,
                &mut self.out,
            ),
            BlockCodec::Zlib => inflate(
                self.inflate_zlib
                    .get_or_insert_with(|| Decompress::new(true)),
                true,
                input,
                &mut self.out,
            ),
            BlockCodec::Zstd => self.unzstd(input),
        };
        result.map_err(|why| {
            ImportError::InvalidImage(format!(
                "compressed block at virtual offset {virt:#x}: {why}"
            ))
        })?;
        Ok(&self.out)
    }

    fn unzstd(&mut self, input: &[u8]) -> Result<(), String> {
        if self.zstd.is_none() {
            self.zstd = Some(ZstdDecoder::new().map_err(|e| e.to_string())?);
        }
        let decoder = self.zstd.as_mut().expect("just set");
        decoder.reinit().map_err(|e| e.to_string())?;
        let mut src = InBuffer::around(input);
        let mut dst = OutBuffer::around(&mut self.out[..]);
        // A cluster may hold several frames; keep going until the cluster is full.
        while dst.pos() < dst.capacity() {
            let before = (src.pos, dst.pos());
            decoder
                .run(&mut src, &mut dst)
                .map_err(|e| format!("zstd data is corrupt: {e}"))?;
            if (src.pos, dst.pos()) == before {
                return Err("zstd data ends before the cluster is complete".into());
            }
        }
        Ok(())
    }
}

fn inflate(
    inflate: &mut Decompress,
    zlib_header: bool,
    input: &[u8],
    out: &mut [u8],
) -> Result<(), String> {
    inflate.reset(zlib_header);
    let status = inflate
        .decompress(input, out, FlushDecompress::Finish)
        .map_err(|e| format!("deflate data is corrupt: {e}"))?;
    let produced = inflate.total_out() as usize;
    match status {
        _ if produced == out.len() => Ok(()),
        Status::StreamEnd => Err(format!("decodes to {produced} bytes, not a whole block")),
        _ => Err("deflate data ends before the block is complete".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn deflate_and_zstd_round_trip() {
        let cluster: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
        let mut deflate =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        deflate.write_all(&cluster).unwrap();
        let mut packed = deflate.finish().unwrap();
        packed.extend_from_slice(&[0u8; 300]); // sector padding
        let mut decoder = BlockDecoder::default();
        assert_eq!(
            decoder
                .decode(BlockCodec::Deflate, &packed, 65536, 0)
                .unwrap(),
            &cluster[..]
        );

        let mut packed = zstd::bulk::compress(&cluster, 1).unwrap();
        packed.extend_from_slice(&[0u8; 100]);
        assert_eq!(
            decoder.decode(BlockCodec::Zstd, &packed, 65536, 0).unwrap(),
            &cluster[..]
        );
    }

    #[test]
    fn short_or_corrupt_clusters_fail() {
        let cluster = vec![7u8; 65536];
        let packed = zstd::bulk::compress(&cluster, 1).unwrap();
        let mut decoder = BlockDecoder::default();
        let err = decoder
            .decode(
                BlockCodec::Zstd,
                &packed[..packed.len() / 2],
                65536,
                0x10000,
            )
            .unwrap_err();
        assert!(err.to_string().contains("virtual offset 0x10000"), "{err}");
        assert!(
            decoder
                .decode(BlockCodec::Deflate, &[0xff; 64], 65536, 0)
                .is_err()
        );
    }
}
