//! Which storage pools this machine's CSI driver should serve, from every HostPathProvisioner
//! CR: a pure function of the CRs and of the pools the store serves now.

use std::collections::BTreeMap;
use std::path::PathBuf;

use admission::hostpath::validate::validate_host_path_provisioner;
use api::ValidationError;
use api::hostpath::{HostPathProvisioner, StoragePool};
use ferrovirt_hostpath::{Pool, PoolEntry, PoolOrigin};

/// The pool the legacy `pathConfig` becomes, as upstream names it in the driver's pool list.
pub const LEGACY_POOL: &str = "legacy";

/// A pool a CR asks for that this machine cannot give, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolRefusal {
    pub pool: String,
    pub message: String,
}

/// What one CR asks of this machine.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CrPools {
    /// Path pools (and the legacy `pathConfig`), in the CR's order.
    pub wanted: Vec<Pool>,
    /// Pools backed by a claim made from their `pvcTemplate`: wanted once it is mounted.
    pub templated: Vec<StoragePool>,
}

/// The pools `hpp` asks for. A CR that fails the webhook's validation (stored before the
/// webhook, say) asks for nothing.
pub fn pools_of(hpp: &HostPathProvisioner) -> Result<CrPools, ValidationError> {
    validate_host_path_provisioner(hpp)?;
    let mut pools = CrPools::default();
    if let Some(path) = hpp
        .spec
        .path_config
        .as_ref()
        .and_then(|pc| pc.path.as_ref())
    {
        pools.wanted.push(Pool {
            name: LEGACY_POOL.to_owned(),
            path: PathBuf::from(path),
        });
    }
    for pool in hpp.spec.storage_pools.iter().flatten() {
        if pool.pvc_template.is_some() {
            pools.templated.push(pool.clone());
            continue;
        }
        pools.wanted.push(Pool {
            name: pool.name.clone(),
            path: PathBuf::from(&pool.path),
        });
    }
    Ok(pools)
}

/// The changes that bring the served pools to what the CRs ask for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolPlan {
    /// Pools to add (or move, or put back in service).
    pub add: Vec<Pool>,
    /// Added pools no CR asks for any more.
    pub remove: Vec<String>,
    /// Per CR, the pools another CR already has under that name with another path.
    pub conflicts: BTreeMap<String, Vec<PoolRefusal>>,
}

/// Plans the served pools from `crs` (CR name and its pools, oldest CR first: it wins a pool
/// name that two CRs give different paths) and the pools `served` now. Pools given at the
/// store's open (the platform's own `local`) are never removed.
pub fn plan(crs: &[(String, CrPools)], served: &[PoolEntry]) -> PoolPlan {
    let mut plan = PoolPlan::default();
    let mut wanted: BTreeMap<&str, &Pool> = BTreeMap::new();
    for (cr, pools) in crs {
        for pool in &pools.wanted {
            match wanted.get(pool.name.as_str()) {
                Some(first) if first.path != pool.path => {
                    plan.conflicts
                        .entry(cr.clone())
                        .or_default()
                        .push(PoolRefusal {
                            pool: pool.name.clone(),
                            message: format!(
                                "storage pool {:?} is already served from {} by another \
                             HostPathProvisioner",
                                pool.name,
                                first.path.display()
                            ),
                        });
                }
                Some(_) => {}
                None => {
                    wanted.insert(&pool.name, pool);
                }
            }
        }
    }
    for pool in wanted.values() {
        let in_service = served.iter().any(|e| e.pool == **pool && !e.retired);
        if !in_service {
            plan.add.push((*pool).clone());
        }
    }
    for entry in served {
        let unwanted = !wanted.contains_key(entry.pool.name.as_str());
        if unwanted && entry.origin == PoolOrigin::Added && !entry.retired {
            plan.remove.push(entry.pool.name.clone());
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::hostpath::{HostPathProvisionerSpec, PathConfig};
    use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;

    fn pool(name: &str, path: &str) -> Pool {
        Pool {
            name: name.into(),
            path: path.into(),
        }
    }

    fn entry(name: &str, path: &str, origin: PoolOrigin, retired: bool) -> PoolEntry {
        PoolEntry {
            pool: pool(name, path),
            origin,
            retired,
        }
    }

    fn hpp(pools: Vec<StoragePool>) -> HostPathProvisioner {
        HostPathProvisioner::new(
            "hpp",
            HostPathProvisionerSpec {
                storage_pools: Some(pools),
                ..Default::default()
            },
        )
    }

    fn spool(name: &str, path: &str) -> StoragePool {
        StoragePool {
            name: name.into(),
            path: path.into(),
            pvc_template: None,
            ..Default::default()
        }
    }

    #[test]
    fn path_pools_and_the_legacy_path_are_wanted_and_templates_set_apart() {
        let mut templated = spool("big", "/var/big");
        templated.pvc_template = Some(PersistentVolumeClaimSpec::default());
        let pools = pools_of(&hpp(vec![spool("a", "/a"), templated])).unwrap();
        assert_eq!(pools.wanted, vec![pool("a", "/a")]);
        assert_eq!(pools.templated[0].name, "big");
        let legacy = HostPathProvisioner::new(
            "hpp",
            HostPathProvisionerSpec {
                path_config: Some(PathConfig {
                    path: Some("/var/hpvolumes".into()),
                    use_naming_prefix: None,
                }),
                ..Default::default()
            },
        );
        assert_eq!(
            pools_of(&legacy).unwrap().wanted,
            vec![pool(LEGACY_POOL, "/var/hpvolumes")]
        );
        let invalid = hpp(vec![spool("a", "/a"), spool("a", "/b")]);
        assert!(pools_of(&invalid).is_err());
    }

    #[test]
    fn the_plan_adds_what_is_missing_and_removes_what_no_cr_names() {
        let crs = vec![(
            "hpp".to_string(),
            CrPools {
                wanted: vec![
                    pool("a", "/a"),
                    pool("b", "/b"),
                    pool("local", "/data/local"),
                ],
                templated: vec![],
            },
        )];
        let served = vec![
            entry("local", "/data/local", PoolOrigin::Configured, false),
            entry("a", "/a", PoolOrigin::Added, false),
            entry("b", "/b", PoolOrigin::Added, true),
            entry("gone", "/gone", PoolOrigin::Added, false),
            entry("old", "/old", PoolOrigin::Added, true),
        ];
        let plan = plan(&crs, &served);
        // b is retired: added again to put it back in service; a and local are in place.
        assert_eq!(plan.add, vec![pool("b", "/b")]);
        // Retired pools go on their own once emptied; configured ones stay.
        assert_eq!(plan.remove, vec!["gone".to_string()]);
        assert!(plan.conflicts.is_empty());
        // No CR at all: every added pool in service goes, the configured one stays.
        let none = super::plan(&[], &served);
        assert_eq!(none.remove, vec!["a".to_string(), "gone".to_string()]);
    }

    #[test]
    fn the_oldest_cr_wins_a_pool_name() {
        let crs = vec![
            (
                "first".to_string(),
                CrPools {
                    wanted: vec![pool("a", "/a")],
                    templated: vec![],
                },
            ),
            (
                "second".to_string(),
                CrPools {
                    wanted: vec![pool("a", "/elsewhere"), pool("b", "/b")],
                    templated: vec![],
                },
            ),
        ];
        let plan = plan(&crs, &[]);
        assert_eq!(plan.add, vec![pool("a", "/a"), pool("b", "/b")]);
        assert_eq!(plan.conflicts["second"][0].pool, "a");
    }
}
