//! CDI's clone authorization, decided: a DataVolume that clones from another namespace is
//! admitted only when its creator may create `datavolumes/source` (or pods) there, and then
//! carries a clone token naming its source and itself, which the controller requires before
//! it clones across namespaces.
//!
//! The rules follow CDI's `CloneSourceHandler`: the source is `spec.source.pvc`,
//! `spec.source.snapshot`, or what a `sourceRef` DataSource points at; a source in the
//! DataVolume's own namespace needs no check. The rules here are pure; the embedded API
//! server's admission and CDI's webhook server look up DataSources, ask for access reviews
//! and issue the token each in their own way.

use serde_json::Value;

pub const CDI_GROUP: &str = "cdi.kubevirt.io";
/// The webhook CDI denies from; kubectl shows its name.
pub const WEBHOOK: &str = "datavolume-mutate.cdi.kubevirt.io";

/// What a DataVolume clones from.
#[derive(Debug, PartialEq, Eq)]
pub struct CloneSource {
    pub snapshot: bool,
    pub namespace: String,
    pub name: String,
}

/// Where a DataVolume's clone source is declared.
#[derive(Debug, PartialEq, Eq)]
pub enum DeclaredSource {
    /// Not a clone.
    None,
    /// `spec.source.pvc` or `spec.source.snapshot`.
    Direct(CloneSource),
    /// `spec.sourceRef` to this DataSource (namespace, name), whose source is the clone's.
    DataSource(String, String),
}

/// The clone source a DataVolume object declares; `namespace` is the DataVolume's.
pub fn declared_source(dv: &Value, namespace: &str) -> DeclaredSource {
    let spec = &dv["spec"];
    if spec["source"].is_object() {
        return source_of(&spec["source"], namespace)
            .map_or(DeclaredSource::None, DeclaredSource::Direct);
    }
    let reference = &spec["sourceRef"];
    if reference["kind"] != "DataSource" {
        return DeclaredSource::None;
    }
    let ds_namespace = non_empty(&reference["namespace"]).unwrap_or(namespace);
    let name = reference["name"].as_str().unwrap_or_default();
    DeclaredSource::DataSource(ds_namespace.into(), name.into())
}

/// A `pvc` or `snapshot` source (a DataVolume's or a DataSource's `spec.source`); an empty
/// namespace is `default_namespace`.
pub fn source_of(source: &Value, default_namespace: &str) -> Option<CloneSource> {
    let (snapshot, reference) = if source["pvc"].is_object() {
        (false, &source["pvc"])
    } else if source["snapshot"].is_object() {
        (true, &source["snapshot"])
    } else {
        return None;
    };
    Some(CloneSource {
        snapshot,
        namespace: non_empty(&reference["namespace"])
            .unwrap_or(default_namespace)
            .to_string(),
        name: reference["name"].as_str().unwrap_or_default().to_string(),
    })
}

fn non_empty(value: &Value) -> Option<&str> {
    value.as_str().filter(|s| !s.is_empty())
}

/// A permission CDI asks about, as a SubjectAccessReview's `resourceAttributes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permission {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

/// CDI's rule, as sets of `create` permissions in the source namespace of which any one
/// suffices: `datavolumes/source`, or `pods` (for a PVC) or `pods` and
/// `persistentvolumeclaims` (for a snapshot).
pub fn sufficient_permissions(source: &CloneSource) -> Vec<Vec<Permission>> {
    let create = |group: &str, resource: &str, subresource: &str| Permission {
        verb: "create".into(),
        group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        namespace: source.namespace.clone(),
        name: source.name.clone(),
    };
    let explicit = vec![create(CDI_GROUP, "datavolumes", "source")];
    let implicit = if source.snapshot {
        vec![
            create("", "pods", ""),
            create("", "persistentvolumeclaims", ""),
        ]
    } else {
        vec![create("", "pods", "")]
    };
    vec![explicit, implicit]
}

/// CDI's answer to a creator without permission, as its webhook words it (the API server
/// puts the webhook's name before it).
pub fn denial(user: &str, source: &CloneSource) -> String {
    format!(
        "Authorization failed, message is: User {user} has insufficient permissions in clone source namespace {}",
        source.namespace
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sources_default_to_the_datavolume_namespace() {
        let dv = json!({"spec": {"source": {"pvc": {"name": "golden"}}}});
        assert_eq!(
            declared_source(&dv, "dst"),
            DeclaredSource::Direct(CloneSource {
                snapshot: false,
                namespace: "dst".into(),
                name: "golden".into()
            })
        );
        let dv = json!({"spec": {"source": {"snapshot": {"namespace": "src", "name": "snap"}}}});
        assert_eq!(
            declared_source(&dv, "dst"),
            DeclaredSource::Direct(CloneSource {
                snapshot: true,
                namespace: "src".into(),
                name: "snap".into()
            })
        );
        let dv = json!({"spec": {"sourceRef": {"kind": "DataSource", "name": "fedora"}}});
        assert_eq!(
            declared_source(&dv, "dst"),
            DeclaredSource::DataSource("dst".into(), "fedora".into())
        );
        let dv = json!({"spec": {"source": {"http": {"url": "x"}}}});
        assert_eq!(declared_source(&dv, "dst"), DeclaredSource::None);
    }

    #[test]
    fn a_snapshot_needs_pods_and_claims_where_a_pvc_needs_pods() {
        let pvc = CloneSource {
            snapshot: false,
            namespace: "src".into(),
            name: "golden".into(),
        };
        let sets = sufficient_permissions(&pvc);
        assert_eq!(sets[0][0].resource, "datavolumes");
        assert_eq!(sets[0][0].subresource, "source");
        assert_eq!(sets[1].len(), 1);
        let snapshot = CloneSource {
            snapshot: true,
            ..pvc
        };
        let sets = sufficient_permissions(&snapshot);
        assert_eq!(sets[1].len(), 2);
        assert!(
            sets.iter()
                .flatten()
                .all(|a| a.verb == "create" && a.namespace == "src")
        );
    }
}
