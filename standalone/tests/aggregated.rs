//! Aggregated APIs through the embedded API server, as virt-api's `subresources.kubevirt.io`
//! is served: a real server on loopback with an axum Router registered as the group's
//! service, driven by raw HTTPS requests (to see exactly what is sent and answered) and by
//! the machine's kubectl for discovery.

use std::collections::HashMap;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use base64::Engine;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use standalone::apiserver::{AggregatedApi, ApiServer, ApiServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

const GROUP: &str = "subresources.kubevirt.io";

/// What the test API reports about each request it gets: method, path, identity headers,
/// whether credentials reached it, and the body.
async fn echo(request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let headers = |name: &str| -> Vec<String> {
        parts
            .headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap_or_default().to_string())
            .collect()
    };
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let report = json!({
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "user": headers("x-remote-user"),
        "groups": headers("x-remote-group"),
        "authorization": headers("authorization"),
        "impersonate": headers("impersonate-user"),
        "body": String::from_utf8_lossy(&body),
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(report.to_string()))
        .unwrap()
}

/// The console: takes the connection over (as virt-api's WebSocket console does) and
/// echoes its bytes until the client, or the server's stop, ends it; then reports on `done`.
fn console(done: mpsc::UnboundedSender<()>) -> Router {
    Router::new().route(
        &format!("/apis/{GROUP}/v1/namespaces/{{ns}}/virtualmachineinstances/{{name}}/console"),
        get(move |mut request: Request| {
            let done = done.clone();
            async move {
                let protocol = request
                    .headers()
                    .get(header::SEC_WEBSOCKET_PROTOCOL)
                    .cloned();
                let upgrade = hyper::upgrade::on(&mut request);
                tokio::spawn(async move {
                    if let Ok(upgraded) = upgrade.await {
                        let mut io = TokioIo::new(upgraded);
                        let mut buf = [0u8; 1024];
                        while let Ok(n) = io.read(&mut buf).await {
                            if n == 0 || io.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                    let _ = done.send(());
                });
                let mut response = Response::builder()
                    .status(StatusCode::SWITCHING_PROTOCOLS)
                    .header(header::CONNECTION, "Upgrade")
                    .header(header::UPGRADE, "websocket");
                if let Some(protocol) = protocol {
                    response = response.header(header::SEC_WEBSOCKET_PROTOCOL, protocol);
                }
                response.body(Body::empty()).unwrap()
            }
        }),
    )
}

fn test_api(done: mpsc::UnboundedSender<()>) -> AggregatedApi {
    let router = console(done).fallback(echo);
    let resources = vec![
        json!({"name": "expand-vm-spec", "singularName": "", "namespaced": true, "kind": "", "verbs": ["update"]}),
        json!({"name": "virtualmachines/start", "singularName": "", "namespaced": true, "kind": "", "verbs": ["update"]}),
        json!({"name": "virtualmachineinstances/console", "singularName": "", "namespaced": true, "kind": "", "verbs": ["get"]}),
    ];
    AggregatedApi::from_tower(
        GROUP,
        vec!["v1".into(), "v1alpha3".into()],
        resources,
        router,
    )
}

/// A server with the test API, and what a raw client needs to reach it.
struct Server {
    dir: tempfile::TempDir,
    api_server: ApiServer,
    token: String,
    connector: TlsConnector,
    console_done: mpsc::UnboundedReceiver<()>,
}

impl Server {
    async fn start() -> Server {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let api_server = ApiServer::start(ApiServerConfig {
            data_dir: dir.path().join("data"),
            listen: "127.0.0.1:0".parse().unwrap(),
            crds: vec![],
            admission: vec![],
            virtual_creates: HashMap::new(),
            create_admission: Vec::new(),
        })
        .await
        .expect("server starts");
        let (done, console_done) = mpsc::unbounded_channel();
        api_server.register_aggregated_api(test_api(done));
        let kubeconfig = std::fs::read_to_string(&api_server.kubeconfig).unwrap();
        let field = |name: &str| {
            kubeconfig
                .lines()
                .find_map(|l| l.trim().strip_prefix(name))
                .unwrap_or_else(|| panic!("{name} in the kubeconfig"))
                .trim()
                .to_string()
        };
        let ca = base64::engine::general_purpose::STANDARD
            .decode(field("certificate-authority-data:"))
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&ca) {
            roots.add(cert.unwrap()).unwrap();
        }
        let tls = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Server {
            token: field("token:"),
            connector: TlsConnector::from(Arc::new(tls)),
            dir,
            api_server,
            console_done,
        }
    }

    async fn connect(&self) -> TlsStream<TcpStream> {
        let addr = self.api_server.addr;
        let tcp = TcpStream::connect(addr).await.unwrap();
        self.connector
            .connect(ServerName::from(addr.ip()), tcp)
            .await
            .unwrap()
    }

    /// Sends one request (`headers` as "Name: value" lines; the admin token unless
    /// `anonymous`) and reads the whole answer.
    async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[&str],
        body: &str,
        anonymous: bool,
    ) -> Answer {
        let mut stream = self.connect().await;
        let mut text = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.api_server.addr,
            body.len()
        );
        if !anonymous {
            text.push_str(&format!("Authorization: Bearer {}\r\n", self.token));
        }
        for header in headers {
            text.push_str(&format!("{header}\r\n"));
        }
        text.push_str("\r\n");
        text.push_str(body);
        stream.write_all(text.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        // A server that closes without TLS close_notify ends the read with an error.
        let _ = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut raw)).await;
        Answer::parse(&raw)
    }

    /// Runs kubectl, which must succeed; returns its stdout.
    async fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args).await;
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// kubectl against this server, on a blocking thread (the server shares this runtime).
    async fn kubectl(&self, args: &[&str]) -> Output {
        let mut command = Command::new("kubectl");
        let cache = self.dir.path().join("kube-cache");
        command
            .env("KUBECONFIG", &self.api_server.kubeconfig)
            .arg(format!("--cache-dir={}", cache.display()))
            .arg("--request-timeout=30s")
            .args(args);
        tokio::task::spawn_blocking(move || command.output().expect("kubectl runs"))
            .await
            .unwrap()
    }
}

/// An HTTP/1.1 answer: status, headers (lower-case names), and the body (de-chunked).
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn parse(raw: &[u8]) -> Answer {
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
        let head = String::from_utf8_lossy(&raw[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let mut body = raw[end + 4..].to_vec();
        if headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v == "chunked")
        {
            body = dechunk(&body);
        }
        Answer {
            status,
            headers,
            body,
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&self.body));
        })
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = data.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&data[..line_end]).unwrap();
        let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap();
        let start = line_end + 2;
        if size == 0 || data.len() < start + size {
            out.extend_from_slice(&data[start.min(data.len())..(start + size).min(data.len())]);
            break;
        }
        out.extend_from_slice(&data[start..start + size]);
        data = &data[(start + size + 2).min(data.len())..];
    }
    out
}

fn assert_status(answer: &Answer, code: u16, reason: &str) {
    assert_eq!(
        answer.status,
        code,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let status = answer.json();
    assert_eq!(
        (
            status["kind"].as_str(),
            status["code"].as_u64(),
            status["reason"].as_str()
        ),
        (Some("Status"), Some(code as u64), Some(reason)),
        "{status}"
    );
}

const START: &str = "/apis/subresources.kubevirt.io/v1/namespaces/ns1/virtualmachines/vm1/start";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_reach_the_service_as_the_authenticated_user() {
    let server = Server::start().await;

    // No token, or a wrong one: refused before the service sees anything.
    let answer = server.request("PUT", START, &[], "{}", true).await;
    assert_status(&answer, 401, "Unauthorized");
    let answer = server
        .request("PUT", START, &["Authorization: Bearer wrong"], "{}", true)
        .await;
    assert_status(&answer, 401, "Unauthorized");

    // The admin's PUT arrives untouched, its forged identity replaced by the real one.
    let forged = [
        "X-Remote-User: mallory",
        "X-Remote-Group: system:masters",
        "Content-Type: application/json",
    ];
    let answer = server
        .request("PUT", START, &forged, r#"{"paused":false}"#, false)
        .await;
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let seen = answer.json();
    assert_eq!(seen["method"], "PUT");
    assert_eq!(seen["path"], START);
    assert_eq!(seen["body"], r#"{"paused":false}"#);
    assert_eq!(seen["user"], json!(["ferrovirt-admin"]));
    assert_eq!(
        seen["groups"],
        json!(["system:masters", "system:authenticated"])
    );
    assert_eq!(
        seen["authorization"],
        json!([]),
        "the token is not passed on"
    );

    // v1alpha3 too; paths deeper than a resource's subresource go through as they are.
    let path = "/apis/subresources.kubevirt.io/v1alpha3/namespaces/ns1/virtualmachineinstances/vmi/vnc/screenshot";
    let answer = server.request("GET", path, &[], "", false).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["path"], path);

    // An impersonated user needs RBAC, as for any other resource; the service then sees
    // that user, not the admin.
    let as_bob = ["Impersonate-User: bob"];
    let answer = server.request("PUT", START, &as_bob, "{}", false).await;
    assert_status(&answer, 403, "Forbidden");
    let message = answer.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("cannot update resource \"virtualmachines/start\" in API group \"subresources.kubevirt.io\" in the namespace \"ns1\""),
        "{message}"
    );
    let rbac = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: vm-starter}
rules:
- {apiGroups: [subresources.kubevirt.io], resources: [virtualmachines/start], verbs: [update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: bob-starts-vms}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: vm-starter}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
"#;
    let rbac_file = server.dir.path().join("rbac.yaml");
    std::fs::write(&rbac_file, rbac).unwrap();
    server
        .kubectl_ok(&["apply", "-f", rbac_file.to_str().unwrap()])
        .await;
    let answer = server.request("PUT", START, &as_bob, "{}", false).await;
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let seen = answer.json();
    assert_eq!(seen["user"], json!(["bob"]));
    assert_eq!(seen["groups"], json!(["system:authenticated"]));
    assert_eq!(seen["impersonate"], json!([]));

    // Groups and versions nobody serves are 404 with a Status, as before.
    for path in [
        "/apis/nothing.example.com/v1/namespaces/ns1/things/a/start",
        "/apis/subresources.kubevirt.io/v2/namespaces/ns1/virtualmachines/vm1/start",
        "/apis/subresources.kubevirt.io/v2",
        "/apis/nothing.example.com",
    ] {
        let answer = server.request("GET", path, &[], "", false).await;
        assert_status(&answer, 404, "NotFound");
    }
    server.api_server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_discovers_the_group() {
    let server = Server::start().await;
    let raw: Value = serde_json::from_str(
        &server
            .kubectl_ok(&["get", "--raw", "/apis/subresources.kubevirt.io/v1"])
            .await,
    )
    .unwrap();
    assert_eq!(raw["kind"], "APIResourceList");
    assert_eq!(raw["groupVersion"], "subresources.kubevirt.io/v1");
    let names: Vec<&str> = raw["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "expand-vm-spec",
            "virtualmachines/start",
            "virtualmachineinstances/console"
        ]
    );

    let group: Value = serde_json::from_str(
        &server
            .kubectl_ok(&["get", "--raw", "/apis/subresources.kubevirt.io"])
            .await,
    )
    .unwrap();
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(group["preferredVersion"]["version"], "v1");
    assert_eq!(
        group["versions"][1]["groupVersion"],
        "subresources.kubevirt.io/v1alpha3"
    );

    let groups: Value =
        serde_json::from_str(&server.kubectl_ok(&["get", "--raw", "/apis"]).await).unwrap();
    let listed = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == GROUP)
        .unwrap_or_else(|| panic!("{GROUP} missing from /apis: {groups}"));
    assert_eq!(listed["versions"].as_array().unwrap().len(), 2);

    // Full discovery works (no "unable to retrieve the complete list of server APIs"),
    // and lists the group's top-level resource; subresources are not listed by kubectl.
    let out = server.kubectl(&["api-resources"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
    let resources = String::from_utf8(out.stdout).unwrap();
    let line = resources
        .lines()
        .find(|l| l.split_whitespace().next() == Some("expand-vm-spec"))
        .unwrap_or_else(|| panic!("expand-vm-spec missing:\n{resources}"));
    assert!(
        line.contains("subresources.kubevirt.io/v1") && line.contains("true"),
        "{line}"
    );
    let only = server
        .kubectl_ok(&["api-resources", "--api-group", GROUP, "-o", "name"])
        .await;
    assert_eq!(only.trim(), "expand-vm-spec.subresources.kubevirt.io");

    // A request kubectl sends through the same path reaches the service.
    let version: Value = serde_json::from_str(
        &server
            .kubectl_ok(&["get", "--raw", "/apis/subresources.kubevirt.io/v1/version"])
            .await,
    )
    .unwrap();
    assert_eq!(version["path"], "/apis/subresources.kubevirt.io/v1/version");
    assert_eq!(version["user"], json!(["ferrovirt-admin"]));
    server.api_server.stop();
}

const CONSOLE: &str =
    "/apis/subresources.kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/vmi/console";

/// Starts a WebSocket upgrade of the console and reads the answer's head.
async fn open_console(server: &Server) -> (Answer, TlsStream<TcpStream>) {
    let mut stream = server.connect().await;
    let request = format!(
        "GET {CONSOLE} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: plain.kubevirt.io\r\n\r\n",
        server.api_server.addr, server.token
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(
            stream.read(&mut byte).await.unwrap(),
            1,
            "the head ends early"
        );
        head.push(byte[0]);
    }
    (Answer::parse(&head), stream)
}

async fn round_trip(stream: &mut TlsStream<TcpStream>, bytes: &[u8]) -> Vec<u8> {
    stream.write_all(bytes).await.unwrap();
    let mut echoed = vec![0u8; bytes.len()];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut echoed))
        .await
        .expect("the echo arrives in time")
        .unwrap();
    echoed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_upgrades_round_trip_and_end_with_the_server() {
    let mut server = Server::start().await;
    let (answer, mut console) = open_console(&server).await;
    assert_eq!(answer.status, 101);
    assert_eq!(answer.header("upgrade"), Some("websocket"));
    assert_eq!(
        answer.header("sec-websocket-protocol"),
        Some("plain.kubevirt.io")
    );
    assert_eq!(round_trip(&mut console, b"hello\r").await, b"hello\r");
    assert_eq!(
        round_trip(&mut console, &[0u8, 1, 2, 255]).await,
        [0u8, 1, 2, 255]
    );

    // The client closing ends the service's side.
    drop(console);
    tokio::time::timeout(Duration::from_secs(10), server.console_done.recv())
        .await
        .expect("the console ends when its client leaves");

    // Stopping the server ends an open console and a watch in flight.
    let (_, mut console) = open_console(&server).await;
    assert_eq!(round_trip(&mut console, b"x").await, b"x");
    let mut watch = server.connect().await;
    let request = format!(
        "GET /api/v1/namespaces/default/configmaps?watch=true HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
        server.api_server.addr, server.token
    );
    watch.write_all(request.as_bytes()).await.unwrap();
    let mut first = [0u8; 12];
    watch.read_exact(&mut first).await.unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");

    server.api_server.stop();
    tokio::time::timeout(Duration::from_secs(10), server.console_done.recv())
        .await
        .expect("the console ends when the server stops");
    let drained = async {
        let mut rest = Vec::new();
        let _ = console.read_to_end(&mut rest).await;
        let _ = watch.read_to_end(&mut rest).await;
    };
    tokio::time::timeout(Duration::from_secs(10), drained)
        .await
        .expect("the console's and the watch's connections close when the server stops");
}
