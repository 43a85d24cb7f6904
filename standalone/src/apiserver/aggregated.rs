//! Aggregated APIs, kube-aggregator's part of the API server: an API group served by an
//! in-process service (KubeVirt's `subresources.kubevirt.io` by virt-api), or a group-version
//! an APIService object registers with a proxy to its backend (see `apiservice`), listed in
//! discovery, and reached after this server's authentication and RBAC with the user passed
//! on in `X-Remote-User` / `X-Remote-Group`, as kube-aggregator's proxy passes it.
//!
//! The service gets the client's hyper request itself, so it can answer WebSocket upgrades
//! (`hyper::upgrade::on`, or axum's `WebSocketUpgrade`) as virt-api answers the console.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response};
use serde_json::{Value, json};

use super::errors::ApiError;
use super::identity::{ResourceAttributes, UserInfo};
use super::resources;

/// An error of a response body, as hyper takes it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of a response: any `http_body::Body` of `Bytes`, boxed (an axum body fits).
pub type AggregatedBody = UnsyncBoxBody<Bytes, BoxError>;

/// Answers one request to an aggregated API.
pub type AggregatedService = Arc<
    dyn Fn(Request<Incoming>) -> Pin<Box<dyn Future<Output = Response<AggregatedBody>> + Send>>
        + Send
        + Sync,
>;

/// An API group served by an in-process service, as an APIService registers one with
/// kube-aggregator. Requests under `/apis/{group}/{version}/...` for a listed version go to
/// `service`; `/apis`, `/apis/{group}` and `/apis/{group}/{version}` are answered from
/// `versions` and `resources`.
#[derive(Clone)]
pub struct AggregatedApi {
    /// The API group, e.g. `subresources.kubevirt.io`. It must not also be a CRD's group.
    pub group: String,
    /// The versions served, the preferred first, e.g. `["v1", "v1alpha3"]`.
    pub versions: Vec<String>,
    /// The `APIResource` entries each version lists in discovery, e.g.
    /// `{"name": "virtualmachines/start", "namespaced": true, "kind": "", "verbs": ["update"]}`.
    pub resources: Vec<Value>,
    pub service: AggregatedService,
}

impl AggregatedApi {
    /// An API answered by a tower service, such as an axum `Router` (its
    /// `WebSocketUpgrade` works: the request keeps hyper's upgrade handle).
    pub fn from_tower<S, B>(
        group: impl Into<String>,
        versions: Vec<String>,
        resources: Vec<Value>,
        service: S,
    ) -> AggregatedApi
    where
        S: tower_service::Service<Request<Incoming>, Response = Response<B>>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        // A clone of the service per request.
        let service: AggregatedService = Arc::new(move |request| {
            let mut service = service.clone();
            Box::pin(async move {
                // The service's error type need not be Send: it becomes a BoxError at once.
                let ready: Result<(), BoxError> = std::future::poll_fn(|cx| service.poll_ready(cx))
                    .await
                    .map_err(Into::into);
                let answered = match ready {
                    Ok(()) => service.call(request).await.map_err(Into::into),
                    Err(err) => Err(err),
                };
                match answered {
                    Ok(response) => response.map(|body| body.map_err(Into::into).boxed_unsync()),
                    Err(err) => unavailable(err),
                }
            })
        });
        AggregatedApi {
            group: group.into(),
            versions,
            resources,
            service,
        }
    }

    fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }

    fn group_versions(&self) -> Vec<Value> {
        self.versions
            .iter()
            .map(|v| json!({"groupVersion": format!("{}/{v}", self.group), "version": v}))
            .collect()
    }

    /// The `APIGroup` of `/apis/{group}` and of the `/apis` list.
    fn api_group(&self) -> Value {
        let versions = self.group_versions();
        json!({
            "name": self.group,
            "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
            "versions": versions,
        })
    }
}

impl fmt::Debug for AggregatedApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AggregatedApi")
            .field("group", &self.group)
            .field("versions", &self.versions)
            .field("resources", &self.resources.len())
            .finish_non_exhaustive()
    }
}

/// What kube-aggregator answers when the API's service fails: 503 with a Status.
pub(super) fn unavailable(err: BoxError) -> Response<AggregatedBody> {
    let status = ApiError::ServiceUnavailable(err.to_string());
    let body = http_body_util::Full::new(Bytes::from(status.status().to_string()))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut response = Response::new(body);
    *response.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A group-version an APIService registered with `spec.service`: every request under
/// `/apis/{group}/{version}`, its discovery document included, goes to `service` (the proxy
/// to the backend).
#[derive(Clone)]
pub struct RemoteVersion {
    pub group: String,
    pub version: String,
    /// `spec.versionPriority`: the highest of a group's versions is its preferred one.
    pub version_priority: i64,
    pub service: AggregatedService,
}

impl fmt::Debug for RemoteVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteVersion")
            .field("group", &self.group)
            .field("version", &self.version)
            .field("version_priority", &self.version_priority)
            .finish_non_exhaustive()
    }
}

/// The aggregated APIs of one server: in-process ones keyed by group, and the group-versions
/// APIServices registered; both change at any time. An in-process API hides every remote
/// version of its group.
#[derive(Default)]
pub struct AggregatedApis {
    in_process: RwLock<HashMap<String, AggregatedApi>>,
    remote: RwLock<BTreeMap<(String, String), RemoteVersion>>,
}

impl AggregatedApis {
    /// Adds `api`, replacing one registered for the same group.
    pub fn register(&self, api: AggregatedApi) {
        let mut apis = self.in_process.write().unwrap_or_else(|e| e.into_inner());
        apis.insert(api.group.clone(), api);
    }

    /// Replaces every APIService-registered version with `versions`.
    pub fn replace_remote(&self, versions: Vec<RemoteVersion>) {
        let versions = versions
            .into_iter()
            .map(|v| ((v.group.clone(), v.version.clone()), v))
            .collect();
        *self.remote.write().unwrap_or_else(|e| e.into_inner()) = versions;
    }

    /// Whether an in-process API serves `group`.
    pub fn serves_in_process(&self, group: &str) -> bool {
        self.in_process(group).is_some()
    }

    fn in_process(&self, group: &str) -> Option<AggregatedApi> {
        let apis = self.in_process.read().unwrap_or_else(|e| e.into_inner());
        apis.get(group).cloned()
    }

    /// The remote versions of `group`, preferred first; none when it is served in-process.
    fn remote_versions(&self, group: &str) -> Vec<RemoteVersion> {
        if self.serves_in_process(group) {
            return Vec::new();
        }
        let remote = self.remote.read().unwrap_or_else(|e| e.into_inner());
        let mut versions: Vec<RemoteVersion> = remote
            .values()
            .filter(|v| v.group == group)
            .cloned()
            .collect();
        versions.sort_by_key(|v| {
            (
                std::cmp::Reverse(v.version_priority),
                std::cmp::Reverse(resources::version_priority(&v.version)),
            )
        });
        versions
    }

    /// The service that answers `path`: an in-process API's below its discovery document
    /// (`/apis/{group}/{version}/...`), a remote version's from its discovery document down.
    pub fn for_path(&self, path: &str) -> Option<AggregatedService> {
        let mut segments = path.split('/').filter(|s| !s.is_empty());
        let (Some("apis"), Some(group), Some(version)) =
            (segments.next(), segments.next(), segments.next())
        else {
            return None;
        };
        let below_discovery = segments.next().is_some();
        if let Some(api) = self.in_process(group) {
            return (below_discovery && api.serves(version)).then_some(api.service);
        }
        let remote = self.remote.read().unwrap_or_else(|e| e.into_inner());
        remote
            .get(&(group.to_string(), version.to_string()))
            .map(|v| v.service.clone())
    }

    /// The `APIGroup` of an aggregated group, in-process or remote.
    fn api_group(&self, group: &str) -> Option<Value> {
        if let Some(api) = self.in_process(group) {
            return Some(api.api_group());
        }
        let versions: Vec<Value> = self
            .remote_versions(group)
            .iter()
            .map(
                |v| json!({"groupVersion": format!("{group}/{}", v.version), "version": v.version}),
            )
            .collect();
        let preferred = versions.first()?.clone();
        Some(json!({"name": group, "preferredVersion": preferred, "versions": versions}))
    }

    /// Every aggregated group's name.
    fn group_names(&self) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self
            .in_process
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        let remote = self.remote.read().unwrap_or_else(|e| e.into_inner());
        names.extend(remote.keys().map(|(group, _)| group.clone()));
        names
    }

    /// Adds the aggregated groups to the `/apis` APIGroupList, in name order.
    pub fn add_to_group_list(&self, list: &mut Value) {
        let names = self.group_names();
        if names.is_empty() {
            return;
        }
        let Some(groups) = list["groups"].as_array_mut() else {
            return;
        };
        groups.retain(|g| g["name"].as_str().is_none_or(|name| !names.contains(name)));
        groups.extend(names.iter().filter_map(|name| self.api_group(name)));
        groups.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    }

    /// `/apis/{group}` of an aggregated group.
    pub fn group(&self, group: &str) -> Option<Value> {
        let mut document = self.api_group(group)?;
        document["kind"] = json!("APIGroup");
        document["apiVersion"] = json!("v1");
        Some(document)
    }

    /// `/apis/{group}/{version}` of an in-process group: `Some(None)` when the group is
    /// aggregated but does not serve `version`. A remote version's is its backend's.
    pub fn resource_list(&self, group: &str, version: &str) -> Option<Option<Value>> {
        let api = self.in_process(group)?;
        if !api.serves(version) {
            return Some(None);
        }
        Some(Some(json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{group}/{version}"),
            "resources": api.resources,
        })))
    }
}

/// Whether `path` is a group-version's discovery document, `/apis/{group}/{version}`, which
/// every authenticated user may read (Kubernetes' `system:discovery`).
pub fn is_discovery_document(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    segments.len() == 3 && segments[0] == "apis"
}

/// Headers that speak for the requester: the client's credentials and impersonation, and
/// any identity it claims for the service to trust.
fn is_identity_header(name: &HeaderName) -> bool {
    let name = name.as_str();
    name == "authorization"
        || name.starts_with("impersonate-")
        || name == "x-remote-user"
        || name == "x-remote-group"
        || name == "x-remote-uid"
        || name.starts_with("x-remote-extra-")
}

/// Replaces the identity headers of a request with the authenticated user, as
/// kube-aggregator's proxy does: `X-Remote-User`, and an `X-Remote-Group` per group.
pub fn set_remote_user(headers: &mut HeaderMap, user: &UserInfo) {
    let claimed: Vec<HeaderName> = headers
        .keys()
        .filter(|name| is_identity_header(name))
        .cloned()
        .collect();
    for name in claimed {
        headers.remove(&name);
    }
    let remote_user = HeaderName::from_static("x-remote-user");
    let remote_group = HeaderName::from_static("x-remote-group");
    if let Ok(value) = HeaderValue::from_str(&user.name) {
        headers.insert(remote_user, value);
    }
    for group in &user.groups {
        if let Ok(value) = HeaderValue::from_str(group) {
            headers.append(remote_group.clone(), value);
        }
    }
}

/// The authorization attributes of a request to an aggregated API, as kube-apiserver's
/// RequestInfo derives them: `/apis/{group}/{version}/namespaces/{ns}/{resource}/{name}/
/// {subresource}/...`, with the verb from the method.
pub fn request_attributes(method: &Method, path: &str, query: Option<&str>) -> ResourceAttributes {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let group = segments.get(1).copied().unwrap_or_default();
    let mut parts = segments.get(3..).unwrap_or_default();
    let mut namespace = "";
    if parts.first() == Some(&"namespaces") && parts.len() > 1 {
        namespace = parts[1];
        if parts.len() > 2 {
            parts = &parts[2..];
        }
    }
    let resource = parts.first().copied().unwrap_or_default();
    let name = parts.get(1).copied().unwrap_or_default();
    let subresource = parts.get(2).copied().unwrap_or_default();
    let watch = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .any(|(key, value)| key == "watch" && super::query::is_true(Some(&value.into_owned())));
    let verb = match *method {
        Method::GET | Method::HEAD if name.is_empty() && watch => "watch",
        Method::GET | Method::HEAD if name.is_empty() => "list",
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if name.is_empty() => "deletecollection",
        Method::DELETE => "delete",
        _ => "",
    };
    ResourceAttributes {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api() -> AggregatedApi {
        AggregatedApi {
            group: "subresources.kubevirt.io".into(),
            versions: vec!["v1".into(), "v1alpha3".into()],
            resources: vec![json!({"name": "virtualmachines/start", "namespaced": true})],
            service: Arc::new(|_| Box::pin(async { unavailable("unused".into()) })),
        }
    }

    #[test]
    fn paths_below_discovery_go_to_the_service() {
        let apis = AggregatedApis::default();
        apis.register(api());
        let served = |path: &str| apis.for_path(path).is_some();
        assert!(served(
            "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/start"
        ));
        assert!(served("/apis/subresources.kubevirt.io/v1alpha3/version"));
        assert!(!served("/apis/subresources.kubevirt.io/v1"));
        assert!(!served("/apis/subresources.kubevirt.io/v2/version"));
        assert!(!served("/apis/kubevirt.io/v1/virtualmachines"));
        assert_eq!(
            apis.resource_list("subresources.kubevirt.io", "v1")
                .flatten()
                .unwrap()["groupVersion"],
            "subresources.kubevirt.io/v1"
        );
        assert_eq!(
            apis.resource_list("subresources.kubevirt.io", "v2"),
            Some(None)
        );
        assert_eq!(apis.resource_list("kubevirt.io", "v1"), None);
    }

    #[test]
    fn group_list_gains_the_group_in_order() {
        let apis = AggregatedApis::default();
        apis.register(api());
        let mut list = json!({"groups": [{"name": "apps"}, {"name": "whatever.io"}]});
        apis.add_to_group_list(&mut list);
        let names: Vec<&str> = list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["apps", "subresources.kubevirt.io", "whatever.io"]);
        assert_eq!(
            list["groups"][1]["preferredVersion"]["groupVersion"],
            "subresources.kubevirt.io/v1"
        );
    }

    fn remote(group: &str, version: &str, version_priority: i64) -> RemoteVersion {
        RemoteVersion {
            group: group.into(),
            version: version.into(),
            version_priority,
            service: Arc::new(|_| Box::pin(async { unavailable("unused".into()) })),
        }
    }

    #[test]
    fn remote_versions_are_proxied_from_discovery_down_in_priority_order() {
        let apis = AggregatedApis::default();
        apis.replace_remote(vec![
            remote("widgets.example.com", "v1beta1", 15),
            remote("widgets.example.com", "v1", 15),
            remote("widgets.example.com", "v2alpha1", 20),
            remote(api().group.as_str(), "v1", 100),
        ]);
        let served = |path: &str| apis.for_path(path).is_some();
        assert!(served("/apis/widgets.example.com/v1"));
        assert!(served(
            "/apis/widgets.example.com/v1beta1/namespaces/ns/widgets/w"
        ));
        assert!(!served("/apis/widgets.example.com/v2/widgets"));
        assert!(!served("/apis/widgets.example.com"));
        let group = apis.group("widgets.example.com").unwrap();
        let versions: Vec<&str> = group["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["version"].as_str().unwrap())
            .collect();
        assert_eq!(versions, ["v2alpha1", "v1", "v1beta1"]);
        assert_eq!(group["preferredVersion"]["version"], "v2alpha1");
        assert_eq!(apis.resource_list("widgets.example.com", "v1"), None);

        // Until an in-process API serves the group, a remote version answers for it.
        assert!(served("/apis/subresources.kubevirt.io/v1"));
        apis.register(api());
        assert!(!served("/apis/subresources.kubevirt.io/v1"));
        let group = apis.group("subresources.kubevirt.io").unwrap();
        assert_eq!(group["versions"].as_array().unwrap().len(), 2);

        apis.replace_remote(vec![]);
        assert!(apis.group("widgets.example.com").is_none());
    }

    #[test]
    fn identity_headers_are_replaced() {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("Bearer secret"));
        headers.insert("x-remote-user", HeaderValue::from_static("forged"));
        headers.insert("x-remote-extra-scopes", HeaderValue::from_static("all"));
        headers.insert("impersonate-user", HeaderValue::from_static("alice"));
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        set_remote_user(&mut headers, &UserInfo::impersonated("alice", vec![]));
        assert_eq!(headers["x-remote-user"], "alice");
        let groups: Vec<_> = headers.get_all("x-remote-group").iter().collect();
        assert_eq!(groups, ["system:authenticated"]);
        assert!(headers.get("authorization").is_none());
        assert!(headers.get("impersonate-user").is_none());
        assert!(headers.get("x-remote-extra-scopes").is_none());
        assert_eq!(headers["content-type"], "application/json");
    }

    #[test]
    fn attributes_follow_request_info() {
        let a = request_attributes(
            &Method::PUT,
            "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/start",
            None,
        );
        assert_eq!(
            (a.verb.as_str(), a.group.as_str(), a.namespace.as_str()),
            ("update", "subresources.kubevirt.io", "ns")
        );
        assert_eq!(
            (a.resource.as_str(), a.name.as_str(), a.subresource.as_str()),
            ("virtualmachines", "vm", "start")
        );
        let a = request_attributes(
            &Method::GET,
            "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vmi/vnc/screenshot",
            None,
        );
        assert_eq!((a.verb.as_str(), a.subresource.as_str()), ("get", "vnc"));
        let a = request_attributes(
            &Method::GET,
            "/apis/subresources.kubevirt.io/v1/version",
            None,
        );
        assert_eq!((a.verb.as_str(), a.resource.as_str()), ("list", "version"));
    }
}
