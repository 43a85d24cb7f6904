//! The decision of the VM pool controller: the pool and the VMs of its namespace in, a list
//! of [`PoolAction`]s out, with no I/O. Behaviour as KubeVirt v1.6.6's
//! `pkg/virt-controller/watch/pool/pool.go`: VMs named `<pool>-<index>` from the lowest free
//! index, DataVolume templates named `<template>-<index>`, scale-in by the selection policy
//! (random unless `DescendingOrder`), no adoption of orphans.

use std::collections::{BTreeMap, BTreeSet};

use api::common::ConditionStatus;
use api::kubevirt::{VirtualMachine, VirtualMachineSpec};
use api::pool::conditions;
use api::pool::{
    VirtualMachinePool, VirtualMachinePoolBasePolicy, VirtualMachinePoolSpec,
    VirtualMachinePoolStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::ResourceExt;

use crate::kubevirt::claims::{self, Claim};

/// At most this many VMs are created or deleted in one reconcile (upstream's default
/// `burstReplicas`).
pub const BURST_REPLICAS: usize = 250;

/// Everything [`plan`] looks at.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The pool, as just read.
    pub pool: &'a VirtualMachinePool,
    /// Every VM of its namespace.
    pub vms: &'a [VirtualMachine],
    /// The current time.
    pub now: Time,
    /// Drives the `Random` scale-in order.
    pub shuffle_seed: u64,
}

/// One step of a reconcile.
#[derive(Clone, Debug, PartialEq)]
pub enum PoolAction {
    /// Take the pool's reference off this VM its selector no longer selects.
    Release { name: String, uid: String },
    /// Create this VM.
    CreateVm(Box<VirtualMachine>),
    /// Delete this VM (foreground: its instance and DataVolumes go first).
    DeleteVm { name: String, uid: String },
    /// Replace the status with this one (as if every create and delete before succeeded).
    WriteStatus(Box<VirtualMachinePoolStatus>),
    /// Publish this normal event (pausing and resuming).
    Event {
        reason: &'static str,
        message: String,
    },
}

/// Why a pool is not acted on at all, as upstream logs and skips it.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSpec {
    /// No selector or no VM template.
    #[error("invalid pool spec: spec.selector and spec.virtualMachineTemplate are required")]
    Incomplete,
    /// A selector apimachinery would refuse.
    #[error("invalid selector on pool")]
    Selector,
    /// The selector does not select the template's labels.
    #[error("selector does not match template labels")]
    SelectorMismatch,
}

/// Decides what to do about a pool.
pub fn plan(observed: &Observed) -> Result<Vec<PoolAction>, InvalidSpec> {
    let pool = observed.pool;
    check_spec(pool)?;
    let mut actions = Vec::new();
    let mine = claim_vms(pool, observed.vms, &mut actions);
    if !pool.spec.paused && pool.metadata.deletion_timestamp.is_none() {
        let diff = mine.len() as i64 - wanted_replicas(pool);
        let count = usize::try_from(diff.unsigned_abs())
            .unwrap_or(usize::MAX)
            .min(BURST_REPLICAS);
        if diff < 0 {
            actions.extend(scale_out(pool, observed.vms, count));
        } else if diff > 0 {
            actions.extend(scale_in(pool, &mine, count, observed.shuffle_seed));
        }
    }
    let status = status(pool, &mine, None, &observed.now);
    if pool.status.as_ref() != Some(&status) {
        actions.push(PoolAction::WriteStatus(Box::new(status)));
        actions.extend(pause_event(pool));
    }
    Ok(actions)
}

/// Whether upstream's controller would act on the pool at all.
pub fn check_spec(pool: &VirtualMachinePool) -> Result<(), InvalidSpec> {
    let (Some(selector), Some(template)) =
        (&pool.spec.selector, &pool.spec.virtual_machine_template)
    else {
        return Err(InvalidSpec::Incomplete);
    };
    if !api::label_selector::is_valid(selector) {
        return Err(InvalidSpec::Selector);
    }
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    if !api::label_selector::selects(selector, &labels) {
        return Err(InvalidSpec::SelectorMismatch);
    }
    Ok(())
}

/// The pool's VMs (deleting ones included, as upstream counts them), releasing those it no
/// longer selects; a pool adopts no orphan.
pub fn claim_vms<'a>(
    pool: &VirtualMachinePool,
    vms: &'a [VirtualMachine],
    actions: &mut Vec<PoolAction>,
) -> Vec<&'a VirtualMachine> {
    let uid = pool.uid().unwrap_or_default();
    let Some(selector) = pool.spec.selector.as_ref() else {
        return Vec::new();
    };
    let mut mine = Vec::new();
    for vm in vms {
        match claims::claim(&uid, selector, &vm.metadata, false) {
            Claim::Owned => mine.push(vm),
            Claim::Release => actions.push(PoolAction::Release {
                name: vm.name_any(),
                uid: vm.uid().unwrap_or_default(),
            }),
            Claim::Adopt | Claim::Ignore => {}
        }
    }
    mine
}

fn wanted_replicas(pool: &VirtualMachinePool) -> i64 {
    i64::from(pool.spec.replicas.unwrap_or(1))
}

/// `count` new VMs at the lowest indexes no VM of the namespace uses.
fn scale_out(pool: &VirtualMachinePool, vms: &[VirtualMachine], count: usize) -> Vec<PoolAction> {
    let taken: BTreeSet<String> = vms.iter().map(ResourceExt::name_any).collect();
    let base = pool.name_any();
    (0usize..)
        .filter(|index| !taken.contains(&vm_name(&base, *index)))
        .take(count)
        .map(|index| PoolAction::CreateVm(Box::new(vm_for(pool, index))))
        .collect()
}

/// `<pool>-<index>`.
pub fn vm_name(pool_name: &str, index: usize) -> String {
    format!("{pool_name}-{index}")
}

/// The index at the end of a VM's name (0 when there is none, as upstream sorts them).
pub fn index_from_name(name: &str) -> usize {
    name.rsplit('-')
        .next()
        .and_then(|i| i.parse().ok())
        .unwrap_or(0)
}

/// `count` VMs to delete, fewer by those already being deleted, in the pool's order.
fn scale_in(
    pool: &VirtualMachinePool,
    mine: &[&VirtualMachine],
    count: usize,
    seed: u64,
) -> Vec<PoolAction> {
    let mut eligible: Vec<&VirtualMachine> = mine
        .iter()
        .copied()
        .filter(|vm| vm.metadata.deletion_timestamp.is_none())
        .collect();
    let count = count
        .saturating_sub(mine.len() - eligible.len())
        .min(eligible.len());
    match base_policy(&pool.spec) {
        VirtualMachinePoolBasePolicy::DescendingOrder => {
            eligible.sort_by_key(|vm| std::cmp::Reverse(index_from_name(&vm.name_any())));
        }
        VirtualMachinePoolBasePolicy::Random => shuffle(&mut eligible, seed),
    }
    eligible
        .iter()
        .take(count)
        .map(|vm| PoolAction::DeleteVm {
            name: vm.name_any(),
            uid: vm.uid().unwrap_or_default(),
        })
        .collect()
}

/// `spec.scaleInStrategy.proactive.selectionPolicy.basePolicy`, `Random` when not set.
pub fn base_policy(spec: &VirtualMachinePoolSpec) -> VirtualMachinePoolBasePolicy {
    spec.scale_in_strategy
        .as_ref()
        .and_then(|s| s.proactive.as_ref())
        .and_then(|p| p.selection_policy.as_ref())
        .and_then(|p| p.base_policy)
        .unwrap_or_default()
}

/// A Fisher-Yates shuffle driven by a xorshift generator seeded with `seed`.
fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed | 1;
    for i in (1..items.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let j = usize::try_from(state % (i as u64 + 1)).unwrap_or(0);
        items.swap(i, j);
    }
}

/// The pool's controller reference, as upstream's `poolOwnerRef`.
pub fn owner_reference(pool: &VirtualMachinePool) -> OwnerReference {
    OwnerReference {
        api_version: format!("{}/{}", api::pool::GROUP, api::pool::VERSION),
        kind: "VirtualMachinePool".into(),
        name: pool.name_any(),
        uid: pool.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The VM of index `index`: the template's labels and annotations, its spec with per-VM
/// names, owned by the pool.
pub fn vm_for(pool: &VirtualMachinePool, index: usize) -> VirtualMachine {
    let template = pool
        .spec
        .virtual_machine_template
        .clone()
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let metadata = ObjectMeta {
        name: Some(vm_name(&pool.name_any(), index)),
        namespace: pool.namespace(),
        labels: meta.labels,
        annotations: meta.annotations,
        owner_references: Some(vec![owner_reference(pool)]),
        ..Default::default()
    };
    VirtualMachine {
        metadata,
        spec: indexed_spec(&pool.spec, template.spec.unwrap_or_default(), index),
        status: None,
    }
}

/// The template's VM spec for index `index`, as upstream's `indexVMSpec`: each DataVolume
/// template named `<name>-<index>` and the volumes naming it renamed with it; ConfigMap and
/// Secret volumes suffixed when `nameGeneration` asks.
pub fn indexed_spec(
    pool: &VirtualMachinePoolSpec,
    mut spec: VirtualMachineSpec,
    index: usize,
) -> VirtualMachineSpec {
    let mut renamed = BTreeMap::new();
    for template in spec.data_volume_templates.iter_mut().flatten() {
        let Some(meta) = template.metadata.as_mut() else {
            continue;
        };
        let Some(name) = meta.name.clone() else {
            continue;
        };
        let indexed = format!("{name}-{index}");
        meta.name = Some(indexed.clone());
        renamed.insert(name, indexed);
    }
    let naming = pool.name_generation.as_ref();
    let config_maps = naming
        .and_then(|n| n.append_index_to_config_map_refs)
        .unwrap_or(false);
    let secrets = naming
        .and_then(|n| n.append_index_to_secret_refs)
        .unwrap_or(false);
    let volumes = spec
        .template
        .as_mut()
        .and_then(|t| t.spec.as_mut())
        .and_then(|s| s.volumes.as_mut());
    for volume in volumes.into_iter().flatten() {
        if let Some(claim) = volume.persistent_volume_claim.as_mut() {
            if let Some(indexed) = renamed.get(&claim.claim_name) {
                claim.claim_name = indexed.clone();
            }
        } else if let Some(dv) = volume.data_volume.as_mut() {
            if let Some(indexed) = renamed.get(&dv.name) {
                dv.name = indexed.clone();
            }
        } else if let Some(config_map) = volume.config_map.as_mut().filter(|_| config_maps) {
            config_map.name = config_map.name.take().map(|n| format!("{n}-{index}"));
        } else if let Some(secret) = volume.secret.as_mut().filter(|_| secrets) {
            secret.secret_name = secret.secret_name.take().map(|n| format!("{n}-{index}"));
        }
    }
    spec
}

fn is_ready(vm: &VirtualMachine) -> bool {
    vm.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Ready" && c.status == ConditionStatus::True)
        })
}

/// The status upstream writes: the pool's VMs and the ready ones, the canonical selector,
/// ReplicaPaused while paused, ReplicaFailure with `failure`'s reason and message.
pub fn status(
    pool: &VirtualMachinePool,
    mine: &[&VirtualMachine],
    failure: Option<(&str, &str)>,
    now: &Time,
) -> VirtualMachinePoolStatus {
    let mut conditions = pool.status.clone().unwrap_or_default().conditions;
    let failed = failure.map(|(reason, message)| ("", reason, message));
    claims::set_condition(&mut conditions, failed, conditions::REPLICA_FAILURE, now);
    let paused = pool.spec.paused.then_some((
        "",
        conditions::SUCCESSFUL_PAUSED,
        conditions::PAUSED_MESSAGE,
    ));
    claims::set_condition(&mut conditions, paused, conditions::REPLICA_PAUSED, now);
    VirtualMachinePoolStatus {
        replicas: i32::try_from(mine.len()).unwrap_or(i32::MAX),
        ready_replicas: i32::try_from(mine.iter().filter(|vm| is_ready(vm)).count())
            .unwrap_or(i32::MAX),
        conditions,
        label_selector: pool
            .spec
            .selector
            .as_ref()
            .map(api::label_selector::canonical)
            .unwrap_or_default(),
    }
}

/// SuccessfulPaused or SuccessfulResume, when the ReplicaPaused condition is to change.
fn pause_event(pool: &VirtualMachinePool) -> Option<PoolAction> {
    let has = pool
        .status
        .as_ref()
        .is_some_and(|s| claims::has_condition(&s.conditions, conditions::REPLICA_PAUSED));
    match (pool.spec.paused, has) {
        (true, false) => Some(PoolAction::Event {
            reason: conditions::SUCCESSFUL_PAUSED,
            message: "Pool is paused".into(),
        }),
        (false, true) => Some(PoolAction::Event {
            reason: conditions::SUCCESSFUL_RESUME,
            message: "Pool is unpaused".into(),
        }),
        _ => None,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
