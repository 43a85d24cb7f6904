//! The upload routes of CDI's API, shared by the proxy and the server, and the headers the
//! upload path reads.

/// The header a client may set to choose the content type (`kubevirt` or `archive`; a
/// clone source sends `blockdevice-clone`).
pub const CONTENT_TYPE_HEADER: &str = "x-cdi-content-type";
/// The content type of a host-assisted clone's stream: the source volume's raw bytes.
pub const BLOCKDEVICE_CLONE: &str = "blockdevice-clone";
/// CDI's content type of a filesystem volume's clone (a tar of it); Ferrovirt's clone
/// source takes it as a flag for a volume that holds `disk.img`, and sends its bytes as
/// [`BLOCKDEVICE_CLONE`].
pub const FILESYSTEM_CLONE: &str = "filesystem-clone";
/// Beyond CDI: the expected checksum of the uploaded bytes, `ALGORITHM:HEX`
/// (md5, sha1, sha256, sha512), verified when the upload ends.
pub const CHECKSUM_HEADER: &str = "x-checksum";
/// Beyond CDI: on HEAD, how many bytes of the upload the server has committed; on POST, the
/// offset in the upload at which the body starts (a resumed upload).
pub const OFFSET_HEADER: &str = "upload-offset";

/// How an upload route delivers the image and when it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Answer once the bytes are received, leaving the conversion running (`-async`).
    pub asynchronous: bool,
    /// The image is the part named `file` of a multipart form (`-form`).
    pub form: bool,
    /// The body is a tar archive to extract (`upload-archive`).
    pub archive: bool,
}

/// The routes of CDI's upload API, `v1beta1` and the `v1alpha1` aliases.
pub fn route(path: &str) -> Option<Route> {
    let name = path
        .strip_prefix("/v1beta1/")
        .or_else(|| path.strip_prefix("/v1alpha1/"))?;
    let (asynchronous, form, archive) = match name {
        "upload" => (false, false, false),
        "upload-async" => (true, false, false),
        "upload-form" => (false, true, false),
        "upload-form-async" => (true, true, false),
        "upload-archive" => (false, false, true),
        _ => return None,
    };
    Some(Route {
        asynchronous,
        form,
        archive,
    })
}

/// The archive route of the same API version as `path` (the proxy's rewrite for a PVC whose
/// content type is `archive`).
pub fn archive_path(path: &str) -> &'static str {
    if path.contains("alpha") {
        "/v1alpha1/upload-archive"
    } else {
        "/v1beta1/upload-archive"
    }
}

/// Escapes text for an HTML context: error bodies may echo names a user chose.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(
            route("/v1beta1/upload-form-async"),
            Some(Route {
                asynchronous: true,
                form: true,
                archive: false
            })
        );
        assert!(route("/v1alpha1/upload").is_some());
        assert!(route("/v1beta1/uploads").is_none());
        assert!(route("/healthz").is_none());
        assert_eq!(
            archive_path("/v1alpha1/upload-async"),
            "/v1alpha1/upload-archive"
        );
        assert_eq!(
            escape_html("<a href='x'>&\""),
            "&lt;a href=&#39;x&#39;&gt;&amp;&#34;"
        );
    }
}
