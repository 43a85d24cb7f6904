//! The plan case by case: each phase of an import, an upload and the clones, from objects
//! written as the API server would return them.

use super::super::keys::{ANN_FAILURE_REASON, ANN_RETAIN_AFTER_COMPLETION};
use super::*;
use api::cdi::DataVolumeStatus;
use api::cdi::datavolume::{DataVolumeConditionType, DataVolumePhase as P};
use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, ContainerStatus};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{Value, json};

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap())
}

fn data_volume(source: Value) -> DataVolume {
    serde_json::from_value(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {"name": "disk", "namespace": "ns", "uid": "uid-dv", "resourceVersion": "5"},
        "spec": {
            "source": source,
            "storage": {"resources": {"requests": {"storage": "1Gi"}}},
        },
    }))
    .unwrap()
}

fn http() -> DataVolume {
    data_volume(json!({"http": {"url": "http://server/disk.qcow2"}}))
}

fn upload() -> DataVolume {
    data_volume(json!({"upload": {}}))
}

fn clone_of(namespace: &str) -> DataVolume {
    data_volume(json!({"pvc": {"namespace": namespace, "name": "golden"}}))
}

/// The DataVolume's claim, owned by it, in `phase`, with `annotations`.
fn claim(phase: &str, annotations: &[(&str, &str)]) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {
            "name": "disk", "namespace": "ns", "uid": "uid-pvc",
            "annotations": annotations.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "ownerReferences": [{
                "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
                "name": "disk", "uid": "uid-dv", "controller": true,
            }],
        },
        "spec": {"storageClassName": "local", "volumeMode": "Filesystem"},
        "status": {"phase": phase},
    }))
    .unwrap()
}

/// A source claim in `namespace` of storage class `class`.
fn source_claim(namespace: &str, class: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": "golden", "namespace": namespace, "uid": "uid-golden"},
        "spec": {
            "storageClassName": class,
            "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": "1Gi"}},
        },
        "status": {"phase": "Bound"},
    }))
    .unwrap()
}

fn class(name: &str, binding: &str) -> StorageClass {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "provisioner": "kubevirt.io.hostpath-provisioner",
        "volumeBindingMode": binding,
    }))
    .unwrap()
}

fn observed(dv: DataVolume) -> Observed {
    let mut observed = Observed::new(dv.clone(), now());
    observed.source = Ok(dv.spec.source.clone().unwrap_or_default());
    observed.settings.class = Some(class("local", "Immediate"));
    observed.can_sign_clones = true;
    observed
}

fn pod(name: &str, phase: &str, ready: bool, state: Option<ContainerState>) -> Pod {
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns"},
        "status": {
            "phase": phase,
            "podIP": "10.0.0.7",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
        },
    }))
    .unwrap();
    if let (Some(state), Some(status)) = (state, pod.status.as_mut()) {
        status.container_statuses = Some(vec![ContainerStatus {
            name: "worker".into(),
            state: Some(state),
            ..Default::default()
        }]);
    }
    pod
}

fn terminated(code: i32, message: &str) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: code,
            message: Some(message.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn running() -> ContainerState {
    ContainerState {
        running: Some(Default::default()),
        ..Default::default()
    }
}

fn run(observed: &Observed) -> Vec<DvAction> {
    plan(observed, &ControllerConfig::default())
}

fn written_status(actions: &[DvAction]) -> DataVolumeStatus {
    actions
        .iter()
        .find_map(|a| match a {
            DvAction::WriteStatus(status) => Some((**status).clone()),
            _ => None,
        })
        .expect("a status is written")
}

fn phase(actions: &[DvAction]) -> Option<P> {
    written_status(actions).phase
}

fn condition(
    status: &DataVolumeStatus,
    type_: DataVolumeConditionType,
) -> (Option<String>, Option<String>) {
    let c = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .expect("the condition");
    (c.reason.clone(), c.message.clone())
}

fn created_pod(actions: &[DvAction]) -> Option<&Pod> {
    actions.iter().find_map(|a| match a {
        DvAction::CreatePod(pod) => Some(&**pod),
        _ => None,
    })
}

fn deleted_pods(actions: &[DvAction]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            DvAction::DeletePod { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

fn annotated(actions: &[DvAction]) -> BTreeMap<String, String> {
    actions
        .iter()
        .filter_map(|a| match a {
            DvAction::AnnotatePvc(changes) => Some(changes.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

fn requeue(actions: &[DvAction]) -> &DvAction {
    actions
        .last()
        .expect("the plan ends with when to look again")
}

#[test]
fn a_new_import_makes_its_claim_first() {
    let actions = run(&observed(http()));
    let DvAction::CreatePvc(pvc) = &actions[0] else {
        panic!("{actions:?}");
    };
    assert_eq!(pvc.metadata.name.as_deref(), Some("disk"));
    assert_eq!(pvc.owner_references()[0].uid, "uid-dv");
    assert!(
        created_pod(&actions).is_none(),
        "the pod waits for the claim"
    );
}

#[test]
fn a_pending_claim_gets_its_importer_pod_and_is_pending() {
    let mut observed = observed(http());
    observed.pvc = Some(claim("Pending", &[]));
    let actions = run(&observed);
    let pod = created_pod(&actions).expect("an importer pod");
    assert_eq!(pod.metadata.name.as_deref(), Some("importer-disk"));
    let changes = annotated(&actions);
    assert_eq!(changes[annotations::POD_PHASE], "Pending");
    assert_eq!(changes[annotations::IMPORT_POD], "importer-disk");
    assert!(!actions.contains(&DvAction::PrepareUploadServer));
    assert_eq!(phase(&actions), Some(P::Pending));
    let (reason, message) = condition(&written_status(&actions), DataVolumeConditionType::Bound);
    assert_eq!(reason.as_deref(), Some("Pending"));
    assert_eq!(message.as_deref(), Some("PVC disk Pending"));
}

#[test]
fn the_importer_skips_tls_verification_and_runs_as_the_service_account_asked_for() {
    let env_of = |dv: DataVolume| {
        let mut observed = observed(dv);
        observed.pvc = Some(claim("Pending", &[]));
        let actions = run(&observed);
        let pod = created_pod(&actions).expect("an importer pod").clone();
        let insecure = pod.spec.as_ref().unwrap().containers[0]
            .env
            .iter()
            .flatten()
            .find(|v| v.name == "INSECURE_TLS")
            .and_then(|v| v.value.clone());
        (insecure, pod.spec.unwrap().service_account_name)
    };
    assert_eq!(env_of(http()), (Some("false".to_owned()), None));
    let mut dv = data_volume(
        json!({"http": {"url": "https://server/disk.qcow2", "insecureSkipVerify": true}}),
    );
    dv.spec.service_account_name = Some("importer-sa".into());
    assert_eq!(
        env_of(dv),
        (Some("true".to_owned()), Some("importer-sa".to_owned()))
    );
}

#[test]
fn waiting_for_the_first_consumer_makes_no_pod() {
    let mut observed = observed(http());
    observed.settings.class = Some(class("local", "WaitForFirstConsumer"));
    observed.settings.config = Some(
        serde_json::from_value(json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDIConfig",
            "metadata": {"name": "config"},
            "spec": {"featureGates": ["HonorWaitForFirstConsumer"]},
        }))
        .unwrap(),
    );
    observed.pvc = Some(claim("Pending", &[]));
    let actions = run(&observed);
    assert!(created_pod(&actions).is_none());
    assert_eq!(phase(&actions), Some(P::WaitForFirstConsumer));
}

#[test]
fn a_bound_claim_with_a_pending_pod_is_import_scheduled() {
    let mut observed = observed(http());
    observed.pvc = Some(claim("Bound", &[(annotations::POD_PHASE, "Pending")]));
    observed.worker = Some(pod("importer-disk", "Pending", false, None));
    let actions = run(&observed);
    assert!(created_pod(&actions).is_none());
    assert_eq!(annotated(&actions)[annotations::POD_READY], "false");
    assert_eq!(phase(&actions), Some(P::ImportScheduled));
    assert!(
        actions.iter().any(
            |a| matches!(a, DvAction::Publish(e) if e.reason == "ImportScheduled" && !e.warning)
        )
    );
    assert_eq!(requeue(&actions), &DvAction::Requeue(RESYNC_INTERVAL));
}

#[test]
fn a_running_import_reports_its_progress_and_is_looked_at_soon() {
    let mut observed = observed(http());
    observed.pvc = Some(claim("Bound", &[(annotations::POD_PHASE, "Pending")]));
    observed.worker = Some(pod("importer-disk", "Running", true, Some(running())));
    observed.progress = Some("45.30%".into());
    let actions = run(&observed);
    assert_eq!(annotated(&actions)[annotations::POD_PHASE], "Running");
    let status = written_status(&actions);
    assert_eq!(status.phase, Some(P::ImportInProgress));
    assert_eq!(status.progress.as_deref(), Some("45.30%"));
    assert_eq!(requeue(&actions), &DvAction::Requeue(PROGRESS_INTERVAL));
}

#[test]
fn a_succeeded_import_deletes_its_pod_unless_retained() {
    let done = r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}"#;
    let mut observed = observed(http());
    observed.pvc = Some(claim("Bound", &[(annotations::POD_PHASE, "Running")]));
    observed.worker = Some(pod(
        "importer-disk",
        "Succeeded",
        false,
        Some(terminated(0, done)),
    ));
    let actions = run(&observed);
    assert_eq!(deleted_pods(&actions), ["importer-disk"]);
    assert_eq!(phase(&actions), Some(P::Succeeded));
    assert_eq!(requeue(&actions), &DvAction::AwaitChange);

    observed.pvc = Some(claim(
        "Bound",
        &[
            (annotations::POD_PHASE, "Running"),
            (ANN_RETAIN_AFTER_COMPLETION, "true"),
        ],
    ));
    let actions = run(&observed);
    assert!(deleted_pods(&actions).is_empty(), "{actions:?}");
    assert_eq!(phase(&actions), Some(P::Succeeded));
}

#[test]
fn a_failure_a_retry_may_fix_keeps_the_pod() {
    let mut observed = observed(http());
    observed.pvc = Some(claim("Bound", &[(annotations::POD_PHASE, "Running")]));
    let reset = "Unable to process data: connection reset";
    let mut worker = pod("importer-disk", "Running", false, Some(running()));
    worker
        .status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[0]
        .last_state = Some(terminated(1, reset));
    observed.worker = Some(worker);
    let actions = run(&observed);
    assert!(deleted_pods(&actions).is_empty());
    assert_ne!(phase(&actions), Some(P::Failed));
}

#[test]
fn a_terminal_failure_deletes_the_pod_and_fails_the_datavolume() {
    let mut observed = observed(http());
    observed.pvc = Some(claim("Bound", &[(annotations::POD_PHASE, "Running")]));
    let mismatch =
        "Unable to process data: checksum mismatch: expected sha256:00, calculated sha256:11";
    let message = WorkerFailure::new(FailureReason::ChecksumMismatch, mismatch);
    observed.worker = Some(pod(
        "importer-disk",
        "Running",
        false,
        Some(terminated(1, &message.termination_message())),
    ));
    let actions = run(&observed);
    assert_eq!(deleted_pods(&actions), ["importer-disk"]);
    assert_eq!(annotated(&actions)[annotations::POD_PHASE], "Failed");
    assert_eq!(annotated(&actions)[ANN_FAILURE_REASON], "ChecksumMismatch");
    let status = written_status(&actions);
    assert_eq!(status.phase, Some(P::Failed));
    let (_, message) = condition(&status, DataVolumeConditionType::Ready);
    assert_eq!(message.as_deref(), Some(mismatch));
    assert_eq!(requeue(&actions), &DvAction::AwaitChange);
}

#[test]
fn an_upload_prepares_its_server_and_becomes_ready() {
    let mut observed = observed(upload());
    observed.pvc = Some(claim("Bound", &[]));
    let actions = run(&observed);
    let prepare = actions
        .iter()
        .position(|a| a == &DvAction::PrepareUploadServer);
    let create = actions
        .iter()
        .position(|a| matches!(a, DvAction::CreatePod(_)));
    assert!(prepare < create && prepare.is_some(), "{actions:?}");
    assert_eq!(
        created_pod(&actions).unwrap().metadata.name.as_deref(),
        Some("cdi-upload-disk")
    );
    assert!(!annotated(&actions).contains_key(annotations::IMPORT_POD));

    observed.pvc = Some(claim("Bound", &[(annotations::POD_PHASE, "Pending")]));
    observed.worker = Some(pod("cdi-upload-disk", "Running", true, Some(running())));
    let actions = run(&observed);
    assert_eq!(phase(&actions), Some(P::UploadReady));
}

#[test]
fn a_lost_claim_is_reported_on_the_bound_condition() {
    let mut observed = observed(http());
    observed.pvc = Some(claim("Lost", &[(annotations::POD_PHASE, "Running")]));
    observed.worker = Some(pod("importer-disk", "Running", true, Some(running())));
    let actions = run(&observed);
    let (reason, message) = condition(&written_status(&actions), DataVolumeConditionType::Bound);
    assert_eq!(reason.as_deref(), Some("ClaimLost"));
    assert_eq!(message.as_deref(), Some("Claim Lost"));
}

#[test]
fn a_claim_the_datavolume_does_not_own_is_left_alone() {
    let mut observed = observed(http());
    let mut foreign = claim("Bound", &[]);
    foreign.metadata.owner_references = None;
    observed.pvc = Some(foreign);
    let actions = run(&observed);
    assert!(created_pod(&actions).is_none());
    let (reason, _) = condition(&written_status(&actions), DataVolumeConditionType::Bound);
    assert_eq!(reason.as_deref(), Some("ErrResourceExists"));
    assert_eq!(requeue(&actions), &DvAction::Requeue(BLOCKED_INTERVAL));
}

#[test]
fn a_source_that_cannot_be_resolved_blocks_the_datavolume() {
    let mut observed = observed(http());
    observed.source = Err(Blocked {
        reason: "NotFound".into(),
        message: "DataSource ns/fedora not found".into(),
    });
    let actions = run(&observed);
    let (reason, message) = condition(&written_status(&actions), DataVolumeConditionType::Bound);
    assert_eq!(reason.as_deref(), Some("NotFound"));
    assert_eq!(message.as_deref(), Some("DataSource ns/fedora not found"));
    assert!(!actions.iter().any(|a| matches!(a, DvAction::CreatePvc(_))));
}

#[test]
fn a_csi_clone_of_the_same_class_makes_its_claim_from_the_source() {
    let mut observed = observed(clone_of("ns"));
    observed.clone_source = Some(CloneSource {
        exists: true,
        claim: Some(source_claim("ns", "local")),
        ..Default::default()
    });
    let actions = run(&observed);
    let DvAction::CreatePvc(pvc) = &actions[0] else {
        panic!("{actions:?}");
    };
    let data_source = pvc.spec.as_ref().unwrap().data_source.as_ref().unwrap();
    assert_eq!(
        (data_source.kind.as_str(), data_source.name.as_str()),
        ("PersistentVolumeClaim", "golden")
    );

    observed.pvc = Some(claim("Bound", &[]));
    let actions = run(&observed);
    assert!(created_pod(&actions).is_none(), "a CSI clone has no worker");
    assert_eq!(phase(&actions), Some(P::Succeeded));
}

#[test]
fn a_clone_of_a_missing_source_is_blocked() {
    let mut observed = observed(clone_of("ns"));
    observed.clone_source = Some(CloneSource::default());
    let actions = run(&observed);
    let (reason, message) = condition(&written_status(&actions), DataVolumeConditionType::Bound);
    assert_eq!(reason.as_deref(), Some("NotFound"));
    assert_eq!(message.as_deref(), Some("Source PVC ns/golden not found"));
    assert_eq!(requeue(&actions), &DvAction::Requeue(BLOCKED_INTERVAL));
}

#[test]
fn a_clone_waits_for_its_source_to_be_filled() {
    let mut observed = observed(clone_of("ns"));
    observed.clone_source = Some(CloneSource {
        exists: true,
        claim: Some(source_claim("ns", "local")),
        filled_by_data_volume: true,
        filling_phase: Some(P::ImportInProgress),
        ..Default::default()
    });
    let actions = run(&observed);
    let (reason, message) = condition(&written_status(&actions), DataVolumeConditionType::Bound);
    assert_eq!(reason.as_deref(), Some("CloneSourceNotPopulated"));
    assert_eq!(
        message.as_deref(),
        Some("source PVC ns/golden is not populated yet: its DataVolume is ImportInProgress")
    );
    assert_eq!(requeue(&actions), &DvAction::Requeue(SOURCE_WAIT_INTERVAL));
}

#[test]
fn a_host_assisted_clone_needs_a_ca_and_a_source_no_pod_uses() {
    let mut observed = observed(clone_of("ns"));
    observed.clone_source = Some(CloneSource {
        exists: true,
        claim: Some(source_claim("ns", "other-class")),
        users: vec!["vm-launcher".into()],
        ..Default::default()
    });
    observed.can_sign_clones = false;
    let actions = run(&observed);
    let (reason, _) = condition(&written_status(&actions), DataVolumeConditionType::Bound);
    assert_eq!(reason.as_deref(), Some("CloneWithoutCertificates"));

    observed.can_sign_clones = true;
    let actions = run(&observed);
    let (reason, message) = condition(&written_status(&actions), DataVolumeConditionType::Bound);
    assert_eq!(reason.as_deref(), Some("CloneSourceInUse"));
    assert!(message.unwrap().contains("vm-launcher"));
    assert_eq!(requeue(&actions), &DvAction::Requeue(SOURCE_WAIT_INTERVAL));
}

#[test]
fn a_host_assisted_clone_starts_its_source_once_the_upload_server_is_ready() {
    let mut observed = observed(clone_of("images"));
    observed.clone_source = Some(CloneSource {
        exists: true,
        claim: Some(source_claim("images", "other-class")),
        ..Default::default()
    });
    observed.pvc = Some(claim("Bound", &[]));
    let actions = run(&observed);
    assert_eq!(
        created_pod(&actions).unwrap().metadata.name.as_deref(),
        Some("cdi-upload-disk"),
        "the target's upload server first"
    );
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, DvAction::CreateCloneSourcePod { .. }))
    );

    observed.pvc = Some(claim("Bound", &[(annotations::POD_PHASE, "Running")]));
    observed.worker = Some(pod("cdi-upload-disk", "Running", true, Some(running())));
    let actions = run(&observed);
    let (source_pod, client) = actions
        .iter()
        .find_map(|a| match a {
            DvAction::CreateCloneSourcePod { pod, client_name } => Some((pod, client_name)),
            _ => None,
        })
        .expect("a clone source pod");
    assert_eq!(
        source_pod.metadata.name.as_deref(),
        Some("uid-pvc-source-pod")
    );
    assert_eq!(source_pod.metadata.namespace.as_deref(), Some("images"));
    assert_eq!(client, "images/golden-ns/disk");
    // In another namespace nothing owns it: the DataVolume holds the finalizer first.
    let finalizer = actions.iter().position(|a| a == &DvAction::AddFinalizer);
    let create = actions
        .iter()
        .position(|a| matches!(a, DvAction::CreateCloneSourcePod { .. }));
    assert!(finalizer.is_some() && finalizer < create, "{actions:?}");
    assert_eq!(phase(&actions), Some(P::CloneInProgress));
}

#[test]
fn a_host_assisted_clone_whose_source_went_away_fails() {
    let mut observed = observed(clone_of("ns"));
    observed.clone_source = Some(CloneSource {
        exists: false,
        ..Default::default()
    });
    observed.pvc = Some(claim(
        "Bound",
        &[
            (ANN_CLONE_TYPE, "copy"),
            (annotations::POD_PHASE, "Running"),
        ],
    ));
    observed.worker = Some(pod("cdi-upload-disk", "Running", true, Some(running())));
    let actions = run(&observed);
    let changes = annotated(&actions);
    assert_eq!(changes[annotations::POD_PHASE], "Failed");
    assert!(changes[annotations::RUNNING_CONDITION_MESSAGE].contains(pod::SOURCE_DELETED));
    assert_eq!(phase(&actions), Some(P::Failed));
}

#[test]
fn a_cross_namespace_clone_needs_its_token() {
    let mut observed = observed(clone_of("images"));
    observed.clone_source = Some(CloneSource {
        exists: true,
        claim: Some(source_claim("images", "local")),
        refusal: Some("cross-namespace clone from images/golden has no clone token".into()),
        ..Default::default()
    });
    let actions = run(&observed);
    let (reason, _) = condition(&written_status(&actions), DataVolumeConditionType::Bound);
    assert_eq!(reason.as_deref(), Some("CloneValidationFailed"));
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, DvAction::HandOverClaim { .. }))
    );
}

#[test]
fn a_cross_namespace_csi_clone_is_handed_over_through_a_temporary_claim() {
    let mut observed = observed(clone_of("images"));
    observed.clone_source = Some(CloneSource {
        exists: true,
        claim: Some(source_claim("images", "local")),
        ..Default::default()
    });
    let actions = run(&observed);
    assert!(matches!(
        &actions[0],
        DvAction::HandOverClaim { source, .. } if source == &("images".to_string(), "golden".to_string())
    ));
    assert_eq!(requeue(&actions), &DvAction::Requeue(HANDOVER_INTERVAL));

    // Once the target is bound, the volume's policy comes back and the finalizer off.
    observed.dv.metadata.finalizers = Some(vec![FINALIZER.into()]);
    observed.pvc = Some(claim("Bound", &[]));
    let actions = run(&observed);
    assert_eq!(actions[0], DvAction::RestoreReclaimPolicy);
    assert_eq!(actions[1], DvAction::RemoveFinalizer);
}

#[test]
fn a_deleted_datavolume_cleans_up_only_what_its_finalizer_holds() {
    let mut observed = observed(clone_of("images"));
    observed.dv.metadata.deletion_timestamp = Some(now());
    assert_eq!(run(&observed), [DvAction::AwaitChange]);
    observed.dv.metadata.finalizers = Some(vec![FINALIZER.into()]);
    assert_eq!(
        run(&observed),
        [
            DvAction::DeleteCloneSourcePods,
            DvAction::ReleaseCrossNamespaceClaims,
            DvAction::AwaitChange
        ]
    );
}

/// A host-assisted clone (the source in another class) whose target claim is bound and whose
/// transfer runs.
fn host_clone_running() -> Observed {
    let mut observed = observed(clone_of("ns"));
    observed.clone_source = Some(CloneSource {
        exists: true,
        claim: Some(source_claim("ns", "other-class")),
        ..Default::default()
    });
    observed.pvc = Some(claim("Bound", &[(annotations::POD_PHASE, "Running")]));
    observed
}

#[test]
fn a_source_pod_calling_the_upload_servers_former_address_is_replaced() {
    let config = ControllerConfig {
        no_cluster_dns: true,
        ..ControllerConfig::default()
    };
    let mut observed = host_clone_running();
    observed.worker = Some(pod("cdi-upload-disk", "Running", true, Some(running())));
    let source_pod = plan(&observed, &config)
        .into_iter()
        .find_map(|a| match a {
            DvAction::CreateCloneSourcePod { pod, .. } => Some(*pod),
            _ => None,
        })
        .expect("a clone source pod");
    let deletes_it = |actions: &[DvAction]| {
        actions
            .iter()
            .any(|a| matches!(a, DvAction::DeletePod { name, .. } if name == "uid-pvc-source-pod"))
    };
    let mut source_pod = source_pod;
    source_pod.status = pod("uid-pvc-source-pod", "Running", true, Some(running())).status;
    observed.host_clone.source_pod = Some(source_pod);
    assert!(!deletes_it(&plan(&observed, &config)), "same address: kept");

    // The platform restarted and its upload server came back elsewhere.
    let server = observed.worker.as_mut().unwrap();
    server.status.as_mut().unwrap().pod_ip = Some("10.0.0.8".into());
    let actions = plan(&observed, &config);
    assert!(deletes_it(&actions), "{actions:?}");
    assert_ne!(phase(&actions), Some(P::Failed));
    // With cluster DNS the pod calls the Service, which follows the server.
    assert!(!deletes_it(&run(&observed)));
}

#[test]
fn a_source_pod_whose_stream_a_restarted_upload_server_lost_is_replaced() {
    let at = |seconds: i64| {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + seconds).unwrap())
    };
    let server_started = |observed: &mut Observed, seconds: i64| {
        let state = ContainerState {
            running: Some(k8s_openapi::api::core::v1::ContainerStateRunning {
                started_at: Some(at(seconds)),
            }),
            ..Default::default()
        };
        observed.worker = Some(pod("cdi-upload-disk", "Running", true, Some(state)));
    };
    let mut observed = host_clone_running();
    server_started(&mut observed, -60);
    let mut source_pod = run(&observed)
        .into_iter()
        .find_map(|a| match a {
            DvAction::CreateCloneSourcePod { pod, .. } => Some(*pod),
            _ => None,
        })
        .expect("a clone source pod");
    // The source streamed the volume; the server answered once it was complete.
    let mut done = terminated(0, "Clone Complete");
    done.terminated.as_mut().unwrap().finished_at = Some(at(-2));
    source_pod.status = pod("uid-pvc-source-pod", "Succeeded", false, Some(done)).status;
    observed.host_clone.source_pod = Some(source_pod.clone());
    let deletes_it = |actions: &[DvAction]| {
        actions
            .iter()
            .any(|a| matches!(a, DvAction::DeletePod { name, .. } if name == "uid-pvc-source-pod"))
    };
    let actions = run(&observed);
    assert!(
        !deletes_it(&actions),
        "the server is about to exit: {actions:?}"
    );
    assert_eq!(phase(&actions), Some(P::CloneInProgress));

    // The platform was killed before the server's exit was recorded: its node agent ran it
    // again, and the new server waits for a stream the finished source never sends again.
    server_started(&mut observed, -1);
    let actions = run(&observed);
    assert!(deletes_it(&actions), "{actions:?}");
    assert_ne!(phase(&actions), Some(P::Failed));

    // Restarted within the second the source finished: told by the time it has waited.
    server_started(&mut observed, -2);
    assert!(!deletes_it(&run(&observed)));
    observed.now = Time(at(-2).0.checked_add(LOST_STREAM_GRACE).unwrap());
    assert!(deletes_it(&run(&observed)));

    // A source that failed is left to its own restarts and failure handling.
    let mut failed = terminated(1, "Unable to clone: connection refused");
    failed.terminated.as_mut().unwrap().finished_at = Some(at(-100));
    source_pod.status = pod("uid-pvc-source-pod", "Running", false, Some(failed)).status;
    observed.host_clone.source_pod = Some(source_pod);
    assert!(!deletes_it(&run(&observed)));
}

/// A claim no DataVolume owns, annotated as `virtctl image-upload pvc` makes it, observed
/// through its in-memory DataVolume (no uid).
fn bare_upload(phase: &str, annotations: &[(&str, &str)]) -> Observed {
    let mut dv = upload();
    dv.metadata.uid = None;
    let mut observed = observed(dv);
    observed.settings.class = Some(class("local", "WaitForFirstConsumer"));
    let mut claim = claim(phase, annotations);
    claim.metadata.owner_references = None;
    observed.pvc = Some(claim);
    observed
}

fn run_claim(observed: &Observed) -> Vec<DvAction> {
    plan_claim(observed, &ControllerConfig::default())
}

#[test]
fn a_bare_upload_claim_gets_its_server_at_once_owned_by_the_claim() {
    let observed = bare_upload("Pending", &[(annotations::UPLOAD_REQUEST, "")]);
    let actions = run_claim(&observed);
    assert!(
        actions.contains(&DvAction::PrepareUploadServer),
        "{actions:?}"
    );
    let pod =
        created_pod(&actions).expect("the upload server, though the class waits for a consumer");
    let owners = pod.metadata.owner_references.as_ref().unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].uid.as_str()),
        ("PersistentVolumeClaim", "uid-pvc")
    );
    let env = pod.spec.as_ref().unwrap().containers[0]
        .env
        .as_ref()
        .unwrap();
    let owner_uid = env
        .iter()
        .find(|v| v.name == "OWNER_UID")
        .and_then(|v| v.value.as_deref());
    assert_eq!(owner_uid, Some("uid-pvc"));
    assert_eq!(annotated(&actions)[annotations::POD_PHASE], "Pending");
    assert!(actions.iter().all(|a| !matches!(
        a,
        DvAction::WriteStatus(_) | DvAction::Publish(_) | DvAction::CreatePvc(_)
    )));
}

#[test]
fn a_bare_claims_server_is_mirrored_then_removed_once_done() {
    let mut observed = bare_upload(
        "Bound",
        &[
            (annotations::UPLOAD_REQUEST, ""),
            (annotations::POD_PHASE, "Pending"),
        ],
    );
    observed.worker = Some(pod("cdi-upload-disk", "Running", true, Some(running())));
    let actions = run_claim(&observed);
    let written = annotated(&actions);
    assert_eq!(written[annotations::POD_PHASE], "Running");
    assert_eq!(written[annotations::POD_READY], "true");
    assert_eq!(requeue(&actions), &DvAction::Requeue(RESYNC_INTERVAL));

    observed.worker = Some(pod(
        "cdi-upload-disk",
        "Succeeded",
        false,
        Some(terminated(0, "")),
    ));
    let actions = run_claim(&observed);
    assert_eq!(annotated(&actions)[annotations::POD_PHASE], "Succeeded");
    assert_eq!(deleted_pods(&actions), ["cdi-upload-disk"]);
    assert!(actions.contains(&DvAction::DeleteService {
        namespace: "ns".into(),
        name: "cdi-upload-disk".into()
    }));
    assert_eq!(requeue(&actions), &DvAction::AwaitChange);

    // Once done, nothing is made again.
    let done = bare_upload(
        "Bound",
        &[
            (annotations::UPLOAD_REQUEST, ""),
            (annotations::POD_PHASE, "Succeeded"),
        ],
    );
    assert_eq!(run_claim(&done), [DvAction::AwaitChange]);
}

#[test]
fn a_bare_import_claim_names_its_importer() {
    let mut dv = http();
    dv.metadata.uid = None;
    let mut observed = observed(dv);
    let mut claim = claim(
        "Bound",
        &[(annotations::IMPORT_ENDPOINT, "http://server/disk.qcow2")],
    );
    claim.metadata.owner_references = None;
    observed.pvc = Some(claim);
    let actions = run_claim(&observed);
    assert_eq!(
        created_pod(&actions).unwrap().metadata.name.as_deref(),
        Some("importer-disk")
    );
    assert_eq!(
        annotated(&actions)[annotations::IMPORT_POD],
        "importer-disk"
    );
}
