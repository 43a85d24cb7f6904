//! HCO's rendering of an HC into its operands, the HCO operator's
//! (`operators::install::hco`), as HCO's admission checks
//! (`admission::install_guards`) read it, in-process and on a cluster alike.

use admission::install_guards::{HcoOperands, Operand};
use serde_json::Value;

/// The HCO operator's rendering.
pub struct HcoOperator;

impl HcoOperands for HcoOperator {
    fn kubevirt_name(&self, hc_name: &str) -> String {
        operators::install::hco::operands::kubevirt_name(hc_name)
    }

    fn cdi_name(&self, hc_name: &str) -> String {
        operators::install::hco::operands::cdi_name(hc_name)
    }

    /// The operands HCO's webhook dry-runs an HC's update against: KubeVirt, CDI,
    /// NetworkAddonsConfig and SSP. The TektonTasks CR is not among them (HCO v1.9's
    /// `ValidateUpdate` leaves it out of the resources it updates with `dryRun`).
    fn desired(&self, hc: &Value, use_emulation: bool) -> Vec<Operand> {
        let desired = operators::install::hco::desired(hc, use_emulation);
        desired
            .into_iter()
            .filter(|operand| operand.resource.plural != "tektontasks")
            .map(|operand| Operand {
                group: operand.resource.group,
                plural: operand.resource.plural,
                namespace: operand.namespace,
                name: operand.name,
                body: operand.body,
            })
            .collect()
    }
}
