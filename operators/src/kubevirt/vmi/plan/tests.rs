use super::*;
use api::common::ConditionStatus;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn settings() -> LauncherPodSettings {
    LauncherPodSettings {
        image: "quay.io/ferrovirt/ferrovirt:latest".into(),
        image_pull_policy: None,
        extra_args: Vec::new(),
        allow_emulation: true,
        cpu_allocation_ratio: 10,
        cpu_limit_per_vcpu: false,
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_790_000_000).expect("time"))
}

fn vmi(phase: Option<Phase>, finalized: bool) -> VirtualMachineInstance {
    let mut vmi: VirtualMachineInstance = serde_saphyr::from_str(
        r#"
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm1, namespace: ns, uid: u-1}
spec:
  domain: {devices: {}}
  volumes:
  - name: root
    dataVolume: {name: root-dv}
"#,
    )
    .expect("test VMI");
    if finalized {
        vmi.metadata.finalizers = Some(vec![keys::VMI_FINALIZER.into()]);
    }
    vmi.status = phase.map(|phase| VirtualMachineInstanceStatus {
        phase: Some(phase),
        ..Default::default()
    });
    vmi
}

fn claims(dv_phase: &str) -> BTreeMap<String, Claim> {
    BTreeMap::from([(
        "root-dv".to_owned(),
        Claim {
            exists: true,
            block: false,
            access_modes: vec!["ReadWriteOnce".into()],
            data_volume_phase: Some(dv_phase.into()),
        },
    )])
}

fn pod(phase: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("virt-launcher-vm1-abcde".into()),
            uid: Some("p-1".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some("node1".into()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if phase == "Running" { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn observed(vmi: VirtualMachineInstance, pods: Vec<Pod>, dv_phase: &str) -> Observed {
    Observed {
        vmi,
        pods,
        claims: claims(dv_phase),
        networks: BTreeMap::new(),
        now: now(),
    }
}

fn written(actions: &[VmiAction]) -> VirtualMachineInstanceStatus {
    actions
        .iter()
        .find_map(|a| match a {
            VmiAction::WriteStatus(s) => Some((**s).clone()),
            _ => None,
        })
        .expect("a status is written")
}

fn condition(status: &VirtualMachineInstanceStatus, type_: &str) -> VirtualMachineCondition {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .cloned()
        .unwrap_or_else(|| panic!("no {type_} condition"))
}

#[test]
fn a_new_vmi_gets_the_finalizer_and_a_launcher_pod() {
    let actions = plan(
        &observed(vmi(None, false), vec![], "Succeeded"),
        &settings(),
    );
    assert_eq!(actions[0], VmiAction::AddFinalizer);
    assert!(
        matches!(&actions[1], VmiAction::CreatePod(p) if p.metadata.generate_name.as_deref() == Some("virt-launcher-vm1-"))
    );
    let status = written(&actions);
    assert_eq!(status.phase, Some(Phase::Scheduling));
    assert_eq!(
        condition(&status, "DataVolumesReady").status,
        ConditionStatus::True
    );
    let migratable = condition(&status, "LiveMigratable");
    assert_eq!(migratable.reason.as_deref(), Some("DisksNotLiveMigratable"));
}

#[test]
fn no_pod_while_a_secondary_networks_definition_is_missing() {
    let mut seen = observed(vmi(None, false), vec![], "Succeeded");
    seen.networks.insert(
        "blue".into(),
        SecondaryNetwork::Missing("default/br1".into()),
    );
    let actions = plan(&seen, &settings());
    assert!(!actions.iter().any(|a| matches!(a, VmiAction::CreatePod(_))));
    let status = written(&actions);
    assert_eq!(status.phase, Some(Phase::Pending));
    let synchronized = condition(&status, "Synchronized");
    assert_eq!(synchronized.reason.as_deref(), Some("FailedCreate"));
    assert!(
        synchronized
            .message
            .as_deref()
            .unwrap()
            .ends_with("failed to locate network attachment definition default/br1")
    );
    seen.networks
        .insert("blue".into(), SecondaryNetwork::Found { resource: None });
    let actions = plan(&seen, &settings());
    assert!(actions.iter().any(|a| matches!(a, VmiAction::CreatePod(_))));
}

#[test]
fn no_pod_while_a_data_volume_imports() {
    let actions = plan(
        &observed(vmi(Some(Phase::Pending), true), vec![], "ImportInProgress"),
        &settings(),
    );
    assert!(!actions.iter().any(|a| matches!(a, VmiAction::CreatePod(_))));
    let status = written(&actions);
    assert_eq!(status.phase, Some(Phase::Pending));
    let ready = condition(&status, "DataVolumesReady");
    assert_eq!(ready.status, ConditionStatus::False);
    assert_eq!(ready.reason.as_deref(), Some("NotAllDataVolumesReady"));
    assert!(
        ready
            .message
            .unwrap_or_default()
            .contains("root-dv (ImportInProgress)")
    );
}

#[test]
fn a_wait_for_first_consumer_volume_lets_the_pod_start() {
    let actions = plan(
        &observed(
            vmi(Some(Phase::Pending), true),
            vec![],
            "WaitForFirstConsumer",
        ),
        &settings(),
    );
    assert!(actions.iter().any(|a| matches!(a, VmiAction::CreatePod(_))));
}

#[test]
fn a_missing_claim_keeps_the_vmi_pending_and_says_which() {
    let mut o = observed(vmi(Some(Phase::Pending), true), vec![], "Succeeded");
    o.claims = BTreeMap::from([("root-dv".to_owned(), Claim::default())]);
    let actions = plan(&o, &settings());
    assert!(!actions.iter().any(|a| matches!(a, VmiAction::CreatePod(_))));
    let synced = condition(&written(&actions), "Synchronized");
    assert_eq!(synced.reason.as_deref(), Some("FailedPvcNotFound"));
    assert_eq!(
        synced.message.as_deref(),
        Some("PVC ns/root-dv does not exist, waiting for it to appear")
    );
}

#[test]
fn a_running_pod_schedules_the_vmi_on_its_node() {
    let actions = plan(
        &observed(
            vmi(Some(Phase::Scheduling), true),
            vec![pod("Running")],
            "Succeeded",
        ),
        &settings(),
    );
    assert!(actions.contains(&VmiAction::LabelNode("node1".into())));
    let status = written(&actions);
    assert_eq!(status.phase, Some(Phase::Scheduled));
    assert_eq!(status.node_name.as_deref(), Some("node1"));
    assert_eq!(
        condition(&status, "PodScheduled").status,
        ConditionStatus::True
    );
    assert_eq!(condition(&status, "Ready").status, ConditionStatus::False);
    assert_eq!(
        status.active_pods,
        Some(BTreeMap::from([("p-1".into(), "node1".into())]))
    );
}

#[test]
fn running_is_kept_and_ready_follows_the_pod() {
    let mut v = vmi(Some(Phase::Running), true);
    v.status.as_mut().unwrap().conditions = Some(vec![VirtualMachineCondition {
        type_: "AgentConnected".into(),
        status: ConditionStatus::True,
        last_probe_time: None,
        last_transition_time: None,
        reason: None,
        message: None,
    }]);
    let status = written(&plan(
        &observed(v, vec![pod("Running")], "Succeeded"),
        &settings(),
    ));
    assert_eq!(status.phase, Some(Phase::Running));
    assert_eq!(condition(&status, "Ready").status, ConditionStatus::True);
    assert_eq!(
        condition(&status, "AgentConnected").status,
        ConditionStatus::True
    );
}

#[test]
fn the_launchers_end_is_the_vmis_end() {
    let mut failed = pod("Failed");
    failed.status.as_mut().unwrap().container_statuses = Some(vec![ContainerStatus {
        name: "compute".into(),
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 1,
                message: Some("crashed: QEMU exited unexpectedly: killed".into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    let actions = plan(
        &observed(vmi(Some(Phase::Running), true), vec![failed], "Succeeded"),
        &settings(),
    );
    let status = written(&actions);
    assert_eq!(status.phase, Some(Phase::Failed));
    assert_eq!(
        status.reason.as_deref(),
        Some("crashed: QEMU exited unexpectedly: killed")
    );
    let done = written(&plan(
        &observed(
            vmi(Some(Phase::Running), true),
            vec![pod("Succeeded")],
            "Succeeded",
        ),
        &settings(),
    ));
    assert_eq!(done.phase, Some(Phase::Succeeded));
}

#[test]
fn a_vanished_pod_fails_a_running_vmi() {
    let status = written(&plan(
        &observed(vmi(Some(Phase::Running), true), vec![], "Succeeded"),
        &settings(),
    ));
    assert_eq!(status.phase, Some(Phase::Failed));
    assert_eq!(status.reason.as_deref(), Some("PodNotExists"));
}

#[test]
fn deletion_stops_the_pod_before_releasing_the_vmi() {
    let mut deleting = vmi(Some(Phase::Running), true);
    deleting.metadata.deletion_timestamp = Some(now());
    let actions = plan(
        &observed(deleting.clone(), vec![pod("Running")], "Succeeded"),
        &settings(),
    );
    assert_eq!(
        actions,
        vec![VmiAction::DeletePod("virt-launcher-vm1-abcde".into())]
    );
    let mut stopping = pod("Running");
    stopping.metadata.deletion_timestamp = Some(now());
    let actions = plan(
        &observed(deleting.clone(), vec![stopping], "Succeeded"),
        &settings(),
    );
    assert!(
        actions.is_empty(),
        "waits while the launcher stops: {actions:?}"
    );
    let actions = plan(&observed(deleting, vec![], "Succeeded"), &settings());
    assert_eq!(actions, vec![VmiAction::RemoveFinalizer]);
}

#[test]
fn a_final_vmi_stops_a_launcher_left_running() {
    let actions = plan(
        &observed(
            vmi(Some(Phase::Failed), true),
            vec![pod("Running")],
            "Succeeded",
        ),
        &settings(),
    );
    assert_eq!(
        actions,
        vec![VmiAction::DeletePod("virt-launcher-vm1-abcde".into())]
    );
    assert!(
        plan(
            &observed(
                vmi(Some(Phase::Failed), true),
                vec![pod("Failed")],
                "Succeeded"
            ),
            &settings()
        )
        .is_empty()
    );
}

#[test]
fn an_unchanged_vmi_writes_nothing() {
    let mut v = vmi(Some(Phase::Scheduling), true);
    let first = written(&plan(
        &observed(v.clone(), vec![pod("Running")], "Succeeded"),
        &settings(),
    ));
    v.status = Some(first);
    let again = plan(&observed(v, vec![pod("Running")], "Succeeded"), &settings());
    assert!(
        !again.iter().any(|a| matches!(a, VmiAction::WriteStatus(_))),
        "{again:?}"
    );
}

#[test]
fn no_second_launcher_while_the_first_stops() {
    let mut stopping = pod("Running");
    stopping.metadata.deletion_timestamp = Some(now());
    let actions = plan(
        &observed(
            vmi(Some(Phase::Scheduling), true),
            vec![stopping],
            "Succeeded",
        ),
        &settings(),
    );
    assert!(actions.is_empty(), "{actions:?}");
}

#[test]
fn a_running_vmi_never_goes_back_to_scheduling() {
    let phase = plan(
        &observed(
            vmi(Some(Phase::Running), true),
            vec![pod("Pending")],
            "Succeeded",
        ),
        &settings(),
    )
    .into_iter()
    .find_map(|a| match a {
        VmiAction::WriteStatus(s) => Some(s.phase),
        _ => None,
    });
    assert_ne!(phase, Some(Some(Phase::Scheduling)));
}
