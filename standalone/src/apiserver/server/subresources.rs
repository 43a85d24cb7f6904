//! Requests that are not a stored object's verbs: pod logs, service account tokens and
//! access reviews.

use std::sync::Arc;

use futures_util::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::{Response, StatusCode, header};
use serde_json::{Value, json};
use tokio_stream::wrappers::ReceiverStream;

use super::http::{json_response, parse_json};
use super::{Body, Call, Handler};
use crate::apiserver::authz::Authorizer;
use crate::apiserver::errors::ApiError;
use crate::apiserver::identity::{ResourceAttributes, UserInfo};
use crate::apiserver::pod_log;
use crate::apiserver::resources::ResourceType;
use crate::apiserver::service_account_token::{ServiceAccountRef, TokenSpec};

impl Handler {
    /// `kubectl logs`: the pod's log file as text, followed while its container runs.
    pub(super) async fn pod_log(
        self: Arc<Self>,
        pods: ResourceType,
        call: &Call,
    ) -> Result<Response<Body>, ApiError> {
        let options = pod_log::LogOptions::parse(&call.query)?;
        let ns = call.path.namespace.clone().unwrap_or_default();
        let name = call.path.name.clone().ok_or(ApiError::NoSuchResource)?;
        let objects = self.objects.clone();
        let (get_pods, get_ns, get_name) = (pods.clone(), ns.clone(), name.clone());
        let pod = tokio::task::spawn_blocking(move || objects.get(&get_pods, &get_ns, &get_name))
            .await
            .map_err(ApiError::internal)??;
        let (file, container) = pod_log::log_file(&self.pod_state_dir, &pod, &options)?;
        let objects = self.objects.clone();
        let running = move || pod_log::container_running(&objects, &pods, &ns, &name, &container);
        let (out, chunks) = tokio::sync::mpsc::channel(8);
        tokio::task::spawn_blocking(move || {
            if let Err(err) = pod_log::stream(file, options, running, out) {
                tracing::warn!(%err, "reading a pod's log");
            }
        });
        let body = StreamBody::new(ReceiverStream::new(chunks).map(|chunk| Ok(Frame::data(chunk))));
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/plain")
            .body(BodyExt::boxed(body))
            .map_err(ApiError::internal)
    }

    /// `kubectl create token`: a TokenRequest for an existing service account.
    pub(super) fn token_request(&self, call: &Call) -> Result<Response<Body>, ApiError> {
        let namespace = call.path.namespace.clone().unwrap_or_default();
        let name = call.path.name.clone().ok_or(ApiError::MethodNotAllowed)?;
        let spec = TokenSpec::from_request(&parse_json(&call.body)?, &name)?;
        let mut account = ServiceAccountRef {
            namespace,
            name,
            uid: String::new(),
        };
        account.uid = self.service_account(&account)?;
        let answer = self.service_accounts.issue(&account, &spec)?;
        Ok(json_response(StatusCode::CREATED, &answer))
    }

    /// A SubjectAccessReview (about `spec.user`) or SelfSubjectAccessReview (about the
    /// requester), answered with `status.allowed` and nothing stored.
    pub(super) fn access_review(
        &self,
        rt: &ResourceType,
        call: &Call,
    ) -> Result<Response<Body>, ApiError> {
        let review = parse_json(&call.body)?;
        let spec = &review["spec"];
        let subject = if rt.plural == "selfsubjectaccessreviews" {
            call.user.clone()
        } else {
            let groups = spec["groups"]
                .as_array()
                .map(|g| {
                    g.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            UserInfo {
                name: spec["user"].as_str().unwrap_or_default().to_string(),
                groups,
            }
        };
        let Some(attributes) = spec.get("resourceAttributes") else {
            return Err(ApiError::Invalid {
                kind: rt.kind.clone(),
                name: String::new(),
                message: "spec.resourceAttributes: Required value: this server reviews resource requests only".into(),
            });
        };
        let attributes = ResourceAttributes::from_review(attributes);
        let allowed = Authorizer::new(&self.objects).allows(&subject, &attributes)?;
        Ok(json_response(
            StatusCode::CREATED,
            &answer_review(review, allowed),
        ))
    }
}

/// The review with its answer: as Kubernetes' RBAC authorizer, which has no opinion and so no
/// reason when no rule allows the request, a denial is `allowed: false` alone (`kubectl auth
/// can-i` then prints a bare `no`, which scripts compare against).
fn answer_review(mut review: Value, allowed: bool) -> Value {
    review["status"] = json!({ "allowed": allowed });
    review
}
