//! Upstream-style manifests in `tests/examples/` parse into the API types, serialize back
//! without losing or adding a field, pass validation, and fail it with the expected field
//! once mutated.

use std::path::PathBuf;

use admission::cdi::validate::{
    validate_data_import_cron, validate_data_source, validate_data_volume,
};
use admission::hostpath::validate::validate_host_path_provisioner;
use admission::kubevirt::validate::{
    validate_virtual_machine, validate_virtual_machine_instance, validate_virtual_machine_json,
};
use api::cdi::default::default_data_volume;
use api::cdi::{CDI, DataImportCron, DataSource, DataVolume, DataVolumePhase};
use api::hco::HyperConverged;
use api::hostpath::HostPathProvisioner;
use api::hostpath::default::default_host_path_provisioner;
use api::kubevirt::default::default_virtual_machine;
use api::kubevirt::{RunStrategy, VirtualMachine, VirtualMachineInstance};
use api::ssp::SSP;
use api::{Problem, ValidationError, ValidationResult};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn example_text(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/examples")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The example as generic JSON.
fn example_value(name: &str) -> Value {
    serde_saphyr::from_str(&example_text(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Parses the example YAML straight into `T` and checks that serializing it gives back
/// exactly the document.
fn round_trip<T: DeserializeOwned + Serialize>(name: &str) -> T {
    let typed: T =
        serde_saphyr::from_str(&example_text(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let back = serde_json::to_value(&typed).unwrap_or_else(|e| panic!("{name}: {e}"));
    let expected = example_value(name);
    assert_eq!(
        back,
        expected,
        "{name} changed in a round trip:\n got: {}\nwant: {}",
        serde_json::to_string_pretty(&back).unwrap_or_default(),
        serde_json::to_string_pretty(&expected).unwrap_or_default()
    );
    typed
}

/// Applies `mutate` to the example and parses the result.
fn mutated<T: DeserializeOwned>(name: &str, mutate: impl FnOnce(&mut Value)) -> T {
    let mut v = example_value(name);
    mutate(&mut v);
    serde_json::from_value(v).unwrap_or_else(|e| panic!("{name} mutated: {e}"))
}

fn failed_field(result: ValidationResult) -> String {
    match result {
        Ok(()) => panic!("validation passed, a failure was expected"),
        Err(ValidationError { field, .. }) => field.to_string(),
    }
}

const DATA_VOLUMES: [&str; 7] = [
    "dv-http.yaml",
    "dv-registry.yaml",
    "dv-upload.yaml",
    "dv-pvc-clone.yaml",
    "dv-blank.yaml",
    "dv-s3.yaml",
    "dv-sourceref.yaml",
];

#[test]
fn data_volumes_round_trip_and_validate() {
    for name in DATA_VOLUMES {
        let mut dv: DataVolume = round_trip(name);
        assert_eq!(validate_data_volume(&dv), Ok(()), "{name}");
        default_data_volume(&mut dv);
        assert_eq!(validate_data_volume(&dv), Ok(()), "{name} after defaulting");
    }
}

#[test]
fn data_volume_status_is_typed() {
    let dv: DataVolume = round_trip("dv-sourceref.yaml");
    let status = dv.status.unwrap_or_default();
    assert_eq!(status.phase, Some(DataVolumePhase::CloneInProgress));
    assert_eq!(status.restart_count, Some(1));
    assert_eq!(status.conditions.map(|c| c.len()), Some(3));
}

#[test]
fn data_volume_with_pvc_and_storage_fails() {
    let dv: DataVolume = mutated("dv-http.yaml", |v| {
        v["spec"]["pvc"] = json!({"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}});
    });
    let e = validate_data_volume(&dv).unwrap_err();
    assert_eq!(e.field.as_str(), "spec.pvc");
    assert!(matches!(e.problem, Problem::Conflict { .. }));
}

#[test]
fn data_volume_without_pvc_or_storage_fails() {
    let dv: DataVolume = mutated("dv-blank.yaml", |v| {
        v["spec"].as_object_mut().map(|s| s.remove("pvc"));
    });
    assert_eq!(
        validate_data_volume(&dv).unwrap_err().to_string(),
        "spec: Missing Data volume PVC: set one of pvc, storage"
    );
}

#[test]
fn data_volume_without_source_fails() {
    let dv: DataVolume = mutated("dv-s3.yaml", |v| {
        v["spec"].as_object_mut().map(|s| s.remove("source"));
    });
    assert_eq!(failed_field(validate_data_volume(&dv)), "spec");
}

#[test]
fn data_volume_with_two_sources_fails() {
    let dv: DataVolume = mutated("dv-http.yaml", |v| {
        v["spec"]["source"]["blank"] = json!({});
    });
    let e = validate_data_volume(&dv).unwrap_err();
    assert_eq!(e.field.as_str(), "spec.source");
    assert!(matches!(e.problem, Problem::MoreThanOneOf { .. }));
}

#[test]
fn data_volume_smaller_than_a_mebibyte_fails() {
    let dv: DataVolume = mutated("dv-blank.yaml", |v| {
        v["spec"]["pvc"]["resources"]["requests"]["storage"] = json!("512Ki");
    });
    let e = validate_data_volume(&dv).unwrap_err();
    assert_eq!(e.field.as_str(), "spec.pvc.resources.requests.storage");
    assert!(matches!(e.problem, Problem::TooSmall { .. }));
}

#[test]
fn data_volume_size_is_required_unless_cloning() {
    let dv: DataVolume = mutated("dv-upload.yaml", |v| {
        v["spec"]["storage"] = json!({});
    });
    assert_eq!(
        failed_field(validate_data_volume(&dv)),
        "spec.storage.resources.requests.storage"
    );
    // The clone example has no size and is valid (checked above).
}

#[test]
fn data_volume_http_url_must_be_http() {
    let dv: DataVolume = mutated("dv-http.yaml", |v| {
        v["spec"]["source"]["http"]["url"] = json!("file:///etc/passwd");
    });
    let e = validate_data_volume(&dv).unwrap_err();
    assert_eq!(e.field.as_str(), "spec.source.http.url");
    assert!(matches!(e.problem, Problem::InvalidUrl { .. }));
}

#[test]
fn data_volume_registry_url_needs_a_registry_scheme() {
    let dv: DataVolume = mutated("dv-registry.yaml", |v| {
        v["spec"]["source"]["registry"]["url"] = json!("quay.io/containerdisks/fedora:40");
    });
    assert_eq!(
        failed_field(validate_data_volume(&dv)),
        "spec.source.registry.url"
    );
    let dv: DataVolume = mutated("dv-registry.yaml", |v| {
        v["spec"]["source"]["registry"]["imageStream"] = json!("fedora");
    });
    assert_eq!(
        failed_field(validate_data_volume(&dv)),
        "spec.source.registry.url"
    );
}

#[test]
fn data_volume_archive_only_with_http_or_upload() {
    let dv: DataVolume = mutated("dv-registry.yaml", |v| {
        v["spec"]["contentType"] = json!("archive");
    });
    assert_eq!(failed_field(validate_data_volume(&dv)), "spec.contentType");
    let dv: DataVolume = mutated("dv-upload.yaml", |v| {
        v["spec"]["contentType"] = json!("archive");
    });
    assert_eq!(validate_data_volume(&dv), Ok(()));
}

#[test]
fn data_volume_content_type_outside_the_enum_does_not_parse() {
    let mut v = example_value("dv-upload.yaml");
    v["spec"]["contentType"] = json!("iso");
    assert!(serde_json::from_value::<DataVolume>(v).is_err());
}

#[test]
fn virtual_machine_round_trips_and_validates() {
    let mut vm: VirtualMachine = round_trip("vm-fedora.yaml");
    assert_eq!(validate_virtual_machine(&vm), Ok(()));
    assert_eq!(vm.spec.run_strategy, Some(RunStrategy::RerunOnFailure));
    let template = vm
        .spec
        .template
        .clone()
        .and_then(|t| t.spec)
        .unwrap_or_default();
    assert!(serde_json::to_value(&template).unwrap()["tolerations"].is_array());
    assert!(
        template
            .domain
            .features
            .as_ref()
            .and_then(|f| f.smm.as_ref())
            .is_some_and(|s| s.is_enabled())
    );
    let volumes = template.volumes.unwrap_or_default();
    let cloud_init = volumes[1].cloud_init_no_cloud.clone().unwrap_or_default();
    assert!(
        cloud_init
            .user_data
            .unwrap_or_default()
            .starts_with("#cloud-config")
    );
    default_virtual_machine(&mut vm);
    assert_eq!(vm.spec.run_strategy, Some(RunStrategy::RerunOnFailure));
    assert_eq!(
        validate_virtual_machine_json(&example_value("vm-fedora.yaml")),
        Ok(())
    );
}

#[test]
fn virtual_machine_running_with_run_strategy_fails() {
    let vm: VirtualMachine = mutated("vm-fedora.yaml", |v| v["spec"]["running"] = json!(false));
    assert_eq!(failed_field(validate_virtual_machine(&vm)), "spec.running");
}

#[test]
fn virtual_machine_unknown_run_strategy_fails() {
    let mut v = example_value("vm-fedora.yaml");
    v["spec"]["runStrategy"] = json!("Eventually");
    assert_eq!(
        failed_field(validate_virtual_machine_json(&v)),
        "spec.runStrategy"
    );
}

#[test]
fn virtual_machine_without_run_strategy_defaults_to_halted() {
    let mut vm: VirtualMachine = mutated("vm-fedora.yaml", |v| {
        v["spec"].as_object_mut().map(|s| s.remove("runStrategy"));
    });
    default_virtual_machine(&mut vm);
    assert_eq!(vm.spec.run_strategy, Some(RunStrategy::Halted));
    assert_eq!(validate_virtual_machine(&vm), Ok(()));
}

#[test]
fn virtual_machine_data_volume_template_is_validated() {
    let vm: VirtualMachine = mutated("vm-fedora.yaml", |v| {
        v["spec"]["dataVolumeTemplates"][0]["spec"]["storage"] = json!({});
    });
    assert_eq!(
        failed_field(validate_virtual_machine(&vm)),
        "spec.dataVolumeTemplates[0].spec.storage.resources.requests.storage"
    );
}

#[test]
fn virtual_machine_interface_without_network_fails() {
    let vm: VirtualMachine = mutated("vm-fedora.yaml", |v| {
        if let Some(n) = v["spec"]["template"]["spec"]["networks"].as_array_mut() {
            n.truncate(1);
        }
    });
    assert_eq!(
        failed_field(validate_virtual_machine(&vm)),
        "spec.template.spec.domain.devices.interfaces[1].name"
    );
}

#[test]
fn virtual_machine_instance_round_trips_and_validates() {
    let vmi: VirtualMachineInstance = round_trip("vmi-cirros.yaml");
    assert_eq!(validate_virtual_machine_instance(&vmi), Ok(()));
    let status = vmi.status.unwrap_or_default();
    assert!(serde_json::to_value(&status).unwrap()["guestOSInfo"].is_object());
}

#[test]
fn host_path_provisioner_round_trips_and_validates() {
    let mut hpp: HostPathProvisioner = round_trip("hpp.yaml");
    assert_eq!(validate_host_path_provisioner(&hpp), Ok(()));
    default_host_path_provisioner(&mut hpp);
    assert_eq!(validate_host_path_provisioner(&hpp), Ok(()));
}

#[test]
fn host_path_provisioner_mutations_fail() {
    let hpp: HostPathProvisioner = mutated("hpp.yaml", |v| {
        v["spec"]["storagePools"][1]["name"] = json!("local");
    });
    let e = validate_host_path_provisioner(&hpp).unwrap_err();
    assert_eq!(e.field.as_str(), "spec.storagePools[1].name");
    assert!(
        e.problem
            .to_string()
            .contains("cannot have duplicate names")
    );

    let hpp: HostPathProvisioner = mutated("hpp.yaml", |v| {
        v["spec"]["storagePools"][0]["path"] = json!("var/hpvolumes");
    });
    assert!(matches!(
        validate_host_path_provisioner(&hpp).unwrap_err().problem,
        Problem::NotAbsolute(_)
    ));

    let hpp: HostPathProvisioner = mutated("hpp.yaml", |v| {
        v["spec"]["pathConfig"] = json!({"path": "/var/legacy"});
    });
    assert_eq!(
        failed_field(validate_host_path_provisioner(&hpp)),
        "spec.pathConfig"
    );

    let hpp: HostPathProvisioner = mutated("hpp.yaml", |v| {
        v["spec"].as_object_mut().map(|s| s.remove("storagePools"));
    });
    assert_eq!(
        validate_host_path_provisioner(&hpp)
            .unwrap_err()
            .to_string(),
        "spec: either pathConfig or storage pools must be set"
    );
}

#[test]
fn hyper_converged_round_trips_keeping_untyped_fields() {
    let hco: HyperConverged = round_trip("hco.yaml");
    assert!(hco.spec.live_migration_config.is_some());
    assert!(hco.spec.cert_config.is_some());
    let infra = hco
        .spec
        .infra
        .and_then(|i| i.node_placement)
        .unwrap_or_default();
    assert!(
        infra
            .node_selector
            .unwrap_or_default()
            .contains_key("node-role.kubernetes.io/infra")
    );
}

#[test]
fn cdi_round_trips() {
    let cdi: CDI = round_trip("cdi.yaml");
    let infra = cdi.spec.infra.unwrap_or_default();
    assert_eq!(infra.api_server_replicas, Some(2));
    assert!(infra.placement.node_selector.is_some());
    let ca = cdi.spec.cert_config.and_then(|c| c.ca).unwrap_or_default();
    assert_eq!(ca.duration.as_deref(), Some("48h0m0s"));
    let patches = cdi
        .spec
        .customize_components
        .and_then(|c| c.patches)
        .unwrap_or_default();
    assert_eq!(patches[0].resource_name, "cdi-uploadproxy");
}

#[test]
fn ssp_round_trips() {
    let ssp: SSP = round_trip("ssp.yaml");
    let validator = ssp.spec.template_validator.unwrap_or_default();
    assert_eq!(validator.replicas, Some(2));
    let placement = validator.placement.unwrap_or_default();
    assert_eq!(placement.tolerations.unwrap_or_default().len(), 1);
    assert_eq!(
        ssp.spec.common_templates.map(|c| c.namespace).as_deref(),
        Some("openshift")
    );
}

#[test]
fn data_import_cron_and_data_source_round_trip_and_validate() {
    let cron: DataImportCron = round_trip("dataimportcron.yaml");
    assert_eq!(validate_data_import_cron(&cron), Ok(()));
    let cron: DataImportCron = mutated("dataimportcron.yaml", |v| {
        v["spec"]["schedule"] = json!("every monday");
    });
    assert_eq!(
        failed_field(validate_data_import_cron(&cron)),
        "spec.schedule"
    );

    let ds: DataSource = round_trip("datasource.yaml");
    assert_eq!(validate_data_source(&ds), Ok(()));
    let ds: DataSource = mutated("datasource.yaml", |v| {
        v["spec"]["source"]["snapshot"] = json!({"namespace": "a", "name": "b"});
    });
    assert_eq!(failed_field(validate_data_source(&ds)), "spec.source");
}

#[test]
fn every_example_is_admitted() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/examples");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    assert!(names.len() >= 14, "examples missing: {names:?}");
    for name in names {
        let mut v = example_value(&name);
        if let Err(e) = admission::admit(&mut v) {
            panic!("{name}: {e}");
        }
    }
}
