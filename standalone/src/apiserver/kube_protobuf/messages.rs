//! Which protobuf message is which kind: Kubernetes' descriptors, compiled by build.rs from
//! its generated.proto files, indexed by apiVersion and kind.

use std::collections::{HashMap, HashSet};

use protobuf::Message;
use protobuf::descriptor::FileDescriptorSet;
use protobuf::reflect::{FileDescriptor, MessageDescriptor};

/// Kubernetes' descriptors as build.rs wrote them.
static DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kubernetes.fds"));

/// The group versions this server serves that have protobuf messages, by their package.
/// CustomResourceDefinitions are left out: their schemas' JSON differs from their messages
/// in ways no other kind's does (`$ref`, `x-kubernetes-*`, schema-or-bool unions), and
/// kubectl and client-go send them as JSON.
const GROUP_VERSIONS: [(&str, &str); 12] = [
    ("v1", "api.core.v1"),
    ("apps/v1", "api.apps.v1"),
    ("events.k8s.io/v1", "api.events.v1"),
    ("storage.k8s.io/v1", "api.storage.v1"),
    ("coordination.k8s.io/v1", "api.coordination.v1"),
    ("rbac.authorization.k8s.io/v1", "api.rbac.v1"),
    ("authentication.k8s.io/v1", "api.authentication.v1"),
    ("authorization.k8s.io/v1", "api.authorization.v1"),
    (
        "admissionregistration.k8s.io/v1",
        "api.admissionregistration.v1",
    ),
    (
        "apiregistration.k8s.io/v1",
        "kube_aggregator.pkg.apis.apiregistration.v1",
    ),
    ("batch/v1", "api.batch.v1"),
    ("policy/v1", "api.policy.v1"),
];

/// The package of the kinds every group version shares (`Status`, `DeleteOptions`, ...).
const META_PACKAGE: &str = "apimachinery.pkg.apis.meta.v1";

/// The envelope of every body.
const UNKNOWN: &str = "apimachinery.pkg.runtime.Unknown";

/// The messages of every served group version, and the kinds common to all of them.
pub struct Messages {
    by_kind: HashMap<(&'static str, String), MessageDescriptor>,
    versions: HashSet<&'static str>,
    common: HashMap<String, MessageDescriptor>,
    unknown: MessageDescriptor,
}

impl Messages {
    pub fn new() -> Self {
        let files = compiled_files();
        let package = |name: &str| -> Vec<MessageDescriptor> {
            files
                .iter()
                .filter(|f| f.package() == name)
                .flat_map(|f| f.messages())
                .collect()
        };
        let mut by_kind = HashMap::new();
        let mut versions = HashSet::from(["meta.k8s.io/v1"]);
        for (api_version, name) in GROUP_VERSIONS {
            versions.insert(api_version);
            for message in package(name) {
                by_kind.insert((api_version, message.name().to_string()), message);
            }
        }
        let common = package(META_PACKAGE)
            .into_iter()
            .map(|m| (m.name().to_string(), m))
            .collect();
        let unknown = files
            .iter()
            .find_map(|f| f.message_by_full_name(&format!(".{UNKNOWN}")))
            .unwrap_or_else(|| panic!("build.rs compiles {UNKNOWN}"));
        Messages {
            by_kind,
            versions,
            common,
            unknown,
        }
    }

    /// The message of `kind` in `api_version`; kinds that only `meta/v1` defines are found
    /// under any version, as client-go sends them with the resource's.
    pub fn find(&self, api_version: &str, kind: &str) -> Option<MessageDescriptor> {
        let version = self.versions.get(api_version)?;
        if let Some(message) = self.by_kind.get(&(*version, kind.to_string())) {
            return Some(message.clone());
        }
        self.common.get(kind).cloned()
    }

    /// `runtime.Unknown`, the envelope.
    pub fn envelope(&self) -> &MessageDescriptor {
        &self.unknown
    }
}

impl Default for Messages {
    fn default() -> Self {
        Self::new()
    }
}

/// The files build.rs compiled, as descriptors. They are checked when compiled, so a
/// failure here is a broken build.
fn compiled_files() -> Vec<FileDescriptor> {
    let set = FileDescriptorSet::parse_from_bytes(DESCRIPTOR_SET)
        .expect("build.rs writes a valid descriptor set");
    FileDescriptor::new_dynamic_fds(set.file, &[])
        .expect("build.rs writes a complete descriptor set")
}
