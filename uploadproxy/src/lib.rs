//! CDI's upload path: upload tokens ([`token`]), the upload proxy that checks them and
//! forwards bodies ([`proxy`]), and the per-upload server that feeds a body through the
//! import pipeline ([`server`]). See docs/upload.md.

pub mod form;
pub mod fuzzing;
pub mod proxy;
pub mod resolver;
pub mod routes;
pub mod server;
pub mod tls;
pub mod token;

pub use proxy::{UploadProxy, UploadProxyConfig};
pub use resolver::{Resolution, StaticResolver, UploadServerResolver, UploadTarget};
pub use server::{UploadServer, UploadServerConfig};
pub use token::{TokenError, UploadClaims, UploadTokenIssuer, UploadTokenValidator};
