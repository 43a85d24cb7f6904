//! common-instancetypes as virt-operator deploys them: the cluster instancetypes
//! ([`instancetypes`]: u1, o1, cx1, m1, n1, rt1 and their sizes) and the cluster
//! preferences ([`preferences`]: one per guest OS) of kubevirt/common-instancetypes
//! [`VERSION`], generated from their series and building blocks, and kept on the cluster
//! while the active KubeVirt CR's `spec.configuration.commonInstancetypesDeployment.enabled`
//! is unset or true ([`deploy`]).

pub mod deploy;
pub mod instancetypes;
pub mod preferences;

use serde_json::Value;

/// The common-instancetypes release the bundle follows (KubeVirt v1.6.6 ships it).
pub const VERSION: &str = "v1.4.1";
/// The prefix of the bundle's labels and annotations.
const LABEL_PREFIX: &str = "instancetype.kubevirt.io/";
/// The `instancetype.kubevirt.io/vendor` label of every object.
const VENDOR: &str = "kubevirt.io";

/// Every VirtualMachineClusterInstancetype of the bundle, ordered by name.
pub fn cluster_instancetypes() -> Vec<Value> {
    by_name(instancetypes::all())
}

/// Every VirtualMachineClusterPreference of the bundle, ordered by name.
pub fn cluster_preferences() -> Vec<Value> {
    by_name(preferences::all())
}

fn by_name(mut objects: Vec<Value>) -> Vec<Value> {
    objects.sort_by(|a, b| {
        let name = |o: &Value| {
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        name(a).cmp(&name(b))
    });
    objects
}

/// `mib` MiB as a Kubernetes quantity: whole GiB as `Gi`, anything else as `Mi`.
fn quantity(mib: u64) -> String {
    if mib % 1024 == 0 {
        format!("{}Gi", mib / 1024)
    } else {
        format!("{mib}Mi")
    }
}

#[cfg(test)]
mod tests;
