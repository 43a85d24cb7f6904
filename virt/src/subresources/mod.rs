//! virt-api's subresource API, `subresources.kubevirt.io` v1 and v1alpha3, as an axum
//! router: the VM verbs start, stop and restart (decided in [`lifecycle`], carried out as
//! patches of the VM), the VMI verbs pause, unpause, softreboot and reset (sent to the
//! VMI's launcher), the guest agent's guestosinfo, userlist and filesystemlist, and the
//! serial console, VNC and port-forward as WebSockets (subprotocol `plain.kubevirt.io`, raw bytes in
//! binary frames), as upstream `virtctl` speaks them. On `ferrovirt up` the embedded API
//! server serves it as an aggregated API after its own authentication.

pub mod lifecycle;
mod streams;
pub mod to_handler;
mod vm_verbs;
mod vmi_verbs;

use std::time::Duration;

use api::kubevirt::VirtualMachineInstance;
use axum::Router;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use kube::{Api, Client};
use serde_json::{Value, json};

use tonic::transport::Channel;

use crate::handler::{LauncherLookupError, Launchers};
use crate::launcher::control::proto::cmd_client::CmdClient;

/// The API group.
pub const GROUP: &str = "subresources.kubevirt.io";
/// The versions served, preferred first.
pub const VERSIONS: [&str; 2] = ["v1", "v1alpha3"];
/// How long a verb waits for a launcher's control socket.
const LAUNCHER_WAIT: Duration = Duration::from_secs(5);

/// What the handlers share.
#[derive(Clone)]
pub struct Subresources {
    pub client: Client,
    pub launchers: Launchers,
}

/// The prefix of every path of the group, `{version}` a path parameter.
const BASE: &str = "/apis/subresources.kubevirt.io/{version}";

/// The router answering every path of the group where virt-api and the launchers share a
/// machine (`ferrovirt up`).
pub fn router(state: Subresources) -> Router {
    api_routes()
        .with_state(state.client.clone())
        .merge(launcher_routes().with_state(state))
        .fallback(not_found)
}

/// virt-handler's share on a cluster: the paths answered by a VMI's launcher, which only
/// the VMI's node reaches. virt-api forwards them there.
pub fn node_router(state: Subresources) -> Router {
    launcher_routes().with_state(state).fallback(not_found)
}

/// virt-api's own share on a cluster: the group's version and health and the VM verbs,
/// which need the API alone; every other path goes to `launcher_paths`.
pub fn api_router(client: Client, launcher_paths: Router) -> Router {
    api_routes()
        .with_state(client)
        .fallback_service(launcher_paths)
}

/// The paths answered with the API alone.
fn api_routes() -> Router<Client> {
    let vm = format!("{BASE}/namespaces/{{namespace}}/virtualmachines/{{name}}");
    Router::new()
        .route("/apis/subresources.kubevirt.io", get(api_group))
        .route(BASE, get(resource_list))
        .route(&format!("{BASE}/version"), get(version))
        .route(&format!("{BASE}/healthz"), get(healthz))
        .route(&format!("{vm}/start"), put(vm_verbs::start))
        .route(&format!("{vm}/stop"), put(vm_verbs::stop))
        .route(&format!("{vm}/restart"), put(vm_verbs::restart))
}

/// The paths answered by a VMI's launcher.
fn launcher_routes() -> Router<Subresources> {
    let vm = format!("{BASE}/namespaces/{{namespace}}/virtualmachines/{{name}}");
    let vmi = format!("{BASE}/namespaces/{{namespace}}/virtualmachineinstances/{{name}}");
    Router::new()
        .route(&format!("{vmi}/pause"), put(vmi_verbs::pause))
        .route(&format!("{vmi}/unpause"), put(vmi_verbs::unpause))
        .route(&format!("{vmi}/softreboot"), put(vmi_verbs::soft_reboot))
        .route(&format!("{vmi}/reset"), put(vmi_verbs::reset))
        .route(&format!("{vmi}/guestosinfo"), get(vmi_verbs::guest_os_info))
        .route(&format!("{vmi}/userlist"), get(vmi_verbs::user_list))
        .route(
            &format!("{vmi}/filesystemlist"),
            get(vmi_verbs::filesystem_list),
        )
        .route(&format!("{vmi}/console"), get(streams::console))
        .route(&format!("{vmi}/vnc"), get(streams::vnc))
        .route(
            &format!("{vmi}/portforward/{{port}}"),
            get(streams::vmi_port_forward),
        )
        .route(
            &format!("{vmi}/portforward/{{port}}/{{protocol}}"),
            get(streams::vmi_port_forward),
        )
        .route(
            &format!("{vm}/portforward/{{port}}"),
            get(streams::vm_port_forward),
        )
        .route(
            &format!("{vm}/portforward/{{port}}/{{protocol}}"),
            get(streams::vm_port_forward),
        )
}

/// The APIResource entries discovery lists for each version.
pub fn discovery_resources() -> Vec<Value> {
    let verb = |name: &str, verbs: &[&str]| json!({"name": name, "singularName": "", "namespaced": true, "kind": "", "verbs": verbs});
    vec![
        verb("virtualmachines/start", &["update"]),
        verb("virtualmachines/stop", &["update"]),
        verb("virtualmachines/restart", &["update"]),
        verb("virtualmachineinstances/pause", &["update"]),
        verb("virtualmachineinstances/unpause", &["update"]),
        verb("virtualmachineinstances/softreboot", &["update"]),
        verb("virtualmachineinstances/reset", &["update"]),
        verb("virtualmachineinstances/console", &["get"]),
        verb("virtualmachineinstances/vnc", &["get"]),
        verb("virtualmachineinstances/portforward", &["get"]),
        verb("virtualmachines/portforward", &["get"]),
        verb("virtualmachineinstances/guestosinfo", &["get"]),
        verb("virtualmachineinstances/userlist", &["get"]),
        verb("virtualmachineinstances/filesystemlist", &["get"]),
    ]
}

/// A failed request as a Kubernetes `Status`.
#[derive(Debug)]
pub struct StatusError {
    code: StatusCode,
    reason: &'static str,
    message: String,
    details: Value,
}

impl StatusError {
    /// 409 worded as the API machinery words a conflict on `resource` `name`.
    pub fn conflict(resource: &str, name: &str, cause: &str) -> Self {
        Self {
            code: StatusCode::CONFLICT,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on {resource}.kubevirt.io \"{name}\": {cause}"
            ),
            details: json!({"name": name, "group": "kubevirt.io", "kind": resource}),
        }
    }

    pub fn not_found(resource: &str, name: &str) -> Self {
        Self {
            code: StatusCode::NOT_FOUND,
            reason: "NotFound",
            message: format!("{resource}.kubevirt.io \"{name}\" not found"),
            details: json!({"name": name, "group": "kubevirt.io", "kind": resource}),
        }
    }

    pub fn bad_request(message: String) -> Self {
        Self {
            code: StatusCode::BAD_REQUEST,
            reason: "BadRequest",
            message,
            details: Value::Null,
        }
    }

    pub fn internal(message: String) -> Self {
        Self {
            code: StatusCode::INTERNAL_SERVER_ERROR,
            reason: "InternalError",
            message: format!("Internal error occurred: {message}"),
            details: Value::Null,
        }
    }

    fn body(&self) -> Value {
        let mut status = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code.as_u16(),
        });
        if !self.details.is_null() {
            status["details"] = self.details.clone();
        }
        status
    }
}

impl IntoResponse for StatusError {
    fn into_response(self) -> Response {
        (self.code, axum::Json(self.body())).into_response()
    }
}

impl From<kube::Error> for StatusError {
    fn from(err: kube::Error) -> Self {
        match err {
            kube::Error::Api(status) => Self {
                code: StatusCode::from_u16(status.code)
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                reason: match status.code {
                    403 => "Forbidden",
                    404 => "NotFound",
                    409 => "Conflict",
                    _ => "InternalError",
                },
                message: status.message,
                details: Value::Null,
            },
            other => Self::internal(other.to_string()),
        }
    }
}

/// A request's options (an empty body is none); an unreadable body is a bad request.
fn options(body: &[u8]) -> Result<Value, StatusError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body).map_err(|e| {
        StatusError::bad_request(format!(
            "Can not unmarshal Request body to struct, error: {e}"
        ))
    })
}

/// Whether the options ask for `dryRun: ["All"]`.
fn dry_run(options: &Value) -> bool {
    options["dryRun"]
        .as_array()
        .is_some_and(|d| d.iter().any(|v| v == "All"))
}

/// The VMI, or KubeVirt's 404.
async fn fetch_vmi(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<VirtualMachineInstance, StatusError> {
    Api::<VirtualMachineInstance>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await?
        .ok_or_else(|| StatusError::not_found("virtualmachineinstance", name))
}

/// A client of the VMI's launcher. A VMI whose launcher pod is gone (it is stopping) is not
/// running: KubeVirt's 409, not an internal error.
async fn launcher(
    state: &Subresources,
    vmi: &VirtualMachineInstance,
) -> Result<CmdClient<Channel>, StatusError> {
    state
        .launchers
        .connect(vmi, LAUNCHER_WAIT)
        .await
        .map_err(|e| match e {
            LauncherLookupError::NoLauncher(name) => {
                StatusError::conflict("virtualmachineinstance", &name, "VMI is not running")
            }
            other => StatusError::internal(other.to_string()),
        })
}

/// The group's `APIGroup` discovery document, as kube-aggregator reads it from virt-api.
async fn api_group() -> axum::Json<Value> {
    let versions: Vec<Value> = VERSIONS
        .iter()
        .map(|v| json!({"groupVersion": format!("{GROUP}/{v}"), "version": v}))
        .collect();
    axum::Json(json!({
        "kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
        "versions": versions, "preferredVersion": versions[0],
    }))
}

/// A version's `APIResourceList`; 404 for a version the group does not serve.
async fn resource_list(Path(version): Path<String>) -> Result<axum::Json<Value>, StatusError> {
    if !VERSIONS.contains(&version.as_str()) {
        return Err(not_found().await);
    }
    Ok(axum::Json(json!({
        "kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{version}"),
        "resources": discovery_resources(),
    })))
}

async fn version() -> axum::Json<Value> {
    axum::Json(json!({
        "gitVersion": concat!("v", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": api::go_platform(),
    }))
}

async fn healthz() -> axum::Json<Value> {
    axum::Json(json!({"apiserver": "ok", "restful": "ok"}))
}

async fn not_found() -> StatusError {
    StatusError {
        code: StatusCode::NOT_FOUND,
        reason: "NotFound",
        message: "the server could not find the requested resource".into(),
        details: Value::Null,
    }
}
