//! Uploads, as CDI serves them: `image-upload` (virtctl's verb), the upload proxy and its
//! resolver, the upload server pod, the upload tokens (the embedded API server's
//! UploadTokenRequest and cdi-apiserver's aggregated API on a cluster), the upload CAs, and
//! the uploads of `ferrovirt up`.

pub mod cas;
pub mod image_upload;
pub mod local;
pub mod proxy;
pub mod resolver;
pub mod server;
pub mod token_api;
pub mod tokens;
