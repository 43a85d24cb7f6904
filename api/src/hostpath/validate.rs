//! Validation of the HostPathProvisioner, as its operator's webhook does it, plus absolute
//! paths (a relative host path has no meaning on a node).

use std::collections::HashMap;

use super::HostPathProvisioner;
use crate::validation::{FieldPath, Problem, ValidationError, ValidationResult, join};

/// The longest storage pool name.
pub const MAX_POOL_NAME_LENGTH: usize = 50;
/// The longest host path.
pub const MAX_PATH_LENGTH: usize = 255;
/// Accepted image pull policies.
pub const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];

fn err(field: FieldPath, problem: Problem) -> ValidationResult {
    Err(ValidationError::new(field, problem))
}

/// Validates a HostPathProvisioner: exactly one of `pathConfig` and `storagePools`, each
/// pool with a unique name and a unique absolute path.
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
        (Some(_), false) => {
            return err(
                spec_path.child("pathConfig"),
                Problem::Conflict {
                    other: spec_path.child("storagePools").to_string(),
                },
            );
        }
        (None, true) => {
            return err(
                spec_path,
                Problem::NoneOf {
                    options: join(&["pathConfig", "storagePools"]),
                },
            );
        }
        (Some(pc), true) => {
            let p = spec_path.child("pathConfig").child("path");
            validate_host_path(pc.path.as_deref().unwrap_or_default(), &p)?;
        }
        (None, false) => {}
    }
    let pools_path = spec_path.child("storagePools");
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut paths: HashMap<&str, usize> = HashMap::new();
    for (i, pool) in pools.iter().enumerate() {
        let p = pools_path.index(i);
        if pool.name.is_empty() {
            return err(p.child("name"), Problem::Required);
        }
        if pool.name.len() > MAX_POOL_NAME_LENGTH {
            return err(
                p.child("name"),
                Problem::TooLong {
                    length: pool.name.len(),
                    maximum: MAX_POOL_NAME_LENGTH,
                },
            );
        }
        validate_host_path(&pool.path, &p.child("path"))?;
        if let Some(first) = names.insert(&pool.name, i) {
            return err(
                p.child("name"),
                Problem::Duplicate {
                    value: pool.name.clone(),
                    first: pools_path.index(first).child("name").to_string(),
                },
            );
        }
        if let Some(first) = paths.insert(&pool.path, i) {
            return err(
                p.child("path"),
                Problem::Duplicate {
                    value: pool.path.clone(),
                    first: pools_path.index(first).child("path").to_string(),
                },
            );
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostpath::{HostPathProvisionerSpec, PathConfig, StoragePool};

    fn pool(name: &str, path: &str) -> StoragePool {
        StoragePool {
            name: name.into(),
            path: path.into(),
            pvc_template: None,
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
        assert!(matches!(
            validate_host_path_provisioner(&hpp).unwrap_err().problem,
            Problem::NoneOf { .. }
        ));
        hpp.spec.path_config = Some(PathConfig {
            path: Some("/var/hpvolumes".into()),
            use_naming_prefix: None,
        });
        assert_eq!(validate_host_path_provisioner(&hpp), Ok(()));
        hpp.spec.storage_pools = Some(vec![pool("local", "/var/hpp")]);
        assert_eq!(field(&hpp), "spec.pathConfig");
        hpp.spec.storage_pools = None;
        hpp.spec.path_config = Some(PathConfig::default());
        assert_eq!(field(&hpp), "spec.pathConfig.path");
    }

    #[test]
    fn duplicate_names_and_paths_are_rejected() {
        let hpp = with_pools(vec![pool("local", "/a"), pool("local", "/b")]);
        let e = validate_host_path_provisioner(&hpp).unwrap_err();
        assert_eq!(e.field.as_str(), "spec.storagePools[1].name");
        assert_eq!(
            e.problem,
            Problem::Duplicate {
                value: "local".into(),
                first: "spec.storagePools[0].name".into()
            }
        );
        let hpp = with_pools(vec![pool("a", "/var/hpp"), pool("b", "/var/hpp")]);
        assert_eq!(field(&hpp), "spec.storagePools[1].path");
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
        let hpp = with_pools(vec![pool("", "/a")]);
        assert_eq!(field(&hpp), "spec.storagePools[0].name");
        let hpp = with_pools(vec![pool(&"n".repeat(51), "/a")]);
        assert_eq!(field(&hpp), "spec.storagePools[0].name");
    }

    #[test]
    fn unknown_pull_policy_is_rejected() {
        let mut hpp = with_pools(vec![pool("a", "/a")]);
        hpp.spec.image_pull_policy = Some("Sometimes".into());
        assert_eq!(field(&hpp), "spec.imagePullPolicy");
    }
}
