//! Validation of the HostPathProvisioner, as its operator's webhook does it, plus absolute
//! paths (a relative host path has no meaning on a node).

use std::collections::HashMap;

use api::hostpath::{HostPathProvisioner, StoragePool};
use api::validation::{FieldPath, Problem, ValidationError, ValidationResult, join};

/// The longest storage pool name.
pub const MAX_POOL_NAME_LENGTH: usize = 50;
/// The longest host path.
pub const MAX_PATH_LENGTH: usize = 255;
/// Accepted image pull policies.
pub const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];

fn err(field: FieldPath, problem: Problem) -> ValidationResult {
    Err(ValidationError::new(field, problem))
}

/// Validates a HostPathProvisioner as hostpath-provisioner-operator's webhook does, with its
/// messages: exactly one of `pathConfig` and `storagePools`, each pool with a name of at most
/// 50 characters and a path of at most 255, names and paths unique. Beyond upstream, paths
/// must be absolute and free of `..`, and the pull policy one Kubernetes knows.
pub fn validate_host_path_provisioner(hpp: &HostPathProvisioner) -> ValidationResult {
    let spec_path = FieldPath::new("spec");
    let spec = &hpp.spec;
    if let Some(policy) = spec.image_pull_policy.as_deref()
        && !policy.is_empty()
        && !PULL_POLICIES.contains(&policy)
    {
        return err(
            spec_path.child("imagePullPolicy"),
            Problem::Unsupported {
                value: policy.to_owned(),
                supported: join(&PULL_POLICIES),
            },
        );
    }
    let pools = spec.storage_pools.as_deref().unwrap_or_default();
    match (&spec.path_config, pools.is_empty()) {
        (Some(_), false) => return invalid(spec_path.child("pathConfig"), MSG_BOTH),
        (None, true) => return invalid(spec_path, MSG_NEITHER),
        (Some(pc), true) => {
            let p = spec_path.child("pathConfig").child("path");
            let path = pc.path.as_deref().unwrap_or_default();
            if path.is_empty() {
                return invalid(p, MSG_PATH_CONFIG_PATH);
            }
            validate_host_path(path, &p)?;
        }
        (None, false) => {}
    }
    let pools_path = spec_path.child("storagePools");
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut paths: HashMap<&str, usize> = HashMap::new();
    for (i, pool) in pools.iter().enumerate() {
        let p = pools_path.index(i);
        validate_pool(pool, &p)?;
        if let Some(first) = paths.insert(&pool.path, i) {
            return invalid(
                p.child("path"),
                &format!(
                    "spec.storagePools[{i}].path is the same as spec.storagePools[{first}].path, \
                     cannot have duplicate paths"
                ),
            );
        }
        if let Some(first) = names.insert(&pool.name, i) {
            return invalid(
                p.child("name"),
                &format!(
                    "spec.storagePools[{i}].name is the same as spec.storagePools[{first}].name, \
                     cannot have duplicate names"
                ),
            );
        }
    }
    Ok(())
}

/// Upstream's message for both `pathConfig` and `storagePools`.
pub const MSG_BOTH: &str = "pathConfig and storage pools cannot be both set";
/// Upstream's message for neither.
pub const MSG_NEITHER: &str = "either pathConfig or storage pools must be set";
/// Upstream's message for a `pathConfig` without a path.
pub const MSG_PATH_CONFIG_PATH: &str = "pathconfig path must be set";

fn invalid(field: FieldPath, message: &str) -> ValidationResult {
    err(field, Problem::Invalid(message.to_owned()))
}

/// One pool, with upstream's messages, then absolute paths.
fn validate_pool(pool: &StoragePool, p: &FieldPath) -> ValidationResult {
    if pool.name.is_empty() {
        return invalid(p.child("name"), "storagePool.name cannot be blank");
    }
    if pool.name.len() > MAX_POOL_NAME_LENGTH {
        return invalid(
            p.child("name"),
            &format!("storagePool.name cannot have a length greater than {MAX_POOL_NAME_LENGTH}"),
        );
    }
    if pool.path.is_empty() {
        return invalid(p.child("path"), "storagePool.path cannot be blank");
    }
    if pool.path.len() > MAX_PATH_LENGTH {
        return invalid(
            p.child("path"),
            &format!("storagePool.path cannot have a length greater than {MAX_PATH_LENGTH}"),
        );
    }
    validate_host_path(&pool.path, &p.child("path"))
}

fn validate_host_path(path: &str, field: &FieldPath) -> ValidationResult {
    if path.is_empty() {
        return err(field.clone(), Problem::Required);
    }
    if path.len() > MAX_PATH_LENGTH {
        return err(
            field.clone(),
            Problem::TooLong {
                length: path.len(),
                maximum: MAX_PATH_LENGTH,
            },
        );
    }
    if !path.starts_with('/') {
        return err(field.clone(), Problem::NotAbsolute(path.to_owned()));
    }
    if path.split('/').any(|c| c == "..") {
        return err(
            field.clone(),
            Problem::Invalid(format!("path {path:?} must not contain \"..\"")),
        );
    }
    Ok(())
}

/// Warnings for the storage pool fields upstream's HPP acts on and this one keeps without
/// acting on, each naming its field: `overlayClassName` (no overlay storage class is made)
/// and `snapshotProvider` (volumes are not snapshotted by reflink yet).
pub fn unacted_fields(hpp: &HostPathProvisioner) -> Vec<String> {
    let pools = hpp.spec.storage_pools.as_deref().unwrap_or_default();
    let mut warnings = Vec::new();
    for (i, pool) in pools.iter().enumerate() {
        let field = FieldPath::new("spec").child("storagePools").index(i);
        if pool.overlay_class_name.is_some() {
            warnings.push(format!(
                "{}: kept, but no overlay storage class is made for the pool",
                field.child("overlayClassName")
            ));
        }
        if pool.snapshot_provider.is_some() {
            warnings.push(format!(
                "{}: kept, but the pool's volumes are not snapshotted by reflink yet",
                field.child("snapshotProvider")
            ));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::hostpath::{HostPathProvisionerSpec, PathConfig, StoragePool};

    fn pool(name: &str, path: &str) -> StoragePool {
        StoragePool {
            name: name.into(),
            path: path.into(),
            pvc_template: None,
            ..Default::default()
        }
    }

    fn with_pools(pools: Vec<StoragePool>) -> HostPathProvisioner {
        HostPathProvisioner::new(
            "hpp",
            HostPathProvisionerSpec {
                storage_pools: Some(pools),
                ..Default::default()
            },
        )
    }

    fn field(hpp: &HostPathProvisioner) -> String {
        validate_host_path_provisioner(hpp)
            .unwrap_err()
            .field
            .to_string()
    }

    #[test]
    fn pools_with_unique_absolute_paths_are_valid() {
        let hpp = with_pools(vec![pool("local", "/var/hpp"), pool("fast", "/mnt/nvme")]);
        assert_eq!(validate_host_path_provisioner(&hpp), Ok(()));
    }

    #[test]
    fn needs_path_config_or_pools_but_not_both() {
        let mut hpp = with_pools(vec![]);
        assert_eq!(
            validate_host_path_provisioner(&hpp)
                .unwrap_err()
                .to_string(),
            "spec: either pathConfig or storage pools must be set"
        );
        hpp.spec.path_config = Some(PathConfig {
            path: Some("/var/hpvolumes".into()),
            use_naming_prefix: None,
        });
        assert_eq!(validate_host_path_provisioner(&hpp), Ok(()));
        hpp.spec.storage_pools = Some(vec![pool("local", "/var/hpp")]);
        assert_eq!(
            validate_host_path_provisioner(&hpp)
                .unwrap_err()
                .to_string(),
            "spec.pathConfig: pathConfig and storage pools cannot be both set"
        );
        hpp.spec.storage_pools = None;
        hpp.spec.path_config = Some(PathConfig::default());
        assert_eq!(
            validate_host_path_provisioner(&hpp)
                .unwrap_err()
                .to_string(),
            "spec.pathConfig.path: pathconfig path must be set"
        );
    }

    #[test]
    fn duplicate_names_and_paths_are_rejected() {
        let hpp = with_pools(vec![pool("local", "/a"), pool("local", "/b")]);
        let e = validate_host_path_provisioner(&hpp).unwrap_err();
        assert_eq!(e.field.as_str(), "spec.storagePools[1].name");
        assert_eq!(
            e.problem.to_string(),
            "spec.storagePools[1].name is the same as spec.storagePools[0].name, cannot have duplicate names"
        );
        // Paths are compared first, as upstream does.
        let hpp = with_pools(vec![pool("a", "/var/hpp"), pool("a", "/var/hpp")]);
        assert_eq!(
            validate_host_path_provisioner(&hpp)
                .unwrap_err()
                .problem
                .to_string(),
            "spec.storagePools[1].path is the same as spec.storagePools[0].path, cannot have duplicate paths"
        );
    }

    #[test]
    fn paths_must_be_absolute_short_and_without_parent_components() {
        let hpp = with_pools(vec![pool("a", "var/hpp")]);
        assert_eq!(
            validate_host_path_provisioner(&hpp).unwrap_err().problem,
            Problem::NotAbsolute("var/hpp".into())
        );
        let hpp = with_pools(vec![pool("a", "/var/../etc")]);
        assert_eq!(field(&hpp), "spec.storagePools[0].path");
        let hpp = with_pools(vec![pool("a", &format!("/{}", "x".repeat(255)))]);
        assert_eq!(field(&hpp), "spec.storagePools[0].path");
        let message = |hpp: &HostPathProvisioner| {
            validate_host_path_provisioner(hpp).unwrap_err().to_string()
        };
        assert_eq!(
            message(&with_pools(vec![pool("", "/a")])),
            "spec.storagePools[0].name: storagePool.name cannot be blank"
        );
        assert_eq!(
            message(&with_pools(vec![pool(&"n".repeat(51), "/a")])),
            "spec.storagePools[0].name: storagePool.name cannot have a length greater than 50"
        );
        assert_eq!(
            message(&with_pools(vec![pool("a", "")])),
            "spec.storagePools[0].path: storagePool.path cannot be blank"
        );
        assert_eq!(
            message(&with_pools(vec![pool(
                "a",
                &format!("/{}", "x".repeat(255))
            )])),
            "spec.storagePools[0].path: storagePool.path cannot have a length greater than 255"
        );
    }

    #[test]
    fn unknown_pull_policy_is_rejected() {
        let mut hpp = with_pools(vec![pool("a", "/a")]);
        hpp.spec.image_pull_policy = Some("Sometimes".into());
        assert_eq!(field(&hpp), "spec.imagePullPolicy");
    }

    #[test]
    fn pool_fields_kept_without_effect_are_warned_of_by_name() {
        let mut quiet = pool("local", "/var/hpp");
        assert!(unacted_fields(&with_pools(vec![quiet.clone()])).is_empty());
        quiet.snapshot_provider = Some("reflink".into());
        let mut overlay = pool("fast", "/mnt/nvme");
        overlay.overlay_class_name = Some("fast-overlay".into());
        let warnings = unacted_fields(&with_pools(vec![quiet, overlay]));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].starts_with("spec.storagePools[0].snapshotProvider: "));
        assert!(warnings[1].starts_with("spec.storagePools[1].overlayClassName: "));
    }
}
