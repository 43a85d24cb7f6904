//! Workloads and flavors: the sizes and tunings each common template is rendered in, as
//! kubevirt/common-templates' `generate-templates.yaml` lists them per operating system.

/// What a VM is for; named in template names and `workload.template.kubevirt.io/*` labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// A server: no tablet, unless the OS's templates always have one.
    Server,
    /// A desktop: a virtio tablet for the pointer.
    Desktop,
    /// Dedicated CPUs, an isolated emulator thread and I/O threads.
    HighPerformance,
}

impl Workload {
    /// The name in template names and labels.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Server => "server",
            Workload::Desktop => "desktop",
            Workload::HighPerformance => "highperformance",
        }
    }
}

/// The size of a VM; named in template names and `flavor.template.kubevirt.io/*` labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Tiny,
    Small,
    Medium,
    Large,
}

impl Flavor {
    /// The name in template names and labels.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Tiny => "tiny",
            Flavor::Small => "small",
            Flavor::Medium => "medium",
            Flavor::Large => "large",
        }
    }

    /// Guest memory of the common Linux templates; the smallest flavor of an OS may differ
    /// (see [`Sizes`]).
    fn memory(self) -> &'static str {
        match self {
            Flavor::Tiny => "1.5Gi",
            Flavor::Small => "2Gi",
            Flavor::Medium => "4Gi",
            Flavor::Large => "8Gi",
        }
    }

    /// CPU sockets: two for large, one otherwise.
    pub fn sockets(self) -> u32 {
        if self == Flavor::Large { 2 } else { 1 }
    }
}

/// One template of an OS: its workload and flavor, and what they imply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub workload: Workload,
    pub flavor: Flavor,
    /// Guest memory, such as `2Gi`.
    pub memory: &'static str,
    /// A virtio tablet among the inputs.
    pub tablet: bool,
    /// `template.kubevirt.io/default-os-variant`: the template a user gets for the OS.
    pub default: bool,
}

impl Variant {
    /// Dedicated I/O threads and CPUs (the high-performance workload).
    pub fn io_threads(&self) -> bool {
        self.workload == Workload::HighPerformance
    }

    /// The template's name for `os`: `fedora-server-small`.
    pub fn template_name(&self, os: &str) -> String {
        format!("{os}-{}-{}", self.workload.name(), self.flavor.name())
    }
}

/// How an OS sizes its flavors.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    pub flavors: &'static [Flavor],
    pub workloads: &'static [Workload],
    /// Memory of the small flavor when it is not 2Gi (Ubuntu: 3Gi).
    pub small_memory: Option<&'static str>,
    /// Every workload has a tablet (Ubuntu).
    pub always_tablet: bool,
}

impl Sizes {
    /// Every template of the OS, flavors outermost as upstream orders them.
    pub fn variants(&self) -> Vec<Variant> {
        let mut variants = Vec::new();
        for &flavor in self.flavors {
            for &workload in self.workloads {
                let memory = match (flavor, self.small_memory) {
                    (Flavor::Small, Some(memory)) => memory,
                    _ => flavor.memory(),
                };
                variants.push(Variant {
                    workload,
                    flavor,
                    memory,
                    tablet: self.always_tablet || workload == Workload::Desktop,
                    default: flavor == Flavor::Small && workload == Workload::Server,
                });
            }
        }
        variants
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_server_is_the_default_variant() {
        let sizes = Sizes {
            flavors: &[Flavor::Tiny, Flavor::Small, Flavor::Large],
            workloads: &[Workload::Server, Workload::Desktop],
            small_memory: Some("3Gi"),
            always_tablet: false,
        };
        let variants = sizes.variants();
        assert_eq!(variants.len(), 6);
        let defaults: Vec<_> = variants.iter().filter(|v| v.default).collect();
        assert_eq!(defaults.len(), 1);
        assert_eq!(defaults[0].template_name("fedora"), "fedora-server-small");
        assert_eq!(defaults[0].memory, "3Gi");
        assert!(
            variants
                .iter()
                .all(|v| v.tablet == (v.workload == Workload::Desktop))
        );
        assert_eq!(variants[0].memory, "1.5Gi");
        assert_eq!(Flavor::Large.sockets(), 2);
    }
}
