//! The `-form` upload routes: the image is the part named `file` of a `multipart/form-data`
//! body (what a browser or `curl -F file=@disk.img` sends). Parts before it are skipped;
//! the form is read by `multer`.

use bytes::Bytes;
use futures_util::Stream;

/// The name of the part that holds the image, as CDI's upload server expects it.
pub const FILE_PART: &str = "file";

/// Why the image could not be read out of a form.
#[derive(Debug, thiserror::Error)]
pub enum FormError {
    #[error("a form upload needs a multipart/form-data body with a boundary")]
    NoBoundary,
    #[error("the form has no part named \"{FILE_PART}\"")]
    NoFilePart,
    #[error("invalid multipart form: {0}")]
    Invalid(String),
    /// The body itself broke off (the client went away).
    #[error("{0}")]
    Interrupted(String),
}

impl From<multer::Error> for FormError {
    fn from(err: multer::Error) -> Self {
        match err {
            multer::Error::StreamReadFailed(err) => Self::Interrupted(err.to_string()),
            other => Self::Invalid(other.to_string()),
        }
    }
}

/// The boundary a `Content-Type` header announces.
pub fn boundary(content_type: Option<&str>) -> Result<String, FormError> {
    content_type
        .and_then(|ct| multer::parse_boundary(ct).ok())
        .ok_or(FormError::NoBoundary)
}

/// The bytes of a form's `file` part, chunk by chunk, as the body arrives.
pub struct FilePart {
    form: multer::Multipart<'static>,
    field: Option<multer::Field<'static>>,
}

impl FilePart {
    pub fn new<S, O, E>(body: S, boundary: String) -> Self
    where
        S: Stream<Item = Result<O, E>> + Send + 'static,
        O: Into<Bytes> + 'static,
        E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
    {
        Self {
            form: multer::Multipart::new(body, boundary),
            field: None,
        }
    }

    /// The next chunk of the `file` part; `None` once it has ended.
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, FormError> {
        loop {
            if let Some(field) = &mut self.field {
                return Ok(field.chunk().await?);
            }
            let field = self.form.next_field().await?.ok_or(FormError::NoFilePart)?;
            if field.name() == Some(FILE_PART) {
                self.field = Some(field);
            } else {
                tracing::info!(name = ?field.name(), "ignoring form part");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(parts: &[&[u8]]) -> impl Stream<Item = Result<Bytes, std::io::Error>> + use<> {
        let chunks: Vec<Result<Bytes, std::io::Error>> = parts
            .iter()
            .map(|p| Ok(Bytes::copy_from_slice(p)))
            .collect();
        futures_util::stream::iter(chunks)
    }

    async fn read_all(mut part: FilePart) -> Result<Vec<u8>, FormError> {
        let mut out = Vec::new();
        while let Some(chunk) = part.next_chunk().await? {
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    const FORM: &[u8] = b"--XyZ\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhello\r\n\
        --XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"d.img\"\r\n\
        Content-Type: application/octet-stream\r\n\r\nDISK\r\nBYTES\r\n--XyZ--\r\n";

    #[tokio::test]
    async fn the_file_part_is_read_after_skipping_the_others() {
        for split in [1, 7, FORM.len() / 2, FORM.len()] {
            let (a, b) = FORM.split_at(split.min(FORM.len()));
            let part = FilePart::new(body(&[a, b]), "XyZ".into());
            assert_eq!(read_all(part).await.unwrap(), b"DISK\r\nBYTES");
        }
    }

    #[tokio::test]
    async fn a_form_without_a_file_part_or_cut_short_is_refused_by_name() {
        let only_note =
            b"--XyZ\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nx\r\n--XyZ--\r\n";
        let err = read_all(FilePart::new(body(&[only_note]), "XyZ".into()))
            .await
            .unwrap_err();
        assert!(matches!(err, FormError::NoFilePart), "{err}");
        let cut = &FORM[..FORM.len() - 12];
        let err = read_all(FilePart::new(body(&[cut]), "XyZ".into()))
            .await
            .unwrap_err();
        assert!(matches!(err, FormError::Invalid(_)), "{err}");
    }

    #[test]
    fn the_boundary_comes_from_the_content_type() {
        assert_eq!(
            boundary(Some("multipart/form-data; boundary=abc")).unwrap(),
            "abc"
        );
        assert!(matches!(
            boundary(Some("application/octet-stream")),
            Err(FormError::NoBoundary)
        ));
        assert!(matches!(boundary(None), Err(FormError::NoBoundary)));
    }
}
