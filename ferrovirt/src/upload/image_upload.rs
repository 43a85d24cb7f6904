//! `ferrovirt image-upload`: uploads a local disk image to a DataVolume or PVC through the
//! upload proxy, as `virtctl image-upload` does it (create the target, wait for its upload
//! server, request a token, POST the file, wait for processing), and beyond it resumes an
//! interrupted upload from the offset the upload server reports.

use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use api::cdi::datavolume::annotations;
use clap::{Args, ValueEnum};
use importer::error_chain;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use operators::cdi::datavolume::pod::{CA_BUNDLE_KEY, CDI_NAMESPACE, UPLOAD_PROXY_CA_CONFIG_MAP};
use reqwest::{StatusCode, Url};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use uploadproxy::routes::{self, OFFSET_HEADER};

/// Annotation asking for immediate binding despite a WaitForFirstConsumer storage class.
const FORCE_BIND: &str = "cdi.kubevirt.io/storage.bind.immediate.requested";
/// The cluster-wide CDIConfig whose status names the upload proxy.
const CDI_CONFIG: &str = "config";
/// How often the target's state is read while waiting.
const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How long to wait for post-upload processing, as virtctl (ctrl-c does not stop it).
const PROCESSING_WAIT: Duration = Duration::from_secs(24 * 3600);
/// The request body is read from the file in chunks of this size.
const CHUNK: usize = 1 << 20;
/// The name of the UploadTokenRequest sent (it is not stored).
const TOKEN_REQUEST_NAME: &str = "token-for-ferrovirt";

#[derive(Args)]
pub struct ImageUploadArgs {
    /// Upload to a DataVolume (`dv`) or to a PersistentVolumeClaim (`pvc`).
    #[arg(value_enum)]
    kind: TargetKind,
    /// The name of the DataVolume or PVC.
    name: String,
    /// Path to the local disk image (raw, qcow2, vmdk, ..., optionally compressed).
    #[arg(long)]
    image_path: PathBuf,
    /// The size of the DataVolume/PVC to create (for example 10Gi, 500Mi).
    #[arg(long)]
    size: Option<String>,
    /// The URL of the upload proxy [default: CDIConfig `config` status.uploadProxyURL].
    #[arg(long = "uploadproxy-url")]
    uploadproxy_url: Option<String>,
    /// A PEM file with the CA that signed the upload proxy's certificate, trusted in addition
    /// to the system roots [default: CDIConfig `config` status.uploadProxyCA, else ConfigMap
    /// cdi/cdi-uploadproxy-signer-bundle, if readable].
    #[arg(long = "uploadproxy-ca", conflicts_with = "insecure")]
    uploadproxy_ca: Option<PathBuf>,
    /// Do not verify the upload proxy's certificate.
    #[arg(long)]
    insecure: bool,
    /// Return once the bytes are uploaded, without waiting for the conversion to complete.
    #[arg(long = "async")]
    asynchronous: bool,
    /// Do not create the DataVolume/PVC: upload to an existing one.
    #[arg(long)]
    no_create: bool,
    /// The storage class of the PVC.
    #[arg(long)]
    storage_class: Option<String>,
    /// The access mode of the PVC (ReadWriteOnce, ReadWriteMany, ReadWriteOncePod).
    #[arg(long)]
    access_mode: Option<String>,
    /// The volume mode of the PVC.
    #[arg(long, value_enum)]
    volume_mode: Option<VolumeMode>,
    /// Bind the PVC at once, ignoring the storage class's WaitForFirstConsumer.
    #[arg(long)]
    force_bind: bool,
    /// Seconds to wait for the upload server to be ready.
    #[arg(long, default_value_t = 300)]
    wait_secs: u64,
    /// How many times a failed transfer is retried (resuming where the server stands).
    #[arg(long, default_value_t = 5)]
    retry: u32,
    /// The namespace [default: the kubeconfig context's].
    #[arg(long, short = 'n')]
    namespace: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TargetKind {
    Dv,
    Pvc,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum VolumeMode {
    Block,
    Filesystem,
}

impl VolumeMode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Block => "Block",
            Self::Filesystem => "Filesystem",
        }
    }
}

/// The local image: opened before anything else so that a wrong path fails at once.
struct Image {
    path: PathBuf,
    size: u64,
}

impl Image {
    async fn open(path: &Path) -> anyhow::Result<Self> {
        let mut file = tokio::fs::File::open(path)
            .await
            .with_context(|| format!("cannot open the image file {}", path.display()))?;
        let metadata = file.metadata().await?;
        if metadata.is_dir() {
            bail!("the image file {} is a directory", path.display());
        }
        // A block device reports no length in its metadata; its end does.
        let size = file
            .seek(SeekFrom::End(0))
            .await
            .with_context(|| format!("reading the size of {}", path.display()))?;
        if size == 0 {
            bail!("the image file {} is empty", path.display());
        }
        Ok(Self {
            path: path.to_path_buf(),
            size,
        })
    }
}

/// The DataVolume or PVC uploaded to.
struct Target {
    kind: TargetKind,
    namespace: String,
    name: String,
    pvcs: Api<PersistentVolumeClaim>,
    data_volumes: Api<DynamicObject>,
}

impl Target {
    fn describe(&self) -> String {
        let kind = match self.kind {
            TargetKind::Dv => "DataVolume",
            TargetKind::Pvc => "PVC",
        };
        format!("{kind} {}/{}", self.namespace, self.name)
    }

    fn pvc_name(&self) -> String {
        format!("PVC {}/{}", self.namespace, self.name)
    }
}

pub async fn run(args: ImageUploadArgs) -> anyhow::Result<()> {
    let image = Image::open(&args.image_path).await?;
    check_args(&args)?;
    let (client, namespace) = crate::cluster::client_in(args.namespace.as_deref()).await?;
    let dv_resource = ApiResource::erase::<api::cdi::DataVolume>(&());
    let target = Target {
        kind: args.kind,
        pvcs: Api::namespaced(client.clone(), &namespace),
        data_volumes: Api::namespaced_with(client.clone(), &namespace, &dv_resource),
        namespace,
        name: args.name.clone(),
    };

    prepare_target(&client, &target, &args).await?;
    wait_ready(&target, &args).await?;
    let proxy = match &args.uploadproxy_url {
        Some(url) => url.clone(),
        None => upload_proxy_url(&client).await?,
    };
    let url = upload_url(&proxy, args.asynchronous)?;
    println!("Uploading data to {url}");
    let token = request_token(&client, &target).await?;
    let extra_ca = if args.insecure {
        Vec::new()
    } else {
        proxy_ca(&client, args.uploadproxy_ca.as_deref()).await?
    };
    let http = http_client(args.insecure, extra_ca)?;
    let transfer = Transfer {
        client: &http,
        url: &url,
        token: &token,
        image: &image,
        retries: args.retry,
    };
    transfer.run().await?;
    if args.asynchronous {
        println!(
            "Uploading data completed successfully; the conversion continues in the background (`kubectl get {} {} -n {}` shows when it is done)",
            match target.kind {
                TargetKind::Dv => "dv",
                TargetKind::Pvc => "pvc",
            },
            target.name,
            target.namespace
        );
        return Ok(());
    }
    println!(
        "Uploading data completed successfully, waiting for processing to complete, you can hit ctrl-c without interrupting the progress"
    );
    wait_processed(&target).await?;
    println!("Uploading {} completed successfully", image.path.display());
    Ok(())
}

/// Checks the flags that need no cluster.
fn check_args(args: &ImageUploadArgs) -> anyhow::Result<()> {
    if let Some(size) = &args.size
        && api::quantity::parse_quantity(size).is_none_or(|bytes| bytes == 0)
    {
        bail!("--size {size:?} is not a size (for example 10Gi or 500Mi)");
    }
    match args.access_mode.as_deref() {
        None | Some("ReadWriteOnce" | "ReadWriteMany" | "ReadWriteOncePod") => {}
        Some("ReadOnlyMany") => {
            bail!("cannot upload to a readonly volume, use either ReadWriteOnce or ReadWriteMany")
        }
        Some(other) => bail!(
            "--access-mode {other:?} is not an access mode (ReadWriteOnce, ReadWriteMany, ReadWriteOncePod)"
        ),
    }
    if args.retry == 0 {
        bail!("--retry must be at least 1");
    }
    Ok(())
}

/// Uses the existing DataVolume/PVC if it can take an upload, or creates it.
async fn prepare_target(
    client: &kube::Client,
    target: &Target,
    args: &ImageUploadArgs,
) -> anyhow::Result<()> {
    let pvc = target
        .pvcs
        .get_opt(&target.name)
        .await
        .with_context(|| format!("reading {}", target.pvc_name()))?;
    let data_volume = match target.kind {
        TargetKind::Dv => target
            .data_volumes
            .get_opt(&target.name)
            .await
            .with_context(|| format!("reading {}", target.describe()))?,
        TargetKind::Pvc => None,
    };
    if let Some(dv) = &data_volume
        && dv.data.pointer("/spec/source/upload").is_none()
    {
        bail!(
            "{} exists and is not an upload target (it has no spec.source.upload)",
            target.describe()
        );
    }
    let Some(pvc) = pvc else {
        if data_volume.is_some() {
            // Its controller creates the PVC.
            println!("Using existing {}", target.describe());
            return Ok(());
        }
        if args.no_create {
            bail!(
                "{} not found (and --no-create was given)",
                target.describe()
            );
        }
        create_target(client, target, args).await?;
        println!("{} created", target.describe());
        return Ok(());
    };
    if target.kind == TargetKind::Dv && data_volume.is_none() {
        bail!(
            "no DataVolume is associated with the existing {}; upload to it with `image-upload pvc`",
            target.pvc_name()
        );
    }
    let pvc_annotations = pvc.metadata.annotations.clone().unwrap_or_default();
    if pvc_annotations
        .get(annotations::POD_PHASE)
        .map(String::as_str)
        == Some("Succeeded")
    {
        bail!(
            "{} already successfully imported/cloned/updated",
            target.pvc_name()
        );
    }
    if !pvc_annotations.contains_key(annotations::UPLOAD_REQUEST) {
        if !args.no_create || target.kind == TargetKind::Dv {
            bail!(
                "{} exists and is not an upload target (no annotation {}); with `pvc NAME --no-create` it is made one",
                target.pvc_name(),
                annotations::UPLOAD_REQUEST
            );
        }
        // As virtctl: --no-create on a plain PVC asks for an upload server for it.
        let patch = json!({"metadata": {"annotations": {annotations::UPLOAD_REQUEST: ""}}});
        target
            .pvcs
            .patch(&target.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("annotating {} as an upload target", target.pvc_name()))?;
    }
    println!("Using existing {}", target.pvc_name());
    Ok(())
}

async fn create_target(
    client: &kube::Client,
    target: &Target,
    args: &ImageUploadArgs,
) -> anyhow::Result<()> {
    let Some(size) = &args.size else {
        bail!(
            "{} does not exist; creating it needs --size (or pass --no-create)",
            target.describe()
        );
    };
    if let Some(class) = &args.storage_class {
        let classes: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(client.clone());
        if classes.get_opt(class).await?.is_none() {
            bail!("storage class {class:?} not found");
        }
    }
    let mut storage = json!({"resources": {"requests": {"storage": size}}});
    if let Some(class) = &args.storage_class {
        storage["storageClassName"] = json!(class);
    }
    if let Some(mode) = &args.access_mode {
        storage["accessModes"] = json!([mode]);
    }
    if let Some(mode) = args.volume_mode {
        storage["volumeMode"] = json!(mode.as_str());
    }
    let mut metadata_annotations = serde_json::Map::new();
    if args.force_bind {
        metadata_annotations.insert(FORCE_BIND.into(), json!(""));
    }
    let result = match target.kind {
        TargetKind::Dv => {
            let dv: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "cdi.kubevirt.io/v1beta1",
                "kind": "DataVolume",
                "metadata": {
                    "name": target.name,
                    "namespace": target.namespace,
                    "annotations": metadata_annotations,
                },
                "spec": {
                    "source": {"upload": {}},
                    "contentType": "kubevirt",
                    "storage": storage,
                },
            }))?;
            target
                .data_volumes
                .create(&PostParams::default(), &dv)
                .await
                .map(drop)
        }
        TargetKind::Pvc => {
            metadata_annotations.insert(annotations::UPLOAD_REQUEST.into(), json!(""));
            metadata_annotations.insert(annotations::CONTENT_TYPE.into(), json!("kubevirt"));
            if storage.get("accessModes").is_none() {
                storage["accessModes"] = json!(["ReadWriteOnce"]);
            }
            // The storage fields are those of a PVC spec.
            let spec = storage;
            let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": target.name,
                    "namespace": target.namespace,
                    "annotations": metadata_annotations,
                },
                "spec": spec,
            }))?;
            target
                .pvcs
                .create(&PostParams::default(), &pvc)
                .await
                .map(drop)
        }
    };
    result.with_context(|| format!("creating {}", target.describe()))
}

/// Waits until the target's upload server takes data: the DataVolume in phase UploadReady,
/// or the PVC annotated `cdi.kubevirt.io/storage.pod.ready: "true"`.
async fn wait_ready(target: &Target, args: &ImageUploadArgs) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(args.wait_secs);
    let mut announced = false;
    loop {
        let pvc = target.pvcs.get_opt(&target.name).await?;
        let pod_ready = pvc
            .as_ref()
            .and_then(|pvc| {
                pvc.metadata
                    .annotations
                    .as_ref()?
                    .get(annotations::POD_READY)
            })
            .is_some_and(|ready| ready == "true");
        let (ready, state) = match target.kind {
            TargetKind::Pvc => (
                pod_ready,
                match &pvc {
                    None => "the PVC does not exist".to_string(),
                    Some(_) => format!("{} is not \"true\"", annotations::POD_READY),
                },
            ),
            TargetKind::Dv => {
                let phase = match target.data_volumes.get_opt(&target.name).await? {
                    Some(dv) => dv
                        .data
                        .pointer("/status/phase")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    None => bail!("{} was deleted while waiting", target.describe()),
                };
                match phase.as_str() {
                    "WaitForFirstConsumer" | "PendingPopulation" if !args.force_bind => bail!(
                        "cannot upload to {} in {phase} phase, make sure the PVC is Bound, or use --force-bind",
                        target.describe()
                    ),
                    "Succeeded" => bail!("{} has already succeeded", target.describe()),
                    "Failed" => bail!("{} failed before the upload", target.describe()),
                    _ => {}
                }
                let state = if phase.is_empty() {
                    "it has no phase yet".to_string()
                } else {
                    format!("its phase is {phase}")
                };
                (phase == "UploadReady" || pod_ready, state)
            }
        };
        if ready {
            if announced {
                println!("Pod now ready");
            }
            return Ok(());
        }
        if !announced {
            println!("Waiting for PVC {} upload pod to be ready...", target.name);
            announced = true;
        }
        if Instant::now() + POLL_INTERVAL > deadline {
            bail!(
                "the upload server of {} was not ready after {} s ({state}); see --wait-secs",
                target.describe(),
                args.wait_secs
            );
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// The upload proxy URL that CDIConfig `config` reports.
async fn upload_proxy_url(client: &kube::Client) -> anyhow::Result<String> {
    let configs: Api<api::cdi::CDIConfig> = Api::all(client.clone());
    let config = configs
        .get_opt(CDI_CONFIG)
        .await
        .context("reading CDIConfig config for the upload proxy URL")?
        .ok_or_else(|| anyhow!("uploadproxy URL not found: there is no CDIConfig {CDI_CONFIG:?}; pass --uploadproxy-url"))?;
    config
        .status
        .and_then(|status| status.upload_proxy_url)
        .filter(|url| !url.is_empty())
        .ok_or_else(|| {
            anyhow!(
                "uploadproxy URL not found: CDIConfig {CDI_CONFIG:?} has no status.uploadProxyURL; pass --uploadproxy-url"
            )
        })
}

/// The URL to POST to: the proxy's base URL (https if it names no scheme) and the upload
/// route, unless the URL already names one.
fn upload_url(proxy: &str, asynchronous: bool) -> anyhow::Result<Url> {
    let proxy = proxy.trim();
    let with_scheme = if proxy.contains("://") {
        proxy.to_string()
    } else {
        format!("https://{proxy}")
    };
    let mut url =
        Url::parse(&with_scheme).with_context(|| format!("the upload proxy URL {proxy:?}"))?;
    if routes::route(url.path()).is_none() {
        let route = if asynchronous {
            "upload-async"
        } else {
            "upload"
        };
        let path = format!("{}/v1beta1/{route}", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    Ok(url)
}

/// Asks the API server for an upload token for the target's PVC.
async fn request_token(client: &kube::Client, target: &Target) -> anyhow::Result<String> {
    let requests: Api<api::upload::UploadTokenRequest> =
        Api::namespaced(client.clone(), &target.namespace);
    let request = api::upload::UploadTokenRequest::new(
        TOKEN_REQUEST_NAME,
        api::upload::UploadTokenRequestSpec {
            pvc_name: target.name.clone(),
        },
    );
    let answer = requests
        .create(&PostParams::default(), &request)
        .await
        .map_err(|err| match err {
            kube::Error::Api(status) => anyhow!(
                "the UploadTokenRequest for {} was refused ({} {}): {}",
                target.pvc_name(),
                status.code,
                status.reason,
                status.message
            ),
            other => anyhow!(other).context(format!(
                "requesting an upload token for {}",
                target.pvc_name()
            )),
        })?;
    answer
        .status
        .and_then(|status| status.token)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| {
            anyhow!(
                "the UploadTokenRequest for {} was answered without status.token",
                target.pvc_name()
            )
        })
}

/// The CA of the upload proxy beyond the system roots: `--uploadproxy-ca`, else CDIConfig
/// `config` `status.uploadProxyCA`, else the bundle CDI's operator publishes (ConfigMap
/// `cdi/cdi-uploadproxy-signer-bundle`) when this user may read it.
async fn proxy_ca(
    client: &kube::Client,
    ca: Option<&Path>,
) -> anyhow::Result<Vec<reqwest::Certificate>> {
    if let Some(ca) = ca {
        let pem = tokio::fs::read(ca)
            .await
            .with_context(|| format!("reading --uploadproxy-ca {}", ca.display()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .with_context(|| format!("reading --uploadproxy-ca {}", ca.display()))?;
        if certs.is_empty() {
            bail!(
                "--uploadproxy-ca {}: no PEM certificates in it",
                ca.display()
            );
        }
        return Ok(certs);
    }
    let bundle = match published_ca(client).await {
        Some(pem) => Some(pem),
        None => signer_bundle(client).await,
    };
    let Some(pem) = bundle else {
        return Ok(Vec::new());
    };
    Ok(
        reqwest::Certificate::from_pem_bundle(pem.as_bytes()).unwrap_or_else(|error| {
            tracing::warn!(%error, "ignoring the upload proxy's CA bundle");
            Vec::new()
        }),
    )
}

/// CDIConfig `config` `status.uploadProxyCA`, if this user may read it.
async fn published_ca(client: &kube::Client) -> Option<String> {
    let configs: Api<api::cdi::CDIConfig> = Api::all(client.clone());
    match configs.get_opt(CDI_CONFIG).await {
        Ok(config) => config
            .and_then(|c| c.status?.upload_proxy_ca)
            .filter(|pem| !pem.is_empty()),
        Err(error) => {
            tracing::debug!(%error, "CDIConfig is not readable");
            None
        }
    }
}

/// The bundle of ConfigMap `cdi/cdi-uploadproxy-signer-bundle`, if this user may read it.
async fn signer_bundle(client: &kube::Client) -> Option<String> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), CDI_NAMESPACE);
    match maps.get_opt(UPLOAD_PROXY_CA_CONFIG_MAP).await {
        Ok(map) => map.and_then(|m| m.data?.remove(CA_BUNDLE_KEY)),
        Err(error) => {
            tracing::debug!(%error, "the upload proxy's CA bundle is not readable");
            None
        }
    }
}

/// An HTTPS client for the upload proxy: the system roots plus `extra`, or (`--insecure`)
/// no verification of the proxy's certificate.
fn http_client(
    insecure: bool,
    extra: Vec<reqwest::Certificate>,
) -> anyhow::Result<reqwest::Client> {
    // ring is the one crypto provider in the build.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(insecure)
        .tls_certs_merge(extra)
        .connect_timeout(Duration::from_secs(30))
        .build()
        .context("building the HTTPS client")
}

/// One upload of the image, with retries that resume where the upload server stands.
struct Transfer<'a> {
    client: &'a reqwest::Client,
    url: &'a Url,
    token: &'a str,
    image: &'a Image,
    retries: u32,
}

/// How one POST ended.
enum Attempt {
    Done,
    /// Worth another try, from `offset` if the server said where it stands.
    Retry {
        why: String,
        offset: Option<u64>,
    },
}

impl Transfer<'_> {
    async fn run(&self) -> anyhow::Result<()> {
        let bar = progress_bar(self.image.size);
        // Where to start, once the upload server has told us (a server without resume
        // support never does, and the upload starts again from the beginning).
        let mut offset: Option<u64> = None;
        let mut failures = 0;
        loop {
            let attempt = self.post(offset, &bar, failures > 0).await?;
            let (why, told) = match attempt {
                Attempt::Done => {
                    bar.finish_and_clear();
                    return Ok(());
                }
                Attempt::Retry { why, offset } => (why, offset),
            };
            failures += 1;
            if failures > self.retries {
                bar.abandon();
                bail!(
                    "error uploading image after {} retries: {why}",
                    self.retries
                );
            }
            bar.suspend(|| {
                eprintln!(
                    "upload interrupted ({why}); retrying ({failures}/{})",
                    self.retries
                )
            });
            tokio::time::sleep(backoff(failures)).await;
            offset = match told {
                Some(offset) => Some(offset),
                None => self.committed().await?,
            };
        }
    }

    /// POSTs the image from `offset` on.
    async fn post(
        &self,
        offset: Option<u64>,
        bar: &indicatif::ProgressBar,
        retrying: bool,
    ) -> anyhow::Result<Attempt> {
        let start = offset.unwrap_or(0).min(self.image.size);
        let mut file = tokio::fs::File::open(&self.image.path)
            .await
            .with_context(|| format!("cannot open the image file {}", self.image.path.display()))?;
        file.seek(SeekFrom::Start(start)).await?;
        bar.set_position(start);
        let mut request = self
            .client
            .post(self.url.clone())
            .bearer_auth(self.token)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .header(reqwest::header::CONTENT_LENGTH, self.image.size - start)
            .body(file_body(file, bar.clone()));
        if offset.is_some() {
            request = request.header(OFFSET_HEADER, start.to_string());
            bar.suspend(|| eprintln!("resuming the upload at byte {start}"));
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(err) => {
                return Ok(Attempt::Retry {
                    why: error_chain(&err),
                    offset: None,
                });
            }
        };
        let status = response.status();
        let told = response
            .headers()
            .get(OFFSET_HEADER)
            .and_then(|value| value.to_str().ok()?.trim().parse::<u64>().ok());
        let body = response.text().await.unwrap_or_default();
        let body = body.trim();
        if status == StatusCode::OK {
            return Ok(Attempt::Done);
        }
        match (status, told) {
            // The server wants the upload to continue from elsewhere.
            (StatusCode::CONFLICT | StatusCode::BAD_REQUEST, Some(told)) => Ok(Attempt::Retry {
                why: format!("{status}: {body}"),
                offset: Some(told),
            }),
            // An earlier attempt whose answer was lost completed the upload.
            (StatusCode::CONFLICT, None) if retrying => {
                tracing::info!(%body, "the upload had completed");
                Ok(Attempt::Done)
            }
            (status, _) if status.is_server_error() => Ok(Attempt::Retry {
                why: format!("the upload proxy answered {status}: {body}"),
                offset: None,
            }),
            (StatusCode::UNAUTHORIZED, _) => {
                bail!("the upload proxy refused the upload token ({status}): {body}")
            }
            (status, _) => bail!("the upload proxy answered {status}: {body}"),
        }
    }

    /// How many bytes the upload server has committed (HEAD), if it says; an error when
    /// the proxy refuses the token (retrying would not change that).
    async fn committed(&self) -> anyhow::Result<Option<u64>> {
        let asked = self
            .client
            .head(self.url.clone())
            .bearer_auth(self.token)
            .send()
            .await;
        let response = match asked {
            Ok(response) => response,
            Err(err) => {
                tracing::warn!(err = %error_chain(&err), "asking for the upload offset");
                return Ok(None);
            }
        };
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED {
            bail!("the upload proxy refused the upload token ({status})");
        }
        if status != StatusCode::OK {
            tracing::warn!(%status, "asking for the upload offset");
            return Ok(None);
        }
        let offset = response.headers().get(OFFSET_HEADER);
        Ok(offset
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok()))
    }
}

/// The file from its current position as a request body, counted on `bar`.
fn file_body(file: tokio::fs::File, bar: indicatif::ProgressBar) -> reqwest::Body {
    let chunks = futures_util::stream::try_unfold((file, bar), |(mut file, bar)| async move {
        let mut chunk = vec![0u8; CHUNK];
        let n = file.read(&mut chunk).await?;
        if n == 0 {
            return Ok::<_, std::io::Error>(None);
        }
        chunk.truncate(n);
        bar.inc(n as u64);
        Ok(Some((chunk, (file, bar))))
    });
    reqwest::Body::wrap_stream(chunks)
}

fn progress_bar(size: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(size);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// 0.5 s, 1 s, 2 s, ... up to 10 s.
fn backoff(failures: u32) -> Duration {
    let millis = 500u64.saturating_mul(1 << failures.saturating_sub(1).min(5));
    Duration::from_millis(millis.min(10_000))
}

/// Waits until the upload is processed: the DataVolume Succeeded, or the PVC's upload pod
/// Succeeded (`cdi.kubevirt.io/storage.pod.phase`), as virtctl waits.
async fn wait_processed(target: &Target) -> anyhow::Result<()> {
    let deadline = Instant::now() + PROCESSING_WAIT;
    loop {
        let done = match target.kind {
            TargetKind::Dv => {
                let dv = target
                    .data_volumes
                    .get_opt(&target.name)
                    .await?
                    .ok_or_else(|| anyhow!("{} was deleted", target.describe()))?;
                match dv.data.pointer("/status/phase").and_then(Value::as_str) {
                    Some("Succeeded") => true,
                    Some("Failed") => bail!(
                        "{} failed after the upload: {}",
                        target.describe(),
                        condition_messages(&dv.data)
                    ),
                    _ => false,
                }
            }
            TargetKind::Pvc => {
                let pvc = target
                    .pvcs
                    .get_opt(&target.name)
                    .await?
                    .ok_or_else(|| anyhow!("{} was deleted", target.pvc_name()))?;
                pvc.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(annotations::POD_PHASE))
                    .is_some_and(|phase| phase == "Succeeded")
            }
        };
        if done {
            println!("Processing completed successfully");
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "timed out waiting for post upload processing to complete, please check upload pod status for progress"
            );
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// The messages of a DataVolume's conditions, for an error.
fn condition_messages(dv: &Value) -> String {
    let messages: Vec<&str> = dv
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("message")?.as_str())
        .filter(|m| !m.is_empty())
        .collect();
    if messages.is_empty() {
        "no condition says why".into()
    } else {
        messages.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_urls() {
        let url = |base, asynchronous| upload_url(base, asynchronous).unwrap().to_string();
        assert_eq!(
            url("cdi-uploadproxy.example.com", false),
            "https://cdi-uploadproxy.example.com/v1beta1/upload"
        );
        assert_eq!(
            url("https://127.0.0.1:8443/", true),
            "https://127.0.0.1:8443/v1beta1/upload-async"
        );
        assert_eq!(
            url("https://proxy/prefix", false),
            "https://proxy/prefix/v1beta1/upload"
        );
        assert_eq!(
            url("https://proxy/v1alpha1/upload", true),
            "https://proxy/v1alpha1/upload"
        );
        assert!(upload_url("https://exa mple", false).is_err());
    }

    #[test]
    fn backoff_is_bounded() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(40), Duration::from_secs(10));
    }

    #[test]
    fn condition_messages_are_joined() {
        let dv = json!({"status": {"conditions": [
            {"type": "Ready", "message": ""},
            {"type": "Running", "message": "Upload failed: checksum mismatch"},
        ]}});
        assert_eq!(condition_messages(&dv), "Upload failed: checksum mismatch");
        assert_eq!(condition_messages(&json!({})), "no condition says why");
    }
}
