//! A DataImportCron against a private registry on one machine: the registry (Debian's
//! docker-registry) serves HTTPS with a certificate of the test CA and requires a password;
//! the cron's template names the credentials (`secretRef`) and the CA (`certConfigMap`), which
//! both the cron's digest polls and the importer pods use.

mod platform;

use std::time::{Duration, Instant};

use ferrovirt_tests::registry::{
    ImageSpec, LayerCompression, LayerSpec, OciLayout, RegistryServer, RegistryServerOptions,
};
use ferrovirt_tests::{TempDir, fixture, reference_sha256, reference_size};
use platform::{Platform, condition, digest_prefix};

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

fn wait_cron(
    platform: &Platform,
    limit: Duration,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + limit;
    loop {
        let cron = platform
            .json(&["get", "dataimportcron", "golden-cron"])
            .unwrap_or_default();
        if done(&cron) {
            return cron;
        }
        if Instant::now() > deadline {
            let imports = platform.json(&["get", "datavolumes"]).unwrap_or_default();
            let conditions: Vec<_> = imports["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|dv| &dv["status"])
                .collect();
            panic!("the cron did not get there: {cron}\nits imports: {conditions:?}");
        }
        std::thread::sleep(Duration::from_millis(300));
    }
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
    let cron = wait_cron(&platform, LIMIT, |cron| {
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
    let cron = wait_cron(&platform, LIMIT, |cron| {
        condition(cron, "UpToDate").is_some_and(|c| c["status"] == "True")
    });
    let imported = cron["status"]["lastImportedPVC"]["name"]
        .as_str()
        .expect("a last imported PVC")
        .to_string();
    let scratch = TempDir::new("cron-private");
    let disk = scratch.join("disk.img");
    platform.extract_disk("default", &imported, &disk);
    let (digest, zero_tail) = digest_prefix(&disk, reference_size(image));
    assert_eq!(digest, reference_sha256(image));
    assert!(zero_tail);
}
