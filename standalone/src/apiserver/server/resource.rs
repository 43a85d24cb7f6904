//! A resource request: its subresource checked, RBAC asked, and the verb chosen.

use std::sync::Arc;

use hyper::{Method, Response, StatusCode};

use super::http::{json_response, parse_json};
use super::{Body, Call, Handler};
use crate::apiserver::authz::Authorizer;
use crate::apiserver::errors::ApiError;
use crate::apiserver::identity::ResourceAttributes;
use crate::apiserver::query::{is_true, persist_of};
use crate::apiserver::resources::ResourceType;
use crate::apiserver::store::Persist;

/// The authorization attributes of a resource request, as kube-apiserver derives them.
fn request_attributes(rt: &ResourceType, call: &Call) -> ResourceAttributes {
    let path = &call.path;
    let collection = path.name.is_none();
    let verb = match call.method {
        Method::GET if collection && is_true(call.query.get("watch")) => "watch",
        Method::GET if collection => "list",
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if collection => "deletecollection",
        Method::DELETE => "delete",
        _ => "",
    };
    ResourceAttributes {
        verb: verb.into(),
        group: rt.group.clone(),
        resource: rt.plural.clone(),
        subresource: path.subresource.clone().unwrap_or_default(),
        namespace: path.namespace.clone().unwrap_or_default(),
        name: path.name.clone().unwrap_or_default(),
    }
}

impl Handler {
    pub(super) async fn resource_json(
        self: Arc<Self>,
        call: Call,
    ) -> Result<Response<Body>, ApiError> {
        let path = &call.path;
        let rt = self
            .objects
            .registry
            .find(&path.group, &path.version, &path.plural)
            .ok_or(ApiError::NoSuchResource)?;
        if !rt.namespaced && path.namespace.is_some() {
            return Err(ApiError::NoSuchResource);
        }
        let pod_log = path.subresource.as_deref() == Some("log")
            && rt.group.is_empty()
            && rt.plural == "pods"
            && call.method == Method::GET;
        let token_request = path.subresource.as_deref() == Some("token")
            && rt.group.is_empty()
            && rt.plural == "serviceaccounts"
            && call.method == Method::POST;
        match path.subresource.as_deref() {
            None | Some("status") => {}
            Some("scale") if rt.scale.is_some() && path.name.is_some() => {}
            Some("log") if pod_log => {}
            Some("token") if token_request => {
                // Refused rather than ignored: ignoring it would make a dry run issue a token.
                if persist_of(&call.query)? == Persist::DryRun {
                    return Err(ApiError::BadRequest(
                        "dryRun is not supported for serviceaccounts/token".into(),
                    ));
                }
            }
            Some(_) => return Err(ApiError::NoSuchResource),
        }
        if !call.user.is_master() {
            let handler = self.clone();
            let attributes = request_attributes(&rt, &call);
            let user = call.user.clone();
            let allowed = tokio::task::spawn_blocking(move || {
                Authorizer::new(&handler.objects).allows(&user, &attributes)
            })
            .await
            .map_err(ApiError::internal)??;
            if !allowed {
                return Err(request_attributes(&rt, &call).forbidden(&call.user));
            }
        }
        if pod_log {
            return self.pod_log(rt, &call).await;
        }
        if token_request {
            let handler = self.clone();
            return tokio::task::spawn_blocking(move || handler.token_request(&call))
                .await
                .map_err(ApiError::internal)?;
        }
        if call.method == Method::GET && path.name.is_none() && is_true(call.query.get("watch")) {
            return self.watch(rt, &call);
        }
        if call.method == Method::POST && rt.group == "authorization.k8s.io" {
            let handler = self.clone();
            return tokio::task::spawn_blocking(move || handler.access_review(&rt, &call))
                .await
                .map_err(ApiError::internal)?;
        }
        if call.method == Method::POST && path.name.is_none() {
            if let Some(create) = self
                .virtual_creates
                .get(&(rt.group.clone(), rt.plural.clone()))
            {
                let body = parse_json(&call.body)?;
                let ns = path.namespace.clone().unwrap_or_default();
                let answer = create(&ns, body)?;
                return Ok(json_response(StatusCode::CREATED, &answer));
            }
        }
        if rt.create_only {
            return Err(ApiError::MethodNotAllowed);
        }
        let handler = self.clone();
        tokio::task::spawn_blocking(move || handler.resource_blocking(&rt, &call))
            .await
            .map_err(ApiError::internal)?
    }

    /// The verbs, run on a blocking thread: they wait on the database.
    pub(super) fn resource_blocking(
        &self,
        rt: &ResourceType,
        call: &Call,
    ) -> Result<Response<Body>, ApiError> {
        // Reads ignore `dryRun`, as kube-apiserver's do.
        let persist = match call.method {
            Method::GET => Persist::Commit,
            _ => persist_of(&call.query)?,
        };
        if call.path.subresource.as_deref() == Some("scale") {
            return self.scale(rt, call, persist);
        }
        match (&call.method, call.path.name.as_deref()) {
            (&Method::GET, None) => self.list(rt, call),
            (&Method::GET, Some(name)) => self.get(rt, call, name),
            (&Method::POST, None) => self.create(rt, call, persist),
            (&Method::PUT, Some(name)) => self.update(rt, call, name, persist),
            (&Method::PATCH, Some(name)) => self.patch(rt, call, name, persist),
            (&Method::DELETE, Some(name)) => self.delete(rt, call, name),
            (&Method::DELETE, None) => self.delete_collection(rt, call),
            _ => Err(ApiError::MethodNotAllowed),
        }
    }
}
