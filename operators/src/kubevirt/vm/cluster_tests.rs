//! The controller against the embedded API server: the runner's calls as a cluster sees
//! them (no VMI controller runs, so instance phases are written by the test).

use super::*;
use api::kubevirt::keys;
use api::kubevirt::{
    RunStrategy, VirtualMachineInstancePhase, VirtualMachineInstanceTemplateSpec,
    VirtualMachinePrintableStatus,
};
use api::kubevirt::{VirtualMachineInstanceSpec, VirtualMachineInstanceStatus, VirtualMachineSpec};
use kube::CustomResourceExt;
use serde_json::json;
use standalone::apiserver::{ApiServer, ApiServerConfig};

const DEADLINE: Duration = Duration::from_secs(30);

async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = std::time::Instant::now();
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_is_started_stopped_and_deleted() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let crds = vec![
        serde_json::to_value(VirtualMachine::crd()).unwrap(),
        serde_json::to_value(VirtualMachineInstance::crd()).unwrap(),
        serde_json::to_value(DataVolume::crd()).unwrap(),
    ];
    let server = ApiServer::start(ApiServerConfig {
        data_dir: dir.path().join("data"),
        listen: "127.0.0.1:0".parse().unwrap(),
        crds,
        admission: vec![],
        virtual_creates: Default::default(),
    })
    .await
    .expect("the API server starts");
    let kubeconfig = kube::config::Kubeconfig::read_from(&server.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = Client::try_from(config).unwrap();
    let controller = tokio::spawn(run(
        client.clone(),
        Arc::new(crate::config::ControllerConfig::default()),
    ));

    let vms = Api::<VirtualMachine>::namespaced(client.clone(), "default");
    let vmis = Api::<VirtualMachineInstance>::namespaced(client.clone(), "default");
    let vm = VirtualMachine::new(
        "vm1",
        VirtualMachineSpec {
            run_strategy: Some(RunStrategy::Always),
            template: Some(VirtualMachineInstanceTemplateSpec {
                metadata: None,
                spec: Some(VirtualMachineInstanceSpec::default()),
            }),
            ..Default::default()
        },
    );
    vms.create(&PostParams::default(), &vm).await.unwrap();

    // Started: the instance exists, owned and held by the controller.
    let vmi = eventually("the VMI", || async { vmis.get_opt("vm1").await.unwrap() }).await;
    assert!(
        vmi.finalizers()
            .contains(&keys::VM_CONTROLLER_FINALIZER.to_string())
    );
    assert_eq!(vmi.owner_references()[0].kind, "VirtualMachine");
    eventually("Starting and the VM finalizer", || async {
        let vm = vms.get("vm1").await.unwrap();
        let status = vm.status.clone()?.printable_status?;
        (status == VirtualMachinePrintableStatus::Starting
            && vm
                .finalizers()
                .contains(&keys::VM_CONTROLLER_FINALIZER.to_string()))
        .then_some(())
    })
    .await;

    // Running, as the VMI controller would report it.
    let mut running = vmi.clone();
    running.status = Some(VirtualMachineInstanceStatus {
        phase: Some(VirtualMachineInstancePhase::Running),
        ..Default::default()
    });
    vmis.patch_status(
        "vm1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": running.status})),
    )
    .await
    .unwrap();
    eventually("Running", || async {
        let status = vms.get("vm1").await.unwrap().status?;
        (status.printable_status == Some(VirtualMachinePrintableStatus::Running)
            && status.created == Some(true))
        .then_some(())
    })
    .await;

    // Halted: the instance is deleted and, with no other finalizer, goes away.
    vms.patch(
        "vm1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"runStrategy": "Halted"}})),
    )
    .await
    .unwrap();
    eventually("the VMI gone", || async {
        vmis.get_opt("vm1").await.unwrap().is_none().then_some(())
    })
    .await;
    eventually("Stopped", || async {
        let status = vms.get("vm1").await.unwrap().status?;
        (status.printable_status == Some(VirtualMachinePrintableStatus::Stopped)
            && status.run_strategy == Some(RunStrategy::Halted))
        .then_some(())
    })
    .await;

    // Deleted: the finalizer is released.
    vms.delete("vm1", &DeleteParams::default()).await.unwrap();
    eventually("the VM gone", || async {
        vms.get_opt("vm1").await.unwrap().is_none().then_some(())
    })
    .await;
    controller.abort();
}
