//! Validation of CDI objects as CDI's admission webhook does it, as pure functions: the first
//! offending field is returned with its JSON path.

use k8s_openapi::api::core::v1::VolumeResourceRequirements;
use url::Url;

use api::cdi::dataimportcron::DataImportCron;
use api::cdi::datasource::DataSource;
use api::cdi::datavolume::{
    DataVolume, DataVolumeContentType, DataVolumeSource, DataVolumeSourceRegistry, DataVolumeSpec,
    REGISTRY_SCHEME_DOCKER, REGISTRY_SCHEME_OCI_ARCHIVE, SOURCE_KINDS, SOURCE_REF_KIND_DATA_SOURCE,
    STORAGE_RESOURCE, VOLUME_MODE_FROM_STORAGE_PROFILE,
};
use api::quantity::{MIB, parse_quantity};
use api::validation::{FieldPath, Problem, ValidationError, ValidationResult, join};

/// The longest name a DataVolume may have (a DNS-1123 subdomain).
pub const MAX_NAME_LENGTH: usize = 253;

/// Access modes a DataVolume may request.
pub const ACCESS_MODES: [&str; 4] = [
    "ReadWriteOnce",
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOncePod",
];

/// Checksum algorithms of `source.http.checksum` and the length of their hex digests.
pub const CHECKSUM_ALGORITHMS: [(&str, usize); 4] =
    [("md5", 32), ("sha1", 40), ("sha256", 64), ("sha512", 128)];

fn err(field: FieldPath, problem: Problem) -> ValidationResult {
    Err(ValidationError::new(field, problem))
}

/// Validates a DataVolume: its name and its spec.
pub fn validate_data_volume(dv: &DataVolume) -> ValidationResult {
    if let Some(name) = dv.metadata.name.as_deref()
        && name.len() > MAX_NAME_LENGTH
    {
        return err(
            FieldPath::new("metadata").child("name"),
            Problem::TooLong {
                length: name.len(),
                maximum: MAX_NAME_LENGTH,
            },
        );
    }
    validate_data_volume_spec(&dv.spec, &FieldPath::new("spec"))
}

/// Validates a DataVolume spec found at `path` (`spec` of a DataVolume,
/// `spec.dataVolumeTemplates[i].spec` of a VirtualMachine, `spec.template.spec` of a
/// DataImportCron).
pub fn validate_data_volume_spec(spec: &DataVolumeSpec, path: &FieldPath) -> ValidationResult {
    // Where the data goes.
    let size_may_be_omitted =
        spec.source_ref.is_some() || spec.source.as_ref().is_some_and(DataVolumeSource::is_clone);
    match (&spec.pvc, &spec.storage) {
        (Some(_), Some(_)) => {
            return err(
                path.child("pvc"),
                Problem::Conflict {
                    other: path.child("storage").to_string(),
                },
            );
        }
        (None, None) => {
            // CDI's words (its field is the Go name, `spec.PVC`).
            return err(
                path.clone(),
                Problem::Invalid("Missing Data volume PVC: set one of pvc, storage".into()),
            );
        }
        (Some(pvc), None) => {
            let pvc_path = path.child("pvc");
            validate_size(pvc.resources.as_ref(), &pvc_path, size_may_be_omitted)?;
            let modes = pvc.access_modes.as_deref().unwrap_or_default();
            if modes.is_empty() {
                return err(pvc_path.child("accessModes"), Problem::Required);
            }
            validate_access_modes(modes, &pvc_path.child("accessModes"))?;
            validate_volume_mode(
                pvc.volume_mode.as_deref(),
                &["Filesystem", "Block"],
                &pvc_path.child("volumeMode"),
            )?;
        }
        (None, Some(storage)) => {
            let storage_path = path.child("storage");
            validate_size(
                storage.resources.as_ref(),
                &storage_path,
                size_may_be_omitted,
            )?;
            if let Some(modes) = storage.access_modes.as_deref() {
                validate_access_modes(modes, &storage_path.child("accessModes"))?;
            }
            validate_volume_mode(
                storage.volume_mode.as_deref(),
                &["Filesystem", "Block", VOLUME_MODE_FROM_STORAGE_PROFILE],
                &storage_path.child("volumeMode"),
            )?;
        }
    }

    // Where the data comes from.
    match (&spec.source, &spec.source_ref) {
        (Some(_), Some(_)) => {
            return err(
                path.child("source"),
                Problem::Conflict {
                    other: path.child("sourceRef").to_string(),
                },
            );
        }
        (None, None) => {
            return err(
                path.clone(),
                Problem::NoneOf {
                    options: join(&["source", "sourceRef"]),
                },
            );
        }
        (None, Some(source_ref)) => {
            let ref_path = path.child("sourceRef");
            if source_ref.kind.is_empty() {
                return err(ref_path.child("kind"), Problem::Required);
            }
            if source_ref.kind != SOURCE_REF_KIND_DATA_SOURCE {
                return err(
                    ref_path.child("kind"),
                    Problem::Unsupported {
                        value: source_ref.kind.clone(),
                        supported: SOURCE_REF_KIND_DATA_SOURCE.into(),
                    },
                );
            }
            if source_ref.name.is_empty() {
                return err(ref_path.child("name"), Problem::Required);
            }
        }
        (Some(source), None) => validate_source(source, &path.child("source"))?,
    }

    // What the data is.
    if let Some(DataVolumeContentType::Archive) = spec.content_type {
        let archive_capable = spec
            .source
            .as_ref()
            .is_some_and(|s| s.http.is_some() || s.upload.is_some());
        if !archive_capable {
            return err(
                path.child("contentType"),
                Problem::Invalid(
                    "contentType archive is only supported with an http or upload source".into(),
                ),
            );
        }
    }
    Ok(())
}

fn validate_size(
    resources: Option<&VolumeResourceRequirements>,
    path: &FieldPath,
    may_be_omitted: bool,
) -> ValidationResult {
    let size_path = path
        .child("resources")
        .child("requests")
        .child(STORAGE_RESOURCE);
    let size = resources
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(STORAGE_RESOURCE));
    let Some(size) = size else {
        if may_be_omitted {
            return Ok(());
        }
        return err(size_path, Problem::Required);
    };
    let Some(bytes) = parse_quantity(&size.0) else {
        return err(
            size_path,
            Problem::Invalid(format!("{:?} is not a valid quantity", size.0)),
        );
    };
    if bytes < MIB {
        return err(
            size_path,
            Problem::TooSmall {
                value: size.0.clone(),
                minimum: "1Mi".into(),
            },
        );
    }
    Ok(())
}

fn validate_access_modes(modes: &[String], path: &FieldPath) -> ValidationResult {
    for (i, mode) in modes.iter().enumerate() {
        if !ACCESS_MODES.contains(&mode.as_str()) {
            return err(
                path.index(i),
                Problem::Unsupported {
                    value: mode.clone(),
                    supported: join(&ACCESS_MODES),
                },
            );
        }
    }
    Ok(())
}

fn validate_volume_mode(
    mode: Option<&str>,
    allowed: &[&str],
    path: &FieldPath,
) -> ValidationResult {
    match mode {
        Some(m) if !allowed.contains(&m) => err(
            path.clone(),
            Problem::Unsupported {
                value: m.to_owned(),
                supported: join(allowed),
            },
        ),
        _ => Ok(()),
    }
}

fn validate_source(source: &DataVolumeSource, path: &FieldPath) -> ValidationResult {
    let kinds = source.kinds();
    match kinds.len() {
        0 => {
            return err(
                path.clone(),
                Problem::NoneOf {
                    options: join(&SOURCE_KINDS),
                },
            );
        }
        1 => {}
        _ => {
            return err(
                path.clone(),
                Problem::MoreThanOneOf {
                    options: join(&SOURCE_KINDS),
                    set: join(&kinds),
                },
            );
        }
    }
    if let Some(http) = &source.http {
        let p = path.child("http");
        validate_http_url(&http.url, &p.child("url"))?;
        if let Some(checksum) = &http.checksum {
            validate_checksum(checksum, &p.child("checksum"))?;
        }
    }
    if let Some(s3) = &source.s3 {
        validate_http_url(&s3.url, &path.child("s3").child("url"))?;
    }
    if let Some(gcs) = &source.gcs {
        let url_path = path.child("gcs").child("url");
        if gcs.url.is_empty() {
            return err(url_path, Problem::Required);
        }
        Url::parse(&gcs.url).map_err(|e| {
            ValidationError::new(
                url_path.clone(),
                Problem::InvalidUrl {
                    url: gcs.url.clone(),
                    reason: e.to_string(),
                },
            )
        })?;
    }
    if let Some(registry) = &source.registry {
        validate_registry(registry, &path.child("registry"))?;
    }
    if let Some(pvc) = &source.pvc {
        let p = path.child("pvc");
        if pvc.namespace.is_empty() {
            return err(p.child("namespace"), Problem::Required);
        }
        if pvc.name.is_empty() {
            return err(p.child("name"), Problem::Required);
        }
    }
    if let Some(snapshot) = &source.snapshot {
        let p = path.child("snapshot");
        if snapshot.namespace.is_empty() {
            return err(p.child("namespace"), Problem::Required);
        }
        if snapshot.name.is_empty() {
            return err(p.child("name"), Problem::Required);
        }
    }
    if let Some(imageio) = &source.imageio {
        let p = path.child("imageio");
        validate_http_url(&imageio.url, &p.child("url"))?;
        if imageio.disk_id.is_empty() {
            return err(p.child("diskId"), Problem::Required);
        }
        if imageio.secret_ref.as_deref().unwrap_or_default().is_empty() {
            return err(p.child("secretRef"), Problem::Required);
        }
        if imageio
            .cert_config_map
            .as_deref()
            .unwrap_or_default()
            .is_empty()
        {
            return err(p.child("certConfigMap"), Problem::Required);
        }
    }
    if let Some(vddk) = &source.vddk {
        let p = path.child("vddk");
        validate_http_url(vddk.url.as_deref().unwrap_or_default(), &p.child("url"))?;
        let required = [
            ("uuid", &vddk.uuid),
            ("backingFile", &vddk.backing_file),
            ("thumbprint", &vddk.thumbprint),
            ("secretRef", &vddk.secret_ref),
        ];
        for (name, value) in required {
            if value.as_deref().unwrap_or_default().is_empty() {
                return err(p.child(name), Problem::Required);
            }
        }
    }
    Ok(())
}

/// Checks that `url` is an absolute http or https URL with a host.
pub fn validate_http_url(url: &str, path: &FieldPath) -> ValidationResult {
    if url.is_empty() {
        return err(path.clone(), Problem::Required);
    }
    let invalid = |reason: String| {
        ValidationError::new(
            path.clone(),
            Problem::InvalidUrl {
                url: url.to_owned(),
                reason,
            },
        )
    };
    let parsed = Url::parse(url).map_err(|e| invalid(e.to_string()))?;
    if parsed.scheme() != "http" && parsed.scheme() != "https" {
        return Err(invalid(format!(
            "scheme {:?} is not http or https",
            parsed.scheme()
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid("no host".into()));
    }
    Ok(())
}

fn validate_registry(registry: &DataVolumeSourceRegistry, path: &FieldPath) -> ValidationResult {
    match (&registry.url, &registry.image_stream) {
        (Some(_), Some(_)) => err(
            path.child("url"),
            Problem::Conflict {
                other: path.child("imageStream").to_string(),
            },
        ),
        (None, None) => err(
            path.clone(),
            Problem::NoneOf {
                options: join(&["url", "imageStream"]),
            },
        ),
        (None, Some(stream)) => {
            if stream.is_empty() {
                return err(path.child("imageStream"), Problem::Required);
            }
            Ok(())
        }
        (Some(url), None) => {
            let url_path = path.child("url");
            let Some((scheme, rest)) = url.split_once("://") else {
                return err(
                    url_path,
                    Problem::InvalidUrl {
                        url: url.clone(),
                        reason: "must start with docker:// or oci-archive://".into(),
                    },
                );
            };
            if scheme != REGISTRY_SCHEME_DOCKER && scheme != REGISTRY_SCHEME_OCI_ARCHIVE {
                return err(
                    url_path,
                    Problem::InvalidUrl {
                        url: url.clone(),
                        reason: format!(
                            "scheme {scheme:?} is not {REGISTRY_SCHEME_DOCKER} or {REGISTRY_SCHEME_OCI_ARCHIVE}"
                        ),
                    },
                );
            }
            if rest.is_empty() {
                return err(
                    url_path,
                    Problem::InvalidUrl {
                        url: url.clone(),
                        reason: "no image reference after the scheme".into(),
                    },
                );
            }
            Ok(())
        }
    }
}

fn validate_checksum(checksum: &str, path: &FieldPath) -> ValidationResult {
    let Some((algorithm, digest)) = checksum.split_once(':') else {
        return err(
            path.clone(),
            Problem::Invalid(format!(
                "{checksum:?} is not of the form algorithm:hexdigest"
            )),
        );
    };
    let Some((_, length)) = CHECKSUM_ALGORITHMS.iter().find(|(a, _)| *a == algorithm) else {
        let names: Vec<&str> = CHECKSUM_ALGORITHMS.iter().map(|(a, _)| *a).collect();
        return err(
            path.clone(),
            Problem::Unsupported {
                value: algorithm.to_owned(),
                supported: join(&names),
            },
        );
    };
    if digest.len() != *length || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return err(
            path.clone(),
            Problem::Invalid(format!(
                "a {algorithm} digest is {length} hexadecimal digits"
            )),
        );
    }
    Ok(())
}

/// Validates a DataSource: exactly one of pvc, snapshot, dataSource, each with a name.
pub fn validate_data_source(ds: &DataSource) -> ValidationResult {
    let path = FieldPath::new("spec").child("source");
    let src = &ds.spec.source;
    let set: Vec<&str> = [
        ("pvc", src.pvc.is_some()),
        ("snapshot", src.snapshot.is_some()),
        ("dataSource", src.data_source.is_some()),
    ]
    .into_iter()
    .filter_map(|(n, s)| s.then_some(n))
    .collect();
    let options = join(&["pvc", "snapshot", "dataSource"]);
    match set.len() {
        // An empty source is allowed: a DataImportCron fills it in later.
        0 => return Ok(()),
        1 => {}
        _ => {
            return err(
                path,
                Problem::MoreThanOneOf {
                    options,
                    set: join(&set),
                },
            );
        }
    }
    let name = src
        .pvc
        .as_ref()
        .map(|p| ("pvc", &p.name))
        .or(src.snapshot.as_ref().map(|s| ("snapshot", &s.name)))
        .or(src.data_source.as_ref().map(|d| ("dataSource", &d.name)));
    if let Some((member, name)) = name
        && name.is_empty()
    {
        return err(path.child(member).child("name"), Problem::Required);
    }
    Ok(())
}

/// Validates a DataImportCron: schedule, managed DataSource, and a template that imports from
/// a registry.
pub fn validate_data_import_cron(cron: &DataImportCron) -> ValidationResult {
    let spec_path = FieldPath::new("spec");
    if cron.spec.schedule.trim().is_empty() {
        return err(spec_path.child("schedule"), Problem::Required);
    }
    if cron.spec.schedule.split_whitespace().count() != 5 {
        return err(
            spec_path.child("schedule"),
            Problem::Invalid(format!(
                "{:?} is not a cron schedule of five fields",
                cron.spec.schedule
            )),
        );
    }
    if cron.spec.managed_data_source.is_empty() {
        return err(spec_path.child("managedDataSource"), Problem::Required);
    }
    let template_spec = spec_path.child("template").child("spec");
    let registry = cron.spec.registry();
    if registry.is_none() {
        return err(
            template_spec.child("source").child("registry"),
            Problem::Required,
        );
    }
    validate_data_volume_spec(&cron.spec.template.spec, &template_spec)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;
    use api::cdi::datavolume::{
        DataVolumeBlankImage, DataVolumeSourceHttp, DataVolumeSourcePvc, DataVolumeSourceRef,
        DataVolumeSourceUpload, StorageSpec,
    };

    fn resources(size: &str) -> Option<VolumeResourceRequirements> {
        Some(VolumeResourceRequirements {
            requests: Some(BTreeMap::from([(
                "storage".to_owned(),
                Quantity(size.to_owned()),
            )])),
            ..Default::default()
        })
    }

    fn storage(size: Option<&str>) -> Option<StorageSpec> {
        Some(StorageSpec {
            resources: size.and_then(resources),
            ..Default::default()
        })
    }

    fn http(url: &str) -> Option<DataVolumeSource> {
        Some(DataVolumeSource {
            http: Some(DataVolumeSourceHttp {
                url: url.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn http_dv() -> DataVolumeSpec {
        DataVolumeSpec {
            source: http("https://example.com/disk.qcow2"),
            storage: storage(Some("1Gi")),
            ..Default::default()
        }
    }

    fn check(spec: &DataVolumeSpec) -> ValidationResult {
        validate_data_volume_spec(spec, &FieldPath::new("spec"))
    }

    fn field_of(spec: &DataVolumeSpec) -> String {
        check(spec).unwrap_err().field.to_string()
    }

    #[test]
    fn http_import_with_storage_is_valid() {
        assert_eq!(check(&http_dv()), Ok(()));
    }

    #[test]
    fn pvc_and_storage_together_are_rejected() {
        let mut spec = http_dv();
        spec.pvc = Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: resources("1Gi"),
            ..Default::default()
        });
        let e = check(&spec).unwrap_err();
        assert_eq!(e.field.as_str(), "spec.pvc");
        assert!(matches!(e.problem, Problem::Conflict { .. }));
    }

    #[test]
    fn neither_pvc_nor_storage_is_rejected() {
        let mut spec = http_dv();
        spec.storage = None;
        let e = check(&spec).unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec: Missing Data volume PVC: set one of pvc, storage"
        );
    }

    #[test]
    fn no_source_and_no_source_ref_is_rejected() {
        let mut spec = http_dv();
        spec.source = None;
        assert!(matches!(
            check(&spec).unwrap_err().problem,
            Problem::NoneOf { .. }
        ));
    }

    #[test]
    fn source_and_source_ref_together_are_rejected() {
        let mut spec = http_dv();
        spec.source_ref = Some(DataVolumeSourceRef {
            kind: "DataSource".into(),
            namespace: None,
            name: "fedora".into(),
        });
        assert_eq!(field_of(&spec), "spec.source");
    }

    #[test]
    fn empty_and_multiple_sources_are_rejected() {
        let mut spec = http_dv();
        spec.source = Some(DataVolumeSource::default());
        assert!(matches!(
            check(&spec).unwrap_err().problem,
            Problem::NoneOf { .. }
        ));
        let mut source = http("http://example.com/a.img").unwrap_or_default();
        source.blank = Some(DataVolumeBlankImage {});
        spec.source = Some(source);
        let e = check(&spec).unwrap_err();
        assert_eq!(
            e.problem,
            Problem::MoreThanOneOf {
                options: join(&SOURCE_KINDS),
                set: "http, blank".into()
            }
        );
    }

    #[test]
    fn sizes_below_one_mebibyte_are_rejected() {
        let mut spec = http_dv();
        spec.storage = storage(Some("1023Ki"));
        let e = check(&spec).unwrap_err();
        assert_eq!(e.field.as_str(), "spec.storage.resources.requests.storage");
        assert!(matches!(e.problem, Problem::TooSmall { .. }));
        spec.storage = storage(Some("1Mi"));
        assert_eq!(check(&spec), Ok(()));
        spec.storage = storage(Some("lots"));
        assert!(matches!(
            check(&spec).unwrap_err().problem,
            Problem::Invalid(_)
        ));
    }

    #[test]
    fn size_may_be_omitted_only_when_cloning() {
        let mut spec = http_dv();
        spec.storage = storage(None);
        assert_eq!(check(&spec).unwrap_err().problem, Problem::Required);
        spec.source = Some(DataVolumeSource {
            pvc: Some(DataVolumeSourcePvc {
                namespace: "golden".into(),
                name: "fedora".into(),
            }),
            ..Default::default()
        });
        assert_eq!(check(&spec), Ok(()));
        spec.source = None;
        spec.source_ref = Some(DataVolumeSourceRef {
            kind: "DataSource".into(),
            namespace: None,
            name: "fedora".into(),
        });
        assert_eq!(check(&spec), Ok(()));
    }

    #[test]
    fn pvc_needs_an_access_mode_and_valid_ones() {
        let mut spec = http_dv();
        spec.storage = None;
        spec.pvc = Some(PersistentVolumeClaimSpec {
            resources: resources("1Gi"),
            ..Default::default()
        });
        assert_eq!(field_of(&spec), "spec.pvc.accessModes");
        if let Some(pvc) = spec.pvc.as_mut() {
            pvc.access_modes = Some(vec!["ReadWriteSometimes".into()]);
        }
        assert_eq!(field_of(&spec), "spec.pvc.accessModes[0]");
        if let Some(pvc) = spec.pvc.as_mut() {
            pvc.access_modes = Some(vec!["ReadWriteMany".into()]);
        }
        assert_eq!(check(&spec), Ok(()));
    }

    #[test]
    fn volume_modes_are_checked_and_from_storage_profile_only_for_storage() {
        let mut spec = http_dv();
        let set = |spec: &mut DataVolumeSpec, m: &str| {
            if let Some(s) = spec.storage.as_mut() {
                s.volume_mode = Some(m.into());
            }
        };
        set(&mut spec, "FromStorageProfile");
        assert_eq!(check(&spec), Ok(()));
        set(&mut spec, "Tape");
        assert_eq!(field_of(&spec), "spec.storage.volumeMode");
        spec.storage = None;
        spec.pvc = Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: resources("1Gi"),
            volume_mode: Some("FromStorageProfile".into()),
            ..Default::default()
        });
        assert_eq!(field_of(&spec), "spec.pvc.volumeMode");
    }

    #[test]
    fn http_url_must_be_http_or_https() {
        for bad in ["ftp://example.com/a", "not a url", "", "http://"] {
            let mut spec = http_dv();
            spec.source = http(bad);
            assert_eq!(field_of(&spec), "spec.source.http.url", "{bad}");
        }
    }

    #[test]
    fn checksum_must_name_a_known_algorithm_and_a_full_digest() {
        let mut spec = http_dv();
        let set = |spec: &mut DataVolumeSpec, c: &str| {
            if let Some(h) = spec.source.as_mut().and_then(|s| s.http.as_mut()) {
                h.checksum = Some(c.into());
            }
        };
        set(&mut spec, &format!("sha256:{}", "ab".repeat(32)));
        assert_eq!(check(&spec), Ok(()));
        set(&mut spec, "sha256:abcd");
        assert_eq!(field_of(&spec), "spec.source.http.checksum");
        set(&mut spec, &format!("crc32:{}", "ab".repeat(4)));
        assert!(matches!(
            check(&spec).unwrap_err().problem,
            Problem::Unsupported { .. }
        ));
    }

    #[test]
    fn registry_needs_exactly_one_of_url_and_image_stream_and_a_known_scheme() {
        let mut spec = http_dv();
        let registry = |url: Option<&str>, stream: Option<&str>| {
            Some(DataVolumeSource {
                registry: Some(DataVolumeSourceRegistry {
                    url: url.map(Into::into),
                    image_stream: stream.map(Into::into),
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        spec.source = registry(Some("docker://quay.io/containerdisks/fedora:40"), None);
        assert_eq!(check(&spec), Ok(()));
        spec.source = registry(Some("oci-archive:///images/disk.tar"), None);
        assert_eq!(check(&spec), Ok(()));
        spec.source = registry(Some("https://quay.io/fedora"), None);
        assert_eq!(field_of(&spec), "spec.source.registry.url");
        spec.source = registry(Some("quay.io/fedora"), None);
        assert_eq!(field_of(&spec), "spec.source.registry.url");
        spec.source = registry(Some("docker://quay.io/fedora"), Some("fedora"));
        assert!(matches!(
            check(&spec).unwrap_err().problem,
            Problem::Conflict { .. }
        ));
        spec.source = registry(None, None);
        assert_eq!(field_of(&spec), "spec.source.registry");
        spec.source = registry(None, Some("fedora"));
        assert_eq!(check(&spec), Ok(()));
    }

    #[test]
    fn archive_only_with_http_or_upload() {
        let mut spec = http_dv();
        spec.content_type = Some(DataVolumeContentType::Archive);
        assert_eq!(check(&spec), Ok(()));
        spec.source = Some(DataVolumeSource {
            upload: Some(DataVolumeSourceUpload {}),
            ..Default::default()
        });
        assert_eq!(check(&spec), Ok(()));
        spec.source = Some(DataVolumeSource {
            blank: Some(DataVolumeBlankImage {}),
            ..Default::default()
        });
        assert_eq!(field_of(&spec), "spec.contentType");
    }

    #[test]
    fn source_ref_must_name_a_data_source() {
        let mut spec = http_dv();
        spec.source = None;
        spec.source_ref = Some(DataVolumeSourceRef {
            kind: "PersistentVolumeClaim".into(),
            namespace: None,
            name: "x".into(),
        });
        assert_eq!(field_of(&spec), "spec.sourceRef.kind");
        if let Some(r) = spec.source_ref.as_mut() {
            r.kind = "DataSource".into();
            r.name.clear();
        }
        assert_eq!(field_of(&spec), "spec.sourceRef.name");
    }

    #[test]
    fn clone_source_needs_namespace_and_name() {
        let mut spec = http_dv();
        spec.source = Some(DataVolumeSource {
            pvc: Some(DataVolumeSourcePvc {
                namespace: String::new(),
                name: "x".into(),
            }),
            ..Default::default()
        });
        assert_eq!(field_of(&spec), "spec.source.pvc.namespace");
    }

    #[test]
    fn long_names_are_rejected() {
        let mut dv = DataVolume::new(&"d".repeat(254), http_dv());
        assert_eq!(
            validate_data_volume(&dv).unwrap_err().field.as_str(),
            "metadata.name"
        );
        dv.metadata.name = Some("disk".into());
        assert_eq!(validate_data_volume(&dv), Ok(()));
    }
}
