//! KubeVirt's feature gates past their beta, as virt-operator v1.7.0 knows them
//! (`pkg/virt-config/featuregate/inactive.go`, the release the HCO mapping of
//! `operators::install::hco` pairs with): graduated, deprecated and discontinued gates, and
//! the warning each gets when a KubeVirt CR sets it. Alpha and beta gates are not listed:
//! setting them is not warned about.

/// KubeVirt's lifecycle states past beta, as its warnings name them.
const GA: &str = "General Availability";
const DEPRECATED: &str = "Deprecated";
const DISCONTINUED: &str = "Discontinued";

/// Every known gate: (name, state, the warning KubeVirt words itself, if it does).
const GATES: &[(&str, &str, Option<&str>)] = &[
    // Graduated: on whatever the CR says, and redundant in it.
    ("LiveMigration", GA, None),
    ("SRIOVLiveMigration", GA, None),
    ("NonRoot", GA, None),
    ("PSA", GA, None),
    ("CPUNodeDiscovery", GA, None),
    ("NUMA", GA, None),
    ("CommonInstancetypesDeploymentGate", GA, None),
    ("GPU", GA, None),
    ("HotplugNICs", GA, None),
    ("BochsDisplayForEFIGuests", GA, None),
    ("VMLiveUpdateFeatures", GA, None),
    ("NetworkBindingPlugins", GA, None),
    ("DynamicPodInterfaceNaming", GA, None),
    ("VolumesUpdateStrategy", GA, None),
    ("VolumeMigration", GA, None),
    ("DisableCustomSELinuxPolicy", GA, None),
    ("AutoResourceLimitsGate", GA, None),
    ("ClusterProfiler", GA, None),
    ("VMPersistentState", GA, None),
    ("InstancetypeReferencePolicy", GA, None),
    // Past their use.
    (
        "DockerSELinuxMCSWorkaround",
        DEPRECATED,
        Some("DockerSELinuxMCSWorkaround has been deprecated since v1.4."),
    ),
    (
        "ExperimentalVirtiofsSupport",
        DEPRECATED,
        Some(
            "Virtiofs ExperimentalVirtiofsSupport feature gate is deprecated and will be removed \
             in >= 1.6. Please use EnableVirtioFsConfigVolumes or EnableVirtioFsPVC feature \
             gates instead",
        ),
    ),
    (
        "Passt",
        DISCONTINUED,
        Some(
            "Passt network binding is discontinued since v1.3. Please refer to Kubevirt user \
             guide for alternatives.",
        ),
    ),
    (
        "Macvtap",
        DISCONTINUED,
        Some(
            "Macvtap network binding is discontinued since v1.3. Please refer to Kubevirt user \
             guide for alternatives.",
        ),
    ),
];

/// The warning virt-operator gives when `gate` is set: a gate past beta is redundant, a
/// deprecated or discontinued one says so in its own words.
pub fn warning(gate: &str) -> Option<String> {
    let (name, state, message) = GATES.iter().find(|(name, ..)| *name == gate)?;
    Some(message.map(str::to_owned).unwrap_or_else(|| {
        format!(
            "feature gate {name} is deprecated (feature state is {state:?}), therefore it can be \
             safely removed and is redundant. For more info, please look at: \
             https://github.com/kubevirt/kubevirt/blob/main/docs/deprecation.md"
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_past_beta_warn_in_kubevirts_words() {
        assert_eq!(warning("Snapshot"), None);
        assert_eq!(warning("CPUManager"), None);
        assert_eq!(warning("NoSuchGate"), None);
        assert_eq!(
            warning("LiveMigration").as_deref(),
            Some(
                "feature gate LiveMigration is deprecated (feature state is \"General Availability\"), \
                 therefore it can be safely removed and is redundant. For more info, please look at: \
                 https://github.com/kubevirt/kubevirt/blob/main/docs/deprecation.md"
            )
        );
        assert_eq!(
            warning("Macvtap").as_deref(),
            Some(
                "Macvtap network binding is discontinued since v1.3. Please refer to Kubevirt user guide for alternatives."
            )
        );
    }
}
