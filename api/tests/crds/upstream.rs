//! Fields held against upstream's published schemas (`../shared/upstream-api`, or the
//! directory `FERROVIRT_UPSTREAM_API` names): a field upstream declares is in our CRD with
//! the same type, so the API server keeps it, and a field upstream never had is in neither.
//! The first step of issue 40's path-by-path comparison, for the fields it found wrong.

use std::path::PathBuf;

use api::kubevirt::cluster_config::{ClusterConfig, DefaultBinding};
use serde_json::{Map, Value, json};

const KUBEVIRT_SWAGGER: &str = "kubevirt-v1.6.6.swagger.json";

fn upstream_dir() -> PathBuf {
    std::env::var_os("FERROVIRT_UPSTREAM_API")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/upstream-api")
        })
}

fn upstream_file(name: &str) -> String {
    let path = upstream_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; set FERROVIRT_UPSTREAM_API to the upstream schemas",
            path.display()
        )
    })
}

/// One schema to walk: its root and the swagger definitions its `$ref`s point into.
struct Schema {
    root: Value,
    definitions: Value,
}

impl Schema {
    /// The swagger definition `definition` (`v1beta1.DataVolume`) of `file`.
    fn swagger(file: &str, definition: &str) -> Schema {
        let swagger: Value =
            serde_json::from_str(&upstream_file(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let definitions = swagger["definitions"].clone();
        let root = definitions[definition].clone();
        assert!(root.is_object(), "{file} has no definition {definition}");
        Schema { root, definitions }
    }

    /// The schema of `version` in the CRD file `file` HCO ships.
    fn bundle(file: &str, version: &str) -> Schema {
        let crd: Value =
            serde_saphyr::from_str(&upstream_file(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        Schema::of_crd(&crd, version).unwrap_or_else(|| panic!("{file} serves no {version}"))
    }

    /// Ours: the schema of `version` of the CRD of `kind`.
    fn ours(kind: &str, version: &str) -> Schema {
        let crd = api::crds::all()
            .into_iter()
            .find(|crd| crd.spec.names.kind == kind)
            .unwrap_or_else(|| panic!("no CRD of {kind}"));
        let crd = serde_json::to_value(crd).expect("a CRD serializes");
        Schema::of_crd(&crd, version).unwrap_or_else(|| panic!("{kind} serves no {version}"))
    }

    fn of_crd(crd: &Value, version: &str) -> Option<Schema> {
        let served = crd["spec"]["versions"]
            .as_array()?
            .iter()
            .find(|v| v["name"] == version)?;
        Some(Schema {
            root: served["schema"]["openAPIV3Schema"].clone(),
            definitions: Value::Null,
        })
    }

    /// `node` with a `$ref` replaced by the definition it names.
    fn resolved<'a>(&'a self, node: &'a Value) -> &'a Value {
        match node["$ref"].as_str() {
            Some(r) => self.resolved(&self.definitions[r.trim_start_matches("#/definitions/")]),
            None => node,
        }
    }

    /// What `path` (`spec.source.http.url`, `[]` for a list's items) finds: the field's
    /// type, `Unchecked` below an object that keeps unknown fields, `Missing` where the
    /// API server drops it.
    fn field(&self, path: &str) -> Field {
        let mut node = self.resolved(&self.root);
        for step in path.split('.') {
            let (name, items) = match step.strip_suffix("[]") {
                Some(name) => (name, true),
                None => (step, false),
            };
            match node["properties"].get(name) {
                Some(child) => node = self.resolved(child),
                None if node["x-kubernetes-preserve-unknown-fields"] == true => {
                    return Field::Unchecked;
                }
                None => return Field::Missing,
            }
            if items {
                node = self.resolved(&node["items"]);
            }
        }
        Field::Typed(type_of(node))
    }
}

/// What a schema says of one field.
#[derive(Debug, PartialEq)]
enum Field {
    /// Declared, with this type.
    Typed(String),
    /// Kept by an ancestor that keeps unknown fields, its name and type not checked.
    Unchecked,
    /// Not declared: the API server prunes it.
    Missing,
}

/// The JSON type of a schema node; swagger's `["string", "null"]` is `string`.
fn type_of(node: &Value) -> String {
    if node["x-kubernetes-int-or-string"] == true {
        return "int-or-string".into();
    }
    match &node["type"] {
        Value::String(t) => t.clone(),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    }
}

/// `value` placed at `path` (no list steps) in an otherwise empty object.
fn object_at(path: &str, value: Value) -> Value {
    path.rsplit('.').fold(value, |inner, name| {
        Value::Object(Map::from_iter([(name.to_owned(), inner)]))
    })
}

#[test]
fn the_default_network_interface_is_read_where_upstream_declares_it() {
    let path = "spec.configuration.network.defaultNetworkInterface";
    let upstream = Schema::swagger(KUBEVIRT_SWAGGER, "v1.KubeVirt");
    assert_eq!(upstream.field(path), Field::Typed("string".into()));
    let bundled = Schema::bundle("hco-bundle-kubevirt00.crd.yaml", "v1");
    assert_eq!(bundled.field(path), Field::Typed("string".into()));
    assert_eq!(
        upstream.field("spec.configuration.networkConfiguration"),
        Field::Missing
    );
    let kubevirt = object_at(path, json!("masquerade"));
    assert_eq!(
        ClusterConfig::from_kubevirt(&kubevirt).default_binding,
        DefaultBinding::Masquerade
    );
}

#[test]
fn the_checker_tells_typed_unchecked_and_missing_apart() {
    let ours = Schema::ours("KubeVirt", "v1");
    assert_eq!(ours.field("status.phase"), Field::Typed("string".into()));
    assert_eq!(ours.field("spec.configuration.anything"), Field::Unchecked);
    assert_eq!(
        ours.field("status.conditions[].noSuchField"),
        Field::Missing
    );
}

/// The names of the fields the object at `path` declares (`[]` steps to a list's items).
fn declared(schema: &Schema, path: &str) -> Vec<String> {
    let mut node = schema.resolved(&schema.root);
    for step in path.split('.') {
        let (name, items) = match step.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (step, false),
        };
        node = schema.resolved(&node["properties"][name]);
        if items {
            node = schema.resolved(&node["items"]);
        }
    }
    let mut names: Vec<String> = node["properties"]
        .as_object()
        .map(|fields| fields.keys().cloned().collect())
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn kubevirt_conditions_are_upstreams() {
    let ours = Schema::ours("KubeVirt", "v1");
    for upstream in [
        Schema::swagger(KUBEVIRT_SWAGGER, "v1.KubeVirt"),
        Schema::bundle("hco-bundle-kubevirt00.crd.yaml", "v1"),
    ] {
        let fields = declared(&upstream, "status.conditions[]");
        assert!(fields.contains(&"lastProbeTime".to_owned()));
        assert_eq!(declared(&ours, "status.conditions[]"), fields);
        for field in fields {
            let path = format!("status.conditions[].{field}");
            assert_eq!(ours.field(&path), upstream.field(&path), "{path}");
        }
    }
}

const CDI_SWAGGER: &str = "cdi-v1.66.0.swagger.json";
const SSP_BUNDLE: &str = "hco-bundle-scheduling-scale-performance00.crd.yaml";
const SSP_CRON: &str = "spec.commonTemplates.dataImportCronTemplates[].spec";

/// Fields upstream accepts that our schemas used to prune: `(our kind, version, upstream,
/// path)`. The DataVolume's fields also hold where its spec is embedded (DataImportCron, SSP,
/// a VM's `dataVolumeTemplates`, which follow CDI's DataVolume, newer than the copy in
/// KubeVirt's swagger).
fn once_pruned() -> Vec<(&'static str, &'static str, Schema, String)> {
    let data_volume = |prefix: &str| {
        [
            "serviceAccountName",
            "source.http.insecureSkipVerify",
            "source.vddk.certConfigMap",
        ]
        .map(|field| format!("{prefix}.{field}"))
    };
    let mut fields = Vec::new();
    for path in data_volume("spec") {
        fields.push((
            "DataVolume",
            "v1beta1",
            Schema::swagger(CDI_SWAGGER, "v1beta1.DataVolume"),
            path.clone(),
        ));
        fields.push((
            "VirtualMachine",
            "v1",
            Schema::swagger(CDI_SWAGGER, "v1beta1.DataVolume"),
            format!("spec.dataVolumeTemplates[].{path}"),
        ));
    }
    for path in data_volume("spec.template.spec")
        .into_iter()
        .chain(["spec.serviceAccountName".to_owned()])
    {
        fields.push((
            "DataImportCron",
            "v1beta1",
            Schema::swagger(CDI_SWAGGER, "v1beta1.DataImportCron"),
            path.clone(),
        ));
        fields.push((
            "SSP",
            "v1beta2",
            Schema::bundle(SSP_BUNDLE, "v1beta2"),
            path.replacen("spec", SSP_CRON, 1),
        ));
    }
    fields.push((
        "CDI",
        "v1beta1",
        Schema::swagger(CDI_SWAGGER, "v1beta1.CDI"),
        "spec.config.webhookPvcRendering".into(),
    ));
    fields.push((
        "CDI",
        "v1beta1",
        Schema::bundle(
            "hco-bundle-containerized-data-importer00.crd.yaml",
            "v1beta1",
        ),
        "spec.config.webhookPvcRendering".into(),
    ));
    fields.push((
        "CDIConfig",
        "v1beta1",
        Schema::swagger(CDI_SWAGGER, "v1beta1.CDIConfig"),
        "spec.webhookPvcRendering".into(),
    ));
    for field in ["overlayClassName", "snapshotProvider"] {
        fields.push((
            "HostPathProvisioner",
            "v1beta1",
            Schema::bundle("hco-bundle-hostpath-provisioner00.crd.yaml", "v1beta1"),
            format!("spec.storagePools[].{field}"),
        ));
    }
    fields
}

#[test]
fn fields_upstream_accepts_are_declared_with_its_types() {
    let mut wrong = Vec::new();
    for (kind, version, upstream, path) in once_pruned() {
        // A VM's template is CDI's DataVolume, found under the template's own path.
        let upstream_path = path
            .strip_prefix("spec.dataVolumeTemplates[].")
            .unwrap_or(&path);
        let want = upstream.field(upstream_path);
        let got = Schema::ours(kind, version).field(&path);
        if !matches!(want, Field::Typed(_)) || got != want {
            wrong.push(format!("{kind} {path}: upstream {want:?}, ours {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// CDI's own example of an https import that skips verification keeps its field through
/// a round trip of our type, so the importer is told to skip it.
#[test]
fn cdis_skip_tls_example_keeps_its_field() {
    let example = json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {"name": "import-skip-tls"},
        "spec": {
            "source": {"http": {"url": "https://example.com/disk.img", "insecureSkipVerify": true}},
            "storage": {"resources": {"requests": {"storage": "1Gi"}}},
        },
    });
    let dv: api::cdi::DataVolume = serde_json::from_value(example.clone()).unwrap();
    assert_eq!(serde_json::to_value(&dv).unwrap(), example);
}

#[test]
fn fields_upstream_never_had_are_not_declared() {
    let invented = [
        (
            "DataImportCron",
            "v1beta1",
            Schema::swagger(CDI_SWAGGER, "v1beta1.DataImportCron"),
            "spec.createdBy".to_owned(),
        ),
        (
            "SSP",
            "v1beta2",
            Schema::bundle(SSP_BUNDLE, "v1beta2"),
            format!("{SSP_CRON}.createdBy"),
        ),
        (
            "VirtualMachineInstance",
            "v1",
            Schema::swagger(KUBEVIRT_SWAGGER, "v1.VirtualMachineInstance"),
            "spec.volumes[].ephemeral.persistentVolumeClaim.hotpluggable".to_owned(),
        ),
        (
            "VirtualMachine",
            "v1",
            Schema::swagger(KUBEVIRT_SWAGGER, "v1.VirtualMachine"),
            "spec.template.spec.volumes[].ephemeral.persistentVolumeClaim.hotpluggable".to_owned(),
        ),
        (
            "KubeVirt",
            "v1",
            Schema::swagger(KUBEVIRT_SWAGGER, "v1.KubeVirt"),
            "status.conditions[].lastHeartbeatTime".to_owned(),
        ),
    ];
    for (kind, version, upstream, path) in invented {
        assert_eq!(
            upstream.field(&path),
            Field::Missing,
            "upstream {kind} {path}"
        );
        assert_eq!(
            Schema::ours(kind, version).field(&path),
            Field::Missing,
            "our {kind} {path}"
        );
    }
}
