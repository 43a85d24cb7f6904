//! The install webhooks' checks: virt-operator's and cdi-operator's uninstall guards
//! (`BlockUninstallIfWorkloadsExist`), virt-operator's review of KubeVirt CR updates, and
//! HCO's webhook (its own checks;
//! on update a dry-run update of each operand with the spec the new HC gives it; on delete
//! the KubeVirt and CDI guards, their refusal passed on inside HCO's words). They run
//! in-process on `ferrovirt up` (over the embedded API server's request) and as `ferrovirt
//! hco-webhook` on a cluster (over a kube client): both are a [`Cluster`], so the checks are
//! written once. What HCO makes of an HC is the HCO operator's rendering, which the caller
//! hands in as [`HcoOperands`].

use serde_json::Value;

use crate::Refusal;
use crate::cluster::Cluster;

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

/// One operand of an HC as HCO would write it.
pub struct Operand {
    pub group: String,
    pub plural: String,
    /// None for a cluster-scoped operand.
    pub namespace: Option<String>,
    pub name: String,
    /// The operand as HCO would write it; its `spec` is what HCO keeps.
    pub body: Value,
}

/// HCO's rendering of an HC into its operands (the HCO operator's, handed in by the caller:
/// admission stands below the operators).
pub trait HcoOperands {
    /// The name of the KubeVirt CR of the HC named `hc_name`.
    fn kubevirt_name(&self, hc_name: &str) -> String;
    /// The name of the CDI CR of the HC named `hc_name`.
    fn cdi_name(&self, hc_name: &str) -> String;
    /// The operands `hc` asks for (`use_emulation` as the live KubeVirt CR allows it).
    fn desired(&self, hc: &Value, use_emulation: bool) -> Vec<Operand>;
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
    use crate::kubevirt::update_review::{placement_probes, review_update};
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
    let workloads = format!("!{}", api::cdi::dataimportcron::CRON_LABEL);
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

fn hco_refusal(err: crate::hco::validate::HyperConvergedError) -> Refusal {
    Refusal::denied(err.to_string())
}

/// HCO's check of a new HC in `namespace`.
pub fn hyperconverged_create(namespace: &str, hc: &Value) -> Result<Vec<String>, Refusal> {
    crate::hco::validate::review_create(&as_v1beta1(hc)?, namespace).map_err(hco_refusal)
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
    operands: &impl HcoOperands,
    namespace: &str,
    hc: &Value,
    old: &Value,
) -> Result<Vec<String>, Refusal> {
    let (hc, old) = (&as_v1beta1(hc)?, &as_v1beta1(old)?);
    let deleting = !hc["metadata"]["deletionTimestamp"].is_null();
    if deleting || !crate::hco::validate::changes_anything(hc, old) {
        return Ok(Vec::new());
    }
    let mut warnings = crate::hco::validate::review_update(hc, old).map_err(hco_refusal)?;
    let kubevirt = operands.kubevirt_name(hc["metadata"]["name"].as_str().unwrap_or_default());
    let live_kubevirt = cluster
        .get("kubevirt.io", "kubevirts", namespace, &kubevirt)
        .await?;
    let use_emulation = live_kubevirt.as_ref().is_some_and(|kv| {
        kv["spec"]["configuration"]["developerConfiguration"]["useEmulation"] == true
    });
    for operand in operands.desired(hc, use_emulation) {
        let (group, plural) = (&operand.group, &operand.plural);
        let operand_namespace = operand.namespace.as_deref().unwrap_or_default();
        let mut live = cluster
            .get(group, plural, operand_namespace, &operand.name)
            .await?
            .ok_or_else(|| {
                // As the API server answers a Get of a missing object.
                let message = format!("{plural}.{group} \"{}\" not found", operand.name);
                Refusal::new(404, message)
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
    operands: &impl HcoOperands,
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
    let kubevirt_name = operands.kubevirt_name(name);
    let kubevirt = cluster
        .get("kubevirt.io", "kubevirts", namespace, &kubevirt_name)
        .await?;
    if let Some(kubevirt) = kubevirt.filter(deployed_by_hco) {
        kubevirt_uninstall(cluster, &kubevirt)
            .await
            .map_err(|r| nested(KUBEVIRT_WEBHOOK, r))?;
    }
    let cdi_name = operands.cdi_name(name);
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
