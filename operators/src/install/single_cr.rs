//! What virt-operator and cdi-operator do with each of their CRs, as a pure plan: one CR
//! (the oldest live one) is the deployment, the others are refused, and a deleted CR that
//! still holds the operator's finalizer is torn down first. While one is torn down no other
//! takes over: both would act on the same cluster-scoped names.

use serde_json::Value;

use super::operator_cr::active_cr;

/// What to do with one CR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrAction {
    /// Deploy the components and report them.
    Deploy,
    /// Remove what was deployed, then the finalizer.
    TearDown,
    /// Mark it as not the deployment (KubeVirt's `ExistingDeployment`, CDI's `Error`).
    Refuse,
    /// The deployment-to-be, waiting for a teardown to finish.
    Wait,
    /// A deleted CR without the finalizer: nothing left to do.
    Nothing,
}

/// The action for each of `crs`, in their order.
pub fn plan(crs: &[Value], finalizer: &str) -> Vec<CrAction> {
    let holds = |cr: &Value| {
        cr["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == finalizer))
    };
    let deleting = |cr: &Value| !cr["metadata"]["deletionTimestamp"].is_null();
    let tearing_down = crs.iter().any(|cr| deleting(cr) && holds(cr));
    let active = active_cr(crs).map(|cr| cr["metadata"]["uid"].clone());
    crs.iter()
        .map(|cr| match (deleting(cr), holds(cr)) {
            (true, true) => CrAction::TearDown,
            (true, false) => CrAction::Nothing,
            (false, _) if Some(&cr["metadata"]["uid"]) != active.as_ref() => CrAction::Refuse,
            (false, _) if tearing_down => CrAction::Wait,
            (false, _) => CrAction::Deploy,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FINALIZER: &str = "example.io/f";

    fn cr(uid: &str, created: &str, deleting: bool, finalizers: &[&str]) -> Value {
        let mut cr = json!({"metadata": {"name": uid, "uid": uid, "creationTimestamp": created,
                                         "finalizers": finalizers}});
        if deleting {
            cr["metadata"]["deletionTimestamp"] = json!("2026-11-26T00:00:00Z");
        }
        cr
    }

    #[test]
    fn the_oldest_live_cr_deploys_and_the_others_are_refused() {
        let crs = [
            cr("new", "2026-02-01T00:00:00Z", false, &[]),
            cr("old", "2026-01-01T00:00:00Z", false, &[FINALIZER]),
        ];
        assert_eq!(plan(&crs, FINALIZER), [CrAction::Refuse, CrAction::Deploy]);
    }

    #[test]
    fn no_cr_takes_over_while_the_deployment_is_torn_down() {
        let crs = [
            cr("old", "2026-01-01T00:00:00Z", true, &[FINALIZER]),
            cr("next", "2026-02-01T00:00:00Z", false, &[]),
            cr("third", "2026-03-01T00:00:00Z", false, &[]),
        ];
        assert_eq!(
            plan(&crs, FINALIZER),
            [CrAction::TearDown, CrAction::Wait, CrAction::Refuse]
        );
        // Once its finalizer is off, the next one deploys.
        let crs = [
            cr("old", "2026-01-01T00:00:00Z", true, &[]),
            cr("next", "2026-02-01T00:00:00Z", false, &[]),
        ];
        assert_eq!(plan(&crs, FINALIZER), [CrAction::Nothing, CrAction::Deploy]);
    }
}
