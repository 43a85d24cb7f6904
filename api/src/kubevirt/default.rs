//! Defaulting of VirtualMachines as virt-api's mutating webhook does it for the fields the
//! platform relies on.

use super::cluster_config::{ClusterConfig, DefaultBinding};
use super::vm::{RunStrategy, VirtualMachine};
use super::vmi::{
    Disk, DiskTarget, Interface, InterfaceBridge, InterfaceMasquerade, Machine, Network,
    PodNetwork, VirtualMachineInstanceSpec,
};
use crate::cdi::default::default_data_volume_spec;

/// Fills in the defaults of a VirtualMachine: `runStrategy: Halted` when neither `running`
/// nor `runStrategy` is set, and DataVolume defaults in every `dataVolumeTemplates` entry.
pub fn default_virtual_machine(vm: &mut VirtualMachine) {
    let spec = &mut vm.spec;
    if spec.running.is_none() && spec.run_strategy.is_none() {
        tracing::trace!("defaulting VirtualMachine runStrategy to Halted");
        spec.run_strategy = Some(RunStrategy::Halted);
    }
    for dvt in spec.data_volume_templates.iter_mut().flatten() {
        default_data_volume_spec(&mut dvt.spec);
    }
}

/// Fills in the defaults virt-api's mutating webhook gives a VirtualMachineInstance spec
/// that the launcher relies on, with the cluster's configuration: the machine type, the pod
/// network as interface `default` with the cluster's default binding when the spec names
/// no network and does not opt out with `autoattachPodInterface: false`, and a disk for
/// every volume that has none.
pub fn default_instance_spec(spec: &mut VirtualMachineInstanceSpec, cluster: &ClusterConfig) {
    let machine = spec.domain.machine.get_or_insert_with(Machine::default);
    if machine.type_.as_deref().is_none_or(str::is_empty) {
        machine.type_ = Some(cluster.machine_type.clone());
    }
    let devices = &mut spec.domain.devices;
    let no_networks = spec.networks.as_ref().is_none_or(Vec::is_empty)
        && devices.interfaces.as_ref().is_none_or(Vec::is_empty);
    if no_networks && devices.autoattach_pod_interface != Some(false) {
        spec.networks = Some(vec![Network {
            name: "default".into(),
            pod: Some(PodNetwork::default()),
            ..Default::default()
        }]);
        let (bridge, masquerade) = match cluster.default_binding {
            DefaultBinding::Bridge => (Some(InterfaceBridge {}), None),
            DefaultBinding::Masquerade => (None, Some(InterfaceMasquerade {})),
        };
        devices.interfaces = Some(vec![Interface {
            name: "default".into(),
            bridge,
            masquerade,
            ..Default::default()
        }]);
    }
    add_volume_disks(spec);
}

/// A disk (virt-api's default target) for each volume that has none, as KubeVirt's
/// `SetDefaultVolumeDisk`.
pub fn add_volume_disks(spec: &mut VirtualMachineInstanceSpec) {
    let disks = spec.domain.devices.disks.get_or_insert_with(Vec::new);
    for volume in spec.volumes.iter().flatten() {
        if !disks.iter().any(|d| d.name == volume.name) {
            disks.push(Disk {
                name: volume.name.clone(),
                disk: Some(DiskTarget::default()),
                ..Default::default()
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdi::datavolume::DataVolumeContentType;
    use crate::kubevirt::vm::{DataVolumeTemplateSpec, VirtualMachineSpec};

    #[test]
    fn run_strategy_defaults_to_halted_only_when_nothing_is_set() {
        let mut vm = VirtualMachine::new("vm", VirtualMachineSpec::default());
        default_virtual_machine(&mut vm);
        assert_eq!(vm.spec.run_strategy, Some(RunStrategy::Halted));

        let mut vm = VirtualMachine::new(
            "vm",
            VirtualMachineSpec {
                running: Some(true),
                ..Default::default()
            },
        );
        default_virtual_machine(&mut vm);
        assert_eq!(vm.spec.run_strategy, None);
        assert_eq!(vm.spec.effective_run_strategy(), RunStrategy::Always);

        let mut vm = VirtualMachine::new(
            "vm",
            VirtualMachineSpec {
                run_strategy: Some(RunStrategy::Manual),
                ..Default::default()
            },
        );
        default_virtual_machine(&mut vm);
        assert_eq!(vm.spec.run_strategy, Some(RunStrategy::Manual));
    }

    #[test]
    fn instances_get_the_pod_network_and_a_disk_per_volume() {
        let mut spec: VirtualMachineInstanceSpec = serde_json::from_value(serde_json::json!({
            "domain": {"devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]}},
            "volumes": [
                {"name": "root", "emptyDisk": {"capacity": "1Gi"}},
                {"name": "cloudinit", "cloudInitNoCloud": {"userData": "#cloud-config"}}
            ]
        }))
        .expect("spec");
        default_instance_spec(&mut spec, &ClusterConfig::default());
        let value = serde_json::to_value(&spec).expect("json");
        assert_eq!(
            value["domain"]["machine"],
            serde_json::json!({"type": "q35"})
        );
        assert_eq!(
            value["networks"],
            serde_json::json!([{"name": "default", "pod": {}}])
        );
        assert_eq!(
            value["domain"]["devices"]["interfaces"],
            serde_json::json!([{"name": "default", "masquerade": {}}])
        );
        assert_eq!(
            value["domain"]["devices"]["disks"][1],
            serde_json::json!({"name": "cloudinit", "disk": {}})
        );

        let mut opted_out: VirtualMachineInstanceSpec = serde_json::from_value(
            serde_json::json!({"domain": {"devices": {"autoattachPodInterface": false}}}),
        )
        .expect("spec");
        default_instance_spec(&mut opted_out, &ClusterConfig::default());
        assert_eq!(opted_out.networks, None);
    }

    #[test]
    fn the_cluster_decides_the_binding_and_machine_type_a_vmi_leaves_out() {
        let cluster = ClusterConfig {
            default_binding: DefaultBinding::Bridge,
            machine_type: "pc".into(),
            use_emulation: false,
            ..Default::default()
        };
        let mut spec = VirtualMachineInstanceSpec::default();
        default_instance_spec(&mut spec, &cluster);
        let value = serde_json::to_value(&spec).expect("json");
        assert_eq!(value["domain"]["machine"]["type"], "pc");
        assert_eq!(
            value["domain"]["devices"]["interfaces"],
            serde_json::json!([{"name": "default", "bridge": {}}])
        );
        let mut own: VirtualMachineInstanceSpec = serde_json::from_value(
            serde_json::json!({"domain": {"machine": {"type": "q35"}, "devices": {}}}),
        )
        .expect("spec");
        default_instance_spec(&mut own, &cluster);
        assert_eq!(
            own.domain.machine.and_then(|m| m.type_).as_deref(),
            Some("q35")
        );
    }

    #[test]
    fn data_volume_templates_get_data_volume_defaults() {
        let mut vm = VirtualMachine::new(
            "vm",
            VirtualMachineSpec {
                data_volume_templates: Some(vec![DataVolumeTemplateSpec::default()]),
                ..Default::default()
            },
        );
        default_virtual_machine(&mut vm);
        let dvts = vm.spec.data_volume_templates.unwrap_or_default();
        assert_eq!(
            dvts[0].spec.content_type,
            Some(DataVolumeContentType::KubeVirt)
        );
    }
}
