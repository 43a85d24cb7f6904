//! A bare claim's clone case by case: from the claim as a user writes it, through
//! [`request`], to the actions of [`plan`], with objects as the API server returns them.

use super::super::{Request, request};
use super::*;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use uploadproxy::token::CLONE_TOKEN_ANNOTATION;

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap())
}

fn claim_with(
    name: &str,
    namespace: &str,
    size: &str,
    annotations: &[(&str, &str)],
) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": namespace, "uid": format!("uid-{name}"),
            "resourceVersion": "3",
            "annotations": annotations.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        },
        "spec": {
            "storageClassName": "local",
            "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": size}},
        },
        "status": {"phase": "Bound"},
    }))
    .unwrap()
}

/// The claim `ns/disk` (2Gi) asking for a clone of `source`.
fn target(source: &str, more: &[(&str, &str)]) -> PersistentVolumeClaim {
    let mut annotations = vec![(CLONE_REQUEST, source)];
    annotations.extend_from_slice(more);
    claim_with("disk", "ns", "2Gi", &annotations)
}

/// The source claim `namespace/golden` (1Gi), filled and bound.
fn golden(namespace: &str) -> PersistentVolumeClaim {
    claim_with("golden", namespace, "1Gi", &[])
}

fn class() -> StorageClass {
    serde_json::from_value(json!({
        "metadata": {"name": "local"},
        "provisioner": "kubevirt.io.hostpath-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }))
    .unwrap()
}

/// What a reconcile of `target` observes, with `source` as the clone's source claim.
fn observed(target: PersistentVolumeClaim, source: Option<PersistentVolumeClaim>) -> Observed {
    let Request::Fill(dv) = request(&target) else {
        panic!("{:?}", request(&target));
    };
    let mut observed = Observed::new(*dv, now());
    observed.source = Ok(observed.dv.spec.source.clone().unwrap_or_default());
    observed.pvc = Some(target);
    observed.settings.class = Some(class());
    observed.can_sign_clones = true;
    observed.clone_source = Some(CloneSource {
        exists: source.is_some(),
        claim: source,
        ..Default::default()
    });
    observed
}

fn pod(name: &str, namespace: &str, phase: &str, ready: bool, state: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace},
        "status": {
            "phase": phase,
            "podIP": "10.0.0.7",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            "containerStatuses": [{
                "name": "worker", "image": "ferrovirt", "imageID": "", "ready": ready,
                "restartCount": 0, "state": state,
            }],
        },
    }))
    .unwrap()
}

fn running() -> Value {
    json!({"running": {"startedAt": "2023-11-14T22:13:00Z"}})
}

fn completed() -> Value {
    json!({"terminated": {"exitCode": 0, "reason": "Completed"}})
}

fn run(observed: &Observed) -> Vec<DvAction> {
    plan(observed, &ControllerConfig::default())
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

fn events(actions: &[DvAction]) -> Vec<&StatusEvent> {
    actions
        .iter()
        .filter_map(|a| match a {
            DvAction::PublishOnClaim(event) => Some(event),
            _ => None,
        })
        .collect()
}

fn created_pods(actions: &[DvAction]) -> Vec<&Pod> {
    actions
        .iter()
        .filter_map(|a| match a {
            DvAction::CreatePod(pod) => Some(&**pod),
            DvAction::CreateCloneSourcePod { pod, .. } => Some(&**pod),
            _ => None,
        })
        .collect()
}

fn position(actions: &[DvAction], wanted: impl Fn(&DvAction) -> bool) -> usize {
    actions
        .iter()
        .position(wanted)
        .unwrap_or_else(|| panic!("not in {actions:?}"))
}

fn env(pod: &Pod, name: &str) -> Option<String> {
    pod.spec.as_ref()?.containers[0]
        .env
        .as_ref()?
        .iter()
        .find(|v| v.name == name)?
        .value
        .clone()
}

/// The plan of a clone held back: its reason and message (from the event), and that nothing
/// was made.
fn held(observed: &Observed) -> (String, String, Vec<DvAction>) {
    let actions = run(observed);
    assert!(created_pods(&actions).is_empty(), "{actions:?}");
    assert!(
        !actions.contains(&DvAction::PrepareUploadServer),
        "{actions:?}"
    );
    let written = annotated(&actions);
    assert_eq!(written[annotations::SOURCE_RUNNING_CONDITION], "false");
    let found = events(&actions);
    assert_eq!(found.len(), 1, "{actions:?}");
    assert!(found[0].warning);
    assert_eq!(
        written[annotations::SOURCE_RUNNING_CONDITION_REASON],
        found[0].reason
    );
    assert_eq!(
        written[annotations::SOURCE_RUNNING_CONDITION_MESSAGE],
        found[0].message
    );
    (found[0].reason.clone(), found[0].message.clone(), actions)
}

#[test]
fn a_clone_request_names_its_source_and_carries_its_token() {
    let claim = target("src/golden", &[(CLONE_TOKEN_ANNOTATION, "signed")]);
    let Request::Fill(dv) = request(&claim) else {
        panic!("{:?}", request(&claim));
    };
    let pvc = dv
        .spec
        .source
        .as_ref()
        .and_then(|s| s.pvc.as_ref())
        .unwrap();
    assert_eq!(
        (pvc.namespace.as_str(), pvc.name.as_str()),
        ("src", "golden")
    );
    assert_eq!(dv.annotations()[CLONE_TOKEN_ANNOTATION], "signed");
    assert!(
        dv.metadata.uid.is_none(),
        "the workers are the claim's alone"
    );
    let Request::Fill(dv) = request(&target("ns/golden", &[])) else {
        panic!("a clone within the namespace");
    };
    assert!(dv.annotations().is_empty());
}

#[test]
fn malformed_and_conflicting_requests_are_refused_by_name() {
    let refused = |claim: &PersistentVolumeClaim| match request(claim) {
        Request::Unsupported(message) => message,
        other => panic!("{other:?}"),
    };
    for value in [
        "golden",
        "src/",
        "/golden",
        "a/b/c",
        "Src/golden",
        "src/gold en",
        "",
    ] {
        let message = refused(&target(value, &[]));
        assert!(
            message.starts_with("error parsing clone request annotation")
                && message.contains(value),
            "{message}"
        );
    }
    assert!(refused(&target("ns/disk", &[])).contains("itself"));
    assert_eq!(
        refused(&target("src/golden", &[(annotations::UPLOAD_REQUEST, "")])),
        "PVC has both clone and upload annotations"
    );
    assert!(
        refused(&target(
            "src/golden",
            &[(annotations::IMPORT_ENDPOINT, "http://x/d.img")]
        ))
        .contains("import")
    );
    assert_eq!(parse_request("src/golden.v1"), Some(("src", "golden.v1")));
}

#[test]
fn a_done_or_deleted_clone_only_releases_its_source_pod() {
    let done = target("src/golden", &[(ANN_CLONE_OF, "true")]);
    assert_eq!(request(&done), Request::None);
    let mut holding = done.clone();
    holding.metadata.finalizers = Some(vec![CLONE_SOURCE_FINALIZER.into()]);
    assert_eq!(request(&holding), Request::ReleaseCloneSource);
    let mut deleted = target("src/golden", &[]);
    deleted.metadata.deletion_timestamp = Some(now());
    assert_eq!(request(&deleted), Request::None);
    deleted.metadata.finalizers = holding.metadata.finalizers.clone();
    assert_eq!(request(&deleted), Request::ReleaseCloneSource);
    // The request taken off midway: the source pod goes too.
    let mut dropped = claim_with("disk", "ns", "2Gi", &[]);
    dropped.metadata.finalizers = holding.metadata.finalizers;
    assert_eq!(request(&dropped), Request::ReleaseCloneSource);
}

#[test]
fn the_claim_gets_an_upload_server_for_the_clones_client_first() {
    let observed = observed(target("src/golden", &[]), Some(golden("src")));
    let actions = run(&observed);
    assert!(
        actions.contains(&DvAction::PrepareUploadServer),
        "{actions:?}"
    );
    let made = created_pods(&actions);
    assert_eq!(made.len(), 1, "only the upload server: {actions:?}");
    let server = made[0];
    assert_eq!(server.metadata.name.as_deref(), Some("cdi-upload-disk"));
    assert_eq!(
        env(server, "CLIENT_NAME").as_deref(),
        Some("src/golden-ns/disk")
    );
    let owners = server.metadata.owner_references.as_ref().unwrap();
    assert_eq!(
        (
            owners.len(),
            owners[0].kind.as_str(),
            owners[0].uid.as_str()
        ),
        (1, "PersistentVolumeClaim", "uid-disk")
    );
    let written = annotated(&actions);
    assert_eq!(written[annotations::POD_PHASE], "Pending");
    assert_eq!(written[ANN_UPLOAD_CLIENT_NAME], "src/golden-ns/disk");
    assert_eq!(written[ANN_CLONE_SOURCE_POD], "uid-disk-source-pod");
    assert!(events(&actions).is_empty());
    assert!(!actions.contains(&DvAction::AddClaimFinalizer));
}

#[test]
fn the_source_pod_comes_once_the_server_is_ready_under_the_claims_finalizer() {
    let mut observed = observed(target("src/golden", &[]), Some(golden("src")));
    observed.worker = Some(pod("cdi-upload-disk", "ns", "Running", true, running()));
    let actions = run(&observed);
    let hold = position(&actions, |a| a == &DvAction::AddClaimFinalizer);
    let create = position(&actions, |a| {
        matches!(a, DvAction::CreateCloneSourcePod { .. })
    });
    assert!(hold < create, "the finalizer before the pod: {actions:?}");
    let DvAction::CreateCloneSourcePod {
        pod: source_pod,
        client_name,
    } = &actions[create]
    else {
        unreachable!()
    };
    assert_eq!(client_name, "src/golden-ns/disk");
    assert_eq!(source_pod.metadata.namespace.as_deref(), Some("src"));
    assert_eq!(
        source_pod.metadata.name.as_deref(),
        Some("uid-disk-source-pod")
    );
    assert!(
        source_pod.metadata.owner_references.is_none(),
        "nothing in ns can own it"
    );
    assert!(!actions.contains(&DvAction::AddFinalizer), "no DataVolume");
    assert_eq!(annotated(&actions)[annotations::POD_PHASE], "Running");

    // Streaming: the source's state on the claim, looked at again soon.
    observed.host_clone.source_pod = Some(pod(
        "uid-disk-source-pod",
        "src",
        "Running",
        true,
        running(),
    ));
    let actions = run(&observed);
    assert!(created_pods(&actions).is_empty(), "{actions:?}");
    assert_eq!(
        annotated(&actions)[annotations::SOURCE_RUNNING_CONDITION],
        "true"
    );
    assert_eq!(actions.last(), Some(&DvAction::Requeue(PROGRESS_INTERVAL)));
}

#[test]
fn a_complete_copy_cleans_up_then_marks_the_claim_cloned() {
    let claim = target("src/golden", &[(annotations::POD_PHASE, "Running")]);
    let mut claim_holding = claim.clone();
    claim_holding.metadata.finalizers = Some(vec![CLONE_SOURCE_FINALIZER.into()]);
    let mut observed = observed(claim_holding, Some(golden("src")));
    observed.worker = Some(pod(
        "cdi-upload-disk",
        "ns",
        "Succeeded",
        false,
        completed(),
    ));
    observed.host_clone.source_pod = Some(pod(
        "uid-disk-source-pod",
        "src",
        "Succeeded",
        false,
        completed(),
    ));
    let actions = run(&observed);
    let deleted: Vec<(&str, &str)> = actions
        .iter()
        .filter_map(|a| match a {
            DvAction::DeletePod { namespace, name } => Some((namespace.as_str(), name.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        deleted,
        [("ns", "cdi-upload-disk"), ("src", "uid-disk-source-pod")]
    );
    let release = position(&actions, |a| a == &DvAction::RemoveClaimFinalizer);
    let cloned = position(
        &actions,
        |a| matches!(a, DvAction::AnnotatePvc(c) if c.get(ANN_CLONE_OF).is_some_and(|v| v == "true")),
    );
    let last_delete = position(
        &actions,
        |a| matches!(a, DvAction::DeletePod { name, .. } if name == "uid-disk-source-pod"),
    );
    assert!(last_delete < release && release < cloned, "{actions:?}");
    assert_eq!(annotated(&actions)[annotations::POD_PHASE], "Succeeded");
    let found = events(&actions);
    assert_eq!(found.len(), 1);
    assert_eq!(
        (
            found[0].warning,
            found[0].reason.as_str(),
            found[0].message.as_str()
        ),
        (false, "CloneSucceeded", "Clone Complete")
    );
    assert_eq!(actions.last(), Some(&DvAction::AwaitChange));
}

#[test]
fn a_source_pod_that_fails_for_good_fails_the_clone_and_goes() {
    use api::cdi::pod_contract::{FailureReason, WorkerFailure};
    let mut observed = observed(target("src/golden", &[]), Some(golden("src")));
    observed.worker = Some(pod("cdi-upload-disk", "ns", "Running", true, running()));
    let failure = WorkerFailure::new(
        FailureReason::NoDiskImage,
        "no disk.img in the source".to_string(),
    );
    observed.host_clone.source_pod = Some(pod(
        "uid-disk-source-pod",
        "src",
        "Running",
        false,
        json!({"terminated": {"exitCode": 1, "reason": "Error", "message": failure.termination_message()}}),
    ));
    let actions = run(&observed);
    let written = annotated(&actions);
    assert_eq!(written[annotations::POD_PHASE], "Failed", "{actions:?}");
    assert_eq!(
        written[annotations::RUNNING_CONDITION_MESSAGE],
        "no disk.img in the source"
    );
    assert!(!written.contains_key(ANN_CLONE_OF), "{actions:?}");
    assert!(events(&actions).is_empty(), "{actions:?}");
    assert!(actions.contains(&DvAction::DeletePod {
        namespace: "src".into(),
        name: "uid-disk-source-pod".into()
    }));
}

#[test]
fn a_clone_from_another_namespace_needs_a_valid_token_and_says_so_once() {
    let mut observed = observed(target("src/golden", &[]), Some(golden("src")));
    observed.clone_source.as_mut().unwrap().refusal =
        Some("cross-namespace clone from src/golden has no clone token".into());
    let (reason, message, actions) = held(&observed);
    assert_eq!(reason, "CloneValidationFailed");
    assert_eq!(
        message,
        "The clone doesn't meet the validation requirements: cross-namespace clone from src/golden has no clone token"
    );
    assert_eq!(actions.last(), Some(&DvAction::Requeue(BLOCKED_INTERVAL)));
    // Said once: the claim carries it now.
    let mut again = observed.clone();
    again.pvc = Some(target(
        "src/golden",
        &[
            (annotations::SOURCE_RUNNING_CONDITION, "false"),
            (annotations::SOURCE_RUNNING_CONDITION_REASON, &reason),
            (annotations::SOURCE_RUNNING_CONDITION_MESSAGE, &message),
        ],
    ));
    let actions = run(&again);
    assert!(events(&actions).is_empty(), "{actions:?}");
    assert!(created_pods(&actions).is_empty());
    // Nothing of the source is told before the token is checked.
    let mut unknown = observed.clone();
    unknown.clone_source.as_mut().unwrap().exists = false;
    unknown.clone_source.as_mut().unwrap().claim = None;
    assert_eq!(held(&unknown).0, "CloneValidationFailed");
}

#[test]
fn a_clone_within_the_namespace_needs_no_token() {
    let mut observed = observed(target("ns/golden", &[]), Some(golden("ns")));
    observed.clone_source.as_mut().unwrap().refusal = Some("no clone token".into());
    let actions = run(&observed);
    assert_eq!(created_pods(&actions).len(), 1, "{actions:?}");
    assert!(events(&actions).is_empty());
}

#[test]
fn a_missing_source_is_named_and_looked_for_again() {
    let observed = observed(target("src/golden", &[]), None);
    let (reason, message, actions) = held(&observed);
    assert_eq!(reason, "NotFound");
    assert_eq!(message, "Source PVC src/golden not found");
    assert_eq!(actions.last(), Some(&DvAction::Requeue(BLOCKED_INTERVAL)));
}

#[test]
fn a_source_bigger_than_the_claim_is_refused_unless_permissive() {
    let small = claim_with("disk", "ns", "1Gi", &[(CLONE_REQUEST, "src/golden")]);
    let mut big = golden("src");
    big.spec.as_mut().unwrap().resources =
        serde_json::from_value(json!({"requests": {"storage": "1100Mi"}})).unwrap();
    let (reason, message, _) = held(&observed(small.clone(), Some(big.clone())));
    assert_eq!(reason, "ErrIncompatiblePVC");
    assert_eq!(
        message,
        "target resources requests storage size is smaller than the source (1Gi < 1100Mi)"
    );
    // The same size fits.
    assert!(created_pods(&run(&observed(small.clone(), Some(golden("src"))))).len() == 1);
    let mut permissive = small;
    permissive
        .annotations_mut()
        .insert(ANN_PERMISSIVE_CLONE.into(), String::new());
    assert_eq!(
        created_pods(&run(&observed(permissive, Some(big)))).len(),
        1
    );
}

#[test]
fn sources_of_another_content_type_or_an_archive_of_another_mode_are_refused() {
    let archive = target("src/golden", &[(annotations::CONTENT_TYPE, "archive")]);
    let (reason, message, _) = held(&observed(archive.clone(), Some(golden("src"))));
    assert_eq!(reason, "ErrIncompatiblePVC");
    assert_eq!(
        message,
        "source contentType (kubevirt) and target contentType (archive) do not match"
    );
    let mut block_archive = golden("src");
    block_archive
        .annotations_mut()
        .insert(annotations::CONTENT_TYPE.into(), "archive".into());
    block_archive.spec.as_mut().unwrap().volume_mode = Some(BLOCK.into());
    let (_, message, _) = held(&observed(archive, Some(block_archive)));
    assert!(message.contains("volume modes do not match"), "{message}");
}

#[test]
fn a_source_still_being_filled_or_unbound_is_waited_for() {
    let mut filling = observed(target("src/golden", &[]), Some(golden("src")));
    let clone = filling.clone_source.as_mut().unwrap();
    clone.filled_by_data_volume = true;
    clone.filling_phase = Some(api::cdi::datavolume::DataVolumePhase::ImportInProgress);
    let (reason, message, actions) = held(&filling);
    assert_eq!(reason, "CloneSourceNotPopulated");
    assert!(message.contains("ImportInProgress"), "{message}");
    assert_eq!(
        actions.last(),
        Some(&DvAction::Requeue(SOURCE_WAIT_INTERVAL))
    );

    let importing = claim_with(
        "golden",
        "src",
        "1Gi",
        &[
            (annotations::IMPORT_ENDPOINT, "http://x/d.img"),
            (annotations::POD_PHASE, "Running"),
        ],
    );
    let (reason, message, _) = held(&observed(target("src/golden", &[]), Some(importing)));
    assert_eq!(reason, "CloneSourceNotPopulated");
    assert!(message.contains("Running"), "{message}");

    let mut unbound = golden("src");
    unbound.status = None;
    let (reason, message, _) = held(&observed(target("src/golden", &[]), Some(unbound)));
    assert_eq!(reason, "CloneSourceNotPopulated");
    assert!(message.contains("not bound"), "{message}");
}

#[test]
fn a_source_in_use_is_waited_for_even_with_the_server_up() {
    let mut observed = observed(target("src/golden", &[]), Some(golden("src")));
    observed.clone_source.as_mut().unwrap().users = vec!["virt-launcher-vm".into()];
    let (reason, message, actions) = held(&observed);
    assert_eq!(reason, "CloneSourceInUse");
    assert_eq!(
        message,
        "pod src/virt-launcher-vm using PersistentVolumeClaim golden"
    );
    assert_eq!(
        actions.last(),
        Some(&DvAction::Requeue(SOURCE_WAIT_INTERVAL))
    );

    // An upload server made before is kept and reported, but no source pod is made.
    observed.worker = Some(pod("cdi-upload-disk", "ns", "Running", true, running()));
    let actions = run(&observed);
    assert!(created_pods(&actions).is_empty(), "{actions:?}");
    assert!(deleted_none(&actions));
    assert_eq!(annotated(&actions)[annotations::POD_PHASE], "Running");

    // Free again: the hold is cleared and the source pod made.
    let mut freed = observed.clone();
    freed.clone_source.as_mut().unwrap().users.clear();
    freed.pvc = Some(target(
        "src/golden",
        &[
            (annotations::SOURCE_RUNNING_CONDITION, "false"),
            (annotations::SOURCE_RUNNING_CONDITION_REASON, &reason),
            (annotations::SOURCE_RUNNING_CONDITION_MESSAGE, &message),
        ],
    ));
    let actions = run(&freed);
    assert_eq!(created_pods(&actions).len(), 1, "{actions:?}");
    let written = annotated(&actions);
    assert_eq!(written[annotations::SOURCE_RUNNING_CONDITION_REASON], "");
    assert_eq!(written[annotations::SOURCE_RUNNING_CONDITION_MESSAGE], "");
}

fn deleted_none(actions: &[DvAction]) -> bool {
    !actions.iter().any(|a| {
        matches!(
            a,
            DvAction::DeletePod { .. } | DvAction::DeleteService { .. }
        )
    })
}

#[test]
fn without_a_ca_to_sign_the_source_nothing_is_made() {
    let mut observed = observed(target("src/golden", &[]), Some(golden("src")));
    observed.can_sign_clones = false;
    assert_eq!(held(&observed).0, "CloneWithoutCertificates");
}
