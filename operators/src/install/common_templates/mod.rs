//! The common templates bundle: `template.openshift.io/v1` Templates for the supported
//! operating systems, rendered in code the way kubevirt/common-templates renders its bundle
//! (names such as `fedora-server-small`, upstream's labels, annotations, parameters and
//! validations). The SSP operator creates them in `spec.commonTemplates.namespace`.

pub mod flavor;
pub mod os;
mod render;

/// The common-templates release whose content the bundle follows; the
/// `template.kubevirt.io/version` label.
pub const BUNDLE_VERSION: &str = "v0.35.0";
/// The architecture the templates are for (`template.kubevirt.io/architecture`).
pub const ARCHITECTURE: &str = "amd64";

/// Every common template, without a namespace, ordered by name.
pub fn bundle() -> Vec<serde_json::Value> {
    let mut templates: Vec<(String, serde_json::Value)> = os::OPERATING_SYSTEMS
        .iter()
        .flat_map(|os| {
            os.sizes
                .variants()
                .into_iter()
                .map(move |variant| (variant.template_name(os.os), render::template(os, &variant)))
        })
        .collect();
    templates.sort_by(|a, b| a.0.cmp(&b.0));
    templates
        .into_iter()
        .map(|(_, template)| template)
        .collect()
}

#[cfg(test)]
mod tests {
    use api::template::Template;
    use api::template::generator::OsRandomness;
    use api::template::process::process;
    use serde_json::{Value, json};

    use super::*;

    fn find(name: &str) -> Value {
        bundle()
            .into_iter()
            .find(|t| t["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no template {name}"))
    }

    #[test]
    fn the_bundle_has_every_linux_server_and_desktop_template() {
        let names: Vec<String> = bundle()
            .iter()
            .map(|t| t["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        for os in ["centos-stream9", "centos-stream10", "rhel8", "rhel9"] {
            for workload in ["server", "desktop"] {
                for flavor in ["tiny", "small", "medium", "large"] {
                    let name = format!("{os}-{workload}-{flavor}");
                    assert!(names.contains(&name), "{name} missing");
                }
            }
        }
        for name in [
            "fedora-server-small",
            "fedora-desktop-large",
            "fedora-highperformance-medium",
            "ubuntu-desktop-medium",
            "opensuse-server-large",
            "rhel9-highperformance-tiny",
        ] {
            assert!(names.contains(&name.to_string()), "{name} missing");
        }
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, names, "names are unique and ordered");
        assert!(
            bundle()
                .iter()
                .all(|t| t["metadata"].get("namespace").is_none())
        );
    }

    #[test]
    fn fedora_server_small_reads_as_upstream() {
        let t = find("fedora-server-small");
        let labels = &t["metadata"]["labels"];
        assert_eq!(labels["os.template.kubevirt.io/fedora43"], "true");
        assert_eq!(labels["workload.template.kubevirt.io/server"], "true");
        assert_eq!(labels["flavor.template.kubevirt.io/small"], "true");
        assert_eq!(labels["template.kubevirt.io/type"], "base");
        assert_eq!(labels["template.kubevirt.io/default-os-variant"], "true");
        assert_eq!(labels["template.kubevirt.io/architecture"], "amd64");
        let annotations = &t["metadata"]["annotations"];
        assert_eq!(annotations["iconClass"], "icon-fedora");
        assert_eq!(
            annotations["defaults.template.kubevirt.io/disk"],
            "rootdisk"
        );
        assert_eq!(
            annotations["name.os.template.kubevirt.io/fedora43"],
            "Fedora Linux 43 or higher"
        );
        let vm = &t["objects"][0];
        let rules: Value = serde_json::from_str(
            vm["metadata"]["annotations"]["vm.kubevirt.io/validations"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(rules[0]["name"], "minimal-required-memory");
        assert_eq!(rules[0]["message"], "This VM requires more memory.");
        assert_eq!(rules[0]["min"], 2147483648u64);
        let domain = &vm["spec"]["template"]["spec"]["domain"];
        assert_eq!(domain["memory"]["guest"], "2Gi");
        assert_eq!(domain["firmware"]["bootloader"]["efi"], json!({}));
        assert!(domain["devices"].get("inputs").is_none());
        let source = &vm["spec"]["dataVolumeTemplates"][0]["spec"]["sourceRef"];
        assert_eq!(source["name"], "${DATA_SOURCE_NAME}");
        let parameters = t["parameters"].as_array().unwrap();
        assert_eq!(parameters[0]["from"], "fedora-[a-z0-9]{16}");
        assert_eq!(parameters[1]["value"], "fedora");
        assert_eq!(parameters[2]["value"], "kubevirt-os-images");
        assert_eq!(parameters[3]["generate"], "expression");
    }

    #[test]
    fn flavors_and_workloads_shape_the_vm() {
        let large = find("rhel9-highperformance-large");
        let domain = &large["objects"][0]["spec"]["template"]["spec"]["domain"];
        assert_eq!(domain["cpu"]["sockets"], 2);
        assert_eq!(domain["cpu"]["dedicatedCpuPlacement"], true);
        assert_eq!(domain["ioThreadsPolicy"], "shared");
        assert_eq!(domain["devices"]["networkInterfaceMultiqueue"], true);
        assert_eq!(domain["devices"]["disks"][0]["dedicatedIOThread"], true);
        let desktop = find("centos-stream9-desktop-tiny");
        let domain = &desktop["objects"][0]["spec"]["template"]["spec"]["domain"];
        assert_eq!(domain["memory"]["guest"], "1.5Gi");
        assert_eq!(domain["devices"]["inputs"][0]["type"], "tablet");
        assert!(domain.get("firmware").is_none());
        let ubuntu = find("ubuntu-server-small");
        let domain = &ubuntu["objects"][0]["spec"]["template"]["spec"]["domain"];
        assert_eq!(domain["memory"]["guest"], "3Gi");
        assert_eq!(domain["devices"]["inputs"][0]["name"], "tablet");
    }

    #[test]
    fn every_template_processes_into_an_admitted_virtual_machine() {
        for value in bundle() {
            let name = value["metadata"]["name"].clone();
            let mut template: Template = serde_json::from_value(value).unwrap();
            process(&mut template, &mut OsRandomness).unwrap();
            assert_eq!(template.objects.len(), 1, "{name}");
            let mut vm = template.objects[0].clone();
            let vm_name = vm["metadata"]["name"].as_str().unwrap().to_string();
            assert!(
                vm_name.len() > 16 && !vm_name.contains('$'),
                "{name}: {vm_name}"
            );
            let text = vm.to_string();
            assert!(!text.contains("${"), "{name}: unsubstituted {text}");
            vm["metadata"]["namespace"] = json!("default");
            admission::admit(&mut vm).unwrap_or_else(|err| panic!("{name}: {err}"));
        }
    }
}
