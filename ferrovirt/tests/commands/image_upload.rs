//! `ferrovirt image-upload` end to end against real parts: the embedded API server (with the
//! UploadTokenRequest virtual create and the platform's admission), a real upload proxy and
//! upload server on loopback with rcgen certificates, and the built binary. The test plays
//! the upload controller (PVC annotations, DataVolume phases) until the DataVolume flow is
//! wired; what lands on disk is compared with `qemu-img convert`.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use ferrovirt::upload::tokens as upload_tokens;
use ferrovirt_tests::pki::Ca;
use ferrovirt_tests::{TempDir, fixture, reference_sha256, sha256_file};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use standalone::apiserver::{ApiServer, ApiServerConfig};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use uploadproxy::tls::{self, Identity};
use uploadproxy::{
    StaticResolver, UploadProxy, UploadProxyConfig, UploadServer, UploadServerConfig, UploadTarget,
    UploadTokenIssuer,
};

const NAMESPACE: &str = "default";
const CLIENT_NAME: &str = "cdi-uploadproxy";
/// How long one run of the binary may take.
const RUN_DEADLINE: Duration = Duration::from_secs(120);

/// A certificate for localhost with common name `cn`, signed by `ca`.
fn identity(ca: &Ca, cn: &str) -> Identity {
    let (cert, key) = ca.leaf(cn);
    Identity::from_pem(cert.as_bytes(), key.as_bytes()).unwrap()
}

/// How a test's world is set up.
#[derive(Default)]
struct Options {
    /// The proxy checks tokens with another key than the API server signs them with.
    foreign_proxy_key: bool,
    /// The proxy is reached through a relay that cuts its first connection after this many
    /// bytes from the client.
    cut_first_connection_after: Option<u64>,
}

/// The API server, an upload server for PVC `pvc`, and the proxy in front of it.
struct World {
    dir: TempDir,
    api_server: ApiServer,
    client: kube::Client,
    upload_server: Arc<UploadServer>,
    proxy_url: String,
    proxy_ca: PathBuf,
    tasks: Vec<JoinHandle<()>>,
}

impl World {
    async fn start(pvc: &str, options: Options) -> World {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = TempDir::new("image-upload");
        let issuer = UploadTokenIssuer::load_or_create(&dir.join("data")).unwrap();
        let validator = if options.foreign_proxy_key {
            UploadTokenIssuer::load_or_create(&dir.join("other-key"))
                .unwrap()
                .validator()
        } else {
            issuer.validator()
        };
        let crds = api::crds::all()
            .into_iter()
            .map(|crd| serde_json::to_value(crd).unwrap())
            .collect();
        let api_server = ApiServer::start(ApiServerConfig {
            data_dir: dir.join("data"),
            listen: "127.0.0.1:0".parse().unwrap(),
            crds,
            admission: vec![ferrovirt::webhooks::embedded::defaulting_and_validation(
                Default::default(),
            )],
            virtual_creates: HashMap::from([upload_tokens::upload_token_requests(
                std::sync::Arc::new(issuer),
            )]),
        })
        .await
        .expect("the API server starts");
        let client = standalone::control_plane::client_for(&api_server.kubeconfig)
            .await
            .unwrap();

        let (proxy_ca, server_ca, client_ca) = (
            Ca::new("test proxy CA"),
            Ca::new("test upload server CA"),
            Ca::new("test upload client CA"),
        );
        let mut config = UploadServerConfig::new(dir.join("disk.img"));
        config.client_name = Some(CLIENT_NAME.into());
        let upload_server = UploadServer::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server_url = format!(
            "https://localhost:{}",
            listener.local_addr().unwrap().port()
        );
        let server_tls = tls::server_config(
            &identity(&server_ca, "cdi-upload-server"),
            Some(tls::roots_from_pem(client_ca.pem.as_bytes()).unwrap()),
        )
        .unwrap();
        let mut tasks = vec![upload_server.serve(listener, server_tls)];

        let resolver = Arc::new(StaticResolver::new());
        resolver.insert(
            NAMESPACE,
            pvc,
            UploadTarget {
                base_url: server_url,
                content_type: importer::ContentType::Kubevirt,
            },
        );
        let upstream_tls = tls::client_config(
            tls::roots_from_pem(server_ca.pem.as_bytes()).unwrap(),
            &identity(&client_ca, CLIENT_NAME),
        )
        .unwrap();
        let proxy = UploadProxy::new(UploadProxyConfig {
            validator,
            resolver,
            upstream_tls,
            ready_timeout: Duration::from_secs(5),
        })
        .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_addr = listener.local_addr().unwrap();
        let proxy_tls = tls::server_config(&identity(&proxy_ca, "cdi-uploadproxy"), None).unwrap();
        tasks.push(proxy.serve(listener, proxy_tls));
        let public_port = match options.cut_first_connection_after {
            Some(limit) => {
                let relay = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let port = relay.local_addr().unwrap().port();
                tasks.push(tokio::spawn(relay_cutting_first(relay, proxy_addr, limit)));
                port
            }
            None => proxy_addr.port(),
        };
        let proxy_ca_file = dir.join("proxy-ca.pem");
        std::fs::write(&proxy_ca_file, &proxy_ca.pem).unwrap();
        World {
            dir,
            api_server,
            client,
            upload_server,
            proxy_url: format!("https://localhost:{public_port}"),
            proxy_ca: proxy_ca_file,
            tasks,
        }
    }

    fn pvcs(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    fn data_volumes(&self) -> Api<DynamicObject> {
        let resource = ApiResource::erase::<api::cdi::DataVolume>(&());
        Api::namespaced_with(self.client.clone(), NAMESPACE, &resource)
    }

    /// Creates PVC `name` with `annotations`, as CDI's controllers leave an upload PVC.
    async fn create_pvc(&self, name: &str, annotations: &[(&str, &str)]) {
        let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
        let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "64Mi"}},
            },
        }))
        .unwrap();
        self.pvcs()
            .create(&PostParams::default(), &pvc)
            .await
            .unwrap();
    }

    /// Plays the upload controller's last step: once the upload server has the whole image,
    /// the PVC's upload pod phase becomes Succeeded.
    fn mark_succeeded_when_done(&mut self, pvc: &str) {
        let server = self.upload_server.clone();
        let pvcs = self.pvcs();
        let name = pvc.to_string();
        self.tasks.push(tokio::spawn(async move {
            server.succeeded().await;
            let patch =
                json!({"metadata": {"annotations": {"cdi.kubevirt.io/storage.pod.phase": "Succeeded"}}});
            pvcs.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }));
    }

    fn disk(&self) -> PathBuf {
        self.dir.join("disk.img")
    }

    /// Runs `ferrovirt image-upload ARGS` against this world, within the deadline.
    async fn image_upload(&self, args: &[&str]) -> Output {
        run_binary(&self.api_server.kubeconfig, self.dir.path(), args).await
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.api_server.stop();
    }
}

async fn run_binary(kubeconfig: &Path, home: &Path, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferrovirt"));
    command
        .arg("image-upload")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", home)
        .env("RUST_LOG", "info")
        .kill_on_drop(true);
    for proxy in [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
    ] {
        command.env_remove(proxy);
    }
    tokio::time::timeout(RUN_DEADLINE, command.output())
        .await
        .expect("image-upload finishes within the deadline")
        .expect("running ferrovirt")
}

fn describe(output: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Relays TCP to `upstream`; the first connection is cut (both sides closed) once `limit`
/// bytes have gone from the client towards the upstream.
async fn relay_cutting_first(listener: TcpListener, upstream: SocketAddr, limit: u64) {
    let mut first = true;
    while let Ok((client, _)) = listener.accept().await {
        let cut = std::mem::take(&mut first);
        tokio::spawn(async move {
            let Ok(mut server) = TcpStream::connect(upstream).await else {
                return;
            };
            if !cut {
                let mut client = client;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                return;
            }
            let (client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            let down =
                tokio::spawn(
                    async move { tokio::io::copy(&mut server_read, &mut client_write).await },
                );
            let mut up = client_read.take(limit);
            let _ = tokio::io::copy(&mut up, &mut server_write).await;
            down.abort();
            // Dropping every half closes both connections in the middle of the body.
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_a_qcow2_image_to_an_existing_upload_pvc() {
    let mut world = World::start("disk", Options::default()).await;
    world
        .create_pvc(
            "disk",
            &[
                ("cdi.kubevirt.io/storage.upload.target", ""),
                ("cdi.kubevirt.io/storage.pod.ready", "true"),
                ("cdi.kubevirt.io/storage.pod.phase", "Running"),
            ],
        )
        .await;
    world.mark_succeeded_when_done("disk");
    let image = fixture("v3.qcow2");
    let output = world
        .image_upload(&[
            "pvc",
            "disk",
            "--no-create",
            "--uploadproxy-url",
            &world.proxy_url,
            "--uploadproxy-ca",
            world.proxy_ca.to_str().unwrap(),
            "--image-path",
            image.to_str().unwrap(),
        ])
        .await;
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("Processing completed successfully"),
        "{}",
        describe(&output)
    );
    assert_eq!(
        sha256_file(&world.disk()).unwrap(),
        reference_sha256("v3.qcow2")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_certificate_is_verified_unless_insecure() {
    let mut world = World::start("disk", Options::default()).await;
    world
        .create_pvc(
            "disk",
            &[
                ("cdi.kubevirt.io/storage.upload.target", ""),
                ("cdi.kubevirt.io/storage.pod.ready", "true"),
                ("cdi.kubevirt.io/storage.pod.phase", "Running"),
            ],
        )
        .await;
    world.mark_succeeded_when_done("disk");
    let image = fixture("raw.img");
    let args = |extra: &'static str| {
        vec![
            "pvc".to_string(),
            "disk".into(),
            "--no-create".into(),
            "--retry".into(),
            "1".into(),
            "--uploadproxy-url".into(),
            world.proxy_url.clone(),
            "--image-path".into(),
            image.to_str().unwrap().into(),
            extra.into(),
        ]
    };
    // The proxy's CA is neither passed nor in the cluster: its certificate does not verify.
    let refused = args("--async");
    let refused: Vec<&str> = refused.iter().map(String::as_str).collect();
    let output = world.image_upload(&refused).await;
    assert!(!output.status.success(), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.to_ascii_lowercase().contains("certificate"),
        "{}",
        describe(&output)
    );
    // --insecure takes the proxy as it is.
    let insecure = args("--insecure");
    let insecure: Vec<&str> = insecure.iter().map(String::as_str).collect();
    let output = world.image_upload(&insecure).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(
        sha256_file(&world.disk()).unwrap(),
        reference_sha256("raw.img")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_upload_resumes_from_the_committed_offset() {
    let world = World::start(
        "disk",
        Options {
            cut_first_connection_after: Some(6 << 20),
            ..Options::default()
        },
    )
    .await;
    world
        .create_pvc(
            "disk",
            &[
                ("cdi.kubevirt.io/storage.upload.target", ""),
                ("cdi.kubevirt.io/storage.pod.ready", "true"),
            ],
        )
        .await;
    let image = fixture("raw.img");
    let output = world
        .image_upload(&[
            "pvc",
            "disk",
            "--no-create",
            "--async",
            "--uploadproxy-url",
            &world.proxy_url,
            "--uploadproxy-ca",
            world.proxy_ca.to_str().unwrap(),
            "--image-path",
            image.to_str().unwrap(),
        ])
        .await;
    assert!(output.status.success(), "{}", describe(&output));
    let log = stderr(&output);
    assert!(log.contains("upload interrupted"), "{}", describe(&output));
    // It continued where the server stood rather than from byte 0.
    let resumed_at: u64 = log
        .lines()
        .find_map(|line| {
            let rest = line.split("resuming the upload at byte ").nth(1)?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no resume in the log:\n{}", describe(&output)));
    assert!(resumed_at > 0, "{}", describe(&output));
    tokio::time::timeout(Duration::from_secs(60), world.upload_server.succeeded())
        .await
        .expect("the conversion completes");
    assert_eq!(
        sha256_file(&world.disk()).unwrap(),
        reference_sha256("raw.img")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_a_data_volume_waits_for_it_and_uploads() {
    let mut world = World::start("fedora", Options::default()).await;
    // The DataVolume controller's part: once the DataVolume exists, its PVC with a ready
    // upload pod, phase UploadReady; Succeeded once the upload server is done.
    let data_volumes = world.data_volumes();
    let pvcs = world.pvcs();
    let server = world.upload_server.clone();
    world.tasks.push(tokio::spawn(async move {
        let dv = loop {
            if let Some(dv) = data_volumes.get_opt("fedora").await.unwrap() {
                break dv;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(dv.data["spec"]["source"], json!({"upload": {}}));
        assert_eq!(dv.data["spec"]["storage"]["resources"]["requests"]["storage"], "64Mi");
        assert_eq!(dv.data["spec"]["storage"]["volumeMode"], "Filesystem");
        let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "fedora", "namespace": NAMESPACE, "annotations": {
                "cdi.kubevirt.io/storage.upload.target": "",
                "cdi.kubevirt.io/storage.pod.ready": "true",
            }},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}},
        }))
        .unwrap();
        pvcs.create(&PostParams::default(), &pvc).await.unwrap();
        let phase = |phase: &str| json!({"status": {"phase": phase}});
        data_volumes
            .patch_status("fedora", &PatchParams::default(), &Patch::Merge(phase("UploadReady")))
            .await
            .unwrap();
        server.succeeded().await;
        data_volumes
            .patch_status("fedora", &PatchParams::default(), &Patch::Merge(phase("Succeeded")))
            .await
            .unwrap();
    }));
    let image = fixture("v3.qcow2");
    let output = world
        .image_upload(&[
            "dv",
            "fedora",
            "--size",
            "64Mi",
            "--volume-mode",
            "filesystem",
            "--wait-secs",
            "60",
            "--uploadproxy-url",
            &world.proxy_url,
            "--uploadproxy-ca",
            world.proxy_ca.to_str().unwrap(),
            "--image-path",
            image.to_str().unwrap(),
        ])
        .await;
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("DataVolume default/fedora created"),
        "{}",
        describe(&output)
    );
    assert_eq!(
        sha256_file(&world.disk()).unwrap(),
        reference_sha256("v3.qcow2")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_image_fails_before_any_api_call() {
    let dir = TempDir::new("image-upload-missing");
    // No cluster at all: the kubeconfig does not exist.
    let missing = dir.join("no-such-image.qcow2");
    let output = run_binary(
        &dir.join("no-kubeconfig"),
        dir.path(),
        &[
            "dv",
            "x",
            "--size",
            "1Gi",
            "--image-path",
            missing.to_str().unwrap(),
        ],
    )
    .await;
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("cannot open the image file") && err.contains("no-such-image.qcow2"),
        "{}",
        describe(&output)
    );
    assert!(
        !err.to_lowercase().contains("kubeconfig"),
        "{}",
        describe(&output)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pvc_that_is_not_an_upload_target_is_refused() {
    let world = World::start("plain", Options::default()).await;
    world.create_pvc("plain", &[]).await;
    let image = fixture("v3.qcow2");
    let output = world
        .image_upload(&[
            "pvc",
            "plain",
            "--size",
            "64Mi",
            "--uploadproxy-url",
            &world.proxy_url,
            "--image-path",
            image.to_str().unwrap(),
        ])
        .await;
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("PVC default/plain exists and is not an upload target"),
        "{}",
        describe(&output)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_the_proxy_refuses_is_reported_with_its_body() {
    let world = World::start(
        "disk",
        Options {
            foreign_proxy_key: true,
            ..Options::default()
        },
    )
    .await;
    world
        .create_pvc(
            "disk",
            &[
                ("cdi.kubevirt.io/storage.upload.target", ""),
                ("cdi.kubevirt.io/storage.pod.ready", "true"),
            ],
        )
        .await;
    let image = fixture("v3.qcow2");
    let output = world
        .image_upload(&[
            "pvc",
            "disk",
            "--no-create",
            "--uploadproxy-url",
            &world.proxy_url,
            "--uploadproxy-ca",
            world.proxy_ca.to_str().unwrap(),
            "--image-path",
            image.to_str().unwrap(),
        ])
        .await;
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("refused the upload token (401 Unauthorized)")
            && err.contains("signature does not verify"),
        "{}",
        describe(&output)
    );
    assert!(!world.disk().exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_token_requests_are_answered_by_the_api_server() {
    let world = World::start("disk", Options::default()).await;
    let requests: Api<api::upload::UploadTokenRequest> =
        Api::namespaced(world.client.clone(), "tenant");
    let request = api::upload::UploadTokenRequest::new(
        "t",
        api::upload::UploadTokenRequestSpec {
            pvc_name: "disk".into(),
        },
    );
    let answer = requests
        .create(&PostParams::default(), &request)
        .await
        .unwrap();
    assert_eq!(answer.metadata.namespace.as_deref(), Some("tenant"));
    let token = answer.status.unwrap().token.unwrap();
    let issuer = UploadTokenIssuer::load_or_create(&world.dir.join("data")).unwrap();
    let claims = issuer.validator().validate(&token).unwrap();
    assert_eq!(
        (claims.namespace.as_str(), claims.name.as_str()),
        ("tenant", "disk")
    );
    // Not stored: a create is answered, nothing can be read back.
    assert!(requests.get_opt("t").await.unwrap_or(None).is_none());
    let empty = api::upload::UploadTokenRequest::new("t", Default::default());
    let err = requests
        .create(&PostParams::default(), &empty)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 422);
            assert!(
                status.message.contains("spec.pvcName"),
                "{}",
                status.message
            );
        }
        other => panic!("unexpected error {other}"),
    }
}
