//! Routing a request: to an aggregated API, to a discovery or OpenAPI document, or to a resource.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode, header};
use serde_json::Value;

use super::http::{add_warning_first, error_response, json_response, unsync};
use super::{Body, Call, Handler};
use crate::apiserver::aggregated::{self, AggregatedBody, AggregatedService};
use crate::apiserver::authz::Authorizer;
use crate::apiserver::discovery;
use crate::apiserver::errors::ApiError;
use crate::apiserver::identity::UserInfo;
use crate::apiserver::openapi;
use crate::apiserver::openapi_v2;
use crate::apiserver::query::query_params;
use crate::apiserver::resources::ResourceType;
use crate::apiserver::route::{self, Route};

/// The largest request body accepted, as kube-apiserver's limit.
const MAX_BODY: usize = 3 * 1024 * 1024;

impl Handler {
    pub(super) async fn handle(
        self: Arc<Self>,
        request: Request<Incoming>,
    ) -> Response<AggregatedBody> {
        let user = match self.authenticate(&request).await {
            Ok(user) => user,
            Err(err) => return unsync(error_response(&err)),
        };
        let method = request.method().clone();
        let path = request.uri().path().to_string();
        let response = match self.aggregated.for_path(&path) {
            Some(service) => match self.clone().to_aggregated(service, request, user).await {
                Ok(response) => response,
                Err(err) => unsync(error_response(&err)),
            },
            None => unsync(match self.clone().dispatch(request, user).await {
                Ok(response) => response,
                Err(err) => error_response(&err),
            }),
        };
        tracing::debug!(%method, %path, status = response.status().as_u16(), "request");
        response
    }

    /// Hands a request to an aggregated API's service once RBAC allows it (a discovery
    /// document needs no rule), with the requester's identity in `X-Remote-User` /
    /// `X-Remote-Group` instead of its credentials.
    pub(super) async fn to_aggregated(
        self: Arc<Self>,
        service: AggregatedService,
        mut request: Request<Incoming>,
        user: UserInfo,
    ) -> Result<Response<AggregatedBody>, ApiError> {
        if !user.is_master() && !aggregated::is_discovery_document(request.uri().path()) {
            let attributes = aggregated::request_attributes(
                request.method(),
                request.uri().path(),
                request.uri().query(),
            );
            let handler = self.clone();
            let subject = user.clone();
            let checked = attributes.clone();
            let allowed = tokio::task::spawn_blocking(move || {
                Authorizer::new(&handler.objects).allows(&subject, &checked)
            })
            .await
            .map_err(ApiError::internal)??;
            if !allowed {
                return Err(attributes.forbidden(&user));
            }
        }
        aggregated::set_remote_user(request.headers_mut(), &user);
        Ok(service(request).await)
    }

    pub(super) async fn dispatch(
        self: Arc<Self>,
        request: Request<Incoming>,
        user: UserInfo,
    ) -> Result<Response<Body>, ApiError> {
        let route = route::parse(request.uri().path()).ok_or(ApiError::NoSuchResource)?;
        let types = || self.objects.registry.all();
        let ok = |body: Value| Ok(json_response(StatusCode::OK, &body));
        match route {
            Route::Version => ok(discovery::version()),
            Route::Health => Ok(Response::new(Full::new(Bytes::from_static(b"ok")).boxed())),
            Route::CoreVersions => ok(discovery::core_versions()),
            Route::Groups => {
                let mut list = discovery::group_list(&types());
                self.aggregated.add_to_group_list(&mut list);
                ok(list)
            }
            Route::Group(name) => ok(self
                .aggregated
                .group(&name)
                .or_else(|| discovery::group(&types(), &name))
                .ok_or(ApiError::NoSuchResource)?),
            Route::ResourceList { group, version } => {
                let list = match self.aggregated.resource_list(&group, &version) {
                    Some(aggregated) => aggregated,
                    None => discovery::resource_list(&types(), &group, &version),
                };
                ok(list.ok_or(ApiError::NoSuchResource)?)
            }
            Route::OpenApiV3Index => ok(openapi::openapi_v3_index(&types())),
            Route::OpenApiV3 { group, version } => {
                let schema_of = |rt: &ResourceType| crd_schema(rt, &version);
                ok(
                    openapi::openapi_v3_document(&types(), &group, &version, schema_of)
                        .ok_or(ApiError::NoSuchResource)?,
                )
            }
            Route::OpenApiV2 => {
                let schema_of = |rt: &ResourceType, version: &str| crd_schema(rt, version);
                let doc = openapi_v2::document(&types(), schema_of);
                let accept = request.headers().get(header::ACCEPT);
                let accept = accept.and_then(|v| v.to_str().ok()).unwrap_or("");
                if !accept.contains(openapi_v2::PROTOBUF_MEDIA_TYPE) {
                    return ok(doc);
                }
                let bytes = tokio::task::spawn_blocking(move || openapi_v2::to_protobuf(&doc))
                    .await
                    .map_err(|e| ApiError::Internal(format!("encoding /openapi/v2: {e}")))?;
                Ok(Response::builder()
                    .header(header::CONTENT_TYPE, openapi_v2::PROTOBUF_CONTENT_TYPE)
                    .body(Full::new(Bytes::from(bytes)).boxed())
                    .map_err(|e| ApiError::Internal(e.to_string()))?)
            }
            Route::Resource(path) => {
                // kube-apiserver warns of a deprecated version on every answer, errors too.
                let deprecation = self
                    .objects
                    .registry
                    .find(&path.group, &path.version, &path.plural)
                    .and_then(|rt| rt.deprecations.get(&path.version).cloned());
                let header = |name: header::HeaderName| {
                    request
                        .headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string()
                };
                let accept = header(header::ACCEPT);
                let content_type = header(header::CONTENT_TYPE);
                let method = request.method().clone();
                let query = query_params(request.uri().query());
                let body = Limited::new(request.into_body(), MAX_BODY)
                    .collect()
                    .await
                    .map_err(|e| ApiError::BadRequest(format!("reading the request body: {e}")))?
                    .to_bytes();
                let answer = self
                    .resource(Call {
                        method,
                        path,
                        query,
                        accept,
                        content_type,
                        body,
                        user,
                    })
                    .await;
                let Some(warning) = deprecation else {
                    return answer;
                };
                let mut response = answer.unwrap_or_else(|err| error_response(&err));
                add_warning_first(&mut response, warning);
                Ok(response)
            }
        }
    }
}

/// The `openAPIV3Schema` of `version` of a custom resource, for the published documents.
fn crd_schema(rt: &ResourceType, version: &str) -> Option<Value> {
    rt.schemas.as_ref()?.schema(version).cloned()
}
