//! The validating webhooks that read other objects, registered in-process with the
//! embedded API server of `ferrovirt up`: virt-operator's and cdi-operator's uninstall
//! guards, HCO's webhook (its own checks; on update a dry-run update of each operand with
//! the spec the new HC gives it; on delete a dry run of deleting its KubeVirt and CDI, so
//! their refusals reach the user inside HCO's), virt-api's feature-gate checks of VMs, and
//! SSP's template validator.

use serde_json::Value;
use standalone::apiserver::{ApiServer, Operation, Refusal, Validation, ValidationRequest};

const KUBEVIRT_WEBHOOK: &str = "kubevirt-update-validator.kubevirt.io";
const CDI_WEBHOOK: &str = "cdi-api-validate.cdi.kubevirt.io";
const HCO_WEBHOOK: &str = "validate-hco.kubevirt.io";
const VM_WEBHOOK: &str = "virtualmachine-validator.kubevirt.io";
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

/// Whether an operator CR blocks its own deletion while workloads exist.
fn blocks_uninstall(operator: &Value) -> bool {
    operator["spec"]["uninstallStrategy"] == BLOCK && operator["status"]["phase"] == "Deployed"
}

fn kubevirt_uninstall(request: &ValidationRequest, kubevirt: &Value) -> Result<(), Refusal> {
    if !blocks_uninstall(kubevirt) {
        return Ok(());
    }
    for (group, plural, words) in KUBEVIRT_WORKLOADS {
        if !list(request, group, plural)?.is_empty() {
            return Err(Refusal::denied(format!(
                "Rejecting the uninstall request, since there are still {words} present. Either delete all KubeVirt related workloads or change the uninstall strategy before uninstalling KubeVirt."
            )));
        }
    }
    Ok(())
}

fn cdi_uninstall(request: &ValidationRequest, cdi: &Value) -> Result<(), Refusal> {
    if blocks_uninstall(cdi) && !list(request, "cdi.kubevirt.io", "datavolumes")?.is_empty() {
        return Err(Refusal::denied(
            "Rejecting the uninstall request, since there are still DataVolumes present. Either delete all DataVolumes or change the uninstall strategy before uninstalling CDI.",
        ));
    }
    Ok(())
}

fn list(request: &ValidationRequest, group: &str, plural: &str) -> Result<Vec<Value>, Refusal> {
    request.list(group, plural, None, 2).map_err(passed_on)
}

fn hco_refusal(err: api::hco::validate::HyperConvergedError) -> Refusal {
    Refusal::denied(err.to_string())
}

/// An error of the API server passed on as the webhook's answer, its status code kept.
fn passed_on(err: standalone::apiserver::ApiError) -> Refusal {
    Refusal {
        code: err.code(),
        message: err.to_string(),
    }
}

fn hyperconverged_create(request: &ValidationRequest, hc: &Value) -> Result<Vec<String>, Refusal> {
    api::hco::validate::review_create(hc, request.namespace).map_err(hco_refusal)
}

/// HCO's update check of an update that changes the spec or annotations of an HC not
/// being deleted (so that HCO's own finalizer updates always pass): the new HC's own
/// checks, then each operand updated with `dryRun=All` to the spec the new HC gives it, so
/// that the operands' own admission judges the change before HCO tries it. A missing
/// operand refuses the update, as HCO's Get does.
fn hyperconverged_update(request: &ValidationRequest, hc: &Value) -> Result<Vec<String>, Refusal> {
    let Some(old) = request.old else {
        return Ok(Vec::new());
    };
    let deleting = !hc["metadata"]["deletionTimestamp"].is_null();
    if deleting || !api::hco::validate::changes_anything(hc, old) {
        return Ok(Vec::new());
    }
    let mut warnings = api::hco::validate::review_update(hc, old).map_err(hco_refusal)?;
    let kubevirt = operators::install::hco::operands::kubevirt_name(
        hc["metadata"]["name"].as_str().unwrap_or_default(),
    );
    let live_kubevirt = request
        .get("kubevirt.io", "kubevirts", request.namespace, &kubevirt)
        .map_err(passed_on)?;
    let use_emulation = live_kubevirt.as_ref().is_some_and(|kv| {
        kv["spec"]["configuration"]["developerConfiguration"]["useEmulation"] == true
    });
    for operand in operators::install::hco::desired(hc, use_emulation) {
        let (group, plural) = (&operand.resource.group, &operand.resource.plural);
        let namespace = operand.namespace.as_deref().unwrap_or_default();
        let mut live = request
            .get(group, plural, namespace, &operand.name)
            .map_err(passed_on)?
            .ok_or_else(|| {
                passed_on(standalone::apiserver::ApiError::NotFound {
                    resource: format!("{plural}.{group}"),
                    name: operand.name.clone(),
                })
            })?;
        live["spec"] = operand.body["spec"].clone();
        let more = request
            .dry_run_update(group, plural, &live)
            .map_err(passed_on)?;
        warnings.extend(more);
    }
    Ok(warnings)
}

/// HCO's delete check: its KubeVirt and CDI must be deletable, and their webhooks' refusal
/// is passed on whole.
fn hyperconverged_delete(request: &ValidationRequest, hc: &Value) -> Result<(), Refusal> {
    let name = hc["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = request.namespace;
    let get = |group: &str, plural: &str, ns: &str, object: &str| {
        request.get(group, plural, ns, object).map_err(passed_on)
    };
    let nested = |webhook: &str, refusal: Refusal| {
        Refusal::denied(format!(
            "admission webhook \"{webhook}\" denied the request: {}",
            refusal.message
        ))
    };
    // Only operands HCO deployed (its `app` label names the HC) are HCO's to delete.
    let deployed_by_hco = |operand: &Value| operand["metadata"]["labels"]["app"] == name;
    let kubevirt_name = operators::install::hco::operands::kubevirt_name(name);
    let kubevirt = get("kubevirt.io", "kubevirts", namespace, &kubevirt_name)?;
    if let Some(kubevirt) = kubevirt.filter(deployed_by_hco) {
        kubevirt_uninstall(request, &kubevirt).map_err(|r| nested(KUBEVIRT_WEBHOOK, r))?;
    }
    let cdi_name = operators::install::hco::operands::cdi_name(name);
    let cdi = get("cdi.kubevirt.io", "cdis", "", &cdi_name)?;
    if let Some(cdi) = cdi.filter(deployed_by_hco) {
        cdi_uninstall(request, &cdi).map_err(|r| nested(CDI_WEBHOOK, r))?;
    }
    Ok(())
}

/// virt-api's checks of a VM that depend on the cluster's feature gates.
fn vm_feature_gates(request: &ValidationRequest, vm: &Value) -> Result<(), Refusal> {
    let video = &vm["spec"]["template"]["spec"]["domain"]["devices"]["video"];
    if video.is_null() {
        return Ok(());
    }
    let kubevirts = request
        .list("kubevirt.io", "kubevirts", None, 100)
        .map_err(passed_on)?;
    let gates = operators::install::components::active_cr(&kubevirts)
        .map(operators::install::components::kubevirt_feature_gates)
        .unwrap_or_default();
    if gates.iter().any(|g| g == "VideoConfig") {
        return Ok(());
    }
    Err(Refusal {
        code: 422,
        message: "Video configuration is specified but the VideoConfig feature gate is not enabled"
            .into(),
    })
}

/// SSP's template validator: the VM against its own rules or its template's.
fn template_rules(request: &ValidationRequest, vm: &Value) -> Result<Vec<String>, Refusal> {
    use api::template_validator as validator;
    let template = match validator::template_needed(vm) {
        Some((namespace, name)) => request
            .get("template.openshift.io", "templates", &namespace, &name)
            .map_err(passed_on)?,
        None => None,
    };
    let verdict = validator::review_vm(vm, template.as_ref());
    match (verdict.message(), verdict.code()) {
        (Some(message), Some(code)) => Err(Refusal { code, message }),
        _ => Ok(verdict.warnings),
    }
}

fn template_delete(request: &ValidationRequest, template: &Value) -> Result<(), Refusal> {
    let vms = request
        .list("kubevirt.io", "virtualmachines", None, 10_000)
        .map_err(passed_on)?;
    match api::template_validator::review_template_deletion(template, &vms) {
        Some(status) => Err(Refusal::denied(
            status["message"].as_str().unwrap_or_default(),
        )),
        None => Ok(()),
    }
}

type Check = fn(&ValidationRequest, &Value) -> Result<Vec<String>, Refusal>;

fn validation(
    name: &str,
    group: &str,
    plural: &str,
    operations: &[Operation],
    check: Check,
) -> Validation {
    Validation {
        name: name.to_owned(),
        group: group.to_owned(),
        plural: plural.to_owned(),
        operations: operations.to_vec(),
        check: Box::new(move |request| {
            let subject = request
                .object
                .or(request.old)
                .cloned()
                .unwrap_or(Value::Null);
            check(request, &subject)
        }),
    }
}

fn no_warnings(result: Result<(), Refusal>) -> Result<Vec<String>, Refusal> {
    result.map(|()| Vec::new())
}

/// Registers every in-process webhook with `server`.
pub fn register(server: &ApiServer) {
    use Operation::{Create, Delete, Update};
    let all = [
        validation(
            KUBEVIRT_WEBHOOK,
            "kubevirt.io",
            "kubevirts",
            &[Delete],
            |r, kv| no_warnings(kubevirt_uninstall(r, kv)),
        ),
        validation(
            CDI_WEBHOOK,
            "cdi.kubevirt.io",
            "cdis",
            &[Delete],
            |r, cdi| no_warnings(cdi_uninstall(r, cdi)),
        ),
        validation(
            HCO_WEBHOOK,
            "hco.kubevirt.io",
            "hyperconvergeds",
            &[Create],
            hyperconverged_create,
        ),
        validation(
            HCO_WEBHOOK,
            "hco.kubevirt.io",
            "hyperconvergeds",
            &[Update],
            hyperconverged_update,
        ),
        validation(
            HCO_WEBHOOK,
            "hco.kubevirt.io",
            "hyperconvergeds",
            &[Delete],
            |r, hc| no_warnings(hyperconverged_delete(r, hc)),
        ),
        validation(
            VM_WEBHOOK,
            "kubevirt.io",
            "virtualmachines",
            &[Create, Update],
            |r, vm| no_warnings(vm_feature_gates(r, vm)),
        ),
        validation(
            api::template_validator::VM_WEBHOOK,
            "kubevirt.io",
            "virtualmachines",
            &[Create, Update],
            template_rules,
        ),
        validation(
            api::template_validator::TEMPLATE_WEBHOOK,
            "template.openshift.io",
            "templates",
            &[Delete],
            |r, t| no_warnings(template_delete(r, t)),
        ),
    ];
    for webhook in all {
        server.register_validation(webhook);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_deployed_operator_with_the_blocking_strategy_blocks() {
        let operator = |strategy: &str, phase: &str| json!({"spec": {"uninstallStrategy": strategy}, "status": {"phase": phase}});
        assert!(blocks_uninstall(&operator(BLOCK, "Deployed")));
        assert!(!blocks_uninstall(&operator("RemoveWorkloads", "Deployed")));
        assert!(!blocks_uninstall(&operator(BLOCK, "Deploying")));
    }
}
