//! `ferrovirt webhook` as SSP's virt-template-validator, against the embedded API server:
//! it keeps the caBundle of ValidatingWebhookConfiguration `virt-template-validator`, and
//! answers AdmissionReviews at `/virtualmachine-validate` with the rules of the VM or of the
//! Template (read from the cluster) its labels name, and at `/template-validate` refuses to
//! delete a common template that stored VMs still validate against.

// `patched` serves the mutating webhooks' tests.
use crate::admission_review;
#[allow(dead_code)]
use ferrovirt_tests::kubectl::Kubectl;

use std::path::Path;
use std::time::{Duration, Instant};

use admission_review::bare_api_server;
use ferrovirt_tests::TempDir;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::Api;
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(30);
const SERVICE_NAME: &str = "ferrovirt-webhook.cdi.svc";

/// A namespace of templates with one common template whose rule wants 2Gi of memory, and a
/// VM made from it.
const CLUSTER: &str = r#"apiVersion: v1
kind: Namespace
metadata: {name: openshift}
---
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: template.openshift.io/v1
kind: Template
metadata:
  name: fedora-server-small
  namespace: openshift
  labels: {template.kubevirt.io/type: base}
  annotations:
    validations: |
      [{"name": "minimal-required-memory", "path": "jsonpath::.spec.domain.memory.guest",
        "rule": "integer", "message": "This VM requires more memory.", "min": 2147483648}]
objects: []
"#;

async fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) {
    Kubectl::new(kubeconfig).ok_async(args, stdin).await;
}

fn vm(memory: &str) -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "fedora", "namespace": "team", "labels": {
            "vm.kubevirt.io/template": "fedora-server-small",
            "vm.kubevirt.io/template.namespace": "openshift",
        }},
        "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {
            "memory": {"guest": memory},
            "devices": {"disks": [{"name": "root", "disk": {"bus": "sata"}}]},
        }}}},
    })
}

fn review(uid: &str, operation: &str, resource: &str, object: Value) -> Value {
    let (group, kind) = match resource {
        "templates" => ("template.openshift.io", "Template"),
        _ => ("kubevirt.io", "VirtualMachine"),
    };
    let (object, old) = match operation {
        "DELETE" => (Value::Null, object),
        _ => (object, Value::Null),
    };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": resource},
            "namespace": "team",
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": old,
        },
    })
}

/// Starts `ferrovirt webhook` with `kubeconfig` and waits (as `admin`) for its CA in the
/// validator's configuration.
async fn start_webhook(
    kubeconfig: &Path,
    admin: &Path,
    port: u16,
) -> (tokio::process::Child, Vec<u8>) {
    let webhook = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .args(["webhook", "--listen", &format!("127.0.0.1:{port}")])
        .env("KUBECONFIG", kubeconfig)
        .env("POD_NAMESPACE", "cdi")
        .env("RUST_LOG", "info")
        .kill_on_drop(true)
        .spawn()
        .expect("starting ferrovirt webhook");
    let client = standalone::control_plane::client_for(admin)
        .await
        .expect("a client");
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client);
    let deadline = Instant::now() + LIMIT;
    loop {
        let configuration = configurations
            .get("virt-template-validator")
            .await
            .expect("the configuration");
        let bundle = configuration.webhooks.unwrap_or_default()[0]
            .client_config
            .ca_bundle
            .clone();
        if let Some(bundle) = bundle {
            return (webhook, bundle.0);
        }
        assert!(Instant::now() < deadline, "no caBundle within {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Webhook {
    https: reqwest::Client,
    base: String,
}

impl Webhook {
    async fn ask(&self, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.base);
        let deadline = Instant::now() + LIMIT;
        loop {
            match self.https.post(&url).json(&body).send().await {
                Ok(answer) => {
                    let answer: Value = answer.json().await.expect("an AdmissionReview");
                    assert_eq!(answer["response"]["uid"], body["request"]["uid"]);
                    return answer["response"].clone();
                }
                Err(err) if Instant::now() < deadline => {
                    eprintln!("webhook not answering yet: {err}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(err) => panic!("the webhook does not answer: {err:?}"),
            }
        }
    }

    async fn vm(&self, uid: &str, vm: Value) -> Value {
        let body = review(uid, "CREATE", "virtualmachines", vm);
        self.ask("/virtualmachine-validate", body).await
    }
}

#[tokio::test]
async fn the_template_validator_applies_template_and_vm_rules() {
    let dir = TempDir::new("template-validator");
    let server = bare_api_server(&dir.join("data")).await;
    let admin = &server.kubeconfig;
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/operators");
    for file in ["rbac.yaml", "webhook.yaml", "../ssp-operator/operator.yaml"] {
        kubectl(admin, &["apply", "-f", &format!("{deploy}/{file}")], None).await;
    }
    kubectl(admin, &["apply", "-f", "-"], Some(CLUSTER)).await;
    // The webhook acts as its service account, under the server's RBAC.
    let as_webhook = dir.join("webhook-kubeconfig");
    let kubeconfig = std::fs::read_to_string(admin).expect("reading the kubeconfig");
    let impersonating = kubeconfig.replacen(
        "  user:\n",
        "  user:\n    as: system:serviceaccount:cdi:ferrovirt-webhook\n",
        1,
    );
    assert_ne!(kubeconfig, impersonating, "the kubeconfig has a user");
    std::fs::write(&as_webhook, impersonating).expect("writing the kubeconfig");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let (_webhook, bundle) = start_webhook(&as_webhook, admin, port).await;
    let webhook = Webhook {
        https: reqwest::Client::builder()
            .tls_certs_merge(reqwest::Certificate::from_pem_bundle(&bundle).expect("the CA"))
            .resolve(SERVICE_NAME, ([127, 0, 0, 1], port).into())
            .build()
            .expect("an HTTPS client"),
        base: format!("https://{SERVICE_NAME}:{port}"),
    };

    // The template's rule refuses 1Gi with its message, the field and upstream's Status.
    let refused = webhook.vm("1", vm("1Gi")).await;
    let message =
        "This VM requires more memory.: value 1073741824 is lower than minimum [2147483648]";
    assert_eq!(refused["allowed"], false, "{refused}");
    assert_eq!(
        refused["status"],
        json!({"message": message, "reason": "Invalid", "code": 422, "details": {"causes": [
            {"reason": "FieldValueInvalid", "field": ".spec.domain.memory.guest", "message": message},
        ]}}),
        "{refused}"
    );
    let admitted = webhook.vm("2", vm("2Gi")).await;
    assert_eq!(admitted, json!({"uid": "2", "allowed": true}));

    // The VM's own rules win over the template's; a justWarning rule only warns.
    let mut own = vm("1Gi");
    own["metadata"]["annotations"] = json!({"vm.kubevirt.io/validations": json!([{
        "name": "virtio", "path": "jsonpath::.spec.domain.devices.disks[*].disk.bus",
        "rule": "enum", "values": ["virtio"], "justWarning": true,
        "message": "virtio disk bus type has better performance",
    }]).to_string()});
    let warned = webhook.vm("3", own.clone()).await;
    assert_eq!(warned["allowed"], true, "{warned}");
    assert_eq!(
        warned["warnings"],
        json!(["virtio disk bus type has better performance: Some of [sata] are not in [virtio]"])
    );

    // Skipped validation; then rules that do not decode.
    let mut skipped = vm("1Gi");
    skipped["metadata"]["annotations"] = json!({"vm.kubevirt.io/skip-validations": ""});
    assert_eq!(webhook.vm("4", skipped).await["allowed"], true);
    own["metadata"]["annotations"]["vm.kubevirt.io/validations"] = json!("[{\"rule\": 1}]");
    let malformed = webhook.vm("5", own).await;
    assert_eq!(
        malformed["status"],
        json!({"code": 400, "message":
            "json: cannot unmarshal number into Go struct field Rule.rule of type validation.RuleType"}),
        "{malformed}"
    );

    // A review of another resource is refused as upstream refuses it.
    let mut wrong = review("6", "CREATE", "virtualmachineinstances", vm("2Gi"));
    wrong["request"]["resource"]["resource"] = json!("virtualmachineinstances");
    let answer = webhook.ask("/virtualmachine-validate", wrong).await;
    assert_eq!(
        answer["status"]["message"],
        "expect resource {kubevirt.io v1 virtualmachineinstances} to be 'virtualmachines'"
    );

    // While the VM is stored, its template may not be deleted.
    let stored = serde_json::to_string(&vm("2Gi")).expect("JSON");
    kubectl(admin, &["apply", "-f", "-"], Some(&stored)).await;
    let template = json!({
        "apiVersion": "template.openshift.io/v1", "kind": "Template",
        "metadata": {"name": "fedora-server-small", "namespace": "openshift",
                     "labels": {"template.kubevirt.io/type": "base"},
                     "annotations": {"validations": "[]"}},
    });
    let delete = |uid: &str| review(uid, "DELETE", "templates", template.clone());
    let forbidden = webhook.ask("/template-validate", delete("7")).await;
    assert_eq!(forbidden["allowed"], false, "{forbidden}");
    assert_eq!(
        forbidden["status"],
        json!({"code": 403, "reason": "Forbidden", "message":
            "Template cannot be deleted, because the following VMs are referencing it for validation: team/fedora"})
    );
    kubectl(
        admin,
        &[
            "delete",
            "virtualmachines.kubevirt.io",
            "-n",
            "team",
            "fedora",
        ],
        None,
    )
    .await;
    let free = webhook.ask("/template-validate", delete("8")).await;
    assert_eq!(free["allowed"], true, "{free}");
    server.stop();
}
