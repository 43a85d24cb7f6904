//! `ferrovirt webhook` as `deploy/operators/webhook.yaml` runs it, against the embedded API
//! server (as its service account, under that server's RBAC): it writes its CA into the
//! MutatingWebhookConfiguration and keeps the signing key in a Secret; AdmissionReviews posted
//! as kube-apiserver posts them are answered with CDI's defaulting, validation and clone
//! permission check (SubjectAccessReviews for the requesting user).

use crate::admission_review;
use ferrovirt_tests::kubectl::Kubectl;

use std::time::{Duration, Instant};

use admission_review::{bare_api_server, patched};
use ferrovirt_tests::TempDir;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::{Value, json};
use uploadproxy::UploadTokenValidator;

const LIMIT: Duration = Duration::from_secs(30);
const SERVICE_NAME: &str = "ferrovirt-webhook.cdi.svc";

/// Alice manages DataVolumes in `team`; she may clone from `golden-images` only once
/// `alice-clones` exists.
const NAMESPACES_AND_ROLES: &str = r#"apiVersion: v1
kind: Namespace
metadata: {name: golden-images}
---
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: datavolume-cloner}
rules: [{apiGroups: [cdi.kubevirt.io], resources: [datavolumes/source], verbs: [create]}]
"#;

const ALICE_CLONES: &str = r#"apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-clones, namespace: golden-images}
subjects: [{kind: User, name: alice}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: datavolume-cloner}
"#;

async fn kubectl(kubeconfig: &std::path::Path, args: &[&str], stdin: Option<&str>) {
    Kubectl::new(kubeconfig).ok_async(args, stdin).await;
}

fn review(uid: &str, user: &str, object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "cdi.kubevirt.io", "version": "v1beta1", "kind": "DataVolume"},
            "resource": {"group": "cdi.kubevirt.io", "version": "v1beta1", "resource": "datavolumes"},
            "namespace": "team",
            "operation": "CREATE",
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
            "object": object,
        },
    })
}

fn clone_dv() -> Value {
    json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {"name": "copy", "namespace": "team"},
        "spec": {
            "source": {"pvc": {"namespace": "golden-images", "name": "golden"}},
            "storage": {"resources": {"requests": {"storage": "1Gi"}}},
        },
    })
}

#[tokio::test]
async fn the_webhook_checks_clone_permission_and_issues_clone_tokens() {
    let dir = TempDir::new("webhook");
    let server = bare_api_server(&dir.join("data")).await;
    let admin = &server.kubeconfig;
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/operators");
    for file in ["rbac.yaml", "webhook.yaml"] {
        kubectl(admin, &["apply", "-f", &format!("{deploy}/{file}")], None).await;
    }
    kubectl(admin, &["apply", "-f", "-"], Some(NAMESPACES_AND_ROLES)).await;

    let kubeconfig = std::fs::read_to_string(admin).expect("reading the kubeconfig");
    let as_webhook = dir.join("webhook-kubeconfig");
    std::fs::write(
        &as_webhook,
        kubeconfig.replacen(
            "  user:\n",
            "  user:\n    as: system:serviceaccount:cdi:ferrovirt-webhook\n",
            1,
        ),
    )
    .expect("writing the kubeconfig");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let _webhook = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .args(["webhook", "--listen", &format!("127.0.0.1:{port}")])
        .env("KUBECONFIG", &as_webhook)
        .env("RUST_LOG", "info")
        .kill_on_drop(true)
        .spawn()
        .expect("starting ferrovirt webhook");

    // The webhook's CA lands in its configuration; its key in the Secret.
    let client = standalone::control_plane::client_for(admin)
        .await
        .expect("a client");
    let configurations: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let deadline = Instant::now() + LIMIT;
    let bundle = loop {
        let configuration = configurations
            .get("ferrovirt-datavolume-mutate")
            .await
            .expect("the configuration");
        let bundle = configuration.webhooks.unwrap_or_default()[0]
            .client_config
            .ca_bundle
            .clone();
        if let Some(bundle) = bundle {
            break bundle.0;
        }
        assert!(Instant::now() < deadline, "no caBundle within {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let secret = Api::<Secret>::namespaced(client.clone(), "cdi")
        .get("cdi-api-signing-key")
        .await
        .expect("the signing key Secret");
    let public = secret.data.expect("data")["id_rsa.pub"].0.clone();
    let validator =
        UploadTokenValidator::from_public_key_pem(std::str::from_utf8(&public).expect("a PEM"))
            .expect("a public key");

    let https = reqwest::Client::builder()
        .tls_certs_merge(reqwest::Certificate::from_pem_bundle(&bundle).expect("the CA"))
        .resolve(SERVICE_NAME, ([127, 0, 0, 1], port).into())
        .build()
        .expect("an HTTPS client");
    let url = format!("https://{SERVICE_NAME}:{port}/datavolume-mutate");
    let ask = |body: Value| {
        let https = https.clone();
        let url = url.clone();
        async move {
            let deadline = Instant::now() + LIMIT;
            loop {
                match https.post(&url).json(&body).send().await {
                    Ok(answer) => {
                        let answer: Value = answer.json().await.expect("an AdmissionReview");
                        assert_eq!(answer["response"]["uid"], body["request"]["uid"]);
                        return answer["response"].clone();
                    }
                    Err(err) if Instant::now() < deadline => {
                        tracing_log(&err);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(err) => panic!("the webhook does not answer: {err:?}"),
                }
            }
        }
    };

    // Without datavolumes/source in golden-images: denied with CDI's message.
    let denied = ask(review("1", "alice", clone_dv())).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    assert_eq!(denied["status"]["code"], 403, "{denied}");
    let message = denied["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(
            "User alice has insufficient permissions in clone source namespace golden-images"
        ),
        "{denied}"
    );

    // With it: allowed, defaulted, and the patch adds a token for exactly this clone.
    kubectl(admin, &["apply", "-f", "-"], Some(ALICE_CLONES)).await;
    let admitted = ask(review("2", "alice", clone_dv())).await;
    assert_eq!(admitted["allowed"], true, "{admitted}");
    assert_eq!(admitted["patchType"], "JSONPatch", "{admitted}");
    let dv = patched(&admitted, clone_dv());
    let token = dv["metadata"]["annotations"]["cdi.kubevirt.io/storage.clone.token"]
        .as_str()
        .expect("a clone token");
    validator
        .validate_clone(token, ("golden-images", "golden"), ("team", "copy"))
        .expect("the token allows this clone");

    // A clone within the namespace needs no check and gets no token.
    let mut local = clone_dv();
    local["spec"]["source"]["pvc"]["namespace"] = json!("team");
    let answer = ask(review("3", "bob", local)).await;
    assert_eq!(answer["allowed"], true, "{answer}");

    // An invalid DataVolume is refused with the validation's message.
    let mut invalid = clone_dv();
    invalid["spec"] = json!({"storage": {}});
    let refused = ask(review("4", "alice", invalid)).await;
    assert_eq!(refused["allowed"], false, "{refused}");
    assert_eq!(refused["status"]["code"], 422, "{refused}");
    assert!(
        refused["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("source")),
        "{refused}"
    );
    server.stop();
}

fn tracing_log(err: &reqwest::Error) {
    eprintln!("webhook not answering yet: {err}");
}
