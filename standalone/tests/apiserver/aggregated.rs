//! Aggregated APIs through the embedded API server, as virt-api's `subresources.kubevirt.io`
//! is served: a real server on loopback with an axum Router registered as the group's
//! service, driven by raw HTTPS requests (to see exactly what is sent and answered) and by
//! the machine's kubectl for discovery; and APIServices applied with kubectl, proxied to a
//! separately running HTTPS extension server that requires the front-proxy client
//! certificate published in `kube-system/extension-apiserver-authentication`.

use std::collections::HashMap;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use base64::Engine;
use ferrovirt_tests::kubectl::Kubectl;
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
        let mut all = vec!["--request-timeout=30s"];
        all.extend(args);
        Kubectl::new(&self.api_server.kubeconfig)
            .with_cache_dir(self.dir.path().join("kube-cache"))
            .run_async(&all, None)
            .await
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

// APIServices: a separately running extension API server registered with kubectl apply, as
// on a cluster, and reached through the proxy with the front-proxy client certificate.

const BACKEND_GROUP: &str = "backend.example.com";
const BACKEND_NAMESPACE: &str = "apis-test";
const WIDGET: &str = "/apis/backend.example.com/v1/namespaces/ns1/widgets/w1";

/// A real HTTPS extension API server on loopback, as virt-api is one: its serving certificate
/// is for `backend.apis-test.svc` from its own CA, and it takes only clients whose
/// certificate the ConfigMap's request-header CA issued to an allowed name.
struct ExtensionServer {
    port: u16,
    ca_pem: String,
    console_done: mpsc::UnboundedReceiver<()>,
}

impl ExtensionServer {
    async fn start(authentication: &Value) -> ExtensionServer {
        let data = &authentication["data"];
        let client_ca = data["requestheader-client-ca-file"].as_str().unwrap();
        let allowed: Vec<String> =
            serde_json::from_str(data["requestheader-allowed-names"].as_str().unwrap()).unwrap();
        let mut client_roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(client_ca.as_bytes()) {
            client_roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(client_roots),
            provider.clone(),
        )
        .build()
        .unwrap();
        let (ca_pem, cert_pem, key_pem) = serving_certificate("backend.apis-test.svc");
        let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (done, console_done) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let allowed = allowed.clone();
                let done = done.clone();
                tokio::spawn(async move {
                    // The handshake fails for a client without a certificate from the CA.
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let peer = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
                    let name = common_name(&peer);
                    assert!(allowed.contains(&name), "{name} is not an allowed name");
                    let service = hyper::service::service_fn(move |request| {
                        let done = done.clone();
                        let name = name.clone();
                        async move {
                            Ok::<_, std::convert::Infallible>(extension(request, name, done).await)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        ExtensionServer {
            port,
            ca_pem,
            console_done,
        }
    }
}

/// A CA and a serving certificate for `dns_name` it issued: (CA, certificate, key) PEM.
fn serving_certificate(dns_name: &str) -> (String, String, String) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "extension-ca");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let params = rcgen::CertificateParams::new(vec![dns_name.to_string()]).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

fn common_name(der: &CertificateDer<'_>) -> String {
    let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
    cert.subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// The extension API: its discovery document, an echoing console, and a report of every
/// other request (as `echo`, plus the client certificate's name).
async fn extension(
    mut request: hyper::Request<hyper::body::Incoming>,
    client: String,
    done: mpsc::UnboundedSender<()>,
) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    use http_body_util::BodyExt;
    let path = request.uri().path().to_string();
    let reply = |status: u16, body: String| {
        hyper::Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .unwrap()
    };
    let segments = path.split('/').filter(|s| !s.is_empty()).count();
    if segments == 3 {
        let list = json!({
            "kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": path.trim_start_matches("/apis/"),
            "resources": [{"name": "widgets", "singularName": "widget", "namespaced": true,
                           "kind": "Widget", "verbs": ["get", "list"]}],
        });
        return reply(200, list.to_string());
    }
    if path.ends_with("/console") {
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
        return hyper::Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header(header::CONNECTION, "Upgrade")
            .header(header::UPGRADE, "websocket")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
    }
    let (parts, body) = request.into_parts();
    let headers = |name: &str| -> Vec<String> {
        parts
            .headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap_or_default().to_string())
            .collect()
    };
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let report = json!({
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query(),
        "user": headers("x-remote-user"),
        "groups": headers("x-remote-group"),
        "authorization": headers("authorization"),
        "impersonate": headers("impersonate-user"),
        "client": client,
        "body": String::from_utf8_lossy(&body),
    });
    reply(200, report.to_string())
}

impl Server {
    /// `kubectl apply` of a YAML document.
    async fn apply(&self, yaml: &str) {
        let file = self.dir.path().join(format!("{}.yaml", next_file_name()));
        std::fs::write(&file, yaml).unwrap();
        self.kubectl_ok(&["apply", "-f", file.to_str().unwrap()])
            .await;
    }

    /// The APIService's Available condition once `accept` takes it (within 30 s).
    async fn wait_for_availability(&self, name: &str, accept: impl Fn(&Value) -> bool) -> Value {
        let path = format!("/apis/apiregistration.k8s.io/v1/apiservices/{name}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let apiservice = self.request("GET", &path, &[], "", false).await.json();
            let available = apiservice["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
                .cloned()
                .unwrap_or(Value::Null);
            if accept(&available) {
                return available;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name} never got there: {apiservice}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Requests `path` until it answers `code` (within 30 s), and returns that answer.
    async fn wait_for_code(&self, path: &str, code: u16) -> Answer {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let answer = self.request("GET", path, &[], "", false).await;
            if answer.status == code {
                return answer;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{path} answers {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A name unique within a test run, for files.
fn next_file_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("applied-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn backend_objects(port: u16, ca_pem: &str) -> String {
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        r#"
apiVersion: v1
kind: Namespace
metadata: {{name: {BACKEND_NAMESPACE}}}
---
apiVersion: v1
kind: Service
metadata: {{name: backend, namespace: {BACKEND_NAMESPACE}}}
spec:
  ports: [{{name: https, port: 443, targetPort: {port}}}]
---
apiVersion: v1
kind: Endpoints
metadata: {{name: backend, namespace: {BACKEND_NAMESPACE}}}
subsets:
- addresses: [{{ip: 127.0.0.1}}]
  ports: [{{name: https, port: {port}}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: v1.{BACKEND_GROUP}}}
spec:
  group: {BACKEND_GROUP}
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {{namespace: {BACKEND_NAMESPACE}, name: backend}}
  caBundle: {ca_bundle}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: v1beta1.{BACKEND_GROUP}}}
spec:
  group: {BACKEND_GROUP}
  version: v1beta1
  groupPriorityMinimum: 1000
  versionPriority: 20
  service: {{namespace: {BACKEND_NAMESPACE}, name: backend, port: 443}}
  insecureSkipTLSVerify: true
"#
    )
}

fn is_available(condition: &Value) -> bool {
    condition["status"] == "True"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiservices_proxy_to_their_backend() {
    let server = Server::start().await;
    let authentication = server
        .request(
            "GET",
            "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication",
            &[],
            "",
            false,
        )
        .await
        .json();
    assert!(authentication["data"].get("client-ca-file").is_none());
    let mut backend = ExtensionServer::start(&authentication).await;
    server
        .apply(&backend_objects(backend.port, &backend.ca_pem))
        .await;
    for version in ["v1", "v1beta1"] {
        let available = server
            .wait_for_availability(&format!("{version}.{BACKEND_GROUP}"), is_available)
            .await;
        assert_eq!(
            (&available["reason"], &available["message"]),
            (&json!("Passed"), &json!("all checks passed"))
        );
    }
    let table = server.kubectl_ok(&["get", "apiservice"]).await;
    let line = table
        .lines()
        .find(|l| l.starts_with("v1.backend.example.com "))
        .unwrap_or_else(|| panic!("no APIService line in\n{table}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        cells[..3],
        ["v1.backend.example.com", "apis-test/backend", "True"]
    );
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.lines().next().unwrap().contains("SERVICE"), "{table}");

    // The admin's request reaches the backend over the proxy's client certificate, as
    // the authenticated user, without the token; its body and query go through.
    let forged = ["X-Remote-User: mallory", "Content-Type: application/json"];
    let answer = server
        .request(
            "PUT",
            &format!("{WIDGET}?dryRun=All"),
            &forged,
            r#"{"size":3}"#,
            false,
        )
        .await;
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let seen = answer.json();
    assert_eq!(seen["path"], WIDGET);
    assert_eq!(seen["query"], "dryRun=All");
    assert_eq!(seen["method"], "PUT");
    assert_eq!(seen["body"], r#"{"size":3}"#);
    assert_eq!(seen["client"], "front-proxy-client");
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

    // An impersonated user needs RBAC first, then arrives as itself.
    let as_carol = ["Impersonate-User: carol"];
    let answer = server.request("GET", WIDGET, &as_carol, "", false).await;
    assert_status(&answer, 403, "Forbidden");
    server
        .apply(
            r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: widget-reader}
rules:
- {apiGroups: [backend.example.com], resources: [widgets], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: carol-reads-widgets}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: widget-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}
"#,
        )
        .await;
    let answer = server.request("GET", WIDGET, &as_carol, "", false).await;
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let seen = answer.json();
    assert_eq!(seen["user"], json!(["carol"]));
    assert_eq!(seen["groups"], json!(["system:authenticated"]));
    assert_eq!(seen["impersonate"], json!([]));
    // Discovery needs no rule.
    let answer = server
        .request("GET", "/apis/backend.example.com/v1", &as_carol, "", false)
        .await;
    assert_eq!(answer.json()["resources"][0]["name"], "widgets");

    // Discovery: the higher versionPriority is preferred; kubectl finds the resources.
    let group: Value = serde_json::from_str(
        &server
            .kubectl_ok(&["get", "--raw", "/apis/backend.example.com"])
            .await,
    )
    .unwrap();
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(group["preferredVersion"]["version"], "v1beta1");
    assert_eq!(group["versions"][1]["version"], "v1");
    let groups: Value =
        serde_json::from_str(&server.kubectl_ok(&["get", "--raw", "/apis"]).await).unwrap();
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == BACKEND_GROUP),
        "{groups}"
    );
    let out = server.kubectl(&["api-resources"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
    let resources = String::from_utf8(out.stdout).unwrap();
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("widgets ") && l.contains("backend.example.com/v1beta1")),
        "{resources}"
    );
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("apiservices ") && l.contains("apiregistration.k8s.io/v1")),
        "{resources}"
    );

    // A WebSocket upgrade is joined through to the backend's console.
    let console = "/apis/backend.example.com/v1/namespaces/ns1/widgets/w1/console";
    let mut stream = server.connect().await;
    let request = format!(
        "GET {console} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
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
    let answer = Answer::parse(&head);
    assert_eq!(answer.status, 101);
    assert_eq!(answer.header("upgrade"), Some("websocket"));
    assert_eq!(round_trip(&mut stream, b"hello\r").await, b"hello\r");
    assert_eq!(
        round_trip(&mut stream, &[0u8, 1, 2, 255]).await,
        [0u8, 1, 2, 255]
    );
    drop(stream);
    tokio::time::timeout(Duration::from_secs(10), backend.console_done.recv())
        .await
        .expect("the backend's console ends when the client leaves");

    // A caBundle that did not sign the backend's certificate: nothing reaches it.
    let wrong_ca = base64::engine::general_purpose::STANDARD.encode(
        authentication["data"]["requestheader-client-ca-file"]
            .as_str()
            .unwrap(),
    );
    server
        .apply(&format!(
            r#"
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: v1alpha1.{BACKEND_GROUP}}}
spec:
  group: {BACKEND_GROUP}
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 5
  service: {{namespace: {BACKEND_NAMESPACE}, name: backend}}
  caBundle: {wrong_ca}
"#
        ))
        .await;
    let available = server
        .wait_for_availability("v1alpha1.backend.example.com", |c| c["status"] == "False")
        .await;
    assert_eq!(available["reason"], "FailedDiscoveryCheck");
    let alpha = "/apis/backend.example.com/v1alpha1/namespaces/ns1/widgets/w1";
    let answer = server.request("GET", alpha, &[], "", false).await;
    assert_status(&answer, 503, "ServiceUnavailable");
    let message = answer.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("error trying to reach service: tls:"),
        "{message}"
    );
    server
        .kubectl_ok(&["delete", "apiservice", "v1alpha1.backend.example.com"])
        .await;

    // Without endpoints: 503 naming them, and the APIService unavailable.
    server
        .kubectl_ok(&["delete", "endpoints", "backend", "-n", BACKEND_NAMESPACE])
        .await;
    let answer = server.request("GET", WIDGET, &[], "", false).await;
    assert_status(&answer, 503, "ServiceUnavailable");
    let message = answer.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains(r#"endpoints for service "apis-test/backend" not found"#),
        "{message}"
    );
    let available = server
        .wait_for_availability("v1.backend.example.com", |c| c["status"] == "False")
        .await;
    assert_eq!(available["reason"], "EndpointsNotFound");
    let table = server.kubectl_ok(&["get", "apiservice"]).await;
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("v1.backend.example.com ") && l.contains(" False ")),
        "{table}"
    );

    // Deleting the APIService unregisters its version; the last one, the group.
    server
        .kubectl_ok(&["delete", "apiservice", "v1.backend.example.com"])
        .await;
    assert_status(&server.wait_for_code(WIDGET, 404).await, 404, "NotFound");
    let beta = "/apis/backend.example.com/v1beta1/namespaces/ns1/widgets/w1";
    assert_status(
        &server.request("GET", beta, &[], "", false).await,
        503,
        "ServiceUnavailable",
    );
    server
        .kubectl_ok(&["delete", "apiservice", "v1beta1.backend.example.com"])
        .await;
    server.wait_for_code(beta, 404).await;
    let answer = server
        .request("GET", "/apis/backend.example.com", &[], "", false)
        .await;
    assert_status(&answer, 404, "NotFound");
    server.api_server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_apis_win_and_local_apiservices_are_available() {
    let server = Server::start().await;
    server
        .apply(
            r#"
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.subresources.kubevirt.io}
spec:
  group: subresources.kubevirt.io
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {namespace: kubevirt, name: virt-api}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.apps}
spec:
  group: apps
  version: v1
  groupPriorityMinimum: 17800
  versionPriority: 15
"#,
        )
        .await;
    let available = server
        .wait_for_availability("v1.subresources.kubevirt.io", |c| c["status"] == "False")
        .await;
    assert_eq!(available["reason"], "ServedInProcess");
    let local = server.wait_for_availability("v1.apps", is_available).await;
    assert_eq!(local["reason"], "Local");
    let table = server.kubectl_ok(&["get", "apiservices"]).await;
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()[..3] == ["v1.apps", "Local", "True"]),
        "{table}"
    );

    // The in-process service still answers, and discovery is still its own.
    let answer = server.request("PUT", START, &[], "{}", false).await;
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(answer.json()["path"], START);
    let list = server
        .request("GET", "/apis/subresources.kubevirt.io/v1", &[], "", false)
        .await
        .json();
    assert_eq!(list["resources"][0]["name"], "expand-vm-spec");

    // An APIService may not take over a group this server serves itself, nor be misnamed.
    server
        .apply(
            r#"
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.rbac.authorization.k8s.io}
spec:
  group: rbac.authorization.k8s.io
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {namespace: x, name: takeover}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: wrong-name}
spec:
  group: widgets.example.com
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {namespace: x, name: widgets}
"#,
        )
        .await;
    for (name, says) in [
        (
            "v1.rbac.authorization.k8s.io",
            "served by this API server itself",
        ),
        ("wrong-name", "metadata.name must be v1.widgets.example.com"),
    ] {
        let refused = server
            .wait_for_availability(name, |c| c["status"] == "False")
            .await;
        assert_eq!(refused["reason"], "InvalidSpec", "{refused}");
        assert!(
            refused["message"]
                .as_str()
                .unwrap_or_default()
                .contains(says),
            "{refused}"
        );
    }
    server.kubectl_ok(&["get", "clusterroles"]).await;
    server.api_server.stop();
}
