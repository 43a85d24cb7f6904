//! The install webhooks' checks: virt-operator's and cdi-operator's uninstall guards
//! (`BlockUninstallIfWorkloadsExist`), virt-operator's review of KubeVirt CR updates, and
//! HCO's webhook (its own checks;
//! on update a dry-run update of each operand with the spec the new HC gives it; on delete
//! the KubeVirt and CDI guards, their refusal passed on inside HCO's words). They run
//! in-process on `ferrovirt up` ([`crate::webhooks::embedded`], over the embedded API
//! server's [`ValidationRequest`]) and as `ferrovirt hco-webhook` on a cluster (over a kube
//! client): both are a [`Cluster`], so the checks are written once.

use serde_json::Value;
use standalone::apiserver::{ApiError, Refusal, ValidationRequest};

/// virt-operator's uninstall webhook, as its refusals are attributed.
pub const KUBEVIRT_WEBHOOK: &str = "kubevirt-validator.kubevirt.io";
/// virt-operator's webhook for a KubeVirt CR's updates.
pub const KUBEVIRT_UPDATE_WEBHOOK: &str = "kubevirt-update-validator.kubevirt.io";
/// cdi-apiserver's webhook for the CDI CR.
pub const CDI_WEBHOOK: &str = "cdi-validate.cdi.kubevirt.io";
/// HCO's webhook.
pub const HCO_WEBHOOK: &str = "validate-hco.kubevirt.io";
const BLOCK: &str = "BlockUninstallIfWorkloadsExist";

/// The workload kinds that block KubeVirt's uninstall, in virt-operator's order:
/// (group, plural, the words its message uses).
const KUBEVIRT_WORKLOADS: [(&str, &str, &str); 3] = [
    (
        "kubevirt.io",
        "virtualmachineinstances",
        "Virtual Machine Instances",
    ),
    ("kubevirt.io", "virtualmachines", "Virtual Machines"),
    (
        "kubevirt.io",
        "virtualmachineinstancereplicasets",
        "Virtual Machine Instance Replica Sets",
    ),
];

/// What the checks read of the cluster and ask of it. A resource the cluster does not
/// serve has no objects.
// Implemented and called only in this crate, with concrete types whose futures are Send.
#[allow(async_fn_in_trait)]
pub trait Cluster {
    /// The object `namespace/name` of `group`/`plural` ("" for cluster-scoped), if any.
    async fn get(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, Refusal>;
    /// How many objects of `group`/`plural` there are in all namespaces, counting no
    /// further than `limit`, of those `selector` selects (a label selector in its text
    /// form; "" selects all).
    async fn count(
        &self,
        group: &str,
        plural: &str,
        selector: &str,
        limit: usize,
    ) -> Result<usize, Refusal>;
    /// Creates `object` in `namespace` with `dryRun=All`, so that the API server's
    /// validation and admission judge it; returns the warnings, or the refusal as the API
    /// server reports it.
    async fn dry_run_create(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        object: &Value,
    ) -> Result<Vec<String>, Refusal>;
    /// Updates `object` with `dryRun=All`, so that its own admission judges it; returns
    /// the warnings, or the refusal as the API server reports it.
    async fn dry_run_update(
        &self,
        group: &str,
        plural: &str,
        object: &Value,
    ) -> Result<Vec<String>, Refusal>;
}

/// An error of the API server passed on as the webhook's answer, its status code (and an
/// admission refusal's warnings) kept.
pub fn passed_on(err: ApiError) -> Refusal {
    let refusal = Refusal::new(err.code(), err.to_string());
    match err {
        ApiError::Refused { warnings, .. } => Refusal {
            warnings,
            ..refusal
        },
        _ => refusal,
    }
}

/// The embedded API server answers from its store: nothing here waits.
impl Cluster for ValidationRequest<'_> {
    async fn get(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, Refusal> {
        ValidationRequest::get(self, group, plural, namespace, name).map_err(passed_on)
    }

    async fn count(
        &self,
        group: &str,
        plural: &str,
        selector: &str,
        limit: usize,
    ) -> Result<usize, Refusal> {
        let found = self.list_selected(group, plural, None, selector, limit);
        Ok(found.map_err(passed_on)?.len())
    }

    async fn dry_run_create(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        object: &Value,
    ) -> Result<Vec<String>, Refusal> {
        ValidationRequest::dry_run_create(self, group, plural, namespace, object).map_err(passed_on)
    }

    async fn dry_run_update(
        &self,
        group: &str,
        plural: &str,
        object: &Value,
    ) -> Result<Vec<String>, Refusal> {
        ValidationRequest::dry_run_update(self, group, plural, object).map_err(passed_on)
    }
}

/// Whether an operator CR asks that its deletion wait until no workloads are left.
fn blocks_uninstall(operator: &Value) -> bool {
    operator["spec"]["uninstallStrategy"] == BLOCK
}

/// virt-operator's check of a KubeVirt CR's deletion.
pub async fn kubevirt_uninstall(cluster: &impl Cluster, kubevirt: &Value) -> Result<(), Refusal> {
    // Only a deployment is guarded: one still deploying, or failed, may go.
    if !blocks_uninstall(kubevirt) || kubevirt["status"]["phase"] != "Deployed" {
        return Ok(());
    }
    for (group, plural, words) in KUBEVIRT_WORKLOADS {
        if cluster.count(group, plural, "", 1).await? > 0 {
            return Err(Refusal::denied(format!(
                "Rejecting the uninstall request, since there are still {words} present. Either delete all KubeVirt related workloads or change the uninstall strategy before uninstalling KubeVirt."
            )));
        }
    }
    Ok(())
}

/// virt-operator's check of an update to a KubeVirt CR (`old` the stored one): its
/// warnings, or its refusal (422 Invalid, the causes joined as KubeVirt joins them) with
/// the warnings, which virt-operator's response carries either way. A changed infra or
/// workloads placement is judged by the API server: a Deployment or DaemonSet carrying it
/// is created with `dryRun=All` in the CR's namespace, and its refusal is a cause.
pub async fn kubevirt_update(
    cluster: &impl Cluster,
    kubevirt: &Value,
    old: &Value,
) -> Result<Vec<String>, Refusal> {
    use api::kubevirt::update_review::{placement_probes, review_update};
    let namespace = kubevirt["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let mut placement_causes = Vec::new();
    for probe in placement_probes(kubevirt, old) {
        let tried = cluster
            .dry_run_create("apps", probe.plural, namespace, &probe.workload)
            .await;
        if let Err(refusal) = tried {
            placement_causes.push(refusal.message);
        }
    }
    let review = review_update(kubevirt, old, &placement_causes);
    match review.refusal() {
        Some(message) => Err(Refusal {
            warnings: review.warnings,
            ..Refusal::new(422, message)
        }),
        None => Ok(review.warnings),
    }
}

/// cdi-apiserver's check of a CDI CR's deletion: a CR never deployed, or in `Error`, may go;
/// under the blocking strategy, not while DataVolumes other than boot source imports exist
/// (its message counts at most two, as CDI lists no further).
pub async fn cdi_uninstall(cluster: &impl Cluster, cdi: &Value) -> Result<(), Refusal> {
    let phase = cdi["status"]["phase"].as_str().unwrap_or_default();
    if matches!(phase, "" | "Error") || !blocks_uninstall(cdi) {
        return Ok(());
    }
    // A DataImportCron's imports (labelled by it) go with CDI.
    let workloads = format!("!{}", operators::cdi::dataimportcron::CRON_LABEL);
    let present = cluster
        .count("cdi.kubevirt.io", "datavolumes", &workloads, 2)
        .await?;
    if present > 0 {
        return Err(Refusal::denied(format!(
            "rejecting the uninstall request, since there are still {present} DataVolumes present. Either delete all DataVolumes or change the uninstall strategy before uninstalling CDI"
        )));
    }
    Ok(())
}

fn hco_refusal(err: api::hco::validate::HyperConvergedError) -> Refusal {
    Refusal::denied(err.to_string())
}

/// HCO's check of a new HC in `namespace`.
pub fn hyperconverged_create(namespace: &str, hc: &Value) -> Result<Vec<String>, Refusal> {
    api::hco::validate::review_create(&as_v1beta1(hc)?, namespace).map_err(hco_refusal)
}

/// An HC as HCO's checks judge it: at v1beta1, whichever version it was written at (as
/// kube-apiserver converts for a webhook that names v1beta1 in its rules).
fn as_v1beta1(hc: &Value) -> Result<Value, Refusal> {
    api::hco::conversion::convert(hc, api::hco::conversion::V1BETA1)
        .map_err(|err| Refusal::new(400, err.to_string()))
}

/// HCO's update check of an update that changes the spec or annotations of an HC not
/// being deleted (so that HCO's own finalizer updates always pass): the new HC's own
/// checks, then each operand updated with `dryRun=All` to the spec the new HC gives it, so
/// that the operands' own admission judges the change before HCO tries it. A missing
/// operand refuses the update, as HCO's Get does.
pub async fn hyperconverged_update(
    cluster: &impl Cluster,
    namespace: &str,
    hc: &Value,
    old: &Value,
) -> Result<Vec<String>, Refusal> {
    let (hc, old) = (&as_v1beta1(hc)?, &as_v1beta1(old)?);
    let deleting = !hc["metadata"]["deletionTimestamp"].is_null();
    if deleting || !api::hco::validate::changes_anything(hc, old) {
        return Ok(Vec::new());
    }
    let mut warnings = api::hco::validate::review_update(hc, old).map_err(hco_refusal)?;
    let kubevirt = operators::install::hco::operands::kubevirt_name(
        hc["metadata"]["name"].as_str().unwrap_or_default(),
    );
    let live_kubevirt = cluster
        .get("kubevirt.io", "kubevirts", namespace, &kubevirt)
        .await?;
    let use_emulation = live_kubevirt.as_ref().is_some_and(|kv| {
        kv["spec"]["configuration"]["developerConfiguration"]["useEmulation"] == true
    });
    for operand in operators::install::hco::desired(hc, use_emulation) {
        let (group, plural) = (&operand.resource.group, &operand.resource.plural);
        let operand_namespace = operand.namespace.as_deref().unwrap_or_default();
        let mut live = cluster
            .get(group, plural, operand_namespace, &operand.name)
            .await?
            .ok_or_else(|| {
                passed_on(ApiError::NotFound {
                    resource: format!("{plural}.{group}"),
                    name: operand.name.clone(),
                })
            })?;
        live["spec"] = operand.body["spec"].clone();
        warnings.extend(cluster.dry_run_update(group, plural, &live).await?);
    }
    Ok(warnings)
}

/// HCO's delete check: its KubeVirt and CDI must be deletable, and their webhooks' refusal
/// is passed on whole.
pub async fn hyperconverged_delete(
    cluster: &impl Cluster,
    namespace: &str,
    hc: &Value,
) -> Result<(), Refusal> {
    let hc = &as_v1beta1(hc)?;
    let name = hc["metadata"]["name"].as_str().unwrap_or_default();
    let nested = |webhook: &str, refusal: Refusal| {
        Refusal::denied(format!(
            "admission webhook \"{webhook}\" denied the request: {}",
            refusal.message
        ))
    };
    // Only operands HCO deployed (its `app` label names the HC) are HCO's to delete.
    let deployed_by_hco = |operand: &Value| operand["metadata"]["labels"]["app"] == name;
    let kubevirt_name = operators::install::hco::operands::kubevirt_name(name);
    let kubevirt = cluster
        .get("kubevirt.io", "kubevirts", namespace, &kubevirt_name)
        .await?;
    if let Some(kubevirt) = kubevirt.filter(deployed_by_hco) {
        kubevirt_uninstall(cluster, &kubevirt)
            .await
            .map_err(|r| nested(KUBEVIRT_WEBHOOK, r))?;
    }
    let cdi_name = operators::install::hco::operands::cdi_name(name);
    let cdi = cluster
        .get("cdi.kubevirt.io", "cdis", "", &cdi_name)
        .await?;
    if let Some(cdi) = cdi.filter(deployed_by_hco) {
        cdi_uninstall(cluster, &cdi)
            .await
            .map_err(|r| nested(CDI_WEBHOOK, r))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_blocking_strategy_blocks() {
        let operator = |strategy: &str| json!({"spec": {"uninstallStrategy": strategy}});
        assert!(blocks_uninstall(&operator(BLOCK)));
        assert!(!blocks_uninstall(&operator("RemoveWorkloads")));
        assert!(!blocks_uninstall(&json!({"spec": {}})));
    }
}
