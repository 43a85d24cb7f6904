//! The boot sources operand (ssp-operator's data-sources): the golden images namespace,
//! `spec.commonTemplates.dataImportCronTemplates` as DataImportCrons (in the golden images
//! namespace unless the template names another), and a DataSource for each boot source the
//! templates name. A DataSource with a DataImportCron is left to CDI's DataImportCron
//! controller (labelled `cdi.kubevirt.io/dataImportCron` so that CDI takes it); one without
//! points at the PVC of its name in the golden images namespace.

use std::collections::{BTreeMap, BTreeSet};

use api::ssp::{DataImportCronTemplate, SSP};
use serde_json::{Value, json};

use super::owner;
use super::plan::{
    Action, Change, Kind, is_being_deleted, is_subset, merge_string_map, name_of, string_map,
};

/// The operand's name (`app.kubernetes.io/name`).
pub const OPERAND: &str = "data-sources";
/// Where golden images are kept.
pub const GOLDEN_IMAGES_NAMESPACE: &str = "kubevirt-os-images";
/// The label by which a DataSource is kept up to date by a DataImportCron.
pub use crate::cdi::dataimportcron::CRON_LABEL;
/// The annotation listing a cron template's architectures; not carried to the cron.
pub const ARCHITECTURES_ANNOTATION: &str = "ssp.kubevirt.io/dict.architectures";

/// A dataImportCronTemplate that cannot become a DataImportCron (in the webhook's words).
pub type Invalid = api::ssp::SspError;

/// What the boot sources plan looks at.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// The golden images namespace, if it exists.
    pub namespace: Option<Value>,
    /// Every DataImportCron (the SSP's are told by their owner annotations).
    pub crons: Vec<Value>,
    /// The DataSources in the golden images namespace.
    pub data_sources: Vec<Value>,
    /// The names of the PVCs in the golden images namespace.
    pub claims: BTreeSet<String>,
}

/// The DataImportCrons `ssp` asks for, as JSON objects.
pub fn desired_crons(ssp: &SSP) -> Result<Vec<Value>, Invalid> {
    let templates = ssp
        .spec
        .common_templates
        .as_ref()
        .and_then(|c| c.data_import_cron_templates.as_deref())
        .unwrap_or_default();
    api::ssp::validate_spec(&ssp.spec)?;
    Ok(templates
        .iter()
        .map(|template| desired_cron(ssp, template))
        .collect())
}

/// The cron of a validated template (named, with a managed DataSource).
fn desired_cron(ssp: &SSP, template: &DataImportCronTemplate) -> Value {
    let meta = &template.metadata;
    let name = meta.name.as_deref().unwrap_or_default();
    let namespace = meta
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(GOLDEN_IMAGES_NAMESPACE);
    let mut annotations = meta.annotations.clone().unwrap_or_default();
    annotations.remove(ARCHITECTURES_ANNOTATION);
    annotations.extend(owner::owner_annotations(ssp));
    let mut labels = meta.labels.clone().unwrap_or_default();
    labels.extend(owner::app_labels(ssp, OPERAND));
    json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataImportCron",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": template.spec,
    })
}

/// The changes that bring the golden images namespace, the crons and the DataSources of
/// `ssp` to what it asks for; `data_sources` are the boot sources the templates name.
pub fn plan(
    ssp: &SSP,
    data_sources: &BTreeSet<String>,
    observed: &Observed,
) -> Result<Vec<Action>, Invalid> {
    let crons = desired_crons(ssp)?;
    let mut actions = namespace_plan(ssp, observed.namespace.as_ref());
    actions.extend(data_source_plan(ssp, data_sources, &crons, observed));
    actions.extend(cron_plan(ssp, &crons, &observed.crons));
    Ok(actions)
}

fn namespace_plan(ssp: &SSP, found: Option<&Value>) -> Vec<Action> {
    let mut desired = json!({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": GOLDEN_IMAGES_NAMESPACE}});
    merge_string_map(&mut desired, "labels", &owner::app_labels(ssp, OPERAND));
    merge_string_map(&mut desired, "annotations", &owner::owner_annotations(ssp));
    let Some(found) = found else {
        return vec![Action::on(
            Kind::Namespace,
            &desired,
            Change::Create(desired.clone()),
        )];
    };
    if is_being_deleted(found) {
        return Vec::new();
    }
    let mut next = found.clone();
    merge_string_map(&mut next, "labels", &string_map(&desired, "labels"));
    merge_string_map(
        &mut next,
        "annotations",
        &string_map(&desired, "annotations"),
    );
    if &next == found {
        return Vec::new();
    }
    vec![Action::on(
        Kind::Namespace,
        &next,
        Change::Replace(next.clone()),
    )]
}

fn cron_plan(ssp: &SSP, desired: &[Value], observed: &[Value]) -> Vec<Action> {
    let key = |o: &Value| {
        (
            o["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            name_of(o).to_owned(),
        )
    };
    let found: BTreeMap<_, &Value> = observed.iter().map(|c| (key(c), c)).collect();
    let mut actions = Vec::new();
    for cron in desired {
        match found.get(&key(cron)) {
            None => actions.push(Action::on(
                Kind::DataImportCron,
                cron,
                Change::Create(cron.clone()),
            )),
            Some(found) if is_being_deleted(found) => {}
            // The spec is immutable to SSP: a changed one is deleted and made anew.
            Some(found) if !is_subset(&cron["spec"], &found["spec"]) => {
                actions.push(Action::on(Kind::DataImportCron, found, Change::Delete));
            }
            Some(found) => {
                let mut next = (*found).clone();
                merge_string_map(&mut next, "labels", &string_map(cron, "labels"));
                merge_string_map(&mut next, "annotations", &string_map(cron, "annotations"));
                if &next != *found {
                    actions.push(Action::on(
                        Kind::DataImportCron,
                        &next,
                        Change::Replace(next.clone()),
                    ));
                }
            }
        }
    }
    let wanted: BTreeSet<_> = desired.iter().map(key).collect();
    let owner_key = owner::owner_key(ssp);
    actions.extend(
        observed
            .iter()
            .filter(|c| owner::is_owned_by(c, &owner_key) && !is_being_deleted(c))
            .filter(|c| !wanted.contains(&key(c)))
            .map(|c| Action::on(Kind::DataImportCron, c, Change::Delete)),
    );
    actions
}

/// The cron keeping each DataSource of the golden images namespace, by the DataSource's name.
fn crons_by_data_source(crons: &[Value]) -> BTreeMap<String, String> {
    crons
        .iter()
        .filter(|c| c["metadata"]["namespace"] == GOLDEN_IMAGES_NAMESPACE)
        .filter_map(|c| {
            let source = c["spec"]["managedDataSource"].as_str()?;
            Some((source.to_owned(), name_of(c).to_owned()))
        })
        .collect()
}

fn data_source_plan(
    ssp: &SSP,
    names: &BTreeSet<String>,
    crons: &[Value],
    observed: &Observed,
) -> Vec<Action> {
    let by_cron = crons_by_data_source(crons);
    let found: BTreeMap<&str, &Value> = observed
        .data_sources
        .iter()
        .map(|d| (name_of(d), d))
        .collect();
    let mut actions = Vec::new();
    for name in names {
        let found = found.get(name.as_str()).copied();
        // A DataSource is kept by its cron unless it already points at a golden image PVC
        // made by hand (before the cron existed).
        let cron = by_cron.get(name).filter(|_| match found {
            Some(ds) => {
                string_map(ds, "labels").contains_key(CRON_LABEL) || !observed.claims.contains(name)
            }
            None => !observed.claims.contains(name),
        });
        if let Some(action) = data_source_action(ssp, name, cron.map(String::as_str), found) {
            actions.push(action);
        }
    }
    let owner_key = owner::owner_key(ssp);
    actions.extend(
        observed
            .data_sources
            .iter()
            .filter(|d| owner::is_owned_by(d, &owner_key) && !is_being_deleted(d))
            .filter(|d| !names.contains(name_of(d)))
            .map(|d| Action::on(Kind::DataSource, d, Change::Delete)),
    );
    actions
}

fn data_source_action(
    ssp: &SSP,
    name: &str,
    cron: Option<&str>,
    found: Option<&Value>,
) -> Option<Action> {
    let mut desired = json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataSource",
        "metadata": {"name": name, "namespace": GOLDEN_IMAGES_NAMESPACE},
        "spec": {"source": {"pvc": {"name": name, "namespace": GOLDEN_IMAGES_NAMESPACE}}},
    });
    merge_string_map(&mut desired, "annotations", &owner::owner_annotations(ssp));
    let Some(found) = found else {
        let labels = match cron {
            Some(cron) => BTreeMap::from([(CRON_LABEL.to_owned(), cron.to_owned())]),
            None => owner::app_labels(ssp, OPERAND),
        };
        merge_string_map(&mut desired, "labels", &labels);
        return Some(Action::on(
            Kind::DataSource,
            &desired,
            Change::Create(desired.clone()),
        ));
    };
    if is_being_deleted(found) {
        return None;
    }
    let mut next = found.clone();
    merge_string_map(
        &mut next,
        "annotations",
        &string_map(&desired, "annotations"),
    );
    let mut labels = string_map(found, "labels");
    match cron {
        // The cron's controller owns the spec; the label is put back if it was taken off.
        Some(cron) => {
            labels.insert(CRON_LABEL.to_owned(), cron.to_owned());
        }
        None => {
            labels.extend(owner::app_labels(ssp, OPERAND));
            labels.remove(CRON_LABEL);
            next["spec"] = desired["spec"].clone();
        }
    }
    super::plan::set_string_map(&mut next, "labels", &labels);
    (&next != found).then(|| Action::on(Kind::DataSource, &next, Change::Replace(next.clone())))
}

/// What deleting `ssp` removes: its crons first; once they are gone, its DataSources and the
/// golden images namespace (when it made it). The flag says whether crons are still there.
pub fn cleanup(ssp: &SSP, observed: &Observed) -> (Vec<Action>, bool) {
    let owner_key = owner::owner_key(ssp);
    let crons: Vec<&Value> = observed
        .crons
        .iter()
        .filter(|c| owner::is_owned_by(c, &owner_key))
        .collect();
    if !crons.is_empty() {
        let actions = crons
            .into_iter()
            .filter(|c| !is_being_deleted(c))
            .map(|c| Action::on(Kind::DataImportCron, c, Change::Delete))
            .collect();
        return (actions, true);
    }
    let mut actions: Vec<Action> = observed
        .data_sources
        .iter()
        .filter(|d| owner::is_owned_by(d, &owner_key) && !is_being_deleted(d))
        .map(|d| Action::on(Kind::DataSource, d, Change::Delete))
        .collect();
    if let Some(namespace) = &observed.namespace {
        if owner::is_owned_by(namespace, &owner_key) && !is_being_deleted(namespace) {
            actions.push(Action::on(Kind::Namespace, namespace, Change::Delete));
        }
    }
    (actions, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssp(crons: Value) -> SSP {
        serde_json::from_value(json!({
            "apiVersion": "ssp.kubevirt.io/v1beta2", "kind": "SSP",
            "metadata": {"name": "ssp", "namespace": "kubevirt"},
            "spec": {"commonTemplates": {"namespace": "openshift", "dataImportCronTemplates": crons}},
        }))
        .unwrap()
    }

    fn fedora_cron() -> Value {
        json!([{
            "metadata": {"name": "fedora-image-cron", "annotations": {ARCHITECTURES_ANNOTATION: "amd64"}},
            "spec": {
                "schedule": "0 */12 * * *",
                "managedDataSource": "fedora",
                "template": {"spec": {"source": {"registry": {"url": "docker://quay.io/containerdisks/fedora:latest"}},
                                      "storage": {"resources": {"requests": {"storage": "30Gi"}}}}},
            },
        }])
    }

    fn summary(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .map(|a| {
                let change = match a.change {
                    Change::Create(_) => "create",
                    Change::Replace(_) => "replace",
                    Change::Delete => "delete",
                };
                format!("{change} {}", a.describe())
            })
            .collect()
    }

    fn created(actions: &[Action]) -> Vec<Value> {
        actions
            .iter()
            .filter_map(|a| match &a.change {
                Change::Create(o) => Some(o.clone()),
                _ => None,
            })
            .collect()
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn crons_go_to_the_golden_namespace_with_labels_and_owner() {
        let crons = desired_crons(&ssp(fedora_cron())).unwrap();
        let cron = &crons[0];
        assert_eq!(cron["metadata"]["namespace"], GOLDEN_IMAGES_NAMESPACE);
        assert_eq!(
            cron["metadata"]["labels"]["app.kubernetes.io/name"],
            "data-sources"
        );
        assert!(
            cron["metadata"]["annotations"]
                .get(ARCHITECTURES_ANNOTATION)
                .is_none()
        );
        assert_eq!(
            cron["metadata"]["annotations"][owner::PRIMARY_RESOURCE],
            "kubevirt/ssp"
        );
        assert_eq!(cron["spec"]["managedDataSource"], "fedora");
        let unnamed = ssp(json!([{"spec": fedora_cron()[0]["spec"]}]));
        assert_eq!(
            desired_crons(&unnamed).unwrap_err().to_string(),
            "dataImportCronTemplates validation error: missing name in DataImportCronTemplate"
        );
    }

    #[test]
    fn a_fresh_install_makes_the_namespace_the_sources_and_the_crons() {
        let actions = plan(
            &ssp(fedora_cron()),
            &names(&["fedora", "rhel9"]),
            &Observed::default(),
        )
        .unwrap();
        assert_eq!(
            summary(&actions),
            [
                "create Namespace /kubevirt-os-images",
                "create DataSource kubevirt-os-images/fedora",
                "create DataSource kubevirt-os-images/rhel9",
                "create DataImportCron kubevirt-os-images/fedora-image-cron",
            ]
        );
        let objects = created(&actions);
        // The cron's DataSource is CDI's to point; the other one points at its PVC.
        assert_eq!(
            objects[1]["metadata"]["labels"],
            json!({CRON_LABEL: "fedora-image-cron"})
        );
        assert_eq!(
            objects[2]["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "ssp-operator"
        );
        assert_eq!(objects[2]["spec"]["source"]["pvc"]["name"], "rhel9");
        // Observed as created (plus what CDI and the server add), nothing is left to do.
        let mut ds = objects[1].clone();
        ds["spec"]["source"]["pvc"]["name"] = json!("fedora-0123456789ab");
        let observed = Observed {
            namespace: Some(objects[0].clone()),
            crons: vec![objects[3].clone()],
            data_sources: vec![ds, objects[2].clone()],
            claims: BTreeSet::new(),
        };
        assert_eq!(
            summary(&plan(&ssp(fedora_cron()), &names(&["fedora", "rhel9"]), &observed).unwrap()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn changed_crons_are_recreated_and_dropped_ones_deleted() {
        let first =
            created(&plan(&ssp(fedora_cron()), &BTreeSet::new(), &Observed::default()).unwrap());
        let mut changed = fedora_cron();
        changed[0]["spec"]["schedule"] = json!("0 0 * * *");
        let observed = Observed {
            namespace: Some(first[0].clone()),
            crons: vec![first[1].clone()],
            ..Default::default()
        };
        let actions = plan(&ssp(changed), &BTreeSet::new(), &observed).unwrap();
        assert_eq!(
            summary(&actions),
            ["delete DataImportCron kubevirt-os-images/fedora-image-cron"]
        );
        let actions = plan(&ssp(json!([])), &BTreeSet::new(), &observed).unwrap();
        assert_eq!(
            summary(&actions),
            ["delete DataImportCron kubevirt-os-images/fedora-image-cron"]
        );
    }

    #[test]
    fn a_source_with_a_hand_made_golden_image_is_not_given_to_the_cron() {
        let observed = Observed {
            claims: names(&["fedora"]),
            ..Default::default()
        };
        let objects = created(&plan(&ssp(fedora_cron()), &names(&["fedora"]), &observed).unwrap());
        assert!(objects[1]["metadata"]["labels"].get(CRON_LABEL).is_none());
        // A cron label taken off by hand is put back.
        let mut unlabelled = created(
            &plan(
                &ssp(fedora_cron()),
                &names(&["fedora"]),
                &Observed::default(),
            )
            .unwrap(),
        )[1]
        .clone();
        unlabelled["metadata"]["labels"] = json!({});
        let observed = Observed {
            data_sources: vec![unlabelled],
            ..Default::default()
        };
        let actions = plan(&ssp(fedora_cron()), &names(&["fedora"]), &observed).unwrap();
        let Change::Replace(fixed) = &actions[1].change else {
            panic!("{actions:?}")
        };
        assert_eq!(fixed["metadata"]["labels"][CRON_LABEL], "fedora-image-cron");
    }

    #[test]
    fn deletion_removes_the_crons_first_then_the_rest() {
        let objects = created(
            &plan(
                &ssp(fedora_cron()),
                &names(&["rhel9"]),
                &Observed::default(),
            )
            .unwrap(),
        );
        let observed = Observed {
            namespace: Some(objects[0].clone()),
            data_sources: vec![objects[1].clone()],
            crons: vec![objects[2].clone()],
            ..Default::default()
        };
        let (actions, pending) = cleanup(&ssp(fedora_cron()), &observed);
        assert!(pending);
        assert_eq!(
            summary(&actions),
            ["delete DataImportCron kubevirt-os-images/fedora-image-cron"]
        );
        let observed = Observed {
            crons: vec![],
            ..observed
        };
        let (actions, pending) = cleanup(&ssp(fedora_cron()), &observed);
        assert!(!pending);
        assert_eq!(
            summary(&actions),
            [
                "delete DataSource kubevirt-os-images/rhel9",
                "delete Namespace /kubevirt-os-images"
            ]
        );
    }
}
