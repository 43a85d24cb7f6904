//! The upload path on loopback for a test: certificates made with rcgen (one CA for the
//! proxy's public endpoint, one for upload server certificates, one for the proxy's client
//! certificate), a token issuer, an upload server writing into a temporary directory, and a
//! proxy routing one PVC to it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use ferrovirt_tests::TempDir;
pub use ferrovirt_tests::pki::Ca;
use importer::ContentType;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use uploadproxy::tls::{self, Identity};
use uploadproxy::{
    StaticResolver, UploadProxy, UploadProxyConfig, UploadServer, UploadServerConfig, UploadTarget,
    UploadTokenIssuer,
};

pub const NAMESPACE: &str = "default";
pub const PVC: &str = "disk";
pub const CLIENT_NAME: &str = "cdi-uploadproxy";

/// The certificates of one test.
pub struct Pki {
    /// Signs the proxy's public certificate; clients trust it.
    pub proxy_ca: Ca,
    /// Signs upload servers' certificates; the proxy trusts it.
    pub server_ca: Ca,
    /// Signs the proxy's client certificate; upload servers require it.
    pub client_ca: Ca,
}

impl Pki {
    pub fn new() -> Self {
        Self {
            proxy_ca: Ca::new("test proxy CA"),
            server_ca: Ca::new("test upload server CA"),
            client_ca: Ca::new("test upload client CA"),
        }
    }

    pub fn proxy_identity(&self) -> Identity {
        let (cert, key) = self.proxy_ca.leaf("cdi-uploadproxy.cdi.svc");
        Identity::from_pem(cert.as_bytes(), key.as_bytes()).unwrap()
    }

    pub fn server_tls(&self) -> Arc<rustls::ServerConfig> {
        let (cert, key) = self.server_ca.leaf("cdi-upload-disk.default.svc");
        let identity = Identity::from_pem(cert.as_bytes(), key.as_bytes()).unwrap();
        let roots = tls::roots_from_pem(self.client_ca.pem.as_bytes()).unwrap();
        tls::server_config(&identity, Some(roots)).unwrap()
    }

    /// The proxy's client side towards upload servers, with common name `cn`.
    pub fn upstream_tls(&self, cn: &str) -> rustls::ClientConfig {
        let (cert, key) = self.client_ca.leaf(cn);
        let identity = Identity::from_pem(cert.as_bytes(), key.as_bytes()).unwrap();
        let roots = tls::roots_from_pem(self.server_ca.pem.as_bytes()).unwrap();
        tls::client_config(roots, &identity).unwrap()
    }
}

/// Options of a harness.
#[derive(Clone)]
pub struct Options {
    pub server: fn(&mut UploadServerConfig),
    pub content_type: ContentType,
    pub ready_timeout: Duration,
    /// Register the upload server with the resolver (not: the PVC never gets ready).
    pub register: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            server: |_| {},
            content_type: ContentType::Kubevirt,
            ready_timeout: Duration::from_secs(2),
            register: true,
        }
    }
}

/// A running upload server and proxy.
pub struct Harness {
    pub dir: TempDir,
    pub pki: Pki,
    pub issuer: UploadTokenIssuer,
    pub server: Arc<UploadServer>,
    pub server_url: String,
    pub proxy_url: String,
    pub proxy_ca_file: PathBuf,
    pub resolver: Arc<StaticResolver>,
    tasks: Vec<JoinHandle<()>>,
}

impl Harness {
    pub async fn start(options: Options) -> Self {
        let dir = TempDir::new("upload");
        let pki = Pki::new();
        let issuer = UploadTokenIssuer::load_or_create(&dir.join("keys")).unwrap();
        std::fs::create_dir_all(dir.join("archive")).unwrap();
        let mut config = UploadServerConfig::new(dir.join("disk.img"));
        config.archive_dir = dir.join("archive");
        config.client_name = Some(CLIENT_NAME.into());
        (options.server)(&mut config);
        let server = UploadServer::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server_url = format!(
            "https://localhost:{}",
            listener.local_addr().unwrap().port()
        );
        let server_task = server.serve(listener, pki.server_tls());

        let resolver = Arc::new(StaticResolver::new());
        if options.register {
            resolver.insert(
                NAMESPACE,
                PVC,
                UploadTarget {
                    base_url: server_url.clone(),
                    content_type: options.content_type,
                },
            );
        }
        let proxy = UploadProxy::new(UploadProxyConfig {
            validator: issuer.validator(),
            resolver: resolver.clone(),
            upstream_tls: pki.upstream_tls(CLIENT_NAME),
            ready_timeout: options.ready_timeout,
        })
        .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_url = format!(
            "https://localhost:{}",
            listener.local_addr().unwrap().port()
        );
        let proxy_tls = tls::server_config(&pki.proxy_identity(), None).unwrap();
        let proxy_task = proxy.serve(listener, proxy_tls);
        let proxy_ca_file = dir.join("proxy-ca.pem");
        std::fs::write(&proxy_ca_file, &pki.proxy_ca.pem).unwrap();
        Self {
            dir,
            pki,
            issuer,
            server,
            server_url,
            proxy_url,
            proxy_ca_file,
            resolver,
            tasks: vec![server_task, proxy_task],
        }
    }

    pub fn token(&self) -> String {
        self.issuer.issue(NAMESPACE, PVC).unwrap()
    }

    pub fn disk(&self) -> PathBuf {
        self.dir.join("disk.img")
    }

    pub fn url(&self, route: &str) -> String {
        format!("{}{route}", self.proxy_url)
    }

    /// A POST of an upload through the proxy, with a valid token; the body and any other
    /// headers are the caller's.
    pub fn upload_request(&self) -> reqwest::RequestBuilder {
        self.client()
            .post(self.url("/v1beta1/upload"))
            .bearer_auth(self.token())
    }

    /// A reqwest client trusting the proxy's CA.
    pub fn client(&self) -> reqwest::Client {
        let roots = tls::roots_from_pem(self.pki.proxy_ca.pem.as_bytes()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        reqwest::Client::builder()
            .use_preconfigured_tls(config)
            .no_proxy()
            .build()
            .unwrap()
    }

    /// `curl` against the proxy with the test CA; `args` come after the common ones.
    pub fn curl(&self, args: &[&str]) -> CurlResult {
        let output = Command::new("curl")
            .args(["-sS", "--cacert"])
            .arg(&self.proxy_ca_file)
            .args(["-w", "\n%{http_code}"])
            .args(args)
            .output()
            .expect("running curl");
        CurlResult::from(output)
    }

    /// Waits for the upload to complete (async routes answer before it does).
    pub async fn completed(&self) {
        tokio::time::timeout(Duration::from_secs(60), self.server.succeeded())
            .await
            .expect("the upload completes");
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// What curl printed: the body and the status code.
pub struct CurlResult {
    pub status: u16,
    pub body: String,
    pub stderr: String,
}

impl From<Output> for CurlResult {
    fn from(output: Output) -> Self {
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let (body, code) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
        Self {
            status: code.trim().parse().unwrap_or(0),
            body: body.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

pub fn sha256(path: &Path) -> String {
    ferrovirt_tests::sha256_file(path).unwrap()
}
