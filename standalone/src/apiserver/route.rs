//! Request paths of the Kubernetes API, parsed into what they address.

/// What a request path addresses.
#[derive(Debug, PartialEq)]
pub enum Route {
    Version,
    Health,
    CoreVersions,
    Groups,
    Group(String),
    ResourceList { group: String, version: String },
    OpenApiV3Index,
    OpenApiV3 { group: String, version: String },
    OpenApiV2,
    Resource(ResourcePath),
}

/// `/api/v1/namespaces/{ns}/{plural}/{name}/{subresource}` and its shorter forms.
#[derive(Debug, PartialEq, Default)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

pub fn parse(path: &str) -> Option<Route> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let owned = |s: &str| s.to_string();
    Some(match segments.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["api"] => Route::CoreVersions,
        ["api", version] => Route::ResourceList {
            group: String::new(),
            version: owned(version),
        },
        ["api", version, rest @ ..] => Route::Resource(resource_path("", version, rest)?),
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group(owned(group)),
        ["apis", group, version] => Route::ResourceList {
            group: owned(group),
            version: owned(version),
        },
        ["apis", group, version, rest @ ..] => {
            Route::Resource(resource_path(group, version, rest)?)
        }
        ["openapi", "v3"] => Route::OpenApiV3Index,
        ["openapi", "v3", "api", version] => Route::OpenApiV3 {
            group: String::new(),
            version: owned(version),
        },
        ["openapi", "v3", "apis", group, version] => Route::OpenApiV3 {
            group: owned(group),
            version: owned(version),
        },
        ["openapi", "v2"] | ["swagger.json"] => Route::OpenApiV2,
        _ => return None,
    })
}

fn resource_path(group: &str, version: &str, rest: &[&str]) -> Option<ResourcePath> {
    let mut path = ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        ..Default::default()
    };
    let namespace_subresource = rest.len() == 3 && matches!(rest[2], "status" | "finalize");
    let rest = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() && !namespace_subresource => {
            path.namespace = Some(ns.to_string());
            tail
        }
        other => other,
    };
    match rest {
        [plural] => path.plural = plural.to_string(),
        [plural, name] => {
            path.plural = plural.to_string();
            path.name = Some(name.to_string());
        }
        [plural, name, subresource] => {
            path.plural = plural.to_string();
            path.name = Some(name.to_string());
            path.subresource = Some(subresource.to_string());
        }
        _ => return None,
    }
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(path: &str) -> ResourcePath {
        match parse(path) {
            Some(Route::Resource(r)) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn resource_paths() {
        let r = resource("/apis/cdi.kubevirt.io/v1beta1/namespaces/ns/datavolumes/dv/status");
        assert_eq!(
            (
                r.group.as_str(),
                r.namespace.as_deref(),
                r.plural.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            (
                "cdi.kubevirt.io",
                Some("ns"),
                "datavolumes",
                Some("dv"),
                Some("status")
            )
        );
        let r = resource("/api/v1/namespaces/ns");
        assert_eq!(
            (r.plural.as_str(), r.name.as_deref(), r.namespace),
            ("namespaces", Some("ns"), None)
        );
        let r = resource("/api/v1/namespaces/ns/status");
        assert_eq!(
            (r.plural.as_str(), r.subresource.as_deref()),
            ("namespaces", Some("status"))
        );
        let r = resource("/api/v1/namespaces/ns/pods");
        assert_eq!(
            (r.plural.as_str(), r.namespace.as_deref(), r.name),
            ("pods", Some("ns"), None)
        );
        let r = resource("/api/v1/pods");
        assert_eq!((r.plural.as_str(), r.namespace), ("pods", None));
        assert_eq!(
            parse("/apis/storage.k8s.io"),
            Some(Route::Group("storage.k8s.io".into()))
        );
        assert_eq!(parse("/api/v1/a/b/c/d/e/f"), None);
    }
}
