//! The VM controller's plan, world by world: every run strategy, requests, the crash-loop
//! back-off, DataVolumes, claims and conditions.

use super::*;
use std::collections::BTreeMap;

use super::super::backoff::{ever_ran, set_start_failure};
use super::super::volumes::dv_error;
use super::super::{
    IMMEDIATE_DATA_VOLUME_CREATION_ANNOTATION, MAX_CRASH_LOOP_BACKOFF, data_volume_for,
    finalizer_patch, instance_for, start_backoff, start_failure, with_failure,
};
use api::cdi::DataVolume;
use api::cdi::datavolume::{DataVolumeCondition, DataVolumeSpec, DataVolumeStatus};
use api::cdi::datavolume::{DataVolumeConditionType, DataVolumePhase};
use api::common::ConditionStatus;
use api::kubevirt::keys;
use api::kubevirt::vm::{VirtualMachineStateChangeRequest, state_change};
use api::kubevirt::vmi::{DataVolumeVolumeSource, Volume};
use api::kubevirt::vmi::{
    VirtualMachineCondition, VirtualMachineInstancePhaseTransitionTimestamp, condition_types,
};
use api::kubevirt::{
    DataVolumeTemplateSpec, VirtualMachineInstanceSpec, VirtualMachineInstanceStatus,
    VirtualMachineSpec,
};
use api::kubevirt::{
    RunStrategy, VirtualMachine, VirtualMachineInstance, VirtualMachineInstancePhase,
    VirtualMachineInstanceTemplateSpec, VirtualMachinePrintableStatus, VirtualMachineStatus,
};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::core::v1::PersistentVolumeClaimStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::json;

use crate::kubevirt::instancetype::{Chosen, Failure, Resolved};

const NOW: i64 = 1_700_000_000;

fn at(second: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(second).unwrap())
}

fn vm(strategy: RunStrategy) -> VirtualMachine {
    let mut vm = VirtualMachine::new(
        "vm1",
        VirtualMachineSpec {
            run_strategy: Some(strategy),
            template: Some(VirtualMachineInstanceTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                    annotations: Some(BTreeMap::from([("note".into(), "x".into())])),
                    ..Default::default()
                }),
                spec: Some(VirtualMachineInstanceSpec::default()),
            }),
            ..Default::default()
        },
    );
    vm.metadata.namespace = Some("ns".into());
    vm.metadata.uid = Some("vm-uid".into());
    vm.metadata.generation = Some(3);
    vm.metadata.resource_version = Some("100".into());
    vm.metadata.finalizers = Some(vec![keys::VM_CONTROLLER_FINALIZER.into()]);
    vm
}

fn vmi(phase: VirtualMachineInstancePhase, uid: &str) -> VirtualMachineInstance {
    let mut vmi = instance_for(&vm(RunStrategy::Always)).unwrap();
    vmi.metadata.uid = Some(uid.into());
    vmi.metadata.creation_timestamp = Some(at(NOW - 5));
    vmi.status = Some(VirtualMachineInstanceStatus {
        phase: Some(phase),
        ..Default::default()
    });
    vmi
}

/// A VMI that reached Running at some point, as its timestamps record.
fn ran(vmi: VirtualMachineInstance) -> VirtualMachineInstance {
    with_phases(vmi, &["Pending", "Running"])
}

/// A VMI whose timestamps show it never reached Running.
fn never_ran(vmi: VirtualMachineInstance) -> VirtualMachineInstance {
    with_phases(vmi, &["Pending", "Failed"])
}

/// A VMI whose phaseTransitionTimestamps list `phases`.
fn with_phases(mut vmi: VirtualMachineInstance, phases: &[&str]) -> VirtualMachineInstance {
    let transitions = phases
        .iter()
        .map(|p| VirtualMachineInstancePhaseTransitionTimestamp {
            phase: Some(serde_json::from_value(json!(p)).expect("a phase")),
            phase_transition_timestamp: None,
        })
        .collect();
    vmi.status.as_mut().unwrap().phase_transition_timestamps = Some(transitions);
    vmi
}

fn condition(type_: &str, status: ConditionStatus, reason: &str) -> VirtualMachineCondition {
    VirtualMachineCondition {
        type_: type_.into(),
        status,
        last_probe_time: None,
        last_transition_time: Some(at(NOW - 100)),
        reason: Some(reason.into()),
        message: Some(format!("{type_} message")),
    }
}

fn with_requests(mut vm: VirtualMachine, requests: &[(&str, Option<&str>)]) -> VirtualMachine {
    let status = vm.status.get_or_insert_with(Default::default);
    status.state_change_requests = Some(
        requests
            .iter()
            .map(|(action, uid)| VirtualMachineStateChangeRequest {
                action: action.to_string(),
                data: None,
                uid: uid.map(str::to_string),
            })
            .collect(),
    );
    vm
}

struct World {
    vm: VirtualMachine,
    vmi: Option<VirtualMachineInstance>,
    dvs: BTreeMap<String, DataVolume>,
    claims: BTreeMap<String, PersistentVolumeClaim>,
    instancetypes: Result<Resolved, Failure>,
    now: i64,
}

impl World {
    fn new(vm: VirtualMachine, vmi: Option<VirtualMachineInstance>) -> Self {
        Self {
            vm,
            vmi,
            dvs: BTreeMap::new(),
            claims: BTreeMap::new(),
            instancetypes: Ok(Resolved::default()),
            now: NOW,
        }
    }

    fn plan(&self) -> Vec<VmAction> {
        plan(&Observed {
            vm: &self.vm,
            vmi: self.vmi.as_ref(),
            data_volumes: &self.dvs,
            claims: &self.claims,
            instancetypes: &self.instancetypes,
            now: at(self.now),
        })
    }

    /// Plans, then takes the planned status as the VM's.
    fn step(&mut self) -> Vec<VmAction> {
        let actions = self.plan();
        if let Some(status) = planned_status(&actions) {
            self.vm.status = Some(status);
        }
        actions
    }
}

fn planned_status(actions: &[VmAction]) -> Option<VirtualMachineStatus> {
    actions.iter().find_map(|a| match a {
        VmAction::PatchVmStatus(s) => Some(s.as_ref().clone()),
        _ => None,
    })
}

fn printable(actions: &[VmAction]) -> VirtualMachinePrintableStatus {
    planned_status(actions)
        .and_then(|s| s.printable_status)
        .expect("a status is written")
}

fn created(actions: &[VmAction]) -> Option<&VirtualMachineInstance> {
    actions.iter().find_map(|a| match a {
        VmAction::CreateVmi(v) => Some(v.as_ref()),
        _ => None,
    })
}

fn deletes(actions: &[VmAction]) -> bool {
    actions
        .iter()
        .any(|a| matches!(a, VmAction::DeleteVmi { .. }))
}

fn events(actions: &[VmAction]) -> Vec<&'static str> {
    actions
        .iter()
        .filter_map(|a| match a {
            VmAction::Event(e) => Some(e.reason),
            _ => None,
        })
        .collect()
}

fn requests_of(actions: &[VmAction]) -> Vec<String> {
    planned_status(actions)
        .and_then(|s| s.state_change_requests)
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.action)
        .collect()
}

fn find_condition(actions: &[VmAction], type_: &str) -> Option<VirtualMachineCondition> {
    planned_status(actions)
        .and_then(|s| s.conditions)
        .and_then(|c| c.into_iter().find(|c| c.type_ == type_))
}

#[test]
fn always_creates_the_instance_from_the_template() {
    let actions = World::new(vm(RunStrategy::Always), None).plan();
    let vmi = created(&actions).expect("an instance is created");
    assert_eq!(vmi.metadata.name.as_deref(), Some("vm1"));
    assert_eq!(vmi.metadata.namespace.as_deref(), Some("ns"));
    let labels = vmi.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["app"], "web");
    assert_eq!(labels[keys::VM_NAME_LABEL], "vm1");
    let annotations = vmi.metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations["note"], "x");
    assert_eq!(annotations[keys::VM_GENERATION_ANNOTATION], "3");
    let owner = &vmi.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "VirtualMachine");
    assert_eq!(owner.api_version, "kubevirt.io/v1");
    assert_eq!(owner.uid, "vm-uid");
    assert_eq!(owner.controller, Some(true));
    assert_eq!(owner.block_owner_deletion, Some(true));
    assert_eq!(
        vmi.metadata.finalizers,
        Some(vec![keys::VM_CONTROLLER_FINALIZER.to_string()])
    );
    assert_eq!(vmi.spec.start_strategy, None);
    assert_eq!(events(&actions), vec![reasons::SUCCESSFUL_CREATE]);
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);
    let status = planned_status(&actions).unwrap();
    assert_eq!(status.created, Some(false));
    assert_eq!(status.ready, Some(false));
    // The run strategy is reported once an instance was seen.
    assert_eq!(status.run_strategy, None);
    let ready = find_condition(&actions, condition_types::READY).unwrap();
    assert_eq!(ready.reason.as_deref(), Some(reasons::VMI_NOT_EXISTS));
}

#[test]
fn the_finalizer_is_added_first() {
    let mut vm = vm(RunStrategy::Halted);
    vm.metadata.finalizers = None;
    let actions = World::new(vm.clone(), None).plan();
    assert_eq!(actions[0], VmAction::AddVmFinalizer);
    let patch = finalizer_patch(&vm.metadata, true);
    assert_eq!(patch[0]["path"], "/metadata/resourceVersion");
    assert_eq!(patch[1]["value"], json!([keys::VM_CONTROLLER_FINALIZER]));
    vm.metadata.finalizers = Some(vec!["other".into(), keys::VM_CONTROLLER_FINALIZER.into()]);
    let patch = finalizer_patch(&vm.metadata, false);
    assert_eq!(patch[0]["op"], "test");
    assert_eq!(patch[1]["value"], json!(["other"]));
}

#[test]
fn halted_stays_stopped_and_stops_a_live_instance() {
    let actions = World::new(vm(RunStrategy::Halted), None).plan();
    assert!(created(&actions).is_none());
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopped);

    let live = vmi(VirtualMachineInstancePhase::Running, "u1");
    let actions = World::new(vm(RunStrategy::Halted), Some(live)).plan();
    assert!(deletes(&actions));
    assert!(actions.contains(&VmAction::DeleteVmi {
        name: "vm1".into(),
        uid: Some("u1".into())
    }));
    assert_eq!(events(&actions), vec![reasons::SUCCESSFUL_DELETE]);
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopping);
    let status = planned_status(&actions).unwrap();
    assert_eq!(status.created, Some(true));
    assert_eq!(status.run_strategy, Some(RunStrategy::Halted));

    // Already being deleted: not deleted again, our finalizer released.
    let mut going = vmi(VirtualMachineInstancePhase::Running, "u1");
    going.metadata.deletion_timestamp = Some(at(NOW));
    let actions = World::new(vm(RunStrategy::Halted), Some(going)).plan();
    assert!(!deletes(&actions));
    assert!(actions.contains(&VmAction::RemoveVmiFinalizer { name: "vm1".into() }));
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopping);
}

#[test]
fn deprecated_running_field_counts() {
    let mut running = vm(RunStrategy::Always);
    running.spec.run_strategy = None;
    running.spec.running = Some(true);
    assert!(created(&World::new(running.clone(), None).plan()).is_some());
    running.spec.running = Some(false);
    assert!(created(&World::new(running.clone(), None).plan()).is_none());
    // Both set (refused at admission, still coped with): runStrategy wins.
    running.spec.run_strategy = Some(RunStrategy::Always);
    assert!(created(&World::new(running, None).plan()).is_some());
}

#[test]
fn always_restarts_a_finished_instance() {
    for phase in [
        VirtualMachineInstancePhase::Succeeded,
        VirtualMachineInstancePhase::Failed,
    ] {
        let done = ran(vmi(phase, "u1"));
        let actions = World::new(vm(RunStrategy::Always), Some(done)).plan();
        assert!(deletes(&actions), "{phase:?}");
        assert!(actions.contains(&VmAction::RemoveVmiFinalizer { name: "vm1".into() }));
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopped);
    }
    // A running one is left alone.
    let live = vmi(VirtualMachineInstancePhase::Running, "u1");
    let actions = World::new(vm(RunStrategy::Always), Some(live)).plan();
    assert!(!deletes(&actions) && created(&actions).is_none());
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Running);
}

#[test]
fn restart_request_stops_then_starts() {
    // Always: the stop request for the live instance deletes it.
    let mut world = World::new(
        with_requests(
            vm(RunStrategy::Always),
            &[("Stop", Some("u1")), ("Start", None)],
        ),
        Some(vmi(VirtualMachineInstancePhase::Running, "u1")),
    );
    let actions = world.step();
    assert!(deletes(&actions));
    assert_eq!(requests_of(&actions), vec!["Stop", "Start"]);
    // Gone: the stop request is done; Always starts at once.
    world.vmi = None;
    let actions = world.step();
    assert!(created(&actions).is_some());
    assert_eq!(requests_of(&actions), vec!["Start"]);
    // The new instance runs: the start request is done.
    world.vmi = Some(vmi(VirtualMachineInstancePhase::Running, "u2"));
    let actions = world.step();
    assert!(!deletes(&actions));
    assert_eq!(requests_of(&actions), Vec::<String>::new());
    assert_eq!(
        world.vm.status.as_ref().unwrap().state_change_requests,
        None
    );
}

#[test]
fn manual_acts_on_requests_only() {
    let actions = World::new(vm(RunStrategy::Manual), None).plan();
    assert!(created(&actions).is_none());
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopped);

    let mut world = World::new(
        with_requests(vm(RunStrategy::Manual), &[("Start", None)]),
        None,
    );
    let actions = world.step();
    assert!(created(&actions).is_some());
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);
    assert_eq!(requests_of(&actions), vec!["Start"]);
    world.vmi = Some(vmi(VirtualMachineInstancePhase::Scheduling, "u1"));
    let actions = world.step();
    assert_eq!(requests_of(&actions), Vec::<String>::new());
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);

    // A finished instance is not restarted by itself.
    world.vmi = Some(ran(vmi(VirtualMachineInstancePhase::Succeeded, "u1")));
    let actions = world.step();
    assert!(!deletes(&actions) && created(&actions).is_none());
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopped);

    // A stop request for another (older) instance is dropped, not acted on.
    let mut world = World::new(
        with_requests(vm(RunStrategy::Manual), &[("Stop", Some("old"))]),
        Some(vmi(VirtualMachineInstancePhase::Running, "u1")),
    );
    let actions = world.step();
    assert!(!deletes(&actions));
    assert_eq!(requests_of(&actions), Vec::<String>::new());

    // A stop request for this one deletes it.
    let world = World::new(
        with_requests(vm(RunStrategy::Manual), &[("Stop", Some("u1"))]),
        Some(vmi(VirtualMachineInstancePhase::Running, "u1")),
    );
    let actions = world.plan();
    assert!(deletes(&actions));
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopping);
}

#[test]
fn paused_start_request_starts_paused() {
    let mut vm = vm(RunStrategy::Manual);
    vm.status = Some(VirtualMachineStatus {
        state_change_requests: Some(vec![VirtualMachineStateChangeRequest {
            action: state_change::START.into(),
            data: Some(BTreeMap::from([(
                state_change::PAUSED.0.into(),
                "true".into(),
            )])),
            uid: None,
        }]),
        ..Default::default()
    });
    let actions = World::new(vm.clone(), None).plan();
    assert_eq!(
        created(&actions).unwrap().spec.start_strategy.as_deref(),
        Some("Paused")
    );
    // Halted: the request switches the VM to Always.
    vm.spec.run_strategy = Some(RunStrategy::Halted);
    let actions = World::new(vm, None).plan();
    assert!(created(&actions).is_none());
    let patch = actions
        .iter()
        .find_map(|a| match a {
            VmAction::PatchVm(p) => Some(p.clone()),
            _ => None,
        })
        .expect("the spec is switched");
    assert_eq!(
        patch,
        json!([
            {"op": "test", "path": "/spec/runStrategy", "value": "Halted"},
            {"op": "replace", "path": "/spec/runStrategy", "value": "Always"},
        ])
    );
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);
}

#[test]
fn rerun_on_failure_restarts_only_failures() {
    // A new VM starts (its status shows no strategy yet).
    assert!(created(&World::new(vm(RunStrategy::RerunOnFailure), None).plan()).is_some());

    let mut seen = vm(RunStrategy::RerunOnFailure);
    seen.status = Some(VirtualMachineStatus {
        run_strategy: Some(RunStrategy::RerunOnFailure),
        ..Default::default()
    });
    // Failed: deleted and a start queued.
    let failed = ran(vmi(VirtualMachineInstancePhase::Failed, "u1"));
    let mut world = World::new(seen.clone(), Some(failed));
    let actions = world.step();
    assert!(deletes(&actions));
    assert_eq!(requests_of(&actions), vec!["Start"]);
    world.vmi = None;
    let actions = world.step();
    assert!(created(&actions).is_some());

    // Succeeded: deleted, not restarted.
    let succeeded = ran(vmi(VirtualMachineInstancePhase::Succeeded, "u1"));
    let mut world = World::new(seen, Some(succeeded));
    let actions = world.step();
    assert!(deletes(&actions));
    assert_eq!(requests_of(&actions), Vec::<String>::new());
    world.vmi = None;
    let actions = world.step();
    assert!(created(&actions).is_none());
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopped);
}

#[test]
fn once_never_restarts() {
    assert!(created(&World::new(vm(RunStrategy::Once), None).plan()).is_some());
    for phase in [
        VirtualMachineInstancePhase::Succeeded,
        VirtualMachineInstancePhase::Failed,
    ] {
        let done = ran(vmi(phase, "u1"));
        let actions = World::new(vm(RunStrategy::Once), Some(done)).plan();
        assert!(!deletes(&actions) && created(&actions).is_none());
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopped);
        assert!(actions.contains(&VmAction::RemoveVmiFinalizer { name: "vm1".into() }));
    }
}

#[test]
fn backoff_grows_and_is_capped() {
    let max = MAX_CRASH_LOOP_BACKOFF;
    for seed in [0, 1, 7, 12345, u64::MAX] {
        let d = |n| start_backoff(n, max, seed).as_secs();
        assert!((10..=15).contains(&d(1)), "{}", d(1));
        assert!((40..=60).contains(&d(2)));
        assert!((90..=135).contains(&d(3)));
        assert!((250..=300).contains(&d(5)));
        assert_eq!(d(10), 300);
        assert_eq!(d(i64::MAX), 300);
    }
    assert_eq!(start_backoff(0, max, 0).as_secs(), 10);
}

#[test]
fn crash_loop_backs_off_and_resets() {
    let mut world = World::new(
        vm(RunStrategy::Always),
        Some(never_ran(vmi(VirtualMachineInstancePhase::Failed, "u1"))),
    );
    let actions = world.step();
    assert!(deletes(&actions));
    let record = start_failure(world.vm.status.as_ref()).expect("a failure is recorded");
    assert_eq!(record.consecutive_fail_count, 1);
    assert_eq!(record.last_failed_vmi_uid.as_deref(), Some("u1"));
    let retry = record.retry_after_timestamp.unwrap().0.as_second() - NOW;
    assert!((10..=15).contains(&retry), "{retry}");
    assert_eq!(
        printable(&actions),
        VirtualMachinePrintableStatus::CrashLoopBackOff
    );
    // Seen again while it goes away: counted once.
    let actions = world.step();
    assert!(
        planned_status(&actions).is_none()
            || start_failure(world.vm.status.as_ref())
                .unwrap()
                .consecutive_fail_count
                == 1
    );

    // Gone: no start before the retry time; requeued for it.
    world.vmi = None;
    let actions = world.step();
    assert!(created(&actions).is_none());
    assert!(actions.contains(&VmAction::RequeueAfter(Duration::from_secs(retry as u64))));
    assert_eq!(
        printable(&actions),
        VirtualMachinePrintableStatus::CrashLoopBackOff
    );

    // After it: started.
    world.now = NOW + retry;
    let actions = world.step();
    assert!(created(&actions).is_some());
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);

    // Fails again: the count grows.
    world.vmi = Some(never_ran(vmi(VirtualMachineInstancePhase::Failed, "u2")));
    world.step();
    let record = start_failure(world.vm.status.as_ref()).unwrap();
    assert_eq!(record.consecutive_fail_count, 2);
    let retry2 = record.retry_after_timestamp.clone().unwrap().0.as_second() - world.now;
    assert!((40..=60).contains(&retry2), "{retry2}");

    // One that reaches Running clears the record.
    world.vmi = Some(vmi(VirtualMachineInstancePhase::Running, "u3"));
    world.step();
    assert_eq!(start_failure(world.vm.status.as_ref()), None);

    // Switching to Manual clears it too.
    let mut manual = world.vm.clone();
    manual.spec.run_strategy = Some(RunStrategy::Manual);
    set_start_failure(manual.status.as_mut().unwrap(), Some(record));
    let actions = World::new(manual, None).plan();
    assert_eq!(start_failure(planned_status(&actions).as_ref()), None);
}

#[test]
fn instance_without_timestamps_is_judged_by_its_age() {
    let mut quick = vmi(VirtualMachineInstancePhase::Failed, "u1");
    quick.metadata.creation_timestamp = Some(at(NOW - 10));
    assert!(!ever_ran(&quick, &at(NOW)));
    quick.metadata.creation_timestamp = Some(at(NOW - 600));
    assert!(ever_ran(&quick, &at(NOW)));
}

#[test]
fn vm_deletion_deletes_the_instance_then_releases_the_vm() {
    let mut deleting = vm(RunStrategy::Always);
    deleting.metadata.deletion_timestamp = Some(at(NOW));
    let live = vmi(VirtualMachineInstancePhase::Running, "u1");
    let actions = World::new(deleting.clone(), Some(live)).plan();
    assert!(deletes(&actions));
    assert!(!actions.contains(&VmAction::RemoveVmFinalizer));
    assert!(created(&actions).is_none());
    assert_eq!(
        printable(&actions),
        VirtualMachinePrintableStatus::Terminating
    );

    let actions = World::new(deleting.clone(), None).plan();
    assert!(created(&actions).is_none());
    assert_eq!(actions.last(), Some(&VmAction::RemoveVmFinalizer));
    // No DataVolume is created for a VM being deleted.
    deleting.spec.data_volume_templates = Some(vec![dv_template("disk")]);
    let actions = World::new(deleting, None).plan();
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, VmAction::CreateDataVolume(_)))
    );
}

fn dv_template(name: &str) -> DataVolumeTemplateSpec {
    DataVolumeTemplateSpec {
        metadata: Some(ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("tier".into(), "gold".into())])),
            ..Default::default()
        }),
        spec: DataVolumeSpec::default(),
        ..Default::default()
    }
}

fn vm_with_disk(strategy: RunStrategy) -> VirtualMachine {
    let mut vm = vm(strategy);
    vm.spec.data_volume_templates = Some(vec![dv_template("disk")]);
    vm.spec
        .template
        .as_mut()
        .unwrap()
        .spec
        .as_mut()
        .unwrap()
        .volumes = Some(vec![Volume {
        name: "root".into(),
        data_volume: Some(DataVolumeVolumeSource {
            name: "disk".into(),
            hotpluggable: None,
        }),
        ..Default::default()
    }]);
    vm
}

fn dv(phase: DataVolumePhase, progress: Option<&str>) -> DataVolume {
    let mut dv = data_volume_for(&vm_with_disk(RunStrategy::Always), &dv_template("disk")).unwrap();
    dv.status = Some(DataVolumeStatus {
        phase: Some(phase),
        progress: progress.map(str::to_string),
        ..Default::default()
    });
    dv
}

#[test]
fn data_volumes_are_created_even_for_a_halted_vm() {
    let actions = World::new(vm_with_disk(RunStrategy::Halted), None).plan();
    let dv = actions
        .iter()
        .find_map(|a| match a {
            VmAction::CreateDataVolume(dv) => Some(dv.as_ref()),
            _ => None,
        })
        .expect("the DataVolume is created");
    assert_eq!(dv.metadata.name.as_deref(), Some("disk"));
    assert_eq!(dv.metadata.namespace.as_deref(), Some("ns"));
    let labels = dv.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[keys::CREATED_BY_LABEL], "vm-uid");
    assert_eq!(labels["tier"], "gold");
    assert_eq!(
        dv.metadata.annotations.as_ref().unwrap()[keys::ALLOW_CLAIM_ADOPTION_ANNOTATION],
        "true"
    );
    let owner = &dv.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.uid.as_str(), owner.controller),
        ("vm-uid", Some(true))
    );
    assert_eq!(
        events(&actions),
        vec![reasons::SUCCESSFUL_DATA_VOLUME_CREATE]
    );
    assert!(created(&actions).is_none());

    // Deferred creation: a halted VM creates none.
    let mut deferred = vm_with_disk(RunStrategy::Halted);
    deferred.metadata.annotations = Some(BTreeMap::from([(
        IMMEDIATE_DATA_VOLUME_CREATION_ANNOTATION.into(),
        "false".into(),
    )]));
    let actions = World::new(deferred, None).plan();
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, VmAction::CreateDataVolume(_)))
    );
}

#[test]
fn the_instance_waits_for_its_data_volumes() {
    // Not created yet: created now, the VM provisions.
    let mut world = World::new(vm_with_disk(RunStrategy::Always), None);
    let actions = world.step();
    assert!(created(&actions).is_none());
    assert_eq!(
        printable(&actions),
        VirtualMachinePrintableStatus::Provisioning
    );

    // Importing: still waiting, and the condition says on what.
    world.dvs.insert(
        "disk".into(),
        dv(DataVolumePhase::ImportInProgress, Some("45.10%")),
    );
    let actions = world.step();
    assert!(created(&actions).is_none());
    assert_eq!(
        printable(&actions),
        VirtualMachinePrintableStatus::Provisioning
    );
    let c = find_condition(&actions, condition_types::DATA_VOLUMES_READY).unwrap();
    assert_eq!(c.status, ConditionStatus::False);
    assert_eq!(
        c.message.as_deref(),
        Some("Waiting for DataVolume disk (ImportInProgress, 45.10%)")
    );
    assert!(actions.contains(&VmAction::RequeueAfter(VOLUME_RECHECK)));

    // Done: started.
    world.dvs.insert(
        "disk".into(),
        dv(DataVolumePhase::Succeeded, Some("100.0%")),
    );
    let actions = world.step();
    assert!(created(&actions).is_some());
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);
    let c = find_condition(&actions, condition_types::DATA_VOLUMES_READY).unwrap();
    assert_eq!(c.status, ConditionStatus::True);

    // Waiting for its first consumer (the launcher pod): started too, not provisioning.
    let mut world = World::new(vm_with_disk(RunStrategy::Always), None);
    world.dvs.insert(
        "disk".into(),
        dv(DataVolumePhase::WaitForFirstConsumer, None),
    );
    let actions = world.step();
    assert!(created(&actions).is_some());
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);
}

#[test]
fn a_failed_data_volume_is_reported_once() {
    let mut world = World::new(vm_with_disk(RunStrategy::Always), None);
    world
        .dvs
        .insert("disk".into(), dv(DataVolumePhase::Failed, None));
    let actions = world.step();
    assert!(created(&actions).is_none());
    assert_eq!(events(&actions), vec![reasons::FAILED_DATA_VOLUME_IMPORT]);
    assert_eq!(
        printable(&actions),
        VirtualMachinePrintableStatus::DataVolumeError
    );
    let actions = world.step();
    assert!(events(&actions).is_empty());

    // A worker stopped on an error is an error too.
    let mut stuck = dv(DataVolumePhase::ImportInProgress, None);
    stuck.status.as_mut().unwrap().conditions = Some(vec![DataVolumeCondition {
        type_: DataVolumeConditionType::Running,
        status: ConditionStatus::False,
        last_transition_time: None,
        last_heartbeat_time: None,
        reason: Some("Error".into()),
        message: Some("boom".into()),
    }]);
    assert!(dv_error(&stuck).unwrap().contains("boom"));
}

#[test]
fn unbound_claims_wait_for_binding() {
    let mut vm = vm(RunStrategy::Always);
    vm.spec
        .template
        .as_mut()
        .unwrap()
        .spec
        .as_mut()
        .unwrap()
        .volumes = Some(vec![Volume {
        name: "data".into(),
        persistent_volume_claim: Some(api::kubevirt::vmi::PersistentVolumeClaimVolumeSource {
            claim_name: "claim".into(),
            read_only: None,
            hotpluggable: None,
        }),
        ..Default::default()
    }]);
    let mut world = World::new(vm, Some(vmi(VirtualMachineInstancePhase::Pending, "u1")));
    let mut pvc = PersistentVolumeClaim {
        status: Some(PersistentVolumeClaimStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    world.claims.insert("claim".into(), pvc.clone());
    assert_eq!(
        printable(&world.plan()),
        VirtualMachinePrintableStatus::WaitingForVolumeBinding
    );
    pvc.status.as_mut().unwrap().phase = Some("Bound".into());
    world.claims.insert("claim".into(), pvc);
    assert_eq!(
        printable(&world.plan()),
        VirtualMachinePrintableStatus::Starting
    );
}

#[test]
fn conditions_are_mirrored_from_the_instance() {
    let mut live = vmi(VirtualMachineInstancePhase::Running, "u1");
    live.status.as_mut().unwrap().conditions = Some(vec![
        condition(condition_types::READY, ConditionStatus::True, ""),
        condition(
            condition_types::PAUSED,
            ConditionStatus::True,
            "PausedByUser",
        ),
        condition(condition_types::AGENT_CONNECTED, ConditionStatus::True, ""),
    ]);
    let mut world = World::new(vm(RunStrategy::Always), Some(live.clone()));
    let actions = world.step();
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Paused);
    let status = planned_status(&actions).unwrap();
    assert_eq!(status.ready, Some(true));
    assert_eq!(status.observed_generation, Some(3));
    assert_eq!(status.desired_generation, Some(3));
    for t in [
        condition_types::READY,
        condition_types::PAUSED,
        condition_types::AGENT_CONNECTED,
    ] {
        assert_eq!(
            find_condition(&actions, t).unwrap().status,
            ConditionStatus::True,
            "{t}"
        );
    }
    // Unpaused: the mirrored condition goes away with the VMI's.
    live.status.as_mut().unwrap().conditions = Some(vec![condition(
        condition_types::READY,
        ConditionStatus::True,
        "",
    )]);
    world.vmi = Some(live);
    let actions = world.step();
    assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Running);
    assert!(find_condition(&actions, condition_types::PAUSED).is_none());
}

#[test]
fn a_stable_world_writes_nothing() {
    for (strategy, vmi) in [
        (RunStrategy::Halted, None),
        (RunStrategy::Manual, None),
        (
            RunStrategy::Always,
            Some(vmi(VirtualMachineInstancePhase::Running, "u1")),
        ),
        (
            RunStrategy::Once,
            Some(ran(vmi(VirtualMachineInstancePhase::Succeeded, "u1"))),
        ),
    ] {
        let mut world = World::new(vm(strategy), vmi);
        world.step();
        world.now += 30;
        let again = world.step();
        assert!(planned_status(&again).is_none(), "{strategy:?}: {again:?}");
    }
}

#[test]
fn bad_input_is_reported_not_panicked_on() {
    let mut no_template = vm(RunStrategy::Always);
    no_template.spec.template = None;
    let actions = World::new(no_template.clone(), None).plan();
    assert!(created(&actions).is_none());
    let failure = find_condition(&actions, condition_types::FAILURE).unwrap();
    assert_eq!(failure.status, ConditionStatus::True);
    assert!(failure.message.unwrap().contains("spec.template"));

    no_template.spec.template = Some(VirtualMachineInstanceTemplateSpec::default());
    let actions = World::new(no_template, None).plan();
    let failure = find_condition(&actions, condition_types::FAILURE).unwrap();
    assert!(failure.message.unwrap().contains("spec.template.spec"));

    let mut nameless = vm(RunStrategy::Always);
    nameless.spec.data_volume_templates = Some(vec![DataVolumeTemplateSpec::default()]);
    let actions = World::new(nameless, None).plan();
    assert!(created(&actions).is_none());
    let failure = find_condition(&actions, condition_types::FAILURE).unwrap();
    assert!(
        failure
            .message
            .unwrap()
            .contains("spec.dataVolumeTemplates[0].metadata.name")
    );

    // An instance of another owner is not touched.
    let mut foreign = vmi(VirtualMachineInstancePhase::Running, "u1");
    foreign.metadata.owner_references.as_mut().unwrap()[0].uid = "someone-else".into();
    let actions = World::new(vm(RunStrategy::Halted), Some(foreign)).plan();
    assert!(!deletes(&actions) && created(&actions).is_none());
    assert!(find_condition(&actions, condition_types::FAILURE).is_some());

    // A minimal VM (no namespace, uid, status) plans without panicking.
    let bare = VirtualMachine::new("x", VirtualMachineSpec::default());
    let _ = World::new(bare, None).plan();
}

#[test]
fn unschedulable_and_errors_from_the_instance() {
    let mut pending = vmi(VirtualMachineInstancePhase::Scheduling, "u1");
    pending.status.as_mut().unwrap().conditions = Some(vec![condition(
        "PodScheduled",
        ConditionStatus::False,
        "Unschedulable",
    )]);
    let actions = World::new(vm(RunStrategy::Always), Some(pending.clone())).plan();
    assert_eq!(
        printable(&actions),
        VirtualMachinePrintableStatus::ErrorUnschedulable
    );
    pending.status.as_mut().unwrap().conditions = Some(vec![condition(
        "Synchronized",
        ConditionStatus::False,
        "FailedPvcNotFound",
    )]);
    let actions = World::new(vm(RunStrategy::Always), Some(pending)).plan();
    assert_eq!(
        printable(&actions),
        VirtualMachinePrintableStatus::ErrorPvcNotFound
    );
}

#[test]
fn failure_condition_keeps_its_time() {
    let status = VirtualMachineStatus::default();
    let once = with_failure(&status, reasons::FAILED_CREATE, "x".into(), &at(NOW));
    let twice = with_failure(&once, reasons::FAILED_CREATE, "x".into(), &at(NOW + 50));
    assert_eq!(once, twice);
}

mod instancetypes {
    use super::*;
    use api::instancetype::matcher::Scope;
    use api::kubevirt::vm::{ControllerRevisionRef, InstancetypeStatusRef};

    fn u1_small() -> Chosen<api::instancetype::VirtualMachineInstancetypeSpec> {
        let spec = serde_json::from_value(json!({"cpu": {"guest": 2}, "memory": {"guest": "2Gi"}}))
            .expect("a spec");
        Chosen {
            spec,
            status_ref: InstancetypeStatusRef {
                name: Some("u1.small".into()),
                kind: Some("virtualmachineclusterinstancetype".into()),
                controller_revision_ref: Some(ControllerRevisionRef {
                    name: Some("vm1-u1.small-v1beta1-uid-1".into()),
                }),
                ..Default::default()
            },
            new_revision: Some(Default::default()),
            scope: Scope::Cluster,
            name: "u1.small".into(),
        }
    }

    fn with_instancetype(resolved: Result<Resolved, Failure>) -> World {
        let mut world = World::new(vm(RunStrategy::Always), None);
        world.instancetypes = resolved;
        world
    }

    #[test]
    fn the_instance_gets_the_instancetypes_cpus_and_memory_and_the_vm_its_revision() {
        let world = with_instancetype(Ok(Resolved {
            instancetype: Some(u1_small()),
            preference: None,
        }));
        let actions = world.plan();
        let vmi = created(&actions).expect("an instance");
        let spec = serde_json::to_value(&vmi.spec).unwrap();
        assert_eq!(
            spec["domain"]["cpu"],
            json!({"sockets": 2, "cores": 1, "threads": 1})
        );
        assert_eq!(spec["domain"]["memory"], json!({"guest": "2Gi"}));
        assert_eq!(
            vmi.metadata.annotations.as_ref().unwrap()["kubevirt.io/cluster-instancetype-name"],
            "u1.small"
        );
        assert!(
            actions
                .iter()
                .any(|a| matches!(a, VmAction::CreateControllerRevision(_)))
        );
        let status = planned_status(&actions).expect("a status");
        assert_eq!(status.instancetype_ref, Some(u1_small().status_ref));
    }

    #[test]
    fn a_missing_instancetype_is_a_failure_and_no_instance() {
        let world = with_instancetype(Err(Failure {
            reason: "FailedFindInstancetype",
            message:
                "virtualmachineclusterinstancetypes.instancetype.kubevirt.io \"nope\" not found"
                    .into(),
        }));
        let actions = world.plan();
        assert!(created(&actions).is_none());
        let failure = find_condition(&actions, condition_types::FAILURE).expect("a Failure");
        assert_eq!(failure.reason.as_deref(), Some("FailedFindInstancetype"));
    }

    #[test]
    fn a_template_that_sets_what_the_instancetype_does_makes_no_instance() {
        let mut world = with_instancetype(Ok(Resolved {
            instancetype: Some(u1_small()),
            preference: None,
        }));
        let template = world.vm.spec.template.as_mut().unwrap();
        template.spec.as_mut().unwrap().domain.cpu = Some(api::kubevirt::vmi::Cpu {
            sockets: Some(4),
            ..Default::default()
        });
        let actions = world.plan();
        assert!(created(&actions).is_none());
        let failure = find_condition(&actions, condition_types::FAILURE).expect("a Failure");
        assert_eq!(
            failure.message.as_deref(),
            Some(
                "Error creating virtual machine instance: Failed to apply instancetype: VMI conflicts with instancetype spec in fields: [spec.domain.cpu.sockets]"
            )
        );
    }
}
