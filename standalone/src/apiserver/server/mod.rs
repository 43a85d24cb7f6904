//! The HTTPS front of the API server: TLS on loopback, bearer-token authentication, and
//! the translation of requests into the verbs of [`Objects`] and back into JSON (objects,
//! lists, Tables, watch streams and Status errors), or their hand-over to an aggregated
//! API's service.

mod authn;
mod connection;
mod dispatch;
mod http;
mod media;
mod reads;
mod resource;
mod subresources;
mod writes;

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::Method;
use serde_json::Value;

use crate::apiserver::aggregated::AggregatedApis;
use crate::apiserver::errors::ApiError;
use crate::apiserver::identity::UserInfo;
use crate::apiserver::kube_protobuf;
use crate::apiserver::objects::Objects;
use crate::apiserver::route::ResourcePath;
use crate::apiserver::service_account_token::ServiceAccountTokens;

pub use connection::serve;

type Body = BoxBody<Bytes, Infallible>;

/// Answers creates of a resource that is not stored (UploadTokenRequest, access reviews).
pub type VirtualCreate = dyn Fn(&str, Value) -> Result<Value, ApiError> + Send + Sync;

pub struct Handler {
    pub objects: Arc<Objects>,
    pub token: String,
    /// Keyed by (group, plural).
    pub virtual_creates: HashMap<(String, String), Box<VirtualCreate>>,
    pub aggregated: Arc<AggregatedApis>,
    /// The node agent's state, where pods' logs are (`kubectl logs`).
    pub pod_state_dir: PathBuf,
    /// The protobuf messages of the built-in kinds.
    pub protobuf: kube_protobuf::Messages,
    /// Issues and checks service account tokens.
    pub service_accounts: ServiceAccountTokens,
}

/// What one resource request carries besides its path.
struct Call {
    method: Method,
    path: ResourcePath,
    query: HashMap<String, String>,
    accept: String,
    content_type: String,
    body: Bytes,
    user: UserInfo,
}
