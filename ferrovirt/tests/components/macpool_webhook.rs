//! `ferrovirt macpool`, kubemacpool's manager on a cluster, against the embedded API server
//! standing in for one (no admission of its own): it writes its CA into
//! MutatingWebhookConfiguration `kubemacpool-mutator`, loads the pool from the stored
//! VirtualMachines before it is ready, and answers AdmissionReviews at
//! `/mutate-virtualmachines` as kube-apiserver posts them.

use crate::admission_review;
use ferrovirt_tests::kubectl::Kubectl;

use std::time::{Duration, Instant};

use admission_review::{bare_api_server, patched};
use ferrovirt_tests::TempDir;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::Api;
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(30);
const SERVICE_NAME: &str = "kubemacpool-service.cluster-network-addons.svc";

const CLUSTER: &str = r#"apiVersion: v1
kind: Namespace
metadata: {name: cluster-network-addons}
---
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kubemacpool-mac-range-config, namespace: cluster-network-addons}
data: {RANGE_START: "02:0e:00:00:00:00", RANGE_END: "02:0e:00:00:00:03"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: kubemacpool-mutator}
webhooks:
- name: mutatevirtualmachines.kubemacpool.io
  admissionReviewVersions: [v1]
  clientConfig:
    service: {name: kubemacpool-service, namespace: cluster-network-addons, path: /mutate-virtualmachines}
  failurePolicy: Fail
  sideEffects: NoneOnDryRun
  namespaceSelector:
    matchExpressions:
    - {key: mutatevirtualmachines.kubemacpool.io, operator: NotIn, values: [ignore]}
  rules:
  - {apiGroups: [kubevirt.io], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [virtualmachines]}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: old, namespace: team}
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        devices:
          interfaces: [{name: default, masquerade: {}, macAddress: "02:0e:00:00:00:00"}]
      networks: [{name: default, pod: {}}]
"#;

async fn kubectl(kubeconfig: &std::path::Path, args: &[&str], stdin: &str) {
    Kubectl::new(kubeconfig).ok_async(args, Some(stdin)).await;
}

fn vm(name: &str, mac: Option<&str>) -> Value {
    let mut iface = json!({"name": "default", "masquerade": {}});
    if let Some(mac) = mac {
        iface["macAddress"] = json!(mac);
    }
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"runStrategy": "Halted", "template": {"spec": {
            "domain": {"devices": {"interfaces": [iface]}},
            "networks": [{"name": "default", "pod": {}}],
        }}},
    })
}

fn review(uid: &str, object: Value, dry_run: bool) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "kubevirt.io", "version": "v1", "kind": "VirtualMachine"},
            "resource": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
            "namespace": "team",
            "operation": "CREATE",
            "dryRun": dry_run,
            "userInfo": {"username": "alice"},
            "object": object,
        },
    })
}

#[tokio::test]
async fn the_webhook_gives_stored_vms_macs_a_wide_berth_and_refuses_taken_ones() {
    let dir = TempDir::new("macpool-webhook");
    let server = bare_api_server(&dir.join("data")).await;
    let admin = &server.kubeconfig;
    kubectl(admin, &["apply", "-f", "-"], CLUSTER).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let _manager = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .args(["macpool", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-listen", "127.0.0.1:0"])
        .env("KUBECONFIG", admin)
        .env("RUST_LOG", "info")
        .kill_on_drop(true)
        .spawn()
        .expect("starting ferrovirt macpool");

    let client = standalone::control_plane::client_for(admin)
        .await
        .expect("a client");
    let configurations: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let deadline = Instant::now() + LIMIT;
    let bundle = loop {
        let configuration = configurations
            .get("kubemacpool-mutator")
            .await
            .expect("the configuration");
        if let Some(bundle) = configuration.webhooks.unwrap_or_default()[0]
            .client_config
            .ca_bundle
            .clone()
        {
            break bundle.0;
        }
        assert!(Instant::now() < deadline, "no caBundle within {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let https = reqwest::Client::builder()
        .tls_certs_merge(reqwest::Certificate::from_pem_bundle(&bundle).expect("the CA"))
        .resolve(SERVICE_NAME, ([127, 0, 0, 1], port).into())
        .build()
        .expect("an HTTPS client");
    // Ready once loaded from the stored VMs.
    let deadline = Instant::now() + LIMIT;
    loop {
        let ready = https
            .get(format!("https://{SERVICE_NAME}:{port}/readyz"))
            .send()
            .await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        assert!(Instant::now() < deadline, "not ready within {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let url = format!("https://{SERVICE_NAME}:{port}/mutate-virtualmachines");
    let ask = |body: Value| {
        let https = https.clone();
        let url = url.clone();
        async move {
            let answer: Value = https
                .post(&url)
                .json(&body)
                .send()
                .await
                .expect("the webhook answers")
                .json()
                .await
                .expect("an AdmissionReview");
            assert_eq!(answer["response"]["uid"], body["request"]["uid"]);
            answer["response"].clone()
        }
    };

    // A new VM gets a MAC of the range, not the stored VM's, and the transaction stamp.
    let admitted = ask(review("1", vm("new", None), false)).await;
    assert_eq!(admitted["allowed"], true, "{admitted}");
    let new = patched(&admitted, vm("new", None));
    let mac = new["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]["macAddress"]
        .as_str()
        .expect("a MAC");
    assert!(
        mac.starts_with("02:0e:00:00:00:0") && mac != "02:0e:00:00:00:00",
        "{mac}"
    );
    assert!(new["metadata"]["annotations"]["kubemacpool.io/transaction-timestamp"].is_string());

    // The stored VM's MAC set by hand: refused with kubemacpool's message, naming the field.
    let refused = ask(review("2", vm("thief", Some("02:0E:00:00:00:00")), false)).await;
    assert_eq!(refused["allowed"], false, "{refused}");
    let message = refused["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("spec.template.spec.domain.devices.interfaces[0].macAddress: Failed to create virtual machine allocation error: Failed to allocate mac to the vm object: failed to allocate requested mac address"),
        "{message}"
    );
    assert!(message.contains("team/old"), "{message}");

    // A dry run allocates nothing.
    let dry = ask(review("3", vm("dry", None), true)).await;
    assert_eq!(dry["allowed"], true, "{dry}");
    assert!(dry["patch"].is_null(), "{dry}");

    // The configuration recreated without a CA (as its operator does after a deletion): the
    // manager writes its CA back.
    kubectl(
        admin,
        &[
            "delete",
            "mutatingwebhookconfiguration",
            "kubemacpool-mutator",
        ],
        "",
    )
    .await;
    kubectl(admin, &["apply", "-f", "-"], CLUSTER).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let configuration = configurations
            .get("kubemacpool-mutator")
            .await
            .expect("the configuration");
        let written = configuration.webhooks.unwrap_or_default()[0]
            .client_config
            .ca_bundle
            .clone();
        if written.is_some_and(|b| b.0 == bundle) {
            break;
        }
        assert!(Instant::now() < deadline, "the CA was not written back");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    server.stop();
}
