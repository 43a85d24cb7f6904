//! Stream decompression, detected from magic bytes and applied as many times as the data is
//! nested (an `.xz` of a `.gz` of a qcow2 is fine). Decoders run synchronously on a thread of
//! their own and hand buffers downstream: an async wrapper around a decoder costs 30-50%.

use std::io::{self, BufReader, Read};

use crate::error::ImportError;
use crate::format::detect::{Compression, PROBE_LEN, detect_compression};
use crate::stream::{PeekedReader, ThreadedReader};

/// Nesting deeper than this is refused: it is either a mistake or a decompression bomb.
const MAX_LAYERS: usize = 4;

/// The decompressed stream and the compressions that were peeled off, outermost first.
pub struct Decompressed {
    pub reader: PeekedReader<Box<dyn Read + Send>>,
    pub layers: Vec<Compression>,
}

/// Peels off every compression layer of `reader`. When there is at least one layer, the
/// decoders run on a separate thread so decompression overlaps with format conversion.
pub fn decompress(reader: Box<dyn Read + Send>) -> Result<Decompressed, ImportError> {
    let mut current = PeekedReader::new(reader, PROBE_LEN).map_err(ImportError::from_read)?;
    let mut layers = Vec::new();
    while let Some(codec) = detect_compression(current.head()) {
        if layers.len() == MAX_LAYERS {
            return Err(ImportError::Decompress {
                codec: codec.name(),
                source: io::Error::other(format!("more than {MAX_LAYERS} nested compressions")),
            });
        }
        layers.push(codec);
        let decoder = decoder(codec, Box::new(current))?;
        current = PeekedReader::new(decoder, PROBE_LEN).map_err(ImportError::from_read)?;
    }
    if layers.is_empty() {
        return Ok(Decompressed {
            reader: current,
            layers,
        });
    }
    let threaded: Box<dyn Read + Send> = Box::new(ThreadedReader::spawn("decompress", current));
    let reader = PeekedReader::new(threaded, PROBE_LEN).map_err(ImportError::from_read)?;
    Ok(Decompressed { reader, layers })
}

/// Removes exactly one layer the sender declared (a clone stream's transport compression).
/// Nothing inside is probed: a disk whose bytes happen to start like a compressed file is
/// passed on as it is.
pub fn decompress_declared(
    reader: Box<dyn Read + Send>,
    codec: Compression,
) -> Result<Decompressed, ImportError> {
    let decoder = decoder(codec, reader)?;
    let threaded: Box<dyn Read + Send> = Box::new(ThreadedReader::spawn("decompress", decoder));
    let reader = PeekedReader::new(threaded, PROBE_LEN).map_err(ImportError::from_read)?;
    Ok(Decompressed {
        reader,
        layers: vec![codec],
    })
}

fn decoder(
    codec: Compression,
    inner: Box<dyn Read + Send>,
) -> Result<Box<dyn Read + Send>, ImportError> {
    let buffered = BufReader::with_capacity(256 * 1024, inner);
    let decoder: Box<dyn Read + Send> = match codec {
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(buffered)),
        Compression::Xz => {
            // Concatenated .xz streams are valid (pxz, parallel xz writers produce them).
            let stream = liblzma::stream::Stream::new_stream_decoder(
                u64::MAX,
                liblzma::stream::CONCATENATED,
            )
            .map_err(|e| ImportError::Decompress {
                codec: "xz",
                source: e.into(),
            })?;
            Box::new(liblzma::bufread::XzDecoder::new_stream(buffered, stream))
        }
        Compression::Zstd => {
            let mut decoder =
                zstd::Decoder::with_buffer(buffered).map_err(|source| ImportError::Decompress {
                    codec: "zstd",
                    source,
                })?;
            // Streams written with `zstd --long` need the largest window.
            decoder
                .window_log_max(31)
                .map_err(|source| ImportError::Decompress {
                    codec: "zstd",
                    source,
                })?;
            Box::new(decoder)
        }
        Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(buffered)),
    };
    Ok(Box::new(DecodeErrors {
        inner: decoder,
        codec: codec.name(),
    }))
}

/// Names the codec in decode errors, so "invalid data" reads "decompressing xz stream: ...".
struct DecodeErrors<R> {
    inner: R,
    codec: &'static str,
}

impl<R: Read> Read for DecodeErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|err| {
            // Errors from upstream of the decoder (source, checksum) pass through unchanged.
            if err.get_ref().is_some_and(|e| e.is::<ImportError>()) {
                return err;
            }
            ImportError::Decompress {
                codec: self.codec,
                source: err,
            }
            .into_io()
        })
    }
}
