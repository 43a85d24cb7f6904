//! CNAO's NetworkAddonsConfig controller: the `cluster` config (others are ignored, as CNAO
//! ignores them) becomes the network add-ons it names, with CNAO's status: conditions
//! Available, Progressing and Degraded, `observedVersion`, `operatorVersion`,
//! `targetVersion`. Here the add-on deployed is the MAC pool: `spec.kubeMacPool` becomes
//! kubemacpool's range ConfigMap in the operand namespace (removed with `kubeMacPool`); with
//! no range given, a random locally administered one (02:XX:XX:00:00:00 –
//! 02:XX:XX:FF:FF:FF) is picked once and kept across restarts in the ConfigMap of the
//! applied configuration, as CNAO keeps it. A config that fails validation (which admission
//! refuses, but one may be stored from before) is reported Degraded with CNAO's reason.
//! On a cluster the pool's manager itself is deployed too ([`components`]), and the config is
//! Progressing, not yet Available, until its Deployment is.

pub mod components;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::ValidationError;
use api::cnao::{
    CLUSTER, KubeMacPool, MacAddress, NetworkAddonsConfig, NetworkAddonsConfigSpec,
    NetworkAddonsConfigStatus, validate_spec,
};
use api::common::{ConditionStatus, OperatorCondition, operator_condition};
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};

use crate::kit::conditions::Heartbeat;
use crate::kit::{self, delete_ignoring_missing, patch_status};
use crate::macpool::{RANGE_CONFIG_MAP, RANGE_END_KEY, RANGE_START_KEY};

/// The namespace CNAO deploys its components to (its own, `cluster-network-addons`).
pub const OPERAND_NAMESPACE: &str = "cluster-network-addons";
/// The prefix of the ConfigMap recording the applied configuration.
pub const APPLIED_PREFIX: &str = "cluster-networks-addons-operator-applied-";
/// The key of that ConfigMap holding the spec as JSON.
pub const APPLIED_KEY: &str = "applied";
/// The field manager of what the controller applies.
pub const FIELD_MANAGER: &str = "cluster-network-addons-operator";
/// The operator's version, reported in the status.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// How often a deployed config is checked again (CNAO requeues every minute).
const RESYNC: Duration = Duration::from_secs(60);

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// An object could not be written as JSON.
    #[error("encoding the applied configuration: {0}")]
    Encode(#[from] serde_json::Error),
}

impl Error {
    /// The variant's name, as failures are counted.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "Kube",
            Error::Encode(_) => "Encode",
        }
    }
}

/// What a reconcile came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every component is deployed.
    Deployed,
    /// The components are applied; these of their workloads are not available yet.
    Deploying(Vec<String>),
    /// The config cannot be deployed; CNAO's reason and message.
    Failed {
        /// `FailedToValidate`, `FailedToApply`, …
        reason: &'static str,
        /// What a person can act on.
        message: String,
    },
}

impl Outcome {
    fn invalid(err: &ValidationError) -> Outcome {
        Outcome::Failed {
            reason: "FailedToValidate",
            message: format!("failed to validate NetworkConfig.Spec: {err}"),
        }
    }
}

/// The spec as deployed: validated, and the MAC pool's range filled in when none is given
/// (the one applied before, else a random locally administered block of 2^24 addresses
/// whose middle octets `random_prefix` picks).
pub fn effective_spec(
    spec: &NetworkAddonsConfigSpec,
    previous: Option<&NetworkAddonsConfigSpec>,
    random_prefix: impl FnOnce() -> [u8; 2],
) -> Result<NetworkAddonsConfigSpec, ValidationError> {
    validate_spec(spec)?;
    let mut spec = spec.clone();
    let Some(pool) = spec.kube_mac_pool.as_mut() else {
        return Ok(spec);
    };
    let unset = |v: &Option<String>| v.as_deref().is_none_or(str::is_empty);
    if unset(&pool.range_start) || unset(&pool.range_end) {
        let kept = previous
            .and_then(|p| p.kube_mac_pool.clone())
            .filter(|p| !unset(&p.range_start) && !unset(&p.range_end));
        *pool = kept.unwrap_or_else(|| {
            let [a, b] = random_prefix();
            KubeMacPool {
                range_start: Some(MacAddress::from_octets([0x02, a, b, 0, 0, 0]).to_string()),
                range_end: Some(
                    MacAddress::from_octets([0x02, a, b, 0xff, 0xff, 0xff]).to_string(),
                ),
            }
        });
    }
    Ok(spec)
}

/// The data of kubemacpool's range ConfigMap for a deployed spec; none without the pool.
pub fn range_data(spec: &NetworkAddonsConfigSpec) -> Option<BTreeMap<String, String>> {
    let pool = spec.kube_mac_pool.as_ref()?;
    Some(BTreeMap::from([
        (
            RANGE_START_KEY.to_owned(),
            pool.range_start.clone().unwrap_or_default(),
        ),
        (
            RANGE_END_KEY.to_owned(),
            pool.range_end.clone().unwrap_or_default(),
        ),
    ]))
}

/// Sets the condition `type_` in `conditions` as CNAO's status manager does, with
/// custom-resource-status' `SetStatusConditionNoHeartbeat`.
fn set_condition(
    conditions: &mut Vec<OperatorCondition>,
    type_: &str,
    status: ConditionStatus,
    reason: Option<&str>,
    message: Option<&str>,
    now: &Time,
) {
    kit::conditions::set(
        conditions,
        type_,
        status,
        reason,
        message,
        Heartbeat::Never,
        now,
    );
}

/// The status after `outcome`, from the status before, as CNAO's status manager sets it.
pub fn status_for(
    before: Option<&NetworkAddonsConfigStatus>,
    outcome: &Outcome,
    version: &str,
    now: &Time,
) -> NetworkAddonsConfigStatus {
    let mut status = before.cloned().unwrap_or_default();
    let mut conditions = status.conditions.take().unwrap_or_default();
    // The Failing condition was replaced by Degraded (CNAO 0.12); dropped if found.
    conditions.retain(|c| c.type_ != "Failing");
    match outcome {
        Outcome::Deployed => {
            set_condition(
                &mut conditions,
                operator_condition::DEGRADED,
                ConditionStatus::False,
                None,
                None,
                now,
            );
            set_condition(
                &mut conditions,
                operator_condition::PROGRESSING,
                ConditionStatus::False,
                None,
                None,
                now,
            );
            set_condition(
                &mut conditions,
                operator_condition::AVAILABLE,
                ConditionStatus::True,
                None,
                None,
                now,
            );
            status.observed_version = Some(version.to_owned());
        }
        Outcome::Deploying(progressing) => {
            set_condition(
                &mut conditions,
                operator_condition::DEGRADED,
                ConditionStatus::False,
                None,
                None,
                now,
            );
            set_condition(
                &mut conditions,
                operator_condition::PROGRESSING,
                ConditionStatus::True,
                Some("Deploying"),
                Some(&progressing.join("\n")),
                now,
            );
            set_condition(
                &mut conditions,
                operator_condition::AVAILABLE,
                ConditionStatus::False,
                Some("Startup"),
                Some("Configuration is in process"),
                now,
            );
        }
        Outcome::Failed { reason, message } => {
            set_condition(
                &mut conditions,
                operator_condition::DEGRADED,
                ConditionStatus::True,
                Some(reason),
                Some(message),
                now,
            );
            set_condition(
                &mut conditions,
                operator_condition::AVAILABLE,
                ConditionStatus::False,
                Some("Failing"),
                Some("Unable to apply desired configuration"),
                now,
            );
            set_condition(
                &mut conditions,
                operator_condition::PROGRESSING,
                ConditionStatus::False,
                Some("InvalidConfiguration"),
                Some("Human interaction is needed, please fix the desired configuration"),
                now,
            );
        }
    }
    status.conditions = Some(conditions);
    status.operator_version = Some(version.to_owned());
    status.target_version = Some(version.to_owned());
    status
}

/// What the controller works with.
pub struct Context {
    /// The API server.
    pub client: Client,
    /// Where the components go.
    pub namespace: String,
    /// On a cluster, the image the add-ons' workloads run (the operator's own); on
    /// `ferrovirt up` none: the add-ons run in-process.
    pub image: Option<String>,
}

fn random_prefix() -> [u8; 2] {
    let [.., a, b] = crate::macpool::runtime::random().to_be_bytes();
    [a, b]
}

fn owner(config: &NetworkAddonsConfig) -> Option<OwnerReference> {
    config.controller_owner_ref(&())
}

async fn applied_spec(ctx: &Context, name: &str) -> Result<Option<NetworkAddonsConfigSpec>, Error> {
    let configs: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let Some(applied) = configs.get_opt(&format!("{APPLIED_PREFIX}{name}")).await? else {
        return Ok(None);
    };
    let text = applied
        .data
        .as_ref()
        .and_then(|d| d.get(APPLIED_KEY))
        .cloned()
        .unwrap_or_default();
    match serde_json::from_str(&text) {
        Ok(spec) => Ok(Some(spec)),
        Err(err) => {
            tracing::warn!(%err, "the applied configuration does not parse; starting afresh");
            Ok(None)
        }
    }
}

async fn apply_config_map(
    ctx: &Context,
    name: &str,
    labels: BTreeMap<String, String>,
    data: BTreeMap<String, String>,
    owner: Option<OwnerReference>,
) -> Result<(), Error> {
    let configs: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ctx.namespace.clone()),
            labels: (!labels.is_empty()).then_some(labels),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    };
    configs
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&config_map),
        )
        .await?;
    Ok(())
}

async fn ensure_namespace(ctx: &Context) -> Result<(), Error> {
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    if namespaces.get_opt(&ctx.namespace).await?.is_some() {
        return Ok(());
    }
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(ctx.namespace.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// Deploys `config`'s components and says which workloads are still progressing;
/// `Ok(Err(..))` when the config itself is at fault.
async fn deploy(
    config: &NetworkAddonsConfig,
    ctx: &Context,
) -> Result<Result<Vec<String>, ValidationError>, Error> {
    let name = config.name_any();
    let previous = applied_spec(ctx, &name).await?;
    let spec = match effective_spec(&config.spec, previous.as_ref(), random_prefix) {
        Ok(spec) => spec,
        Err(invalid) => return Ok(Err(invalid)),
    };
    ensure_namespace(ctx).await?;
    let applied = BTreeMap::from([(APPLIED_KEY.to_owned(), serde_json::to_string(&spec)?)]);
    apply_config_map(
        ctx,
        &format!("{APPLIED_PREFIX}{name}"),
        BTreeMap::new(),
        applied,
        owner(config),
    )
    .await?;
    match range_data(&spec) {
        Some(data) => {
            let labels = BTreeMap::from([
                (
                    "control-plane".to_owned(),
                    "mac-controller-manager".to_owned(),
                ),
                ("controller-tools.k8s.io".to_owned(), "1.0".to_owned()),
            ]);
            apply_config_map(ctx, RANGE_CONFIG_MAP, labels, data, owner(config)).await?;
        }
        None => {
            let configs: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
            delete_ignoring_missing(&configs, RANGE_CONFIG_MAP).await?;
        }
    }
    let Some(image) = &ctx.image else {
        return Ok(Ok(Vec::new()));
    };
    let progressing = components::sync_kubemacpool(
        &ctx.client,
        &ctx.namespace,
        image,
        owner(config).as_ref(),
        spec.kube_mac_pool.is_some(),
    )
    .await?;
    Ok(Ok(progressing))
}

/// Reconciles one NetworkAddonsConfig: deploys it and writes its status.
pub async fn reconcile(
    config: Arc<NetworkAddonsConfig>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    if config.name_any() != CLUSTER {
        tracing::debug!(name = %config.name_any(), "ignoring a NetworkAddonsConfig not named cluster");
        return Ok(Action::await_change());
    }
    let (outcome, result) = match deploy(&config, &ctx).await {
        Ok(Ok(progressing)) if progressing.is_empty() => {
            (Outcome::Deployed, Ok(Action::requeue(RESYNC)))
        }
        // The Deployments' changes wake the config too; this is for a missed one.
        Ok(Ok(progressing)) => (
            Outcome::Deploying(progressing),
            Ok(Action::requeue(Duration::from_secs(10))),
        ),
        Ok(Err(invalid)) => (Outcome::invalid(&invalid), Ok(Action::await_change())),
        Err(err) => (
            Outcome::Failed {
                reason: "FailedToApply",
                message: err.to_string(),
            },
            Err(err),
        ),
    };
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let status = status_for(config.status.as_ref(), &outcome, VERSION, &now);
    if config.status.as_ref() != Some(&status) {
        let configs: Api<NetworkAddonsConfig> = Api::all(ctx.client.clone());
        patch_status(&configs, CLUSTER, &status).await?;
    }
    result
}

fn error_policy(_config: Arc<NetworkAddonsConfig>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(%err, label = err.metric_label(), "NetworkAddonsConfig reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// Reconciles the `cluster` config once, if there is one: `ferrovirt up` does it before the
/// MAC pool starts, so the pool starts with its range.
pub async fn sync_cluster(client: Client, namespace: &str) -> Result<(), Error> {
    let configs: Api<NetworkAddonsConfig> = Api::all(client.clone());
    let Some(config) = configs.get_opt(CLUSTER).await? else {
        return Ok(());
    };
    let ctx = Arc::new(Context {
        client,
        namespace: namespace.to_owned(),
        image: None,
    });
    reconcile(Arc::new(config), ctx).await.map(|_| ())
}

/// Runs the controller until its watch ends. With `image` (on a cluster) the add-ons'
/// workloads are deployed running it, and their Deployments' changes wake the config.
pub async fn run(client: Client, namespace: String, image: Option<String>) {
    let mut controller = Controller::new(
        Api::<NetworkAddonsConfig>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(
        Api::<ConfigMap>::namespaced(client.clone(), &namespace),
        watcher::Config::default(),
    );
    if image.is_some() {
        controller = controller.owns(
            Api::<Deployment>::namespaced(client.clone(), &namespace),
            watcher::Config::default(),
        );
    }
    let ctx = Arc::new(Context {
        client,
        namespace,
        image,
    });
    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(%err, "NetworkAddonsConfig controller event");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pool: Option<(&str, &str)>) -> NetworkAddonsConfigSpec {
        NetworkAddonsConfigSpec {
            kube_mac_pool: Some(KubeMacPool {
                range_start: pool.map(|p| p.0.to_owned()),
                range_end: pool.map(|p| p.1.to_owned()),
            }),
            ..Default::default()
        }
    }

    fn now() -> Time {
        Time("2024-05-01T10:00:00Z".parse().unwrap())
    }

    #[test]
    fn a_range_is_kept_given_or_picked_once() {
        let given = effective_spec(
            &spec(Some(("02:00:00:00:00:00", "02:00:00:00:00:ff"))),
            None,
            || unreachable!(),
        )
        .unwrap();
        assert_eq!(
            given,
            spec(Some(("02:00:00:00:00:00", "02:00:00:00:00:ff")))
        );
        let picked = effective_spec(&spec(None), None, || [0xab, 0xcd]).unwrap();
        assert_eq!(
            picked,
            spec(Some(("02:ab:cd:00:00:00", "02:ab:cd:ff:ff:ff")))
        );
        // Next time (another start) the applied one is reused, not picked anew.
        let again = effective_spec(&spec(None), Some(&picked), || [0, 0]).unwrap();
        assert_eq!(again, picked);
        let data = range_data(&again).unwrap();
        assert_eq!(data[RANGE_START_KEY], "02:ab:cd:00:00:00");
        assert_eq!(range_data(&NetworkAddonsConfigSpec::default()), None);
        let invalid = effective_spec(
            &spec(Some(("02:00:00:00:00:ff", "02:00:00:00:00:00"))),
            None,
            || [0, 0],
        );
        assert_eq!(
            invalid.unwrap_err().field.as_str(),
            "spec.kubeMacPool.rangeEnd"
        );
    }

    #[test]
    fn the_status_says_available_or_degraded_as_cnao() {
        let deployed = status_for(None, &Outcome::Deployed, "1.2.3", &now());
        let find = |status: &NetworkAddonsConfigStatus, type_: &str| {
            status
                .conditions
                .as_ref()
                .unwrap()
                .iter()
                .find(|c| c.type_ == type_)
                .cloned()
                .unwrap()
        };
        assert_eq!(find(&deployed, "Available").status, ConditionStatus::True);
        assert_eq!(find(&deployed, "Degraded").status, ConditionStatus::False);
        assert_eq!(
            find(&deployed, "Progressing").status,
            ConditionStatus::False
        );
        assert_eq!(deployed.observed_version.as_deref(), Some("1.2.3"));
        let invalid = ValidationError::new(
            api::FieldPath::new("spec")
                .child("kubeMacPool")
                .child("rangeEnd"),
            api::Problem::Invalid(
                "both or none of the KubeMacPool ranges needs to be configured".into(),
            ),
        );
        let later = Time("2024-05-01T11:00:00Z".parse().unwrap());
        let failed = status_for(
            Some(&deployed),
            &Outcome::invalid(&invalid),
            "1.2.3",
            &later,
        );
        let degraded = find(&failed, "Degraded");
        assert_eq!(degraded.status, ConditionStatus::True);
        assert_eq!(degraded.reason.as_deref(), Some("FailedToValidate"));
        assert_eq!(
            degraded.message.as_deref(),
            Some(
                "failed to validate NetworkConfig.Spec: spec.kubeMacPool.rangeEnd: both or none of the KubeMacPool ranges needs to be configured"
            )
        );
        assert_eq!(degraded.last_transition_time, Some(later.clone()));
        assert_eq!(
            find(&failed, "Available").reason.as_deref(),
            Some("Failing")
        );
        assert_eq!(
            find(&failed, "Progressing").reason.as_deref(),
            Some("InvalidConfiguration")
        );
        // Applied, the manager not yet available: Progressing, not Available, as CNAO.
        let deploying = status_for(
            Some(&failed),
            &Outcome::Deploying(vec!["a".into(), "b".into()]),
            "1.2.3",
            &later,
        );
        let progressing = find(&deploying, "Progressing");
        assert_eq!(progressing.status, ConditionStatus::True);
        assert_eq!(progressing.reason.as_deref(), Some("Deploying"));
        assert_eq!(progressing.message.as_deref(), Some("a\nb"));
        let available = find(&deploying, "Available");
        assert_eq!(available.status, ConditionStatus::False);
        assert_eq!(available.reason.as_deref(), Some("Startup"));
        assert_eq!(find(&deploying, "Degraded").status, ConditionStatus::False);
        // The same outcome again changes nothing (no needless status writes).
        assert_eq!(
            status_for(Some(&failed), &Outcome::invalid(&invalid), "1.2.3", &now()),
            failed
        );
    }
}
