//! Who gets through: the proxy's token checks (missing or malformed → 400, invalid, forged
//! or expired → 401, a token for something other than an upload → 400), its wait for the
//! upload server (503), and the upload server's mTLS (only the proxy's client certificate).

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use common::{CLIENT_NAME, Harness, NAMESPACE, Options, PVC};
use uploadproxy::token::{
    GroupVersionResource, ISSUER, RESOURCE_PVC, TOKEN_LIFETIME, UploadClaims,
};
use uploadproxy::{UploadTarget, UploadTokenIssuer};

async fn post_status(harness: &Harness, authorization: Option<&str>) -> (u16, String) {
    let mut request = harness
        .client()
        .post(harness.url("/v1beta1/upload"))
        .body("not an image");
    if let Some(value) = authorization {
        request = request.header("Authorization", value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_checked() {
    let harness = Harness::start(Options::default()).await;
    let bearer = |token: &str| format!("Bearer {token}");

    assert_eq!(post_status(&harness, None).await.0, 400);
    assert_eq!(
        post_status(&harness, Some("Basic dXNlcjpwYXNz")).await.0,
        400
    );
    assert_eq!(post_status(&harness, Some("Bearer a b c")).await.0, 400);

    let (status, body) = post_status(&harness, Some(&bearer("not.a.jwt"))).await;
    assert_eq!(status, 401, "{body}");

    let elsewhere = tempfile::tempdir().unwrap();
    let forger = UploadTokenIssuer::load_or_create(elsewhere.path()).unwrap();
    let forged = forger.issue(NAMESPACE, PVC).unwrap();
    let (status, body) = post_status(&harness, Some(&bearer(&forged))).await;
    assert_eq!(status, 401);
    assert!(body.contains("signature"), "{body}");

    let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
    let expired = harness
        .issuer
        .issue_at(NAMESPACE, PVC, an_hour_ago, TOKEN_LIFETIME)
        .unwrap();
    let (status, body) = post_status(&harness, Some(&bearer(&expired))).await;
    assert_eq!(status, 401);
    assert!(body.contains("expired"), "{body}");

    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let clone_token = harness
        .issuer
        .sign(&UploadClaims {
            iss: ISSUER.into(),
            iat: now,
            nbf: now,
            exp: now + 300,
            operation: "Clone".into(),
            name: PVC.into(),
            namespace: NAMESPACE.into(),
            resource: GroupVersionResource {
                group: String::new(),
                version: "v1".into(),
                resource: RESOURCE_PVC.into(),
            },
            params: Default::default(),
        })
        .unwrap();
    assert_eq!(
        post_status(&harness, Some(&bearer(&clone_token))).await.0,
        400
    );

    // Nothing reached the upload server.
    assert_eq!(harness.server.committed(), 0);
    assert!(!harness.disk().exists());
    // The health check needs no token.
    let health = harness
        .client()
        .get(harness.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_server_that_is_not_ready_is_503_after_the_wait() {
    let harness = Harness::start(Options {
        register: false,
        ready_timeout: Duration::from_millis(500),
        ..Options::default()
    })
    .await;
    let started = Instant::now();
    let auth = format!("Bearer {}", harness.token());
    let (status, body) = post_status(&harness, Some(&auth)).await;
    assert_eq!(status, 503, "{body}");
    assert!(started.elapsed() >= Duration::from_millis(450));
    assert!(body.contains("default/disk"), "{body}");

    // Becoming ready during the wait is enough.
    let resolver = harness.resolver.clone();
    let url = harness.server_url.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        resolver.insert(
            NAMESPACE,
            PVC,
            UploadTarget {
                base_url: url,
                content_type: importer::ContentType::Kubevirt,
            },
        );
    });
    let head = harness
        .client()
        .head(harness.url("/v1beta1/upload"))
        .header("Authorization", &auth)
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_bodies_are_escaped() {
    struct Refusing;
    impl uploadproxy::UploadServerResolver for Refusing {
        fn resolve<'a>(
            &'a self,
            _namespace: &'a str,
            pvc: &'a str,
        ) -> uploadproxy::resolver::ResolveFuture<'a> {
            Box::pin(async move {
                uploadproxy::Resolution::Rejected(format!("PVC {pvc} has content type <script>"))
            })
        }
    }
    let harness = Harness::start(Options::default()).await;
    let proxy = uploadproxy::UploadProxy::new(uploadproxy::UploadProxyConfig {
        validator: harness.issuer.validator(),
        resolver: Arc::new(Refusing),
        upstream_tls: harness.pki.upstream_tls(CLIENT_NAME),
        ready_timeout: Duration::from_secs(1),
    })
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://localhost:{}/v1beta1/upload",
        listener.local_addr().unwrap().port()
    );
    let tls = uploadproxy::tls::server_config(&harness.pki.proxy_identity(), None).unwrap();
    let task = proxy.serve(listener, tls);
    let response = harness
        .client()
        .post(url)
        .bearer_auth(harness.token())
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    let body = response.text().await.unwrap();
    assert!(body.contains("&lt;script&gt;"), "{body}");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upload_server_takes_only_the_proxys_certificate() {
    let harness = Harness::start(Options::default()).await;
    let url = format!("{}/v1beta1/upload", harness.server_url);
    let roots = uploadproxy::tls::roots_from_pem(harness.pki.server_ca.pem.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let anonymous = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let client = |config| {
        reqwest::Client::builder()
            .use_preconfigured_tls(config)
            .no_proxy()
            .build()
            .unwrap()
    };
    // No client certificate: the handshake fails.
    assert!(client(anonymous).post(&url).body("x").send().await.is_err());
    // A certificate from the right CA but another name: 401.
    let intruder = client(harness.pki.upstream_tls("intruder"));
    let response = intruder.post(&url).body("x").send().await.unwrap();
    assert_eq!(response.status(), 401);
    // The proxy's own identity: accepted (HEAD reports the committed offset).
    let proxy = client(harness.pki.upstream_tls(CLIENT_NAME));
    let response = proxy.head(&url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["upload-offset"], "0");
    let response = proxy.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 405);
}
