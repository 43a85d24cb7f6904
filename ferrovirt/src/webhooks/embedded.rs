//! The webhooks registered in-process with the embedded API server of `ferrovirt up`: the
//! defaulting and validation of the platform's kinds, and the validating webhooks that read
//! other objects: virt-operator's and cdi-operator's uninstall
//! guards, virt-operator's review of KubeVirt CR updates and HCO's webhook (the checks of [`install_guards`], which `ferrovirt
//! hco-webhook` serves on a cluster), virt-api's feature-gate checks of VMs, SSP's
//! template validator, and Tekton's defaults and refusals of its kinds.

use admission::install_guards::{
    self, CDI_WEBHOOK, HCO_WEBHOOK, KUBEVIRT_UPDATE_WEBHOOK, KUBEVIRT_WEBHOOK,
};
use futures_util::FutureExt;
use serde_json::Value;
use standalone::apiserver::{
    AdmissionPlugin, AdmissionRequest, ApiServer, Converter, Operation, Refusal, Resources, Wording,
};

use crate::webhooks::hco_operands::HcoOperator;

const VM_WEBHOOK: &str = "virtualmachine-validator.kubevirt.io";
const VMI_WEBHOOK: &str = "virtualmachineinstances-create-validator.kubevirt.io";
/// The warnings for HostPathProvisioner fields kept without effect.
const HPP_FIELDS: &str = "hostpathprovisioner-fields.ferrovirt.io";
/// The defaulting and validation of the platform's kinds, in one plugin: virt-api's and
/// CDI's mutating and validating webhooks of their objects' own fields.
const DEFAULTING: &str = "defaulting-and-validation.ferrovirt.io";

/// Runs a check of [`install_guards`] here, where the cluster is the embedded server's
/// store: its future never waits, so one poll ends it.
fn in_process<T>(
    check: impl std::future::Future<Output = Result<T, Refusal>>,
) -> Result<T, Refusal> {
    check
        .now_or_never()
        .unwrap_or_else(|| Err(Refusal::new(500, "an in-process admission check waited")))
}

/// virt-api's checks of a VM or VMI that depend on the active KubeVirt CR's feature gates
/// (none without a KubeVirt CR).
fn feature_gates(request: &AdmissionRequest, object: &Value) -> Result<(), Refusal> {
    let kubevirts = request
        .list("kubevirt.io", "kubevirts", None, 100)
        .map_err(Refusal::from)?;
    let gates = operators::install::components::active_cr(&kubevirts)
        .map(api::kubevirt::cluster_config::feature_gates)
        .unwrap_or_default();
    match api::kubevirt::gated_features::refusal(object, &gates) {
        Some(message) => Err(Refusal::new(422, message)),
        None => Ok(()),
    }
}

/// SSP's template validator: the VM against its own rules or its template's.
fn template_rules(request: &AdmissionRequest, vm: &Value) -> Result<Vec<String>, Refusal> {
    use admission::ssp::template_validator as validator;
    let template = match validator::template_needed(vm) {
        Some((namespace, name)) => request
            .get("template.openshift.io", "templates", &namespace, &name)
            .map_err(Refusal::from)?,
        None => None,
    };
    let verdict = validator::review_vm(vm, template.as_ref());
    match (verdict.message(), verdict.code()) {
        (Some(message), Some(code)) => Err(Refusal::new(code, message)),
        _ => Ok(verdict.warnings),
    }
}

fn template_delete(request: &AdmissionRequest, template: &Value) -> Result<(), Refusal> {
    let vms = request
        .list("kubevirt.io", "virtualmachines", None, 10_000)
        .map_err(Refusal::from)?;
    match admission::ssp::template_validator::review_template_deletion(template, &vms) {
        Some(status) => Err(Refusal::denied(
            status["message"].as_str().unwrap_or_default(),
        )),
        None => Ok(()),
    }
}

type Check = fn(&AdmissionRequest, &Value) -> Result<Vec<String>, Refusal>;

fn validation(
    name: &str,
    group: &str,
    plural: &str,
    operations: &[Operation],
    check: Check,
) -> AdmissionPlugin {
    let validate = Box::new(move |request: &AdmissionRequest| {
        let subject = request.object.or(request.old).unwrap_or(&Value::Null);
        check(request, subject)
    });
    AdmissionPlugin::validating(name, (group, plural), operations, validate)
}

/// virt-api's and CDI's defaulting and validation of the platform's kinds
/// (`api::admission`), on the cluster configured by the active KubeVirt CR (`cluster`).
pub fn defaulting_and_validation(
    cluster: api::kubevirt::cluster_config::SharedClusterConfig,
) -> AdmissionPlugin {
    let mutate = Box::new(move |_: &AdmissionRequest, object: &mut Value| {
        let admitted = admission::admit_in(object, &cluster.get());
        admitted
            .map(|()| Vec::new())
            .map_err(|err| Refusal::new(422, err.to_string()))
    });
    AdmissionPlugin::mutating(DEFAULTING, Resources::All, Wording::InvalidObject, mutate)
}

/// virt-api's VMI mutator, its preset part (`admission::kubevirt::preset`): a VMI created
/// gets the presets of its namespace that select it, before its defaults. Registered ahead
/// of [`defaulting_and_validation`], as upstream applies presets before defaulting.
pub fn vmi_presets() -> AdmissionPlugin {
    let mutate = Box::new(|request: &AdmissionRequest, vmi: &mut Value| {
        if request.operation != Operation::Create {
            return Ok(Vec::new());
        }
        let presets = request
            .list(
                "kubevirt.io",
                "virtualmachineinstancepresets",
                Some(request.namespace),
                10_000,
            )
            .map_err(Refusal::from)?;
        admission::kubevirt::preset::apply_presets(vmi, &presets)
    });
    let vmis = Resources::One {
        group: "kubevirt.io".to_owned(),
        plural: "virtualmachineinstances".to_owned(),
    };
    AdmissionPlugin::mutating(
        admission::kubevirt::preset::VMI_MUTATOR_WEBHOOK,
        vmis,
        Wording::Webhook,
        mutate,
    )
}

/// [`admission::hostpath::validate::unacted_fields`] of an HPP (none of one that does not
/// parse, which the defaulting and validation plugin has refused already).
fn hpp_unacted_fields(hpp: &Value) -> Vec<String> {
    serde_json::from_value(hpp.clone())
        .map(|hpp| admission::hostpath::validate::unacted_fields(&hpp))
        .unwrap_or_default()
}

/// virt-api's validation of VMs, VMIs and presets that reads beyond the object.
fn virt_api_plugins() -> Vec<AdmissionPlugin> {
    use Operation::{Create, Update};
    vec![
        validation(
            VM_WEBHOOK,
            "kubevirt.io",
            "virtualmachines",
            &[Create, Update],
            |r, vm| {
                feature_gates(r, vm)?;
                no_warnings(in_process(admission::instancetype::validate_vm(r, vm)))
            },
        ),
        validation(
            VMI_WEBHOOK,
            "kubevirt.io",
            "virtualmachineinstances",
            &[Create],
            |r, vmi| no_warnings(feature_gates(r, vmi)),
        ),
        validation(
            admission::kubevirt::preset::PRESET_VALIDATOR_WEBHOOK,
            "kubevirt.io",
            "virtualmachineinstancepresets",
            &[Create, Update],
            |_, preset| no_warnings(admission::kubevirt::preset::validate_preset(preset)),
        ),
    ]
}

/// virt-api's admission of instancetypes: the VM mutator's part and the four kinds' checks.
fn instancetype_plugins() -> Vec<AdmissionPlugin> {
    use Operation::{Create, Update};
    let mut plugins = vec![instancetype_mutator()];
    for plural in [
        "virtualmachineinstancetypes",
        "virtualmachineclusterinstancetypes",
    ] {
        plugins.push(validation(
            &admission::instancetype::kinds::webhook_name(plural),
            api::instancetype::GROUP,
            plural,
            &[Create, Update],
            |_, it| admission::instancetype::kinds::validate_instancetype(it),
        ));
    }
    for plural in [
        "virtualmachinepreferences",
        "virtualmachineclusterpreferences",
    ] {
        plugins.push(validation(
            &admission::instancetype::kinds::webhook_name(plural),
            api::instancetype::GROUP,
            plural,
            &[Create, Update],
            |_, pref| admission::instancetype::kinds::validate_preference(pref),
        ));
    }
    plugins
}

/// Tekton's webhook: its defaults on the four kinds, and its refusals of runs.
fn tekton_plugins() -> Vec<AdmissionPlugin> {
    use Operation::{Create, Update};
    let mut plugins = Vec::new();
    for plural in admission::tekton::PLURALS {
        let mutate = Box::new(|_: &AdmissionRequest, object: &mut Value| {
            admission::tekton::defaults::set_defaults(object);
            Ok(Vec::new())
        });
        let resources = Resources::One {
            group: api::tekton::GROUP.into(),
            plural: (*plural).into(),
        };
        plugins.push(AdmissionPlugin::mutating(
            admission::tekton::DEFAULTING_WEBHOOK,
            resources,
            Wording::Webhook,
            mutate,
        ));
    }
    for plural in ["taskruns", "pipelineruns"] {
        plugins.push(validation(
            admission::tekton::VALIDATION_WEBHOOK,
            api::tekton::GROUP,
            plural,
            &[Create, Update],
            |_, run| {
                admission::tekton::validate::validate(run)
                    .map(|()| Vec::new())
                    .map_err(|failed| Refusal::new(400, failed.to_string()))
            },
        ));
    }
    plugins
}

/// virt-api's VM mutator, for instancetypes: matchers checked, inferred and defaulted.
fn instancetype_mutator() -> AdmissionPlugin {
    let mutate = Box::new(|request: &AdmissionRequest, vm: &mut Value| {
        in_process(admission::instancetype::mutate_vm(request, vm, request.old))
            .map(|()| Vec::new())
    });
    let resources = Resources::One {
        group: "kubevirt.io".into(),
        plural: "virtualmachines".into(),
    };
    AdmissionPlugin::mutating(
        admission::instancetype::VM_MUTATOR,
        resources,
        Wording::Webhook,
        mutate,
    )
}

fn no_warnings(result: Result<(), Refusal>) -> Result<Vec<String>, Refusal> {
    result.map(|()| Vec::new())
}

/// Registers every in-process webhook with `server`: the validating ones, HCO's conversion
/// of the HyperConverged between v1beta1 and v1, and Tekton's of its four kinds.
pub fn register(server: &ApiServer) {
    server.register_converter(Converter::new(
        api::hco::GROUP,
        api::hco::conversion::KIND,
        api::hco::conversion::webhook,
    ));
    for kind in api::tekton::conversion::KINDS {
        server.register_converter(Converter::new(
            api::tekton::GROUP,
            *kind,
            api::tekton::conversion::webhook,
        ));
    }
    use Operation::{Create, Delete, Update};
    let all = [
        validation(
            KUBEVIRT_WEBHOOK,
            "kubevirt.io",
            "kubevirts",
            &[Delete],
            |r, kv| no_warnings(in_process(install_guards::kubevirt_uninstall(r, kv))),
        ),
        validation(
            KUBEVIRT_UPDATE_WEBHOOK,
            "kubevirt.io",
            "kubevirts",
            &[Update],
            |r, kv| {
                in_process(install_guards::kubevirt_update(
                    r,
                    kv,
                    r.old.unwrap_or(&Value::Null),
                ))
            },
        ),
        validation(
            CDI_WEBHOOK,
            "cdi.kubevirt.io",
            "cdis",
            &[Delete],
            |r, cdi| no_warnings(in_process(install_guards::cdi_uninstall(r, cdi))),
        ),
        validation(
            HCO_WEBHOOK,
            "hco.kubevirt.io",
            "hyperconvergeds",
            &[Create],
            |r, hc| install_guards::hyperconverged_create(r.namespace, hc),
        ),
        validation(
            HCO_WEBHOOK,
            "hco.kubevirt.io",
            "hyperconvergeds",
            &[Update],
            |r, hc| match r.old {
                Some(old) => in_process(install_guards::hyperconverged_update(
                    r,
                    &HcoOperator,
                    r.namespace,
                    hc,
                    old,
                )),
                None => Ok(Vec::new()),
            },
        ),
        validation(
            HCO_WEBHOOK,
            "hco.kubevirt.io",
            "hyperconvergeds",
            &[Delete],
            |r, hc| {
                no_warnings(in_process(install_guards::hyperconverged_delete(
                    r,
                    &HcoOperator,
                    r.namespace,
                    hc,
                )))
            },
        ),
        validation(
            HPP_FIELDS,
            api::hostpath::GROUP,
            "hostpathprovisioners",
            &[Create, Update],
            |_, hpp| Ok(hpp_unacted_fields(hpp)),
        ),
        validation(
            admission::ssp::template_validator::VM_WEBHOOK,
            "kubevirt.io",
            "virtualmachines",
            &[Create, Update],
            template_rules,
        ),
        validation(
            admission::ssp::template_validator::TEMPLATE_WEBHOOK,
            "template.openshift.io",
            "templates",
            &[Delete],
            |r, t| no_warnings(template_delete(r, t)),
        ),
    ];
    for webhook in all
        .into_iter()
        .chain(virt_api_plugins())
        .chain(instancetype_plugins())
        .chain(tekton_plugins())
    {
        server.register_admission(webhook);
    }
}
