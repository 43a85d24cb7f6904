//! A DataImportCron against a private registry on one machine: the registry (Debian's
//! docker-registry) serves HTTPS with a certificate of the test CA and requires a password;
//! the cron's template names the credentials (`secretRef`) and the CA (`certConfigMap`), which
//! both the cron's digest polls and the importer pods use.

use crate::platform;

use std::time::Duration;

use ferrovirt_tests::fixture;
use ferrovirt_tests::registry::{
    ImageSpec, LayerCompression, LayerSpec, OciLayout, RegistryServer, RegistryServerOptions,
};
use platform::{Platform, condition};

const LIMIT: Duration = Duration::from_secs(120);

fn cron_yaml(url: &str, secret: &str) -> String {
    format!(
        r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataImportCron
metadata:
  name: golden-cron
spec:
  schedule: "* * * * *"
  managedDataSource: golden
  template:
    spec:
      source:
        registry:
          url: "{url}"
          secretRef: {secret}
          certConfigMap: registry-ca
      storage:
        resources:
          requests:
            storage: 64Mi
"#
    )
}

/// `kubectl create KIND ...`, through YAML: the create generators send protobuf, which the
/// embedded API server does not speak.
fn create(platform: &Platform, args: &[&str]) {
    let mut generate = vec!["create"];
    generate.extend_from_slice(args);
    generate.extend_from_slice(&["--dry-run=client", "-o", "yaml"]);
    let yaml = platform.ok(&generate);
    platform.apply(&yaml);
}

#[test]
fn a_dataimportcron_polls_a_private_registry_with_its_secret_and_ca() {
    let registry = RegistryServer::start(RegistryServerOptions {
        tls: true,
        auth: Some(("puller".into(), "s3cret".into())),
        bearer: false,
    });
    let image = "v3.qcow2";
    let spec = ImageSpec::new(
        "linux/amd64",
        vec![LayerSpec::disk(LayerCompression::Gzip, image)],
    );
    registry.push(&OciLayout::image(&spec), "golden:latest");
    let platform = Platform::start("cron-private");
    let ca = std::fs::read_to_string(fixture("tls/ca.pem")).expect("the test CA");
    create(
        &platform,
        &[
            "configmap",
            "registry-ca",
            &format!("--from-literal=ca.pem={ca}"),
        ],
    );
    for (name, password) in [("wrong-creds", "guess"), ("registry-creds", "s3cret")] {
        create(
            &platform,
            &[
                "secret",
                "generic",
                name,
                "--from-literal=accessKeyId=puller",
                &format!("--from-literal=secretKey={password}"),
            ],
        );
    }
    let url = registry.reference("golden:latest");

    // Wrong credentials: the poll fails and says so; nothing is imported.
    platform.apply(&cron_yaml(&url, "wrong-creds"));
    let cron = platform.wait_cron("golden-cron", LIMIT, |cron| {
        condition(cron, "UpToDate")
            .is_some_and(|c| c["reason"] == "NoDigest" && c["message"] != "No source digest")
    });
    let message = condition(&cron, "UpToDate").expect("UpToDate")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(message.contains("401"), "{cron}");

    // The right ones: the digest is polled, imported, and the DataSource points at it.
    platform.apply(&cron_yaml(&url, "registry-creds"));
    let cron = platform.wait_cron("golden-cron", LIMIT, |cron| {
        condition(cron, "UpToDate").is_some_and(|c| c["status"] == "True")
    });
    let imported = cron["status"]["lastImportedPVC"]["name"]
        .as_str()
        .expect("a last imported PVC")
        .to_string();
    platform.assert_volume_holds("default", &imported, image);
}
