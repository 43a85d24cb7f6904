//! The resource types the server serves: the built-in core kinds, and every kind a stored
//! CustomResourceDefinition declares (registered when the CRD is written, dropped when it is
//! deleted).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::converter::{Converter, Strategy};
use super::crd_schema::CrdSchemas;

/// A printed column of `kubectl get`: a header and a simple JSONPath into the object.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    /// The OpenAPI type of the cells; `date` prints an age, [`SERVICE_REFERENCE`] a
    /// service reference.
    pub kind: String,
    pub json_path: String,
    pub priority: i64,
}

/// The storage key of every Event, whichever API it comes through: `events.k8s.io` Events
/// are a view of the core ones.
pub const EVENTS_KEY: &str = "/events";

/// One resource (a plural name in a group), served at one or more versions.
#[derive(Clone, Debug)]
pub struct ResourceType {
    pub group: String,
    pub versions: Vec<String>,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    /// The status subresource: status is written only through `/status`.
    pub status_subresource: bool,
    /// The scale subresource, where a CRD declares one.
    pub scale: Option<super::scale::ScalePaths>,
    pub columns: Vec<Column>,
    /// Served by a handler rather than stored (UploadTokenRequest, access reviews).
    pub create_only: bool,
    /// A custom resource's schemas, checked on every write (none for built-in kinds).
    pub schemas: Option<Arc<CrdSchemas>>,
    /// The version objects are stored at (a CRD's storage version; the only version of a
    /// built-in kind).
    pub storage_version: String,
    /// How objects move between the served versions.
    pub conversion: Strategy,
    /// The served versions a CRD marks deprecated, each with the warning every request to
    /// it is answered with.
    pub deprecations: BTreeMap<String, String>,
}

impl ResourceType {
    /// The key objects of this resource are stored under, the same for every version (and
    /// for `events.k8s.io` Events, the core Events' key: they are a view of those).
    pub fn storage_key(&self) -> String {
        if self.is_events_view() {
            return EVENTS_KEY.to_string();
        }
        format!("{}/{}", self.group, self.plural)
    }

    /// Whether this is the `events.k8s.io` view of the core Events ([`super::event_view`]).
    pub fn is_events_view(&self) -> bool {
        self.group == "events.k8s.io" && self.plural == "events"
    }

    /// "datavolumes.cdi.kubevirt.io", or "pods" for the core group, as in error messages.
    pub fn qualified_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    pub fn verbs(&self) -> Vec<&'static str> {
        if self.create_only {
            vec!["create"]
        } else {
            vec![
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ]
        }
    }
}

/// The set of served resources. Readers take a snapshot; writes happen when CRDs change.
#[derive(Default)]
pub struct Registry {
    types: RwLock<BTreeMap<(String, String), ResourceType>>,
    /// The in-process conversion webhooks, given to the kinds whose CRDs ask for one.
    converters: RwLock<Vec<Converter>>,
}

impl Registry {
    pub fn with_builtins() -> Self {
        let registry = Registry::default();
        for resource in builtin_types() {
            registry.insert(resource);
        }
        registry
    }

    pub fn insert(&self, mut resource: ResourceType) {
        if let Strategy::Webhook(converter) = &mut resource.conversion {
            let converters = self.converters.read().unwrap_or_else(|e| e.into_inner());
            *converter = converters
                .iter()
                .find(|c| c.group == resource.group && c.kind == resource.kind)
                .cloned();
        }
        let key = (resource.group.clone(), resource.plural.clone());
        self.types
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, resource);
    }

    /// Converts `converter`'s kind from now on, as a conversion webhook a CRD names does
    /// once it answers.
    pub fn register_converter(&self, converter: Converter) {
        let mut types = self.types.write().unwrap_or_else(|e| e.into_inner());
        for resource in types.values_mut() {
            if let Strategy::Webhook(slot) = &mut resource.conversion {
                if resource.group == converter.group && resource.kind == converter.kind {
                    *slot = Some(converter.clone());
                }
            }
        }
        let mut converters = self.converters.write().unwrap_or_else(|e| e.into_inner());
        converters.retain(|c| !(c.group == converter.group && c.kind == converter.kind));
        converters.push(converter);
    }

    pub fn remove(&self, group: &str, plural: &str) {
        self.types
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(group.to_string(), plural.to_string()));
    }

    /// The resource `plural` served at `group/version`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<ResourceType> {
        let types = self.types.read().unwrap_or_else(|e| e.into_inner());
        types
            .get(&(group.to_string(), plural.to_string()))
            .filter(|r| r.versions.iter().any(|v| v == version))
            .cloned()
    }

    /// The resource `plural` of `group`, whatever versions it serves.
    pub fn find_plural(&self, group: &str, plural: &str) -> Option<ResourceType> {
        let types = self.types.read().unwrap_or_else(|e| e.into_inner());
        types.get(&(group.to_string(), plural.to_string())).cloned()
    }

    /// The resource of a kind, for owner references and apply bodies.
    pub fn find_kind(&self, api_version: &str, kind: &str) -> Option<ResourceType> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let types = self.types.read().unwrap_or_else(|e| e.into_inner());
        types
            .values()
            .find(|r| r.group == group && r.kind == kind && r.versions.iter().any(|v| v == version))
            .cloned()
    }

    pub fn all(&self) -> Vec<ResourceType> {
        let types = self.types.read().unwrap_or_else(|e| e.into_inner());
        types.values().cloned().collect()
    }
}

/// The resource a CustomResourceDefinition object declares, or `None` when it is malformed.
pub fn from_crd(crd: &Value) -> Option<ResourceType> {
    let spec = crd.get("spec")?;
    let names = spec.get("names")?;
    let served: Vec<&Value> = spec
        .get("versions")?
        .as_array()?
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
        .collect();
    let storage = served
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .or(served.first())?;
    let str_list = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let kind = names.get("kind")?.as_str()?.to_string();
    Some(ResourceType {
        group: spec.get("group")?.as_str()?.to_string(),
        versions: served
            .iter()
            .filter_map(|v| v.get("name").and_then(Value::as_str).map(String::from))
            .collect(),
        plural: names.get("plural")?.as_str()?.to_string(),
        singular: names
            .get("singular")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| kind.to_lowercase()),
        kind,
        short_names: str_list(names.get("shortNames")),
        categories: str_list(names.get("categories")),
        namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
        status_subresource: storage
            .get("subresources")
            .and_then(|s| s.get("status"))
            .is_some(),
        scale: storage
            .get("subresources")
            .and_then(|s| s.get("scale"))
            .and_then(super::scale::ScalePaths::of_crd),
        columns: crd_columns(storage),
        create_only: false,
        // A stored CRD's schemas compiled when it was written; `Objects` refuses one
        // that does not compile.
        schemas: CrdSchemas::compile(crd).ok().map(Arc::new),
        storage_version: storage.get("name")?.as_str()?.to_string(),
        conversion: Strategy::of_crd(crd),
        deprecations: crd_deprecations(spec, &served),
    })
}

/// Kubernetes version ordering: GA over beta over alpha, higher numbers first.
pub(super) fn version_priority(version: &str) -> (u8, u32, u32) {
    let rest = version.trim_start_matches('v');
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stability, minor) = if let Some(n) = tail.strip_prefix("beta") {
        (1, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (0, n.parse().unwrap_or(0))
    } else {
        (2, 0)
    };
    (stability, major, minor)
}

/// The deprecated ones among a CRD's `served` versions, with their warnings: the CRD's
/// `deprecationWarning`, or kube-apiserver's default, which names the newest served version
/// that is not deprecated ("g/v1alpha1 K is deprecated; use g/v1 K").
fn crd_deprecations(spec: &Value, served: &[&Value]) -> BTreeMap<String, String> {
    let name = |v: &Value| v.get("name").and_then(Value::as_str).map(str::to_owned);
    let is_deprecated = |v: &Value| v.get("deprecated").and_then(Value::as_bool) == Some(true);
    let group = spec.get("group").and_then(Value::as_str).unwrap_or("");
    let kind = spec
        .pointer("/names/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let newest_current = served
        .iter()
        .filter(|v| !is_deprecated(v))
        .filter_map(|v| name(v))
        .max_by_key(|v| version_priority(v));
    served
        .iter()
        .filter(|v| is_deprecated(v))
        .filter_map(|v| {
            let version = name(v)?;
            let warning = match v.get("deprecationWarning").and_then(Value::as_str) {
                Some(warning) => warning.to_owned(),
                None => {
                    let mut text = format!("{group}/{version} {kind} is deprecated");
                    if let Some(current) = &newest_current {
                        text.push_str(&format!("; use {group}/{current} {kind}"));
                    }
                    text
                }
            };
            Some((version, warning))
        })
        .collect()
}

fn crd_columns(version: &Value) -> Vec<Column> {
    let Some(columns) = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
    else {
        return vec![age()];
    };
    columns
        .iter()
        .filter_map(|c| {
            Some(Column {
                name: c.get("name")?.as_str()?.to_string(),
                kind: c.get("type")?.as_str()?.to_string(),
                json_path: c.get("jsonPath")?.as_str()?.to_string(),
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
            })
        })
        .collect()
}

/// The column kind of an APIService's `spec.service`: `namespace/name`, or `Local` when null.
pub const SERVICE_REFERENCE: &str = "serviceReference";
/// The column kind of a PV's `spec.claimRef`: `namespace/name`.
pub const CLAIM_REFERENCE: &str = "claimReference";
/// The column kind of access modes, abbreviated as kubectl prints them (`RWO,RWX`).
pub const ACCESS_MODES: &str = "accessModes";
/// The column kinds computed from a whole pod, as kubectl's pod printer computes them:
/// ready containers of all (`1/1`), the status a user reads (a waiting container's reason
/// such as `CrashLoopBackOff`, `Terminating`, else the phase), and restarts.
pub const POD_READY: &str = "podReady";
pub const POD_STATUS: &str = "podStatus";
pub const POD_RESTARTS: &str = "podRestarts";
/// The column kind of an object's controller, from its `ownerReferences`, as kubectl
/// prints a ControllerRevision's (`virtualmachine.kubevirt.io/vm1`, `<none>` without one).
pub const CONTROLLER_REFERENCE: &str = "controllerReference";

fn column(name: &str, json_path: &str) -> Column {
    Column {
        name: name.into(),
        kind: "string".into(),
        json_path: json_path.into(),
        priority: 0,
    }
}

/// A column printed by a kind of its own (see [`POD_STATUS`] and the others).
fn typed(name: &str, kind: &str, json_path: &str) -> Column {
    Column {
        kind: kind.into(),
        ..column(name, json_path)
    }
}

/// A column `kubectl get -o wide` adds.
fn wide(name: &str, json_path: &str) -> Column {
    Column {
        priority: 1,
        ..column(name, json_path)
    }
}

fn age() -> Column {
    Column {
        name: "Age".into(),
        kind: "date".into(),
        json_path: ".metadata.creationTimestamp".into(),
        priority: 0,
    }
}

struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short_names: &'static [&'static str],
    namespaced: bool,
    status: bool,
    columns: Vec<Column>,
}

impl Builtin {
    fn into_type(self) -> ResourceType {
        let mut columns = self.columns;
        // Age comes before the wide columns, as kubectl prints it, unless the kind places
        // it itself (a PriorityClass prints a column after it).
        if !columns.contains(&age()) {
            let wide_from = columns
                .iter()
                .position(|c| c.priority > 0)
                .unwrap_or(columns.len());
            columns.insert(wide_from, age());
        }
        ResourceType {
            group: self.group.into(),
            versions: vec![self.version.into()],
            kind: self.kind.into(),
            plural: self.plural.into(),
            singular: self.kind.to_lowercase(),
            short_names: self.short_names.iter().map(|s| s.to_string()).collect(),
            categories: vec![],
            namespaced: self.namespaced,
            status_subresource: self.status,
            scale: None,
            columns,
            create_only: false,
            schemas: None,
            storage_version: self.version.into(),
            conversion: Strategy::None,
            deprecations: BTreeMap::new(),
        }
    }
}

#[rustfmt::skip]
fn builtin_types() -> Vec<ResourceType> {
    let b = |group, version, kind, plural, short_names, namespaced, status, columns| Builtin {
        group, version, kind, plural, short_names, namespaced, status, columns,
    };
    let mut types: Vec<ResourceType> = vec![
        b("", "v1", "Namespace", "namespaces", &["ns"], false, true, vec![column("Status", ".status.phase")]),
        b("", "v1", "Pod", "pods", &["po"], true, true, vec![
            typed("Ready", POD_READY, ""),
            typed("Status", POD_STATUS, ""),
            typed("Restarts", POD_RESTARTS, ""),
            wide("IP", ".status.podIP"),
            wide("Node", ".spec.nodeName"),
        ]),
        b("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", &["pvc"], true, true, vec![
            column("Status", ".status.phase"),
            column("Volume", ".spec.volumeName"),
            column("Capacity", ".status.capacity.storage"),
            typed("Access Modes", ACCESS_MODES, ".status.accessModes"),
            column("StorageClass", ".spec.storageClassName"),
        ]),
        b("", "v1", "PersistentVolume", "persistentvolumes", &["pv"], false, true, vec![
            column("Capacity", ".spec.capacity.storage"),
            typed("Access Modes", ACCESS_MODES, ".spec.accessModes"),
            column("Reclaim Policy", ".spec.persistentVolumeReclaimPolicy"),
            column("Status", ".status.phase"),
            typed("Claim", CLAIM_REFERENCE, ".spec.claimRef"),
            column("StorageClass", ".spec.storageClassName"),
        ]),
        b("", "v1", "Secret", "secrets", &[], true, false, vec![column("Type", ".type")]),
        b("", "v1", "ConfigMap", "configmaps", &["cm"], true, false, vec![]),
        b("", "v1", "Service", "services", &["svc"], true, true, vec![
            column("Type", ".spec.type"),
            column("Cluster-IP", ".spec.clusterIP"),
        ]),
        b("", "v1", "Endpoints", "endpoints", &["ep"], true, false, vec![]),
        b("", "v1", "Event", "events", &["ev"], true, false, vec![
            column("Type", ".type"),
            column("Reason", ".reason"),
            column("Object", ".involvedObject.name"),
            column("Message", ".message"),
        ]),
        b("", "v1", "Node", "nodes", &["no"], false, true, vec![]),
        b("", "v1", "ServiceAccount", "serviceaccounts", &["sa"], true, false, vec![]),
        b("events.k8s.io", "v1", "Event", "events", &["ev"], true, false, vec![
            column("Type", ".type"),
            column("Reason", ".reason"),
            column("Object", ".regarding.name"),
            column("Note", ".note"),
        ]),
        b("storage.k8s.io", "v1", "StorageClass", "storageclasses", &["sc"], false, false, vec![
            column("Provisioner", ".provisioner"),
            column("ReclaimPolicy", ".reclaimPolicy"),
            column("VolumeBindingMode", ".volumeBindingMode"),
        ]),
        b("storage.k8s.io", "v1", "CSIDriver", "csidrivers", &[], false, false, vec![]),
        b("storage.k8s.io", "v1", "CSINode", "csinodes", &[], false, false, vec![]),
        b("snapshot.storage.k8s.io", "v1", "VolumeSnapshot", "volumesnapshots", &["vs"], true, true, vec![]),
        b("snapshot.storage.k8s.io", "v1", "VolumeSnapshotContent", "volumesnapshotcontents", &["vsc"], false, true, vec![]),
        b("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass", "volumesnapshotclasses", &["vsclass"], false, false, vec![]),
        b("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", &["crd", "crds"], false, true, vec![]),
        b("apps", "v1", "Deployment", "deployments", &["deploy"], true, true, vec![]),
        b("apps", "v1", "DaemonSet", "daemonsets", &["ds"], true, true, vec![]),
        b("apps", "v1", "ControllerRevision", "controllerrevisions", &[], true, false, vec![
            typed("Controller", CONTROLLER_REFERENCE, ".metadata.ownerReferences"),
            typed("Revision", "integer", ".revision"),
        ]),
        // Stored for the operators that make them (HPP's cleanup Jobs); nothing here runs them.
        b("batch", "v1", "Job", "jobs", &[], true, true, vec![]),
        b("coordination.k8s.io", "v1", "Lease", "leases", &[], true, false, vec![]),
        b("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", &["pc"], false, false, vec![
            typed("Value", "integer", ".value"),
            typed("Global-Default", "boolean", ".globalDefault"),
            age(),
            column("PreemptionPolicy", ".preemptionPolicy"),
        ]),
        b("rbac.authorization.k8s.io", "v1", "Role", "roles", &[], true, false, vec![]),
        b("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", &[], true, false, vec![]),
        b("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", &[], false, false, vec![]),
        b("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", &[], false, false, vec![]),
        b("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", &[], false, false, vec![]),
        b("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", &[], false, false, vec![]),
        b("apiregistration.k8s.io", "v1", "APIService", "apiservices", &[], false, true, vec![
            Column { kind: SERVICE_REFERENCE.into(), ..column("Service", ".spec.service") },
            column("Available", ".status.conditions[?(@.type==\"Available\")].status"),
        ]),
    ]
    .into_iter()
    .map(Builtin::into_type)
    .collect();
    // Served at every version Kubernetes serves, so that any of them meets the refusal.
    for (kind, plural) in super::resource_claim::KINDS {
        let mut claim = b(super::resource_claim::GROUP, super::resource_claim::VERSIONS[0], kind, plural, &[], true, true, vec![]).into_type();
        claim.versions = super::resource_claim::VERSIONS.map(String::from).to_vec();
        types.push(claim);
    }
    for (group, kind, plural) in [
        ("authorization.k8s.io", "SelfSubjectAccessReview", "selfsubjectaccessreviews"),
        ("authorization.k8s.io", "SubjectAccessReview", "subjectaccessreviews"),
    ] {
        types.push(ResourceType {
            group: group.into(),
            versions: vec!["v1".into()],
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            short_names: vec![],
            categories: vec![],
            namespaced: false,
            status_subresource: false,
            scale: None,
            columns: vec![],
            create_only: true,
            schemas: None,
            storage_version: "v1".into(),
            conversion: Strategy::None,
            deprecations: BTreeMap::new(),
        });
    }
    types
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::crd_schema::Input;
    use serde_json::json;

    #[test]
    fn crd_declares_a_namespaced_resource_with_status_and_columns() {
        let crd = json!({"spec": {
        "group": "cdi.kubevirt.io", "scope": "Namespaced",
        "names": {"kind": "DataVolume", "plural": "datavolumes", "singular": "datavolume", "shortNames": ["dv", "dvs"], "categories": ["all"]},
        "versions": [
            {"name": "v1alpha1", "served": false, "storage": false},
            {"name": "v1beta1", "served": true, "storage": true, "subresources": {"status": {}},
             "additionalPrinterColumns": [{"name": "Phase", "type": "string", "jsonPath": ".status.phase"}]}
        ]}});
        let resource = from_crd(&crd).unwrap();
        assert_eq!(resource.versions, vec!["v1beta1"]);
        assert!(resource.namespaced && resource.status_subresource);
        assert_eq!(resource.short_names, vec!["dv", "dvs"]);
        assert_eq!(resource.columns[0].json_path, ".status.phase");
        assert_eq!(resource.storage_key(), "cdi.kubevirt.io/datavolumes");
        assert!(resource.deprecations.is_empty());
    }

    #[test]
    fn deprecated_versions_warn_with_the_crds_text_or_kube_apiservers_default() {
        let crd = |warning: Option<&str>| {
            let mut old = json!({"name": "v1alpha1", "served": true, "deprecated": true});
            if let Some(warning) = warning {
                old["deprecationWarning"] = json!(warning);
            }
            json!({"spec": {
            "group": "ssp.kubevirt.io", "scope": "Namespaced",
            "names": {"kind": "SSP", "plural": "ssps"},
            "versions": [
                old,
                {"name": "v1beta2", "served": true, "deprecated": true},
                {"name": "v1beta1", "served": true},
                {"name": "v1", "served": true, "storage": true},
                {"name": "v2", "served": false}
            ]}})
        };
        let resource = from_crd(&crd(Some("going away"))).unwrap();
        assert_eq!(resource.deprecations["v1alpha1"], "going away");
        assert_eq!(
            resource.deprecations["v1beta2"],
            "ssp.kubevirt.io/v1beta2 SSP is deprecated; use ssp.kubevirt.io/v1 SSP"
        );
        assert!(!resource.deprecations.contains_key("v1"));
        let resource = from_crd(&crd(None)).unwrap();
        assert_eq!(
            resource.deprecations["v1alpha1"],
            "ssp.kubevirt.io/v1alpha1 SSP is deprecated; use ssp.kubevirt.io/v1 SSP"
        );
    }

    #[test]
    fn registry_finds_by_version_and_kind() {
        let registry = Registry::with_builtins();
        assert!(registry.find("", "v1", "pods").is_some());
        assert!(registry.find("", "v2", "pods").is_none());
        let sc = registry
            .find_kind("storage.k8s.io/v1", "StorageClass")
            .unwrap();
        assert!(!sc.namespaced);
    }

    #[test]
    fn controller_revisions_are_namespaced_and_keep_their_data_as_given() {
        let registry = Registry::with_builtins();
        let rt = registry
            .find_kind("apps/v1", "ControllerRevision")
            .expect("built in");
        assert!(rt.namespaced);
        let mut revision = json!({
            "apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "vm1-instancetype-1"}, "revision": 1,
            "data": {"apiVersion": "instancetype.kubevirt.io/v1beta1",
                     "spec": {"cpu": {"guest": 2}}},
            "unknown": true,
        });
        let pruned = super::super::openapi::prune_builtin(&rt, "v1", &mut revision, Input::Object);
        assert!(pruned.is_ok(), "{pruned:?}");
        assert_eq!(revision["data"]["spec"]["cpu"]["guest"], 2);
        assert!(revision.get("unknown").is_none(), "{revision}");
    }
}
