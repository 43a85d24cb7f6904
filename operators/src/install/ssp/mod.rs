//! The SSP operator (kubevirt/ssp-operator): each SSP CR gets the common templates in
//! `spec.commonTemplates.namespace`, its boot sources (DataImportCrons and DataSources in
//! `kubevirt-os-images`) and SSP's status. The template validator runs in-process in the
//! API server on `ferrovirt up`, so there is nothing to deploy for it here. The SSP carries
//! the `ssp.kubevirt.io/finalizer`; deleting it removes what it made.
//!
//! Each operand is a pure plan (`templates`, `boot_sources`: observed objects in, changes
//! out); `apply` reads and writes, `status` computes the status.

pub mod apply;
pub mod boot_sources;
pub mod owner;
pub mod plan;
pub mod rbac;
pub mod status;
pub mod templates;

use std::sync::Arc;
use std::time::Duration;

use api::ssp::{OPERATOR_PAUSED_ANNOTATION, SSP, SspStatus};
use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DynamicObject;
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::Value;

use self::plan::{Action, Change, Kind};
use self::status::{Outcome, status_for};
use crate::kit::{finalizer, is_status};

/// The finalizer on every SSP.
pub const FINALIZER: &str = "ssp.kubevirt.io/finalizer";
/// The finalizer older ssp-operators put; replaced by [`FINALIZER`].
pub const OLD_FINALIZER: &str = "finalize.ssp.kubevirt.io";
/// The operator's version, reported in the status.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// How often a deployed SSP is checked again.
const RESYNC: Duration = Duration::from_secs(60);
/// How soon an SSP with resources still going away is looked at again.
const SOON: Duration = Duration::from_secs(2);

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// An object could not be read or written as JSON.
    #[error("encoding an object: {0}")]
    Encode(#[from] serde_json::Error),
    /// The SSP asks for something that cannot be made.
    #[error(transparent)]
    Invalid(#[from] boot_sources::Invalid),
    /// CRDs the operands need are not served.
    #[error("Required CRDs are missing: {}", .0.join(", "))]
    MissingCrds(Vec<String>),
}

impl Error {
    /// The variant's name, as failures are counted.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "Kube",
            Error::Encode(_) => "Encode",
            Error::Invalid(_) => "Invalid",
            Error::MissingCrds(_) => "MissingCrds",
        }
    }
}

/// What the controller works with.
pub struct Context {
    /// The API server.
    pub client: Client,
    /// The common templates bundle (Templates without a namespace).
    pub bundle: Vec<Value>,
}

/// The status messages of the resources that `actions` delete.
fn pending(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter(|a| a.change == Change::Delete)
        .map(|a| format!("{}: Resource is being deleted.", a.describe()))
        .collect()
}

/// Deploys the operands of `ssp`; returns the resources not ready yet.
async fn deploy(ssp: &SSP, ctx: &Context) -> Result<Vec<String>, Error> {
    api::ssp::validate_spec(&ssp.spec)?;
    let namespace = ssp
        .spec
        .common_templates
        .as_ref()
        .map(|c| c.namespace.clone())
        .unwrap_or_default();
    let observed = apply::templates(&ctx.client, &namespace).await?;
    let mut actions = templates::plan(&ctx.bundle, ssp, &namespace, &observed);
    let names = templates::data_source_names(&ctx.bundle);
    let observed = apply::boot_sources(&ctx.client).await?;
    actions.extend(boot_sources::plan(ssp, &names, &observed)?);
    actions.extend(rbac::plan(ssp, &apply::roles(&ctx.client).await?));
    apply::apply_all(&ctx.client, &actions).await?;
    Ok(pending(&actions))
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Writes the status after `outcome`, if it changed.
async fn write_status(api: &Api<SSP>, ssp: &SSP, outcome: &Outcome) -> Result<(), Error> {
    let status = status_for(
        ssp.status.as_ref(),
        ssp.meta().generation,
        outcome,
        VERSION,
        &now(),
    );
    if ssp.status.as_ref() == Some(&status) {
        return Ok(());
    }
    patch_status(api, ssp, &status).await
}

async fn patch_status(api: &Api<SSP>, ssp: &SSP, status: &SspStatus) -> Result<(), Error> {
    let mut value = serde_json::to_value(status)?;
    value["paused"] = Value::Bool(status.paused);
    match crate::kit::objects::patch_status(api, &ssp.name_any(), &value).await {
        Ok(_) => Ok(()),
        Err(err) if is_status(&err, 404) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

fn is_paused(ssp: &SSP) -> bool {
    ssp.annotations()
        .get(OPERATOR_PAUSED_ANNOTATION)
        .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Reconciles one SSP: its finalizer, its operands and its status.
pub async fn reconcile(ssp: Arc<SSP>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    let api: Api<SSP> = Api::namespaced(ctx.client.clone(), &ssp.namespace().unwrap_or_default());
    if ssp.meta().deletion_timestamp.is_some() {
        return cleanup(&api, &ssp, &ctx).await;
    }
    if !finalizer::has(&*ssp, FINALIZER) || finalizer::has(&*ssp, OLD_FINALIZER) {
        return initialize(&api, &ssp).await;
    }
    if is_paused(&ssp) {
        if !ssp.status.as_ref().is_some_and(|s| s.paused) {
            tracing::info!(ssp = %owner::owner_key(&ssp), "pausing the SSP operator on it");
            let mut status = ssp.status.clone().unwrap_or_default();
            status.paused = true;
            patch_status(&api, &ssp, &status).await?;
        }
        return Ok(Requeue::await_change());
    }
    let generation = ssp.meta().generation;
    if ssp.status.as_ref().and_then(|s| s.observed_generation) != generation {
        write_status(&api, &ssp, &Outcome::Reconciling).await?;
    }
    let (outcome, result) = match deploy(&ssp, &ctx).await {
        Ok(pending) => {
            let requeue = if pending.is_empty() { RESYNC } else { SOON };
            (
                Outcome::Reconciled { pending },
                Ok(Requeue::requeue(requeue)),
            )
        }
        Err(Error::Kube(err)) if is_status(&err, 409) => {
            tracing::debug!(%err, "restarting the reconcile after a conflict");
            return Ok(Requeue::requeue(Duration::from_millis(200)));
        }
        Err(Error::MissingCrds(crds)) => {
            (Outcome::MissingCrds(crds), Ok(Requeue::requeue(SOON * 5)))
        }
        Err(err) => (Outcome::Failed(err.to_string()), Err(err)),
    };
    let latest = api
        .get_opt(&ssp.name_any())
        .await?
        .unwrap_or_else(|| (*ssp).clone());
    write_status(&api, &latest, &outcome).await?;
    result
}

/// Puts the finalizer on a new SSP (in place of an old one) and marks it Deploying.
async fn initialize(api: &Api<SSP>, ssp: &SSP) -> Result<Requeue, Error> {
    let mut current = ssp.clone();
    if let Some(patched) = finalizer::set(api, &current, OLD_FINALIZER, false).await? {
        current = patched;
    }
    if let Some(patched) = finalizer::set(api, &current, FINALIZER, true).await? {
        current = patched;
    }
    write_status(api, &current, &Outcome::Reconciling).await?;
    Ok(Requeue::requeue(Duration::from_millis(100)))
}

/// Removes what `ssp` made, then its finalizer.
async fn cleanup(api: &Api<SSP>, ssp: &SSP, ctx: &Context) -> Result<Requeue, Error> {
    if !finalizer::has(ssp, FINALIZER) && !finalizer::has(ssp, OLD_FINALIZER) {
        return Ok(Requeue::await_change());
    }
    write_status(api, ssp, &Outcome::Deleting).await?;
    let namespace = ssp
        .spec
        .common_templates
        .as_ref()
        .map(|c| c.namespace.clone())
        .unwrap_or_default();
    let listed = match namespace.is_empty() {
        true => Ok(Vec::new()),
        false => apply::templates(&ctx.client, &namespace).await,
    };
    let mut actions = match listed {
        Ok(observed) => templates::cleanup(ssp, &observed),
        Err(Error::MissingCrds(_)) => Vec::new(),
        Err(err) => return Err(err),
    };
    let observed = apply::boot_sources(&ctx.client).await?;
    let (more, crons_remain) = boot_sources::cleanup(ssp, &observed);
    if !crons_remain {
        actions.extend(rbac::cleanup(ssp, &apply::roles(&ctx.client).await?));
    }
    actions.extend(more);
    apply::apply_all(&ctx.client, &actions).await?;
    if crons_remain {
        return Ok(Requeue::requeue(SOON));
    }
    finalizer::remove_from_latest(api, ssp, FINALIZER).await?;
    finalizer::remove_from_latest(api, ssp, OLD_FINALIZER).await?;
    tracing::info!(ssp = %owner::owner_key(ssp), "SSP resources removed");
    Ok(Requeue::await_change())
}

fn error_policy(_ssp: Arc<SSP>, err: &Error, _ctx: Arc<Context>) -> Requeue {
    tracing::warn!(%err, label = err.metric_label(), "SSP reconcile failed");
    Requeue::requeue(Duration::from_secs(5))
}

/// The SSP that owner annotations name, for watches of what SSPs make.
fn owning_ssp(annotations: &std::collections::BTreeMap<String, String>) -> Option<ObjectRef<SSP>> {
    let (namespace, name) = owner::owner_of(annotations)?;
    Some(ObjectRef::new(&name).within(&namespace))
}

/// The SSPs a Template's change concerns: its owner, or for a base template of no SSP (one
/// of an older bundle, say) every SSP whose templates namespace it is in.
fn template_owners(template: &DynamicObject, ssps: &[Arc<SSP>]) -> Vec<ObjectRef<SSP>> {
    if let Some(owner) = owning_ssp(template.annotations()) {
        return vec![owner];
    }
    let base = template
        .labels()
        .get(templates::TYPE_LABEL)
        .map(String::as_str)
        == Some(templates::TYPE_BASE);
    if !base {
        return Vec::new();
    }
    let namespace = template.namespace();
    ssps.iter()
        .filter(|ssp| {
            ssp.spec.common_templates.as_ref().map(|c| &c.namespace) == namespace.as_ref()
        })
        .map(|ssp| ObjectRef::from_obj(ssp.as_ref()))
        .collect()
}

/// Runs the SSP controller until its watches end; `bundle` is the common templates bundle.
pub async fn run(client: Client, bundle: Vec<Value>) {
    let ctx = Arc::new(Context {
        client: client.clone(),
        bundle,
    });
    let template = Kind::Template.resource();
    let controller = Controller::new(Api::<SSP>::all(client.clone()), watcher::Config::default());
    let ssps = controller.store();
    controller
        .watches_with(
            Api::<DynamicObject>::all_with(client.clone(), &template),
            template.clone(),
            watcher::Config::default(),
            move |t| template_owners(&t, &ssps.state()),
        )
        .watches(
            Api::<api::cdi::DataImportCron>::all(client.clone()),
            watcher::Config::default(),
            |c| owning_ssp(c.annotations()),
        )
        .watches(
            Api::<api::cdi::DataSource>::namespaced(client, boot_sources::GOLDEN_IMAGES_NAMESPACE),
            watcher::Config::default(),
            |d| owning_ssp(d.annotations()),
        )
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(%err, "SSP controller event");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_base_template_of_no_ssp_concerns_the_ssps_of_its_namespace() {
        let ssp = |name: &str, namespace: &str| -> Arc<SSP> {
            Arc::new(
                serde_json::from_value(json!({
                    "apiVersion": "ssp.kubevirt.io/v1beta2", "kind": "SSP",
                    "metadata": {"name": name, "namespace": "kubevirt"},
                    "spec": {"commonTemplates": {"namespace": namespace}},
                }))
                .unwrap(),
            )
        };
        let ssps = [ssp("a", "openshift"), ssp("b", "elsewhere")];
        let template = |labels: Value| -> DynamicObject {
            serde_json::from_value(json!({
                "apiVersion": "template.openshift.io/v1", "kind": "Template",
                "metadata": {"name": "old", "namespace": "openshift", "labels": labels},
            }))
            .unwrap()
        };
        let base = template(json!({templates::TYPE_LABEL: templates::TYPE_BASE}));
        assert_eq!(
            template_owners(&base, &ssps),
            [ObjectRef::new("a").within("kubevirt")]
        );
        assert!(template_owners(&template(json!({})), &ssps).is_empty());
    }

    #[test]
    fn deletes_are_reported_as_pending_resources() {
        let actions = [
            Action::on(
                Kind::Template,
                &json!({"metadata": {"name": "a", "namespace": "ns"}}),
                Change::Delete,
            ),
            Action::on(
                Kind::Template,
                &json!({"metadata": {"name": "b", "namespace": "ns"}}),
                Change::Create(json!({})),
            ),
        ];
        assert_eq!(
            pending(&actions),
            ["Template ns/a: Resource is being deleted."]
        );
        let annotations = owner::owner_annotations(
            &serde_json::from_value(json!({
                "apiVersion": "ssp.kubevirt.io/v1beta2", "kind": "SSP",
                "metadata": {"name": "ssp", "namespace": "kubevirt"}, "spec": {},
            }))
            .unwrap(),
        );
        assert_eq!(
            owning_ssp(&annotations),
            Some(ObjectRef::new("ssp").within("kubevirt"))
        );
    }
}
