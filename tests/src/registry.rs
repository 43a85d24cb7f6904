//! A real OCI registry on loopback (Debian's `docker-registry`), optionally with TLS, and
//! htpasswd basic auth or bearer tokens from a small token server, and test images: containerDisks assembled here as OCI image layouts
//! (single images and multi-platform indexes, layers plain, gzip or zstd) and pushed with
//! `skopeo copy --preserve-digests`, or packed as an `oci-archive`.

use std::fs::{self, File};
use std::io::{Seek, SeekFrom, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::{TempDir, fixture};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";

/// How a layer's tar is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerCompression {
    None,
    Gzip,
    Zstd,
}

/// One layer: files at paths inside the tar (`disk/` directories are added as needed).
#[derive(Debug, Clone)]
pub struct LayerSpec {
    pub files: Vec<(String, Vec<u8>)>,
    pub compression: LayerCompression,
}

impl LayerSpec {
    pub fn new(compression: LayerCompression) -> Self {
        Self {
            files: Vec::new(),
            compression,
        }
    }

    pub fn file(mut self, path: &str, contents: Vec<u8>) -> Self {
        self.files.push((path.to_string(), contents));
        self
    }

    /// A containerDisk layer: `disk/<name>` holding the fixture `name`.
    pub fn disk(compression: LayerCompression, name: &str) -> Self {
        Self::disk_file(compression, &fixture(name))
    }

    /// A containerDisk layer holding the file at `path` as `disk/<its name>`.
    pub fn disk_file(compression: LayerCompression, path: &Path) -> Self {
        let contents = fs::read(path).expect("reading a disk image");
        let name = path.file_name().expect("a file name").to_string_lossy();
        Self::new(compression).file(&format!("disk/{name}"), contents)
    }
}

/// One image of a given platform.
#[derive(Debug, Clone)]
pub struct ImageSpec {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
    pub layers: Vec<LayerSpec>,
}

impl ImageSpec {
    pub fn new(platform: &str, layers: Vec<LayerSpec>) -> Self {
        let parts: Vec<&str> = platform.split('/').collect();
        Self {
            os: parts[0].to_string(),
            architecture: parts[1].to_string(),
            variant: parts.get(2).map(|v| v.to_string()),
            layers,
        }
    }
}

/// An OCI image layout on disk, tagged `latest`.
pub struct OciLayout {
    dir: TempDir,
    /// The digest of the top manifest (the index, for a multi-platform layout).
    pub digest: String,
    /// The layer digests of each image, bottom layer first.
    pub layers: Vec<Vec<String>>,
}

impl OciLayout {
    pub const TAG: &'static str = "latest";

    /// A single-platform image.
    pub fn image(image: &ImageSpec) -> Self {
        let dir = TempDir::new("oci-layout");
        fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        let (manifest, size, layers) = write_image(dir.path(), image);
        write_layout_index(dir.path(), OCI_MANIFEST, &manifest, size);
        Self {
            dir,
            digest: manifest,
            layers: vec![layers],
        }
    }

    /// A multi-platform index of `images`.
    pub fn index(images: &[ImageSpec]) -> Self {
        let dir = TempDir::new("oci-layout");
        fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        let mut entries = Vec::new();
        let mut all_layers = Vec::new();
        for image in images {
            let (digest, size, layers) = write_image(dir.path(), image);
            let mut platform = json!({"architecture": image.architecture, "os": image.os});
            if let Some(variant) = &image.variant {
                platform["variant"] = json!(variant);
            }
            entries.push(json!({
                "mediaType": OCI_MANIFEST, "digest": digest, "size": size, "platform": platform
            }));
            all_layers.push(layers);
        }
        let index = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries});
        let (digest, size) = write_blob(dir.path(), &serde_json::to_vec(&index).unwrap());
        write_layout_index(dir.path(), OCI_INDEX, &digest, size);
        Self {
            dir,
            digest,
            layers: all_layers,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Packs the layout into an uncompressed tar, as `oci-archive:` expects.
    pub fn write_archive(&self, archive: &Path) {
        let mut builder = tar::Builder::new(File::create(archive).unwrap());
        builder.append_dir_all(".", self.path()).unwrap();
        builder.into_inner().unwrap().flush().unwrap();
    }
}

fn write_blob(layout: &Path, bytes: &[u8]) -> (String, usize) {
    let hex = hex::encode(Sha256::digest(bytes));
    fs::write(layout.join("blobs/sha256").join(&hex), bytes).unwrap();
    (format!("sha256:{hex}"), bytes.len())
}

fn write_layout_index(layout: &Path, media_type: &str, digest: &str, size: usize) {
    let index = json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": media_type, "digest": digest, "size": size,
            "annotations": {"org.opencontainers.image.ref.name": OciLayout::TAG}
        }]
    });
    fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&index).unwrap(),
    )
    .unwrap();
    fs::write(
        layout.join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
}

/// Writes the image's layers, config and manifest; returns the manifest's digest and size
/// and the layer digests.
fn write_image(layout: &Path, image: &ImageSpec) -> (String, usize, Vec<String>) {
    let mut layers = Vec::new();
    let mut diff_ids = Vec::new();
    let mut digests = Vec::new();
    for spec in &image.layers {
        let tar = layer_tar(spec);
        diff_ids.push(format!("sha256:{}", hex::encode(Sha256::digest(&tar))));
        let (blob, media_type) = match spec.compression {
            LayerCompression::None => (tar, "application/vnd.oci.image.layer.v1.tar"),
            LayerCompression::Gzip => {
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                encoder.write_all(&tar).unwrap();
                (
                    encoder.finish().unwrap(),
                    "application/vnd.oci.image.layer.v1.tar+gzip",
                )
            }
            LayerCompression::Zstd => (
                zstd::encode_all(&tar[..], 3).unwrap(),
                "application/vnd.oci.image.layer.v1.tar+zstd",
            ),
        };
        let (digest, size) = write_blob(layout, &blob);
        layers.push(json!({"mediaType": media_type, "digest": digest, "size": size}));
        digests.push(digest);
    }
    let mut config = json!({
        "architecture": image.architecture,
        "os": image.os,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "config": {}
    });
    if let Some(variant) = &image.variant {
        config["variant"] = json!(variant);
    }
    let (config_digest, config_size) = write_blob(layout, &serde_json::to_vec(&config).unwrap());
    let manifest: Value = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config_size},
        "layers": layers
    });
    let (digest, size) = write_blob(layout, &serde_json::to_vec(&manifest).unwrap());
    (digest, size, digests)
}

/// The layer's tar, files first in the order given (a containerDisk's disk is then the first
/// entry after its directory), parent directories added once.
fn layer_tar(spec: &LayerSpec) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut dirs: Vec<String> = Vec::new();
    for (path, contents) in &spec.files {
        if let Some((parent, _)) = path.rsplit_once('/')
            && !dirs.iter().any(|d| d == parent)
        {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            header.set_mtime(0);
            builder
                .append_data(&mut header, format!("{parent}/"), std::io::empty())
                .unwrap();
            dirs.push(parent.to_string());
        }
        let mut header = tar::Header::new_gnu();
        header.set_mode(0o644);
        header.set_size(contents.len() as u64);
        header.set_mtime(0);
        builder
            .append_data(&mut header, path, &contents[..])
            .unwrap();
    }
    builder.into_inner().unwrap()
}

/// Options of the test registry.
#[derive(Debug, Clone, Default)]
pub struct RegistryServerOptions {
    /// Serve HTTPS with the fixtures' server certificate (for `localhost`).
    pub tls: bool,
    /// Require this user and password: by basic auth (htpasswd, bcrypt), or with `bearer`
    /// through a token server that checks them and issues signed bearer tokens.
    pub auth: Option<(String, String)>,
    /// Token auth (the Docker/OCI token flow) instead of basic auth.
    pub bearer: bool,
}

/// A token server for the registry's `auth.token` mode: checks basic credentials and
/// answers with an RS256 JWT (signed by `openssl dgst`) carrying the scopes asked for and
/// the signing certificate in `x5c`.
const TOKEN_SERVER: &str = r#"
import base64, json, os, subprocess, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

key, cert, user, password, port_file = sys.argv[1:6]
der = "".join(l for l in open(cert).read().splitlines() if "-----" not in l)
expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        query = parse_qs(urlparse(self.path).query)
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        access = []
        for scope in query.get("scope", []):
            kind, rest = scope.split(":", 1)
            name, actions = rest.rsplit(":", 1)
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "x5c": [der]}
        claims = {"iss": "ferrovirt-test", "sub": user, "aud": query["service"][0],
                  "exp": now + 600, "nbf": now - 60, "iat": now,
                  "jti": os.urandom(8).hex(), "access": access}
        signing_input = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
        signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key],
                                   input=signing_input.encode(), capture_output=True,
                                   check=True).stdout
        token = signing_input + "." + b64(signature)
        body = json.dumps({"token": token, "access_token": token, "expires_in": 600}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
"#;

/// Debian's `docker-registry` on 127.0.0.1 with its storage in a temporary directory;
/// killed on drop.
pub struct RegistryServer {
    child: Child,
    token_server: Option<Child>,
    port: u16,
    options: RegistryServerOptions,
    state: TempDir,
}

impl RegistryServer {
    pub fn start(options: RegistryServerOptions) -> Self {
        let state = TempDir::new("registry");
        let port = free_port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {root}\n\
             http:\n  addr: 127.0.0.1:{port}\n  secret: ferrovirt-test-secret\n",
            root = state.join("data").display(),
        );
        if options.tls {
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                fixture("tls/server.pem").display(),
                fixture("tls/server-key.pem").display()
            ));
        }
        let mut token_server = None;
        if let (Some((user, password)), true) = (&options.auth, options.bearer) {
            let (child, token_port) = start_token_server(&state, user, password);
            token_server = Some(child);
            config.push_str(&format!(
                "auth:\n  token:\n    realm: http://127.0.0.1:{token_port}/token\n    \
                 service: ferrovirt-registry\n    issuer: ferrovirt-test\n    \
                 rootcertbundle: {}\n",
                state.join("token.pem").display()
            ));
        } else if let Some((user, password)) = &options.auth {
            let out = Command::new("htpasswd")
                .args(["-Bbn", user, password])
                .output()
                .expect("running htpasswd (apache2-utils)");
            assert!(out.status.success(), "htpasswd failed");
            fs::write(state.join("htpasswd"), out.stdout).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: ferrovirt\n    path: {}\n",
                state.join("htpasswd").display()
            ));
        }
        fs::write(state.join("config.yml"), config).unwrap();
        fs::write(
            state.join("policy.json"),
            br#"{"default":[{"type":"insecureAcceptAnything"}]}"#,
        )
        .unwrap();
        let log = File::create(state.join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(state.join("config.yml"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting docker-registry (Debian package docker-registry)");
        let mut server = RegistryServer {
            child,
            token_server,
            port,
            options,
            state,
        };
        server.wait_ready();
        server
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "docker-registry exited ({status}): {}",
                    fs::read_to_string(self.state.join("registry.log")).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("docker-registry did not listen within 15 s");
    }

    /// `host:port` (`localhost` with TLS, so that the certificate's name matches).
    pub fn host(&self) -> String {
        if self.options.tls {
            format!("localhost:{}", self.port)
        } else {
            format!("127.0.0.1:{}", self.port)
        }
    }

    /// `docker://host:port/<name>`, where `name` is `repo:tag` or `repo@digest`.
    pub fn reference(&self, name: &str) -> String {
        format!("docker://{}/{name}", self.host())
    }

    /// Pushes the layout (every platform of an index) as `repo:tag`, byte for byte.
    pub fn push(&self, layout: &OciLayout, repo_tag: &str) {
        let mut command = Command::new("skopeo");
        command
            .arg("--policy")
            .arg(self.state.join("policy.json"))
            .args(["copy", "--quiet", "--all", "--preserve-digests"])
            .arg("--dest-tls-verify=false");
        if let Some((user, password)) = &self.options.auth {
            command
                .arg("--dest-creds")
                .arg(format!("{user}:{password}"));
        }
        let out = command
            .arg(format!(
                "oci:{}:{}",
                layout.path().display(),
                OciLayout::TAG
            ))
            .arg(format!("docker://{}/{repo_tag}", self.host()))
            .env("HOME", self.state.path())
            .output()
            .expect("running skopeo");
        assert!(
            out.status.success(),
            "skopeo copy failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The stored blob (the registry's filesystem layout), for tests that tamper with it.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.state.join(&format!(
            "data/docker/registry/v2/blobs/sha256/{}/{hex}/data",
            &hex[..2]
        ))
    }

    /// Flips one byte of a stored blob, keeping its size: what the registry then serves no
    /// longer has the digest it is served under.
    pub fn tamper_blob(&self, digest: &str, offset: u64) {
        let mut file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.blob_path(digest))
            .expect("stored blob");
        let mut byte = [0u8; 1];
        file.seek(SeekFrom::Start(offset)).unwrap();
        std::io::Read::read_exact(&mut file, &mut byte).unwrap();
        byte[0] ^= 0xff;
        file.seek(SeekFrom::Start(offset)).unwrap();
        file.write_all(&byte).unwrap();
    }
}

impl Drop for RegistryServer {
    fn drop(&mut self) {
        for child in std::iter::once(&mut self.child).chain(self.token_server.as_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Makes the token signing key and certificate in `state` and starts the token server;
/// returns it and its port.
fn start_token_server(state: &TempDir, user: &str, password: &str) -> (Child, u16) {
    let status = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=ferrovirt-test-token-issuer", "-keyout"])
        .arg(state.join("token-key.pem"))
        .arg("-out")
        .arg(state.join("token.pem"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("running openssl");
    assert!(status.success(), "openssl req failed");
    fs::write(state.join("token-server.py"), TOKEN_SERVER).unwrap();
    let port_file = state.join("token-port");
    let mut child = Command::new("python3")
        .arg(state.join("token-server.py"))
        .arg(state.join("token-key.pem"))
        .arg(state.join("token.pem"))
        .args([user, password])
        .arg(&port_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the token server (python3)");
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Some(port) = fs::read_to_string(&port_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return (child, port);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the token server did not start within 15 s");
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on loopback")
}
