//! HCO's aggregation of its operands' conditions into the HyperConverged's own: each
//! operand that is not Available, Progressing, Degraded or not Upgradeable says so under a
//! `<Kind>NotAvailable`-style reason, and what nobody reported is filled in as HCO's chart
//! does (ReconcileComplete, then Degraded, Progressing, Upgradeable, Available).

use std::collections::BTreeMap;

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";
pub const DEGRADED: &str = "Degraded";
pub const UPGRADEABLE: &str = "Upgradeable";
pub const RECONCILE_COMPLETE: &str = "ReconcileComplete";

const COMPLETED: &str = "ReconcileCompleted";
const COMPLETED_MESSAGE: &str = "Reconcile completed successfully";

/// A condition as an operand reports it, or as the HC gets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reported {
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl Reported {
    fn new(type_: &str, status: &str, reason: &str, message: &str) -> Reported {
        Reported {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
        }
    }
}

/// One operand as HCO sees it: its kind and its conditions (empty when it has none yet).
pub struct Operand<'a> {
    pub kind: &'a str,
    pub conditions: Vec<Reported>,
}

/// The HC's conditions, keyed by type, set in the order HCO sets them; a later operand's
/// report of a type replaces an earlier one's, as in HCO.
#[derive(Default)]
struct Conditions(BTreeMap<String, Reported>);

impl Conditions {
    fn set(&mut self, condition: Reported) {
        self.0.insert(condition.type_.clone(), condition);
    }

    fn set_if_unset(&mut self, condition: Reported) {
        self.0.entry(condition.type_.clone()).or_insert(condition);
    }

    fn has(&self, type_: &str) -> bool {
        self.0.contains_key(type_)
    }
}

/// Aggregates `operands` into the HC's five conditions.
pub fn aggregate(operands: &[Operand]) -> Vec<Reported> {
    let mut conditions = Conditions::default();
    for operand in operands {
        report_operand(&mut conditions, operand);
    }
    conditions.set(Reported::new(
        RECONCILE_COMPLETE,
        "True",
        COMPLETED,
        COMPLETED_MESSAGE,
    ));
    let completed = |type_, status| Reported::new(type_, status, COMPLETED, COMPLETED_MESSAGE);
    if conditions.has(DEGRADED) {
        conditions.set_if_unset(completed(PROGRESSING, "False"));
        conditions.set_if_unset(Reported::new(
            UPGRADEABLE,
            "False",
            "HCODegraded",
            "HCO is not Upgradeable due to degraded components",
        ));
        conditions.set_if_unset(Reported::new(
            AVAILABLE,
            "False",
            "HCODegraded",
            "HCO is not available due to degraded components",
        ));
    } else {
        conditions.set(completed(DEGRADED, "False"));
        if conditions.has(PROGRESSING) {
            conditions.set_if_unset(Reported::new(
                UPGRADEABLE,
                "False",
                "HCOProgressing",
                "HCO is not Upgradeable due to progressing components",
            ));
        } else {
            conditions.set(completed(PROGRESSING, "False"));
            conditions.set_if_unset(completed(UPGRADEABLE, "True"));
        }
        conditions.set_if_unset(completed(AVAILABLE, "True"));
    }
    conditions.0.into_values().collect()
}

/// What one operand's conditions add to the HC's.
fn report_operand(conditions: &mut Conditions, operand: &Operand) {
    let kind = operand.kind;
    if operand.conditions.is_empty() {
        let reason = format!("{kind}Conditions");
        let message = format!("{kind} resource has no conditions");
        conditions.set(Reported::new(AVAILABLE, "False", &reason, &message));
        conditions.set(Reported::new(PROGRESSING, "True", &reason, &message));
        conditions.set(Reported::new(UPGRADEABLE, "False", &reason, &message));
        return;
    }
    let mut available_reported = false;
    for condition in &operand.conditions {
        let message = &condition.message;
        match (condition.type_.as_str(), condition.status.as_str()) {
            (AVAILABLE, status) => {
                available_reported = true;
                if status == "False" {
                    conditions.set(not_available(
                        kind,
                        &format!("{kind} is not available: {message}"),
                    ));
                }
            }
            (PROGRESSING, "True") => {
                let reason = format!("{kind}Progressing");
                let text = format!("{kind} is progressing: {message}");
                conditions.set(Reported::new(PROGRESSING, "True", &reason, &text));
                conditions.set_if_unset(Reported::new(UPGRADEABLE, "False", &reason, &text));
            }
            (DEGRADED, "True") => {
                let reason = format!("{kind}Degraded");
                let text = format!("{kind} is degraded: {message}");
                conditions.set(Reported::new(DEGRADED, "True", &reason, &text));
            }
            (UPGRADEABLE, "False") => {
                let reason = format!("{kind}NotUpgradeable");
                let text = format!("{kind} is not upgradeable: {message}");
                conditions.set(Reported::new(UPGRADEABLE, "False", &reason, &text));
            }
            _ => {}
        }
    }
    if !available_reported {
        conditions.set(not_available(kind, "missing \"Available\" condition"));
    }
}

fn not_available(kind: &str, message: &str) -> Reported {
    Reported::new(AVAILABLE, "False", &format!("{kind}NotAvailable"), message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy(kind: &str) -> Operand<'_> {
        Operand {
            kind,
            conditions: vec![
                Reported::new(AVAILABLE, "True", "", ""),
                Reported::new(PROGRESSING, "False", "", ""),
                Reported::new(DEGRADED, "False", "", ""),
            ],
        }
    }

    fn get<'a>(conditions: &'a [Reported], type_: &str) -> &'a Reported {
        conditions.iter().find(|c| c.type_ == type_).expect(type_)
    }

    #[test]
    fn all_healthy_operands_make_the_hc_available_and_complete() {
        let conditions = aggregate(&[healthy("KubeVirt"), healthy("CDI")]);
        assert_eq!(conditions.len(), 5);
        assert_eq!(get(&conditions, AVAILABLE).status, "True");
        assert_eq!(get(&conditions, RECONCILE_COMPLETE).status, "True");
        assert_eq!(get(&conditions, PROGRESSING).status, "False");
        assert_eq!(get(&conditions, DEGRADED).status, "False");
        assert_eq!(get(&conditions, UPGRADEABLE).status, "True");
        assert_eq!(get(&conditions, AVAILABLE).reason, "ReconcileCompleted");
    }

    #[test]
    fn an_operand_without_conditions_keeps_the_hc_unavailable_and_progressing() {
        let conditions = aggregate(&[
            healthy("KubeVirt"),
            Operand {
                kind: "SSP",
                conditions: vec![],
            },
        ]);
        let available = get(&conditions, AVAILABLE);
        assert_eq!(
            (available.status.as_str(), available.reason.as_str()),
            ("False", "SSPConditions")
        );
        assert_eq!(available.message, "SSP resource has no conditions");
        assert_eq!(get(&conditions, PROGRESSING).status, "True");
        assert_eq!(get(&conditions, UPGRADEABLE).status, "False");
        assert_eq!(get(&conditions, DEGRADED).status, "False");
    }

    #[test]
    fn an_unavailable_operand_is_named_in_the_reason() {
        let mut cdi = healthy("CDI");
        cdi.conditions[0] = Reported::new(AVAILABLE, "False", "", "deploying");
        let conditions = aggregate(&[healthy("KubeVirt"), cdi]);
        let available = get(&conditions, AVAILABLE);
        assert_eq!(available.reason, "CDINotAvailable");
        assert_eq!(available.message, "CDI is not available: deploying");
    }

    #[test]
    fn a_degraded_operand_degrades_and_blocks_upgrades() {
        let mut kv = healthy("KubeVirt");
        kv.conditions[2] = Reported::new(DEGRADED, "True", "", "virt-handler crashes");
        let conditions = aggregate(&[kv]);
        assert_eq!(get(&conditions, DEGRADED).reason, "KubeVirtDegraded");
        assert_eq!(get(&conditions, AVAILABLE).reason, "HCODegraded");
        assert_eq!(
            get(&conditions, UPGRADEABLE).message,
            "HCO is not Upgradeable due to degraded components"
        );
        assert_eq!(get(&conditions, PROGRESSING).status, "False");
    }

    #[test]
    fn a_progressing_operand_leaves_the_hc_available_but_not_upgradeable() {
        let mut kv = healthy("KubeVirt");
        kv.conditions[1] = Reported::new(PROGRESSING, "True", "", "rolling out");
        let conditions = aggregate(&[kv]);
        assert_eq!(get(&conditions, AVAILABLE).status, "True");
        assert_eq!(get(&conditions, PROGRESSING).reason, "KubeVirtProgressing");
        assert_eq!(get(&conditions, UPGRADEABLE).reason, "KubeVirtProgressing");
    }

    #[test]
    fn missing_available_condition_is_reported() {
        let conditions = aggregate(&[Operand {
            kind: "SSP",
            conditions: vec![Reported::new(DEGRADED, "False", "", "")],
        }]);
        assert_eq!(
            get(&conditions, AVAILABLE).message,
            "missing \"Available\" condition"
        );
    }
}
