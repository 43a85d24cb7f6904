//! CDI's aggregated API on a cluster, as cdi-apiserver serves it behind APIService
//! `v1beta1.upload.cdi.kubevirt.io`: discovery of `upload.cdi.kubevirt.io/v1beta1`, and
//! the create of an UploadTokenRequest, which is answered (never stored) with an upload
//! token for the named PVC. Only requests kube-aggregator forwards are served, for users a
//! SubjectAccessReview lets create `uploadtokenrequests` in the namespace.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use kube::Client;
use serde_json::{Value, json};
use uploadproxy::UploadTokenIssuer;
use uploadproxy::tls::Peer;

use crate::cluster::front_proxy::FrontProxy;
use crate::upload::tokens::{GROUP, PLURAL};
use crate::webhooks::review::respond;

const VERSION: &str = "v1beta1";
/// The largest request body read (a request names one PVC).
const MAX_BODY: usize = 64 * 1024;

/// Whether `path` is this API's.
pub fn serves(path: &str) -> bool {
    path.strip_prefix("/apis/")
        .and_then(|rest| rest.strip_prefix(GROUP))
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The aggregated API: the signing key, and who may ask (no front proxy: the cluster has
/// no aggregation layer, and every request is refused).
pub struct UploadTokenApi {
    pub client: Client,
    pub issuer: Arc<UploadTokenIssuer>,
    pub front_proxy: Option<FrontProxy>,
}

/// What a request asks of the API.
#[derive(Debug, PartialEq)]
enum Route<'a> {
    Group,
    Resources,
    Create { namespace: &'a str },
    Unknown,
}

fn route<'a>(method: &Method, path: &'a str) -> Route<'a> {
    let rest = path
        .strip_prefix("/apis/")
        .and_then(|rest| rest.strip_prefix(GROUP))
        .unwrap_or_default();
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    match (method, segments.as_slice()) {
        (&Method::GET, []) => Route::Group,
        (&Method::GET, [VERSION]) => Route::Resources,
        (&Method::POST, [VERSION, "namespaces", namespace, PLURAL]) => Route::Create { namespace },
        _ => Route::Unknown,
    }
}

impl UploadTokenApi {
    pub async fn handle(&self, request: Request<Incoming>, peer: &Peer) -> Response<Full<Bytes>> {
        let path = request.uri().path().to_owned();
        match route(request.method(), &path) {
            Route::Group => respond(StatusCode::OK, &group_document()),
            Route::Resources => respond(StatusCode::OK, &resource_list()),
            Route::Create { namespace } => self.create(request, peer, namespace).await,
            Route::Unknown => status(
                StatusCode::NOT_FOUND,
                "NotFound",
                "the server could not find the requested resource",
            ),
        }
    }

    async fn create(
        &self,
        request: Request<Incoming>,
        peer: &Peer,
        namespace: &str,
    ) -> Response<Full<Bytes>> {
        let Some(front_proxy) = &self.front_proxy else {
            let message = "the cluster has no front proxy (requestheader-client-ca-file) to trust";
            return status(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                message,
            );
        };
        let Some(user) = front_proxy.user(peer, request.headers()) else {
            let message = "the request did not come through the API server's front proxy";
            return status(StatusCode::UNAUTHORIZED, "Unauthorized", message);
        };
        let attributes = ResourceAttributes {
            verb: Some("create".into()),
            group: Some(GROUP.into()),
            version: Some(VERSION.into()),
            resource: Some(PLURAL.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        };
        match crate::cluster::front_proxy::may(&self.client, &user, attributes).await {
            Ok(true) => {}
            Ok(false) => {
                let message = format!(
                    "{PLURAL}.{GROUP} is forbidden: User \"{}\" cannot create resource \"{PLURAL}\" in API group \"{GROUP}\" in the namespace \"{namespace}\"",
                    user.username
                );
                return status(StatusCode::FORBIDDEN, "Forbidden", &message);
            }
            Err(err) => {
                let message = format!("reviewing the user's access: {err}");
                return status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &message);
            }
        }
        let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
            Ok(body) => body.to_bytes(),
            Err(err) => {
                let message = format!("reading the request body: {err}");
                return status(StatusCode::BAD_REQUEST, "BadRequest", &message);
            }
        };
        let body: Value = match serde_json::from_slice(&body) {
            Ok(body) => body,
            Err(err) => {
                let message = format!("the body is not a JSON UploadTokenRequest: {err}");
                return status(StatusCode::BAD_REQUEST, "BadRequest", &message);
            }
        };
        match crate::upload::tokens::answer(&self.issuer, namespace, body) {
            Ok(answer) => respond(StatusCode::CREATED, &answer),
            Err(err) => {
                let code = StatusCode::from_u16(err.code()).unwrap_or(StatusCode::BAD_REQUEST);
                respond(code, &err.status())
            }
        }
    }
}

fn group_version() -> String {
    format!("{GROUP}/{VERSION}")
}

fn group_document() -> Value {
    let version = json!({"groupVersion": group_version(), "version": VERSION});
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
           "versions": [version], "preferredVersion": version})
}

fn resource_list() -> Value {
    json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version(),
        "resources": [{"name": PLURAL, "singularName": "uploadtokenrequest", "namespaced": true,
                       "kind": "UploadTokenRequest", "verbs": ["create"]}],
    })
}

/// A Kubernetes Status answer.
fn status(code: StatusCode, reason: &str, message: &str) -> Response<Full<Bytes>> {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16()});
    respond(code, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_group_its_version_and_namespaced_creates_are_routed() {
        let base = "/apis/upload.cdi.kubevirt.io";
        assert!(serves(base) && serves(&format!("{base}/v1beta1")));
        assert!(!serves("/apis/upload.cdi.kubevirt.iox") && !serves("/datavolume-mutate"));
        assert_eq!(route(&Method::GET, base), Route::Group);
        assert_eq!(
            route(&Method::GET, &format!("{base}/v1beta1/")),
            Route::Resources
        );
        let create = format!("{base}/v1beta1/namespaces/team/uploadtokenrequests");
        assert_eq!(
            route(&Method::POST, &create),
            Route::Create { namespace: "team" }
        );
        assert_eq!(route(&Method::GET, &create), Route::Unknown);
        assert_eq!(
            route(
                &Method::POST,
                &format!("{base}/v1/namespaces/team/uploadtokenrequests")
            ),
            Route::Unknown
        );
        assert_eq!(
            route(
                &Method::POST,
                &format!("{base}/v1beta1/uploadtokenrequests")
            ),
            Route::Unknown
        );
    }
}
