//! What a VM's `spec.instancetype` / `spec.preference` names: namespaced or cluster-wide,
//! by KubeVirt's case-insensitive kind names (`pkg/instancetype/find`).

/// Whether a matcher names a namespaced or a cluster-wide object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// In the VM's namespace.
    Namespaced,
    /// Cluster-wide.
    Cluster,
}

/// Which of the two families a matcher is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `spec.instancetype`.
    Instancetype,
    /// `spec.preference`.
    Preference,
}

impl Family {
    /// The namespaced and cluster kinds.
    pub fn kinds(self) -> (&'static str, &'static str) {
        match self {
            Self::Instancetype => (
                "VirtualMachineInstancetype",
                "VirtualMachineClusterInstancetype",
            ),
            Self::Preference => (
                "VirtualMachinePreference",
                "VirtualMachineClusterPreference",
            ),
        }
    }

    /// The kind an empty matcher kind is defaulted to (lower case, as KubeVirt writes it).
    pub fn default_kind(self) -> &'static str {
        match self {
            Self::Instancetype => "virtualmachineclusterinstancetype",
            Self::Preference => "virtualmachineclusterpreference",
        }
    }

    /// The matcher's name in messages.
    pub fn matcher(self) -> &'static str {
        match self {
            Self::Instancetype => "InstancetypeMatcher",
            Self::Preference => "PreferenceMatcher",
        }
    }

    /// The scope a matcher's kind names; an unknown kind is KubeVirt's error.
    pub fn scope(self, kind: Option<&str>) -> Result<Scope, String> {
        let given = kind.unwrap_or_default();
        let kind = given.to_lowercase();
        let (namespaced, cluster) = self.kinds();
        let (namespaced, cluster) = (namespaced.to_lowercase(), cluster.to_lowercase());
        if kind == namespaced || kind == format!("{namespaced}s") {
            Ok(Scope::Namespaced)
        } else if kind.is_empty() || kind == cluster || kind == format!("{cluster}s") {
            Ok(Scope::Cluster)
        } else {
            Err(format!(
                "got unexpected kind in {}: {}",
                self.matcher(),
                given
            ))
        }
    }

    /// The kind of an object in `scope`.
    pub fn kind(self, scope: Scope) -> &'static str {
        let (namespaced, cluster) = self.kinds();
        match scope {
            Scope::Namespaced => namespaced,
            Scope::Cluster => cluster,
        }
    }
}
