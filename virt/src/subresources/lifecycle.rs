//! What virt-api's `start`, `stop` and `restart` subresources of a VirtualMachine do, as pure
//! decisions: the VM and its instance in, the JSON patches to apply (or the refusal, with
//! KubeVirt's status code and message) out. The caller fetches the objects, applies the
//! patches in order and answers 202 Accepted.
//!
//! Every patch carries a `test` operation on the value it replaces (or on the object's
//! `resourceVersion` where there is no value yet), so a concurrent change makes the patch
//! fail instead of being lost; answer such a failure with [`LifecycleError::from_failed_patch`].

use std::collections::BTreeMap;

use api::kubevirt::vm::{VirtualMachineStateChangeRequest, state_change};
use api::kubevirt::vmi::START_STRATEGY_PAUSED;
use api::kubevirt::{
    RunStrategy, VirtualMachine, VirtualMachineInstance, VirtualMachineInstancePhase,
    VirtualMachineStatus,
};
use serde_json::{Value, json};

/// The VM condition set when a volume migration left volumes to be reassigned by hand.
pub const MANUAL_RECOVERY_REQUIRED_CONDITION: &str = "ManualRecoveryRequired";
/// The VM condition set while a volume migration is under way.
pub const VOLUMES_CHANGE_CONDITION: &str = "VolumesChange";

/// Upstream's answer when a volume migration must first be repaired by hand.
pub const MANUAL_RECOVERY_REQUIRED: &str = "VM recovery required: Volume migration failed, leaving some volumes pointing to non-consistent targets; manual intervention is needed to reassign them to their original volumes.";
/// Upstream's answer to a stop of a VM without a live instance.
pub const VM_NOT_RUNNING: &str = "VM is not running";
/// Upstream's answer to a start of a VM with a live instance.
pub const VM_ALREADY_RUNNING: &str = "VM is already running";
/// Upstream's answer to a request while another start or stop is pending.
pub const REQUEST_UNDERWAY: &str = "unable to complete request: stop/start already underway";

/// The body of `PUT .../virtualmachines/{name}/start`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StartRequest {
    /// Start the instance paused.
    pub paused: bool,
    /// Check and answer without changing anything (`dryRun: ["All"]`).
    pub dry_run: bool,
}

/// The body of `PUT .../virtualmachines/{name}/stop`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StopRequest {
    /// The grace period to give the instance's shutdown (`virtctl stop --force
    /// --grace-period N`).
    pub grace_period: Option<i64>,
    /// Check and answer without changing anything.
    pub dry_run: bool,
}

/// The body of `PUT .../virtualmachines/{name}/restart`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RestartRequest {
    /// `0` for a forced restart; nothing else is accepted.
    pub grace_period_seconds: Option<i64>,
    /// Check and answer without changing anything.
    pub dry_run: bool,
}

/// Where a VM patch goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmPatchTarget {
    /// The VM itself (`PATCH .../virtualmachines/{name}`): its spec.
    Object,
    /// Its status subresource (`PATCH .../virtualmachines/{name}/status`).
    Status,
}

/// A JSON patch (RFC 6902, `application/json-patch+json`) for the VM.
#[derive(Clone, Debug, PartialEq)]
pub struct VmPatch {
    /// The VM or its status.
    pub target: VmPatchTarget,
    /// The operations.
    pub patch: Value,
}

/// A JSON patch of the instance's `spec.terminationGracePeriodSeconds`, applied before the
/// VM patch, so the shutdown that follows is as short as asked.
#[derive(Clone, Debug, PartialEq)]
pub struct VmiGracePeriodPatch {
    /// Sets the new grace period.
    pub patch: Value,
    /// Puts the previous one back; apply it when the VM patch then fails (restart does).
    pub rollback: Value,
}

/// What a request does, once accepted.
#[derive(Clone, Debug, PartialEq)]
pub struct LifecycleChange {
    /// First, the instance's grace period.
    pub vmi: Option<VmiGracePeriodPatch>,
    /// Then the VM; `None` when the request is accepted with nothing to change (a start of
    /// a `WaitAsReceiver` VM, as upstream).
    pub vm: Option<VmPatch>,
    /// Apply with `dryRun=All`.
    pub dry_run: bool,
}

/// A refused request, with the status code and message KubeVirt answers.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleError {
    /// 409: the request does not fit the VM's state or run strategy.
    #[error("{0}")]
    Conflict(String),
    /// 400: the request itself is wrong.
    #[error("{0}")]
    BadRequest(String),
    /// 500: the request cannot be carried out.
    #[error("{0}")]
    Internal(String),
}

impl LifecycleError {
    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            Self::Conflict(_) => 409,
            Self::BadRequest(_) => 400,
            Self::Internal(_) => 500,
        }
    }

    /// The Status reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Conflict(_) => "Conflict",
            Self::BadRequest(_) => "BadRequest",
            Self::Internal(_) => "InternalError",
        }
    }

    /// The Status message, worded as the API machinery words it for the VM `name`:
    /// `Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm1": VM is not running`.
    pub fn message(&self, name: &str) -> String {
        match self {
            Self::Conflict(cause) => {
                format!(
                    "Operation cannot be fulfilled on virtualmachine.kubevirt.io \"{name}\": {cause}"
                )
            }
            Self::BadRequest(cause) => cause.clone(),
            Self::Internal(cause) => format!("Internal error occurred: {cause}"),
        }
    }

    /// The whole `v1.Status` body to answer with.
    pub fn status(&self, name: &str) -> Value {
        let mut details = json!({});
        match self {
            Self::Conflict(_) => {
                details = json!({"name": name, "group": "kubevirt.io", "kind": "virtualmachine"});
            }
            Self::Internal(cause) => {
                details = json!({"causes": [{"message": cause}]});
            }
            Self::BadRequest(_) => {}
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message(name),
            "reason": self.reason(),
            "code": self.code(),
        });
        if details != json!({}) {
            status["details"] = details;
        }
        status
    }

    /// The answer to a patch the API server refused with `code`: a failed `test` (someone
    /// else changed the VM meanwhile; 422, as the API server answers a patch that does not
    /// apply) or a resourceVersion conflict (409) is a conflict, anything else an internal
    /// error.
    pub fn from_failed_patch(code: u16, message: &str) -> Self {
        match code {
            409 | 422 => Self::Conflict(message.to_owned()),
            _ => Self::Internal(message.to_owned()),
        }
    }
}

fn request(action: &str, uid: Option<String>, paused: bool) -> VirtualMachineStateChangeRequest {
    VirtualMachineStateChangeRequest {
        action: action.to_string(),
        data: paused.then(|| {
            BTreeMap::from([(
                state_change::PAUSED.0.to_string(),
                state_change::PAUSED.1.to_string(),
            )])
        }),
        uid,
    }
}

fn resource_version_test(meta_rv: Option<&String>) -> Option<Value> {
    meta_rv.map(|rv| json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}))
}

/// The status patch queueing `changes`, as upstream builds it: the whole status when the
/// VM has none; otherwise the list, tested against its current value, set when empty or
/// replaced by a lone stop request, anything else refused while a request is pending. A
/// crash-loop record is dropped: a person asked.
pub fn state_change_patch(
    vm: &VirtualMachine,
    changes: &[VirtualMachineStateChangeRequest],
) -> Result<Value, LifecycleError> {
    let mut ops = Vec::new();
    let status = vm.status.clone().unwrap_or_default();
    if status == VirtualMachineStatus::default() {
        ops.extend(resource_version_test(vm.metadata.resource_version.as_ref()));
        ops.push(
            json!({"op": "add", "path": "/status", "value": {"stateChangeRequests": changes}}),
        );
        return Ok(Value::Array(ops));
    }
    let current = status.state_change_requests.as_ref();
    match current {
        Some(list) => {
            ops.push(json!({"op": "test", "path": "/status/stateChangeRequests", "value": list}))
        }
        None => ops.extend(resource_version_test(vm.metadata.resource_version.as_ref())),
    }
    let lone_stop = changes.len() == 1 && changes[0].action == state_change::STOP;
    match current {
        None => {
            ops.push(json!({"op": "add", "path": "/status/stateChangeRequests", "value": changes}))
        }
        Some(list) if list.is_empty() => ops.push(
            json!({"op": "replace", "path": "/status/stateChangeRequests", "value": changes}),
        ),
        Some(_) if lone_stop => ops.push(
            json!({"op": "replace", "path": "/status/stateChangeRequests", "value": changes}),
        ),
        Some(_) => return Err(LifecycleError::Internal(REQUEST_UNDERWAY.to_string())),
    }
    if status.start_failure.is_some() {
        ops.push(json!({"op": "remove", "path": "/status/startFailure"}));
    }
    Ok(Value::Array(ops))
}

/// The spec patch switching the VM on (`Always`/`running: true`) or off (`Halted`/`running:
/// false`), in whichever of the two fields the VM uses.
pub fn running_patch(vm: &VirtualMachine, running: bool) -> Value {
    let strategy = if running {
        RunStrategy::Always
    } else {
        RunStrategy::Halted
    };
    match (vm.spec.run_strategy, vm.spec.running) {
        (Some(current), _) => json!([
            {"op": "test", "path": "/spec/runStrategy", "value": current.as_str()},
            {"op": "replace", "path": "/spec/runStrategy", "value": strategy.as_str()},
        ]),
        (None, Some(current)) => json!([
            {"op": "test", "path": "/spec/running", "value": current},
            {"op": "replace", "path": "/spec/running", "value": running},
        ]),
        (None, None) => {
            let mut ops: Vec<Value> = resource_version_test(vm.metadata.resource_version.as_ref())
                .into_iter()
                .collect();
            ops.push(json!({"op": "add", "path": "/spec/running", "value": running}));
            Value::Array(ops)
        }
    }
}

/// The patch setting the instance's grace period to `seconds`, and the one undoing it.
pub fn grace_period_patch(vmi: &VirtualMachineInstance, seconds: i64) -> VmiGracePeriodPatch {
    const PATH: &str = "/spec/terminationGracePeriodSeconds";
    let previous = vmi.spec.termination_grace_period_seconds;
    let (patch, rollback) = match previous {
        Some(old) => (
            json!([
                {"op": "test", "path": PATH, "value": old},
                {"op": "replace", "path": PATH, "value": seconds},
            ]),
            json!([
                {"op": "test", "path": PATH, "value": seconds},
                {"op": "replace", "path": PATH, "value": old},
            ]),
        ),
        None => {
            let mut ops: Vec<Value> = resource_version_test(vmi.metadata.resource_version.as_ref())
                .into_iter()
                .collect();
            ops.push(json!({"op": "add", "path": PATH, "value": seconds}));
            (
                Value::Array(ops),
                json!([
                    {"op": "test", "path": PATH, "value": seconds},
                    {"op": "remove", "path": PATH},
                ]),
            )
        }
    };
    VmiGracePeriodPatch { patch, rollback }
}

fn status_patch(
    vm: &VirtualMachine,
    changes: &[VirtualMachineStateChangeRequest],
) -> Result<Option<VmPatch>, LifecycleError> {
    Ok(Some(VmPatch {
        target: VmPatchTarget::Status,
        patch: state_change_patch(vm, changes)?,
    }))
}

fn spec_patch(vm: &VirtualMachine, running: bool) -> Option<VmPatch> {
    Some(VmPatch {
        target: VmPatchTarget::Object,
        patch: running_patch(vm, running),
    })
}

/// `start`: refused while an instance lives; a halted VM is switched to `Always` (or, for a
/// paused start, sent a start request the controller turns into that); Manual and
/// RerunOnFailure get a start request (after a stop of a finished instance); Always and
/// Once refuse, as they start by themselves.
pub fn start(
    vm: &VirtualMachine,
    vmi: Option<&VirtualMachineInstance>,
    req: StartRequest,
) -> Result<LifecycleChange, LifecycleError> {
    if let Some(v) = vmi
        && !v.is_final()
        && !matches!(v.phase(), None | Some(VirtualMachineInstancePhase::Unknown))
    {
        return Err(LifecycleError::Conflict(VM_ALREADY_RUNNING.to_string()));
    }
    if vm.condition_holds(MANUAL_RECOVERY_REQUIRED_CONDITION) {
        return Err(LifecycleError::Conflict(
            MANUAL_RECOVERY_REQUIRED.to_string(),
        ));
    }
    let strategy = vm.spec.effective_run_strategy();
    let vm_patch = match strategy {
        RunStrategy::Halted => {
            let starts_paused = vm
                .spec
                .template
                .as_ref()
                .and_then(|t| t.spec.as_ref())
                .and_then(|s| s.start_strategy.as_deref())
                .is_some_and(|s| s == START_STRATEGY_PAUSED);
            if req.paused && !starts_paused {
                status_patch(vm, &[request(state_change::START, None, true)])?
            } else {
                spec_patch(vm, true)
            }
        }
        RunStrategy::RerunOnFailure | RunStrategy::Manual => {
            let vmi_phase = vmi.and_then(VirtualMachineInstance::phase);
            if strategy == RunStrategy::RerunOnFailure
                && vmi_phase == Some(VirtualMachineInstancePhase::Failed)
            {
                return Err(LifecycleError::Conflict(format!(
                    "{} does not support starting VM from failed state",
                    strategy.as_str()
                )));
            }
            let finished = match strategy {
                RunStrategy::RerunOnFailure => {
                    vmi_phase == Some(VirtualMachineInstancePhase::Succeeded)
                }
                _ => vmi.is_some_and(VirtualMachineInstance::is_final),
            };
            let start = request(state_change::START, None, req.paused);
            match vmi.filter(|_| finished) {
                Some(v) => status_patch(
                    vm,
                    &[
                        request(state_change::STOP, v.metadata.uid.clone(), false),
                        start,
                    ],
                )?,
                None => status_patch(vm, &[start])?,
            }
        }
        RunStrategy::Always | RunStrategy::Once => {
            return Err(LifecycleError::Conflict(format!(
                "{} does not support manual start requests",
                strategy.as_str()
            )));
        }
        RunStrategy::WaitAsReceiver => None,
    };
    Ok(LifecycleChange {
        vmi: None,
        vm: vm_patch,
        dry_run: req.dry_run,
    })
}

/// `stop`: Always and Once are switched to `Halted`; Manual and RerunOnFailure get a stop
/// request for the live instance; a halted VM whose instance still shuts down accepts only
/// a shorter grace period. A grace period given is first set on the live instance.
pub fn stop(
    vm: &VirtualMachine,
    vmi: Option<&VirtualMachineInstance>,
    req: StopRequest,
) -> Result<LifecycleChange, LifecycleError> {
    let live = vmi.filter(|v| !v.is_final());
    let grace = match (live, req.grace_period) {
        (Some(v), Some(seconds)) => Some(grace_period_patch(v, seconds)),
        _ => None,
    };
    let stop_live = |v: &VirtualMachineInstance| {
        status_patch(
            vm,
            &[request(state_change::STOP, v.metadata.uid.clone(), false)],
        )
    };
    let strategy = vm.spec.effective_run_strategy();
    let vm_patch = match strategy {
        RunStrategy::Halted => {
            let Some(v) = live else {
                return Err(LifecycleError::Conflict(VM_NOT_RUNNING.to_string()));
            };
            let shorter = match (req.grace_period, v.spec.termination_grace_period_seconds) {
                (None, _) => false,
                (Some(new), Some(old)) => new < old,
                (Some(_), None) => true,
            };
            if !shorter {
                return Err(LifecycleError::Conflict(format!(
                    "{} only supports manual stop requests with a shorter graceperiod",
                    strategy.as_str()
                )));
            }
            stop_live(v)?
        }
        RunStrategy::RerunOnFailure | RunStrategy::Manual => {
            let Some(v) = live else {
                return Err(LifecycleError::Conflict(VM_NOT_RUNNING.to_string()));
            };
            stop_live(v)?
        }
        RunStrategy::Always | RunStrategy::Once => spec_patch(vm, false),
        RunStrategy::WaitAsReceiver => None,
    };
    Ok(LifecycleChange {
        vmi: grace,
        vm: vm_patch,
        dry_run: req.dry_run,
    })
}

/// `restart`: a stop request for the instance followed by a start request, for every run
/// strategy that restarts (not Halted, not Once); a forced restart (grace period 0) first
/// cuts the instance's grace period to one second.
pub fn restart(
    vm: &VirtualMachine,
    vmi: Option<&VirtualMachineInstance>,
    req: RestartRequest,
) -> Result<LifecycleChange, LifecycleError> {
    match req.grace_period_seconds {
        Some(g) if g > 0 => {
            return Err(LifecycleError::BadRequest(
                "For force restart, only gracePeriod=0 is supported for now".to_string(),
            ));
        }
        Some(g) if g < 0 => {
            return Err(LifecycleError::BadRequest(
                "gracePeriod has to be greater or equal to 0".to_string(),
            ));
        }
        _ => {}
    }
    if vm.condition_holds(VOLUMES_CHANGE_CONDITION) {
        return Err(LifecycleError::Conflict(
            MANUAL_RECOVERY_REQUIRED.to_string(),
        ));
    }
    let strategy = vm.spec.effective_run_strategy();
    if matches!(strategy, RunStrategy::Halted | RunStrategy::Once) {
        // Upstream's wording, misspelling included: clients may match on it.
        return Err(LifecycleError::Conflict(format!(
            "RunStategy {} does not support manual restart requests",
            strategy.as_str()
        )));
    }
    let Some(v) = vmi else {
        return Err(LifecycleError::Conflict(format!(
            "{VM_NOT_RUNNING}: {}",
            RunStrategy::Halted.as_str()
        )));
    };
    let grace = (req.grace_period_seconds == Some(0)).then(|| grace_period_patch(v, 1));
    let vm_patch = status_patch(
        vm,
        &[
            request(state_change::STOP, v.metadata.uid.clone(), false),
            request(state_change::START, None, false),
        ],
    )?;
    Ok(LifecycleChange {
        vmi: grace,
        vm: vm_patch,
        dry_run: req.dry_run,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::common::ConditionStatus;
    use api::kubevirt::vm::VirtualMachineStartFailure;
    use api::kubevirt::vmi::VirtualMachineCondition;
    use api::kubevirt::{
        VirtualMachineInstanceSpec, VirtualMachineInstanceStatus,
        VirtualMachineInstanceTemplateSpec, VirtualMachineSpec,
    };

    const ALL: [RunStrategy; 5] = [
        RunStrategy::Always,
        RunStrategy::RerunOnFailure,
        RunStrategy::Manual,
        RunStrategy::Halted,
        RunStrategy::Once,
    ];

    fn vm(strategy: RunStrategy) -> VirtualMachine {
        let mut vm = VirtualMachine::new(
            "vm1",
            VirtualMachineSpec {
                run_strategy: Some(strategy),
                template: Some(VirtualMachineInstanceTemplateSpec::default()),
                ..Default::default()
            },
        );
        vm.metadata.namespace = Some("default".into());
        vm.metadata.resource_version = Some("42".into());
        vm.status = Some(VirtualMachineStatus {
            printable_status: Some(api::kubevirt::VirtualMachinePrintableStatus::Stopped),
            ..Default::default()
        });
        vm
    }

    fn vmi(phase: Option<VirtualMachineInstancePhase>) -> VirtualMachineInstance {
        let mut vmi = VirtualMachineInstance::new("vm1", VirtualMachineInstanceSpec::default());
        vmi.metadata.uid = Some("uid-1".into());
        vmi.metadata.resource_version = Some("7".into());
        vmi.status = Some(VirtualMachineInstanceStatus {
            phase,
            ..Default::default()
        });
        vmi
    }

    /// Applies a JSON patch of test/add/replace/remove operations on object paths, failing
    /// as RFC 6902 does: a test that does not match, a replace or remove of nothing.
    fn patch_json(doc: &mut Value, patch: &Value) -> Result<(), String> {
        let mut out = doc.clone();
        for op in patch.as_array().ok_or("not a list")? {
            let path = op["path"].as_str().ok_or("no path")?;
            let (parent, key) = path.rsplit_once('/').ok_or("bad path")?;
            let target = if parent.is_empty() {
                Some(&mut out)
            } else {
                out.pointer_mut(parent)
            };
            let object = target
                .and_then(Value::as_object_mut)
                .ok_or(format!("no parent for {path}"))?;
            match op["op"].as_str() {
                Some("test") if object.get(key) == Some(&op["value"]) => {}
                Some("test") => return Err(format!("test of {path} failed")),
                Some("add") => {
                    object.insert(key.to_string(), op["value"].clone());
                }
                Some("replace") if object.contains_key(key) => {
                    object.insert(key.to_string(), op["value"].clone());
                }
                Some("remove") if object.remove(key).is_some() => {}
                _ => return Err(format!("cannot apply {op}")),
            }
        }
        *doc = out;
        Ok(())
    }

    fn running() -> VirtualMachineInstance {
        vmi(Some(VirtualMachineInstancePhase::Running))
    }

    fn apply(vm: &VirtualMachine, change: &LifecycleChange) -> VirtualMachine {
        let mut doc = serde_json::to_value(vm).unwrap();
        if let Some(p) = &change.vm {
            patch_json(&mut doc, &p.patch).unwrap();
        }
        serde_json::from_value(doc).unwrap()
    }

    fn requests(vm: &VirtualMachine) -> Vec<(String, Option<String>, bool)> {
        vm.status
            .as_ref()
            .and_then(|s| s.state_change_requests.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|r| {
                let paused = r
                    .data
                    .is_some_and(|d| d.get("paused").is_some_and(|v| v == "true"));
                (r.action, r.uid, paused)
            })
            .collect()
    }

    fn conflict(result: Result<LifecycleChange, LifecycleError>) -> String {
        match result {
            Err(LifecycleError::Conflict(m)) => m,
            other => panic!("expected a conflict, got {other:?}"),
        }
    }

    #[test]
    fn start_per_run_strategy_without_an_instance() {
        for strategy in ALL {
            let vm = vm(strategy);
            let result = start(&vm, None, StartRequest::default());
            match strategy {
                RunStrategy::Halted => {
                    let change = result.unwrap();
                    assert_eq!(change.vm.as_ref().unwrap().target, VmPatchTarget::Object);
                    let after = apply(&vm, &change);
                    assert_eq!(after.spec.run_strategy, Some(RunStrategy::Always));
                }
                RunStrategy::Manual | RunStrategy::RerunOnFailure => {
                    let change = result.unwrap();
                    assert_eq!(change.vm.as_ref().unwrap().target, VmPatchTarget::Status);
                    let after = apply(&vm, &change);
                    assert_eq!(requests(&after), vec![("Start".into(), None, false)]);
                }
                RunStrategy::Always | RunStrategy::Once => {
                    assert_eq!(
                        conflict(result),
                        format!(
                            "{} does not support manual start requests",
                            strategy.as_str()
                        )
                    );
                }
                RunStrategy::WaitAsReceiver => unreachable!(),
            }
        }
    }

    #[test]
    fn start_is_refused_while_an_instance_lives() {
        for strategy in ALL {
            for phase in [
                VirtualMachineInstancePhase::Pending,
                VirtualMachineInstancePhase::Scheduling,
                VirtualMachineInstancePhase::Running,
            ] {
                let err = start(
                    &vm(strategy),
                    Some(&vmi(Some(phase))),
                    StartRequest::default(),
                )
                .unwrap_err();
                assert_eq!(
                    err,
                    LifecycleError::Conflict("VM is already running".into())
                );
                assert_eq!(err.code(), 409);
                assert_eq!(
                    err.message("vm1"),
                    "Operation cannot be fulfilled on virtualmachine.kubevirt.io \"vm1\": VM is already running"
                );
            }
        }
    }

    #[test]
    fn start_after_a_finished_instance_stops_it_first() {
        let succeeded = vmi(Some(VirtualMachineInstancePhase::Succeeded));
        let failed = vmi(Some(VirtualMachineInstancePhase::Failed));
        for (strategy, instance) in [
            (RunStrategy::Manual, &succeeded),
            (RunStrategy::Manual, &failed),
            (RunStrategy::RerunOnFailure, &succeeded),
        ] {
            let vm = vm(strategy);
            let after = apply(
                &vm,
                &start(&vm, Some(instance), StartRequest::default()).unwrap(),
            );
            assert_eq!(
                requests(&after),
                vec![
                    ("Stop".into(), Some("uid-1".into()), false),
                    ("Start".into(), None, false)
                ],
                "{strategy:?}"
            );
        }
        assert_eq!(
            conflict(start(
                &vm(RunStrategy::RerunOnFailure),
                Some(&failed),
                StartRequest::default()
            )),
            "RerunOnFailure does not support starting VM from failed state"
        );
        // An instance of unknown phase does not block a start.
        let unknown = vmi(Some(VirtualMachineInstancePhase::Unknown));
        assert!(
            start(
                &vm(RunStrategy::Manual),
                Some(&unknown),
                StartRequest::default()
            )
            .is_ok()
        );
    }

    #[test]
    fn paused_start_sends_a_request() {
        let vm_halted = vm(RunStrategy::Halted);
        let req = StartRequest {
            paused: true,
            dry_run: true,
        };
        let change = start(&vm_halted, None, req).unwrap();
        assert!(change.dry_run);
        assert_eq!(change.vm.as_ref().unwrap().target, VmPatchTarget::Status);
        let after = apply(&vm_halted, &change);
        assert_eq!(requests(&after), vec![("Start".into(), None, true)]);
        assert_eq!(after.spec.run_strategy, Some(RunStrategy::Halted));

        // A template that starts paused anyway only needs the switch.
        let mut paused_template = vm(RunStrategy::Halted);
        let spec = VirtualMachineInstanceSpec {
            start_strategy: Some(START_STRATEGY_PAUSED.into()),
            ..Default::default()
        };
        paused_template.spec.template.as_mut().unwrap().spec = Some(spec);
        let change = start(&paused_template, None, req).unwrap();
        assert_eq!(change.vm.unwrap().target, VmPatchTarget::Object);

        let manual = vm(RunStrategy::Manual);
        let after = apply(&manual, &start(&manual, None, req).unwrap());
        assert_eq!(requests(&after), vec![("Start".into(), None, true)]);
    }

    #[test]
    fn deprecated_running_field_is_patched_in_place() {
        let mut vm = vm(RunStrategy::Halted);
        vm.spec.run_strategy = None;
        vm.spec.running = Some(false);
        let after = apply(&vm, &start(&vm, None, StartRequest::default()).unwrap());
        assert_eq!(after.spec.running, Some(true));
        assert_eq!(after.spec.run_strategy, None);
        let after_stop = apply(
            &after,
            &stop(&after, Some(&running()), StopRequest::default()).unwrap(),
        );
        assert_eq!(after_stop.spec.running, Some(false));
        // Neither field (Halted by default): the field is added, guarded by resourceVersion.
        vm.spec.running = None;
        let change = start(&vm, None, StartRequest::default()).unwrap();
        assert_eq!(
            change.vm.as_ref().unwrap().patch[0]["path"],
            "/metadata/resourceVersion"
        );
        assert_eq!(apply(&vm, &change).spec.running, Some(true));
    }

    #[test]
    fn stop_per_run_strategy() {
        for strategy in ALL {
            let vm = vm(strategy);
            let live = running();
            let result = stop(&vm, Some(&live), StopRequest::default());
            match strategy {
                RunStrategy::Always | RunStrategy::Once => {
                    let after = apply(&vm, &result.unwrap());
                    assert_eq!(after.spec.run_strategy, Some(RunStrategy::Halted));
                }
                RunStrategy::Manual | RunStrategy::RerunOnFailure => {
                    let change = result.unwrap();
                    assert!(change.vmi.is_none());
                    let after = apply(&vm, &change);
                    assert_eq!(
                        requests(&after),
                        vec![("Stop".into(), Some("uid-1".into()), false)]
                    );
                }
                RunStrategy::Halted => assert_eq!(
                    conflict(result),
                    "Halted only supports manual stop requests with a shorter graceperiod"
                ),
                RunStrategy::WaitAsReceiver => unreachable!(),
            }
            // Without a live instance.
            let done = vmi(Some(VirtualMachineInstancePhase::Succeeded));
            for instance in [None, Some(&done)] {
                let result = stop(&vm, instance, StopRequest::default());
                match strategy {
                    RunStrategy::Always | RunStrategy::Once => assert!(result.is_ok()),
                    _ => assert_eq!(conflict(result), "VM is not running"),
                }
            }
        }
    }

    #[test]
    fn forced_stop_sets_the_grace_period_first() {
        let mut live = running();
        live.spec.termination_grace_period_seconds = Some(180);
        let req = StopRequest {
            grace_period: Some(0),
            dry_run: false,
        };
        // Halted with a shutdown under way: a shorter grace period is accepted.
        let vm_halted = vm(RunStrategy::Halted);
        let change = stop(&vm_halted, Some(&live), req).unwrap();
        let grace = change.vmi.clone().unwrap();
        // The patch tests the grace period it replaces.
        assert_eq!(
            grace.patch[0],
            json!({"op": "test", "path": "/spec/terminationGracePeriodSeconds", "value": 180})
        );
        let mut doc = serde_json::to_value(&live).unwrap();
        patch_json(&mut doc, &grace.patch.clone()).unwrap();
        assert_eq!(doc["spec"]["terminationGracePeriodSeconds"], 0);
        patch_json(&mut doc, &grace.rollback).unwrap();
        assert_eq!(doc["spec"]["terminationGracePeriodSeconds"], 180);
        assert_eq!(
            requests(&apply(&vm_halted, &change)),
            vec![("Stop".into(), Some("uid-1".into()), false)]
        );
        // Not shorter: refused.
        let longer = StopRequest {
            grace_period: Some(300),
            dry_run: false,
        };
        assert!(stop(&vm_halted, Some(&live), longer).is_err());
        // Always: the grace period is set and the VM halted.
        let always = vm(RunStrategy::Always);
        let change = stop(&always, Some(&live), req).unwrap();
        assert!(change.vmi.is_some());
        assert_eq!(
            apply(&always, &change).spec.run_strategy,
            Some(RunStrategy::Halted)
        );
        // An instance without a grace period gets one added.
        let bare = running();
        let grace = grace_period_patch(&bare, 0);
        let mut doc = serde_json::to_value(&bare).unwrap();
        patch_json(&mut doc, &grace.patch).unwrap();
        assert_eq!(doc["spec"]["terminationGracePeriodSeconds"], 0);
    }

    #[test]
    fn restart_per_run_strategy() {
        for strategy in ALL {
            let vm = vm(strategy);
            let result = restart(&vm, Some(&running()), RestartRequest::default());
            match strategy {
                RunStrategy::Halted | RunStrategy::Once => assert_eq!(
                    conflict(result),
                    format!(
                        "RunStategy {} does not support manual restart requests",
                        strategy.as_str()
                    )
                ),
                _ => {
                    let change = result.unwrap();
                    assert!(change.vmi.is_none());
                    assert_eq!(
                        requests(&apply(&vm, &change)),
                        vec![
                            ("Stop".into(), Some("uid-1".into()), false),
                            ("Start".into(), None, false)
                        ]
                    );
                }
            }
            if !matches!(strategy, RunStrategy::Halted | RunStrategy::Once) {
                assert_eq!(
                    conflict(restart(&vm, None, RestartRequest::default())),
                    "VM is not running: Halted"
                );
            }
        }
    }

    #[test]
    fn restart_grace_periods() {
        let vm = vm(RunStrategy::Always);
        let live = running();
        for (g, message) in [
            (
                5,
                "For force restart, only gracePeriod=0 is supported for now",
            ),
            (-1, "gracePeriod has to be greater or equal to 0"),
        ] {
            let err = restart(
                &vm,
                Some(&live),
                RestartRequest {
                    grace_period_seconds: Some(g),
                    dry_run: false,
                },
            )
            .unwrap_err();
            assert_eq!(err, LifecycleError::BadRequest(message.into()));
            assert_eq!(err.code(), 400);
            assert_eq!(err.message("vm1"), message);
        }
        let forced = restart(
            &vm,
            Some(&live),
            RestartRequest {
                grace_period_seconds: Some(0),
                dry_run: false,
            },
        )
        .unwrap();
        let grace = forced.vmi.unwrap();
        assert_eq!(grace.patch.as_array().unwrap().last().unwrap()["value"], 1);
    }

    #[test]
    fn pending_requests_block_all_but_a_lone_stop() {
        let mut vm = vm(RunStrategy::Manual);
        vm.status.as_mut().unwrap().state_change_requests =
            Some(vec![request(state_change::START, None, false)]);
        vm.status.as_mut().unwrap().start_failure = Some(VirtualMachineStartFailure {
            consecutive_fail_count: Some(2),
            ..Default::default()
        });
        let err = restart(&vm, Some(&running()), RestartRequest::default()).unwrap_err();
        assert_eq!(err, LifecycleError::Internal(REQUEST_UNDERWAY.into()));
        assert_eq!(err.code(), 500);
        assert_eq!(
            err.message("vm1"),
            "Internal error occurred: unable to complete request: stop/start already underway"
        );
        let change = stop(&vm, Some(&running()), StopRequest::default()).unwrap();
        let patch = &change.vm.as_ref().unwrap().patch;
        assert_eq!(patch[0]["op"], "test");
        assert_eq!(patch[0]["path"], "/status/stateChangeRequests");
        let after = apply(&vm, &change);
        assert_eq!(
            requests(&after),
            vec![("Stop".into(), Some("uid-1".into()), false)]
        );
        assert!(after.status.unwrap().start_failure.is_none());
    }

    #[test]
    fn a_concurrent_change_fails_the_patch() {
        let vm = vm(RunStrategy::Manual);
        let change = start(&vm, None, StartRequest::default()).unwrap();
        // Someone queued a request meanwhile: the resourceVersion moved on.
        let mut moved = vm.clone();
        moved.metadata.resource_version = Some("43".into());
        moved.status.as_mut().unwrap().state_change_requests =
            Some(vec![request(state_change::STOP, Some("x".into()), false)]);
        let mut doc = serde_json::to_value(&moved).unwrap();
        assert!(patch_json(&mut doc, &change.vm.unwrap().patch).is_err());
        // The spec switch tests the current value.
        let halted = vm_with(RunStrategy::Halted);
        let change = start(&halted, None, StartRequest::default()).unwrap();
        let mut doc = serde_json::to_value(vm_with(RunStrategy::Manual)).unwrap();
        assert!(patch_json(&mut doc, &change.vm.unwrap().patch).is_err());
        assert_eq!(
            LifecycleError::from_failed_patch(422, "JSON patch failed: test").code(),
            409
        );
        assert_eq!(
            LifecycleError::from_failed_patch(409, "changed").code(),
            409
        );
        assert_eq!(LifecycleError::from_failed_patch(500, "broken").code(), 500);
    }

    fn vm_with(strategy: RunStrategy) -> VirtualMachine {
        vm(strategy)
    }

    #[test]
    fn a_vm_without_status_gets_one() {
        let mut vm = vm(RunStrategy::Manual);
        vm.status = None;
        let change = start(&vm, None, StartRequest::default()).unwrap();
        let after = apply(&vm, &change);
        assert_eq!(requests(&after), vec![("Start".into(), None, false)]);
    }

    #[test]
    fn volume_migration_conditions_block() {
        let mut vm = vm(RunStrategy::Manual);
        vm.status.as_mut().unwrap().conditions = Some(vec![VirtualMachineCondition {
            type_: MANUAL_RECOVERY_REQUIRED_CONDITION.into(),
            status: ConditionStatus::True,
            last_probe_time: None,
            last_transition_time: None,
            reason: None,
            message: None,
        }]);
        assert_eq!(
            conflict(start(&vm, None, StartRequest::default())),
            MANUAL_RECOVERY_REQUIRED
        );
        let status = LifecycleError::Conflict("VM is not running".into()).status("vm1");
        assert_eq!(status["code"], 409);
        assert_eq!(status["reason"], "Conflict");
        assert_eq!(status["details"]["kind"], "virtualmachine");
    }
}
