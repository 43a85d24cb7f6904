//! Defaulting of VirtualMachines as virt-api's mutating webhook does it for the fields the
//! platform relies on.

use super::vm::{RunStrategy, VirtualMachine};
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
