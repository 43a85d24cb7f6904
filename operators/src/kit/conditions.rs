//! Setting a status condition by type, once for every operator and CDI controller: the
//! rule of openshift/custom-resource-status' `SetStatusCondition` (a new condition gets
//! both times; the transition time moves only when the status changes; reason and message
//! are replaced), with the heartbeat policy each caller's upstream follows as a parameter.

use api::cdi::datasource::CdiCondition;
use api::common::{ConditionStatus, OperatorCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// When a condition's `lastHeartbeatTime` moves. This is a real upstream difference:
/// custom-resource-status has `SetStatusCondition` (heartbeat at every set) and
/// `SetStatusConditionNoHeartbeat`, and CDI's own controllers stamp it at every pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heartbeat {
    /// Never written; an existing condition keeps whatever it had (`SetStatusConditionNoHeartbeat`,
    /// as CNAO's status manager calls it).
    Never,
    /// Moved when the status, reason or message changes, so an unchanged reconcile writes
    /// nothing (HPP and SSP; their upstreams move it at every set, which only makes writes).
    OnChange,
    /// Moved at every set (CDI's DataSource and DataImportCron controllers; their writers
    /// compare conditions without heartbeats before writing).
    Always,
}

/// A condition in the shape of custom-resource-status (type, status, reason, message, the
/// transition and heartbeat times), whichever API group declares it.
pub trait StatusCondition {
    /// A condition of `type_` with no times set.
    fn untimed(
        type_: &str,
        status: ConditionStatus,
        reason: Option<String>,
        message: Option<String>,
    ) -> Self;
    /// Its type.
    fn type_(&self) -> &str;
    /// Its fields, to be updated in place.
    fn fields(&mut self) -> Fields<'_>;
}

/// The fields of a [`StatusCondition`] that setting it touches.
pub struct Fields<'a> {
    pub status: &'a mut ConditionStatus,
    pub reason: &'a mut Option<String>,
    pub message: &'a mut Option<String>,
    pub last_heartbeat_time: &'a mut Option<Time>,
    pub last_transition_time: &'a mut Option<Time>,
}

macro_rules! status_condition {
    ($type:ty) => {
        impl StatusCondition for $type {
            fn untimed(
                type_: &str,
                status: ConditionStatus,
                reason: Option<String>,
                message: Option<String>,
            ) -> Self {
                Self {
                    type_: type_.to_owned(),
                    status,
                    reason,
                    message,
                    last_heartbeat_time: None,
                    last_transition_time: None,
                }
            }

            fn type_(&self) -> &str {
                &self.type_
            }

            fn fields(&mut self) -> Fields<'_> {
                Fields {
                    status: &mut self.status,
                    reason: &mut self.reason,
                    message: &mut self.message,
                    last_heartbeat_time: &mut self.last_heartbeat_time,
                    last_transition_time: &mut self.last_transition_time,
                }
            }
        }
    };
}

status_condition!(OperatorCondition);
status_condition!(CdiCondition);

/// Sets the condition `type_` in `conditions` as of `now`: added with its transition time
/// (and heartbeat, unless [`Heartbeat::Never`]) if missing; otherwise its transition time
/// moves only when `status` differs, its reason and message are replaced, and its heartbeat
/// follows `heartbeat`.
pub fn set<C: StatusCondition>(
    conditions: &mut Vec<C>,
    type_: &str,
    status: ConditionStatus,
    reason: Option<&str>,
    message: Option<&str>,
    heartbeat: Heartbeat,
    now: &Time,
) {
    let reason = reason.map(str::to_owned);
    let message = message.map(str::to_owned);
    let Some(existing) = conditions.iter_mut().find(|c| c.type_() == type_) else {
        let mut condition = C::untimed(type_, status, reason, message);
        let fields = condition.fields();
        *fields.last_transition_time = Some(now.clone());
        if heartbeat != Heartbeat::Never {
            *fields.last_heartbeat_time = Some(now.clone());
        }
        conditions.push(condition);
        return;
    };
    let fields = existing.fields();
    let changed =
        *fields.status != status || *fields.reason != reason || *fields.message != message;
    if *fields.status != status {
        *fields.last_transition_time = Some(now.clone());
    }
    if heartbeat == Heartbeat::Always || (heartbeat == Heartbeat::OnChange && changed) {
        *fields.last_heartbeat_time = Some(now.clone());
    }
    *fields.status = status;
    *fields.reason = reason;
    *fields.message = message;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConditionStatus::{False, True};

    fn at(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).expect("a valid time"))
    }

    fn times(c: &OperatorCondition) -> (Option<Time>, Option<Time>) {
        (
            c.last_transition_time.clone(),
            c.last_heartbeat_time.clone(),
        )
    }

    #[test]
    fn a_new_condition_gets_its_times_and_no_heartbeat_when_never() {
        let mut list: Vec<OperatorCondition> = Vec::new();
        set(
            &mut list,
            "Available",
            True,
            None,
            None,
            Heartbeat::OnChange,
            &at(1),
        );
        set(
            &mut list,
            "Degraded",
            False,
            None,
            None,
            Heartbeat::Never,
            &at(1),
        );
        assert_eq!(times(&list[0]), (Some(at(1)), Some(at(1))));
        assert_eq!(times(&list[1]), (Some(at(1)), None));
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let mut list: Vec<OperatorCondition> = Vec::new();
        set(
            &mut list,
            "Available",
            True,
            None,
            None,
            Heartbeat::Always,
            &at(1),
        );
        set(
            &mut list,
            "Available",
            True,
            Some("R"),
            None,
            Heartbeat::Always,
            &at(2),
        );
        assert_eq!(times(&list[0]), (Some(at(1)), Some(at(2))));
        assert_eq!(list[0].reason.as_deref(), Some("R"));
        set(
            &mut list,
            "Available",
            False,
            None,
            None,
            Heartbeat::Always,
            &at(3),
        );
        assert_eq!(times(&list[0]), (Some(at(3)), Some(at(3))));
        assert_eq!(list.len(), 1);
    }

    #[test]
    fn on_change_leaves_an_unchanged_condition_alone() {
        let mut list: Vec<CdiCondition> = Vec::new();
        set(
            &mut list,
            "Ready",
            True,
            Some("R"),
            Some("m"),
            Heartbeat::OnChange,
            &at(1),
        );
        set(
            &mut list,
            "Ready",
            True,
            Some("R"),
            Some("m"),
            Heartbeat::OnChange,
            &at(2),
        );
        assert_eq!(list[0].last_heartbeat_time, Some(at(1)));
        set(
            &mut list,
            "Ready",
            True,
            Some("R"),
            Some("n"),
            Heartbeat::OnChange,
            &at(3),
        );
        assert_eq!(list[0].last_heartbeat_time, Some(at(3)));
        assert_eq!(list[0].last_transition_time, Some(at(1)));
    }
}
