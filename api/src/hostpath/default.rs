//! Defaulting of the HostPathProvisioner, as its operator does it on reconcile.

use super::HostPathProvisioner;

/// The image pull policy when none is set.
pub const DEFAULT_IMAGE_PULL_POLICY: &str = "IfNotPresent";

/// Fills in defaults: `imagePullPolicy: IfNotPresent`, `pathConfig.useNamingPrefix: false`,
/// and trailing slashes removed from pool and legacy paths (so `/var/hpp/` and `/var/hpp`
/// name the same directory and duplicates are caught).
pub fn default_host_path_provisioner(hpp: &mut HostPathProvisioner) {
    let spec = &mut hpp.spec;
    if spec.image_pull_policy.as_deref().is_none_or(str::is_empty) {
        spec.image_pull_policy = Some(DEFAULT_IMAGE_PULL_POLICY.to_owned());
    }
    if let Some(pc) = spec.path_config.as_mut() {
        pc.use_naming_prefix.get_or_insert(false);
        if let Some(path) = pc.path.as_mut() {
            trim_trailing_slashes(path);
        }
    }
    for pool in spec.storage_pools.iter_mut().flatten() {
        trim_trailing_slashes(&mut pool.path);
    }
}

fn trim_trailing_slashes(path: &mut String) {
    while path.len() > 1 && path.ends_with('/') {
        path.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostpath::{HostPathProvisionerSpec, PathConfig, StoragePool};

    #[test]
    fn fills_pull_policy_naming_prefix_and_trims_paths() {
        let mut hpp = HostPathProvisioner::new(
            "hpp",
            HostPathProvisionerSpec {
                path_config: Some(PathConfig {
                    path: Some("/var/hpvolumes/".into()),
                    use_naming_prefix: None,
                }),
                storage_pools: Some(vec![StoragePool {
                    name: "local".into(),
                    path: "/var/hpp//".into(),
                    pvc_template: None,
                    ..Default::default()
                }]),
                ..Default::default()
            },
        );
        default_host_path_provisioner(&mut hpp);
        assert_eq!(hpp.spec.image_pull_policy.as_deref(), Some("IfNotPresent"));
        let pc = hpp.spec.path_config.clone().unwrap_or_default();
        assert_eq!(pc.use_naming_prefix, Some(false));
        assert_eq!(pc.path.as_deref(), Some("/var/hpvolumes"));
        let pools = hpp.spec.storage_pools.clone().unwrap_or_default();
        assert_eq!(pools[0].path, "/var/hpp");
    }

    #[test]
    fn keeps_values_that_are_set() {
        let mut hpp = HostPathProvisioner::new(
            "hpp",
            HostPathProvisionerSpec {
                image_pull_policy: Some("Always".into()),
                path_config: Some(PathConfig {
                    path: Some("/".into()),
                    use_naming_prefix: Some(true),
                }),
                ..Default::default()
            },
        );
        default_host_path_provisioner(&mut hpp);
        assert_eq!(hpp.spec.image_pull_policy.as_deref(), Some("Always"));
        let pc = hpp.spec.path_config.clone().unwrap_or_default();
        assert_eq!(pc.use_naming_prefix, Some(true));
        assert_eq!(pc.path.as_deref(), Some("/"));
    }
}
