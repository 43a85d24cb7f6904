//! Kubernetes' protobuf media type: protobuf request bodies read as JSON, and answers
//! encoded in protobuf when the client prefers it.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Response, header};
use serde_json::Value;

use super::{Body, Call, Handler};
use crate::apiserver::errors::ApiError;
use crate::apiserver::kube_protobuf::{self, ProtobufError};
use crate::apiserver::query::is_true;

/// A protobuf body that cannot be read: a kind without a message is the media type's
/// limit (415), anything else a malformed request (400).
fn protobuf_error(err: ProtobufError) -> ApiError {
    match err {
        ProtobufError::UnknownKind { .. } => ApiError::UnsupportedMediaType(err.to_string()),
        other => ApiError::BadRequest(other.to_string()),
    }
}

impl Handler {
    /// A resource request in either of Kubernetes' media types: a protobuf body is read
    /// into JSON before the verbs see it, and a plain object or list is answered in
    /// protobuf when the client prefers it. Streams (watch, logs), Tables and errors stay
    /// JSON, which every client that asks for protobuf also accepts.
    pub(super) async fn resource(
        self: Arc<Self>,
        mut call: Call,
    ) -> Result<Response<Body>, ApiError> {
        // A request without a body (a get, a list) may name a content type all the same.
        if kube_protobuf::is_media_type(&call.content_type) && !call.body.is_empty() {
            let object = self.protobuf.decode(&call.body).map_err(protobuf_error)?;
            call.body = Bytes::from(object.to_string());
            call.content_type = "application/json".into();
        }
        let streams =
            call.path.subresource.as_deref() == Some("log") || is_true(call.query.get("watch"));
        let answer_protobuf = kube_protobuf::preferred_in(&call.accept) && !streams;
        let response = self.clone().resource_json(call).await?;
        if !answer_protobuf {
            return Ok(response);
        }
        let (mut parts, body) = response.into_parts();
        let json = body.collect().await.map_err(ApiError::internal)?.to_bytes();
        // A list of thousands of objects takes a while: off the async threads.
        let handler = self.clone();
        let answer = json.clone();
        let encoded = tokio::task::spawn_blocking(move || handler.to_protobuf(&answer))
            .await
            .map_err(ApiError::internal)?;
        let body = match encoded {
            Some(message) => {
                parts.headers.insert(
                    header::CONTENT_TYPE,
                    header::HeaderValue::from_static(kube_protobuf::MEDIA_TYPE),
                );
                Bytes::from(message)
            }
            None => json,
        };
        Ok(Response::from_parts(parts, Full::new(body).boxed()))
    }

    /// A JSON answer as protobuf, or `None` when its kind has no message. A stored object
    /// its message cannot hold is answered in JSON too (which the client accepts as well),
    /// and the mismatch logged to be fixed.
    pub(super) fn to_protobuf(&self, json: &[u8]) -> Option<Vec<u8>> {
        let object = serde_json::from_slice::<Value>(json).ok()?;
        self.protobuf.encode(&object).unwrap_or_else(|err| {
            tracing::warn!(%err, "answering in JSON: the object does not fit its protobuf message");
            None
        })
    }
}
