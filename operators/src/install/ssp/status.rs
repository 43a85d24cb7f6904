//! SSP's status as ssp-operator writes it: `phase` (Deploying, Deployed, Deleting), the
//! Available, Progressing and Degraded conditions (reason = the condition's type, as
//! upstream), `observedGeneration`, and the operator, target and observed versions. Unlike
//! upstream, a condition's heartbeat moves only when it changes, so an unchanged reconcile
//! writes nothing.

use api::common::{ConditionStatus, operator_condition};
use api::ssp::{SspStatus, phase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::kit::conditions::{self, Heartbeat};

/// What a reconcile came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A new generation is being reconciled.
    Reconciling,
    /// Every operand was reconciled; these resources (`KIND NS/NAME: why`) are not ready yet.
    Reconciled {
        /// Resources that are not available (and so progressing and degraded).
        pending: Vec<String>,
    },
    /// The reconcile failed.
    Failed(String),
    /// CRDs the operands need are not served.
    MissingCrds(Vec<String>),
    /// The SSP is being deleted.
    Deleting,
}

/// How an operator's status messages name what it deploys.
#[derive(Clone, Copy, Debug)]
pub struct Words {
    /// What its resources are called: `SSP` in "Reconciling SSP resources".
    pub noun: &'static str,
    /// The Available message when everything is.
    pub available: &'static str,
}

/// SSP's words.
pub const SSP_WORDS: Words = Words {
    noun: "SSP",
    available: "All SSP resources are available",
};

/// The three conditions as (status, message) for Available, Progressing and Degraded.
fn conditions_for(outcome: &Outcome, words: Words) -> [(ConditionStatus, String); 3] {
    let noun = words.noun;
    use ConditionStatus::{False, True};
    let all_bad = |message: String| {
        [
            (False, message.clone()),
            (True, message.clone()),
            (True, message),
        ]
    };
    match outcome {
        Outcome::Reconciling => all_bad(format!("Reconciling {noun} resources")),
        Outcome::Deleting => all_bad(format!("Deleting {noun} resources")),
        Outcome::Failed(error) => all_bad(format!("Error: {error}")),
        Outcome::MissingCrds(crds) => {
            all_bad(format!("Required CRDs are missing: {}", crds.join(", ")))
        }
        Outcome::Reconciled { pending } => match pending.as_slice() {
            [] => [
                (True, words.available.to_owned()),
                (False, format!("No {noun} resources are progressing")),
                (False, format!("No {noun} resources are degraded")),
            ],
            [one] => all_bad(one.clone()),
            many => [
                (
                    False,
                    format!("{} {noun} resources are not available", many.len()),
                ),
                (
                    True,
                    format!("{} {noun} resources are progressing", many.len()),
                ),
                (
                    True,
                    format!("{} {noun} resources are degraded", many.len()),
                ),
            ],
        },
    }
}

/// The status after `outcome` for generation `generation`, from the status before.
pub fn status_for(
    before: Option<&SspStatus>,
    generation: Option<i64>,
    outcome: &Outcome,
    version: &str,
    now: &Time,
) -> SspStatus {
    status_in_words(before, generation, outcome, version, now, SSP_WORDS)
}

/// [`status_for`] with another operator's `words` (the same status shape, the operator
/// SDK's).
pub fn status_in_words(
    before: Option<&SspStatus>,
    generation: Option<i64>,
    outcome: &Outcome,
    version: &str,
    now: &Time,
    words: Words,
) -> SspStatus {
    let mut status = before.cloned().unwrap_or_default();
    let mut conditions = status.conditions.take().unwrap_or_default();
    let types = [
        operator_condition::AVAILABLE,
        operator_condition::PROGRESSING,
        operator_condition::DEGRADED,
    ];
    for (type_, (value, message)) in types.into_iter().zip(conditions_for(outcome, words)) {
        // The reason is the condition's type, as upstream.
        conditions::set(
            &mut conditions,
            type_,
            value,
            Some(type_),
            Some(&message),
            Heartbeat::OnChange,
            now,
        );
    }
    status.conditions = Some(conditions);
    status.observed_generation = generation;
    status.paused = false;
    status.phase = Some(
        match outcome {
            Outcome::Deleting => phase::DELETING,
            Outcome::Reconciled { pending } if pending.is_empty() => phase::DEPLOYED,
            _ => phase::DEPLOYING,
        }
        .to_owned(),
    );
    if !matches!(outcome, Outcome::Deleting) {
        status.operator_version = Some(version.to_owned());
        status.target_version = Some(version.to_owned());
    }
    if status.phase.as_deref() == Some(phase::DEPLOYED) {
        status.observed_version = Some(version.to_owned());
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::common::OperatorCondition;

    fn at(time: &str) -> Time {
        Time(time.parse().unwrap())
    }

    fn condition<'a>(status: &'a SspStatus, type_: &str) -> &'a OperatorCondition {
        status
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap()
    }

    #[test]
    fn deployed_when_nothing_is_pending() {
        let now = at("2026-01-01T00:00:00Z");
        let reconciling = status_for(None, Some(1), &Outcome::Reconciling, "1.0.0", &now);
        assert_eq!(reconciling.phase.as_deref(), Some("Deploying"));
        assert_eq!(reconciling.observed_version, None);
        let later = at("2026-01-01T00:01:00Z");
        let deployed = status_for(
            Some(&reconciling),
            Some(1),
            &Outcome::Reconciled { pending: vec![] },
            "1.0.0",
            &later,
        );
        assert_eq!(deployed.phase.as_deref(), Some("Deployed"));
        assert_eq!(deployed.observed_version.as_deref(), Some("1.0.0"));
        assert_eq!(deployed.observed_generation, Some(1));
        let available = condition(&deployed, "Available");
        assert_eq!(available.status, ConditionStatus::True);
        assert_eq!(available.reason.as_deref(), Some("Available"));
        assert_eq!(
            available.message.as_deref(),
            Some("All SSP resources are available")
        );
        assert_eq!(available.last_transition_time, Some(later.clone()));
        // The same outcome again writes nothing new.
        let again = status_for(
            Some(&deployed),
            Some(1),
            &Outcome::Reconciled { pending: vec![] },
            "1.0.0",
            &at("2026-01-01T00:02:00Z"),
        );
        assert_eq!(again, deployed);
    }

    #[test]
    fn pending_resources_failures_and_missing_crds_are_named() {
        let now = at("2026-01-01T00:00:00Z");
        let one = status_for(
            None,
            Some(2),
            &Outcome::Reconciled {
                pending: vec!["Template openshift/a: Resource is being deleted.".into()],
            },
            "1.0.0",
            &now,
        );
        assert_eq!(one.phase.as_deref(), Some("Deploying"));
        assert_eq!(
            condition(&one, "Degraded").message.as_deref(),
            Some("Template openshift/a: Resource is being deleted.")
        );
        let two = status_for(
            None,
            Some(2),
            &Outcome::Reconciled {
                pending: vec!["a".into(), "b".into()],
            },
            "1.0.0",
            &now,
        );
        assert_eq!(
            condition(&two, "Progressing").message.as_deref(),
            Some("2 SSP resources are progressing")
        );
        let missing = status_for(
            None,
            Some(2),
            &Outcome::MissingCrds(vec!["templates.template.openshift.io".into()]),
            "1.0.0",
            &now,
        );
        assert_eq!(
            condition(&missing, "Available").message.as_deref(),
            Some("Required CRDs are missing: templates.template.openshift.io")
        );
        let failed = status_for(
            None,
            Some(2),
            &Outcome::Failed("boom".into()),
            "1.0.0",
            &now,
        );
        assert_eq!(condition(&failed, "Degraded").status, ConditionStatus::True);
        assert_eq!(
            condition(&failed, "Degraded").message.as_deref(),
            Some("Error: boom")
        );
        let deleting = status_for(Some(&failed), Some(2), &Outcome::Deleting, "1.0.0", &now);
        assert_eq!(deleting.phase.as_deref(), Some("Deleting"));
    }
}
