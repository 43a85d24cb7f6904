//! Every (API group, resource, verbs) the controllers use, in one list: the deploy
//! ClusterRole must grant all of them. A new API call in a controller adds its line here.

/// Verbs the controllers use on one resource of one API group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permission {
    /// The API group (`""` for the core group).
    pub group: &'static str,
    /// The resource, with `/status` for the status subresource.
    pub resource: &'static str,
    /// The verbs.
    pub verbs: &'static [&'static str],
}

const fn p(
    group: &'static str,
    resource: &'static str,
    verbs: &'static [&'static str],
) -> Permission {
    Permission {
        group,
        resource,
        verbs,
    }
}

/// Watching a resource through a kube-rs controller: its initial list and the watch.
const WATCH: &[&str] = &["get", "list", "watch"];

/// The permissions of the DataVolume, StorageProfile, DataSource and DataImportCron
/// controllers.
pub const PERMISSIONS: &[Permission] = &[
    // DataVolume controller
    p("cdi.kubevirt.io", "datavolumes", WATCH),
    // The finalizer of a cross-namespace clone (see `datavolume::cross_namespace`).
    p("cdi.kubevirt.io", "datavolumes", &["patch"]),
    p("cdi.kubevirt.io", "datavolumes/status", &["patch"]),
    p("cdi.kubevirt.io", "datasources", &["get"]),
    p("cdi.kubevirt.io", "cdiconfigs", &["get"]),
    // The active CDI CR's workload placement, for the worker pods.
    p("cdi.kubevirt.io", "cdis", &["list"]),
    p("cdi.kubevirt.io", "storageprofiles", &["get"]),
    p(
        "",
        "persistentvolumeclaims",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    // Handing a cross-namespace clone's volume from its temporary claim to the target.
    p("", "persistentvolumes", &["get", "list", "patch"]),
    p("", "pods", &["get", "list", "watch", "create", "delete"]),
    p(
        "",
        "services",
        &["get", "list", "watch", "create", "delete"],
    ),
    // Upload servers' serving certificates and the upload clients' CA bundle.
    p("", "secrets", &["get", "create"]),
    p("", "configmaps", &["get", "create"]),
    p("storage.k8s.io", "storageclasses", &["get", "list"]),
    // Events through kube's Recorder (created, then patched as a series).
    p("events.k8s.io", "events", &["create", "patch"]),
    // StorageProfile controller
    p("storage.k8s.io", "storageclasses", WATCH),
    p(
        "cdi.kubevirt.io",
        "storageprofiles",
        &["get", "list", "watch", "create"],
    ),
    p("cdi.kubevirt.io", "storageprofiles/status", &["patch"]),
    // DataSource controller
    p("cdi.kubevirt.io", "datasources", WATCH),
    p("cdi.kubevirt.io", "datasources/status", &["patch"]),
    p("cdi.kubevirt.io", "datavolumes", WATCH),
    p("", "persistentvolumeclaims", WATCH),
    p("snapshot.storage.k8s.io", "volumesnapshots", WATCH),
    // DataImportCron controller
    p(
        "cdi.kubevirt.io",
        "dataimportcrons",
        &["get", "list", "watch", "patch"],
    ),
    p("cdi.kubevirt.io", "dataimportcrons/status", &["patch"]),
    p(
        "cdi.kubevirt.io",
        "datavolumes",
        &["get", "list", "watch", "create", "delete"],
    ),
    p(
        "cdi.kubevirt.io",
        "datasources",
        &["get", "create", "patch"],
    ),
    // CDIConfig controller
    p("cdi.kubevirt.io", "cdiconfigs", WATCH),
    p("cdi.kubevirt.io", "cdiconfigs/status", &["update"]),
    p("storage.k8s.io", "storageclasses", WATCH),
];
