//! What HCO tells KubeVirt about the hosts' hardware: the CPU models VMs must not be
//! scheduled for, and the host devices VMs may be given. Both are read from a v1beta1 HC's
//! spec and written in the KubeVirt CR's shape, as upstream HCO's KubeVirt handler
//! (`controllers/handlers/kubevirt.go`, `getKVConfig`) writes them. Pure functions of JSON,
//! lenient as the rest of the mapping: an entry of the wrong shape is skipped.

use serde_json::{Map, Value, json};

/// The CPU models HCO always marks obsolete, whatever the HC says (upstream's
/// `hardcodedObsoleteCPUModels` in `controllers/handlers/kubevirt.go`).
pub const BUILT_IN_OBSOLETE_CPU_MODELS: [&str; 34] = [
    "486",
    "486-v1",
    "pentium",
    "pentium-v1",
    "pentium2",
    "pentium2-v1",
    "pentium3",
    "pentium3-v1",
    "pentiumpro",
    "pentiumpro-v1",
    "coreduo",
    "coreduo-v1",
    "n270",
    "n270-v1",
    "core2duo",
    "core2duo-v1",
    "Conroe",
    "Conroe-v1",
    "athlon",
    "athlon-v1",
    "phenom",
    "phenom-v1",
    "qemu64",
    "qemu64-v1",
    "qemu32",
    "qemu32-v1",
    "kvm64",
    "kvm64-v1",
    "kvm32",
    "kvm32-v1",
    "Opteron_G1",
    "Opteron_G1-v1",
    "Opteron_G2",
    "Opteron_G2-v1",
];

/// KubeVirt's `configuration.obsoleteCPUModels` for a v1beta1 HC spec: every built-in model
/// and every model of the HC's `obsoleteCPUs.cpuModels`, each mapped to `true` (upstream's
/// `getObsoleteCPUConfig`). Always set, since the built-in list is never empty.
/// `obsoleteCPUs.minCPUModel` is not passed on: upstream deprecated it and ignores it, so
/// KubeVirt's `minCPUModel` stays unset.
pub fn obsolete_cpu_models(hc_spec: &Value) -> Value {
    let from_hc = hc_spec["obsoleteCPUs"]["cpuModels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    let models: Map<String, Value> = BUILT_IN_OBSOLETE_CPU_MODELS
        .into_iter()
        .chain(from_hc)
        .map(|model| (model.to_owned(), Value::Bool(true)))
        .collect();
    Value::Object(models)
}

/// KubeVirt's `configuration.permittedHostDevices` for a v1beta1 HC spec (upstream's
/// `toKvPermittedHostDevices`): none when the HC sets none; otherwise its PCI, mediated and
/// USB devices in KubeVirt's shape without the entries the HC marks `disabled`, a list left
/// out when nothing of it remains (Go's `omitempty`).
pub fn permitted_host_devices(hc_spec: &Value) -> Option<Value> {
    let devices = hc_spec
        .get("permittedHostDevices")
        .filter(|d| d.is_object())?;
    let mut permitted = Map::new();
    for (hc_key, kubevirt_key, convert) in DEVICE_LISTS {
        let enabled: Vec<Value> = devices[hc_key]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|device| device.is_object() && !is_disabled(device))
            .map(convert)
            .collect();
        if !enabled.is_empty() {
            permitted.insert(kubevirt_key.to_owned(), Value::Array(enabled));
        }
    }
    Some(Value::Object(permitted))
}

/// A device of the HC in KubeVirt's shape.
type DeviceConversion = fn(&Value) -> Value;

/// The HC's device lists: (HC's name, KubeVirt's name, how an entry converts).
const DEVICE_LISTS: [(&str, &str, DeviceConversion); 3] = [
    ("pciHostDevices", "pciHostDevices", pci_host_device),
    ("mediatedDevices", "mediatedDevices", mediated_device),
    ("usbHostDevices", "usb", usb_host_device),
];

fn is_disabled(device: &Value) -> bool {
    device["disabled"].as_bool().unwrap_or(false)
}

/// A string field as Go writes it: always present, empty when unset.
fn text(device: &Value, key: &str) -> Value {
    json!(device[key].as_str().unwrap_or_default())
}

/// The fields every kind of device shares: its resource name, and whether an external
/// device plugin serves it (written only when true, as Go's `omitempty`).
fn resource(device: &Value) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("resourceName".into(), text(device, "resourceName"));
    if device["externalResourceProvider"].as_bool() == Some(true) {
        fields.insert("externalResourceProvider".into(), json!(true));
    }
    fields
}

/// HC's `pciDeviceSelector` is KubeVirt's `pciVendorSelector`.
fn pci_host_device(device: &Value) -> Value {
    let mut fields = resource(device);
    fields.insert(
        "pciVendorSelector".into(),
        text(device, "pciDeviceSelector"),
    );
    Value::Object(fields)
}

fn mediated_device(device: &Value) -> Value {
    let mut fields = resource(device);
    fields.insert("mdevNameSelector".into(), text(device, "mdevNameSelector"));
    Value::Object(fields)
}

/// A USB device with its vendor/product selectors (left out when there are none).
fn usb_host_device(device: &Value) -> Value {
    let mut fields = resource(device);
    let selectors: Vec<Value> = device["selectors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|selector| selector.is_object())
        .map(|selector| json!({"vendor": text(selector, "vendor"), "product": text(selector, "product")}))
        .collect();
    if !selectors.is_empty() {
        fields.insert("selectors".into(), Value::Array(selectors));
    }
    Value::Object(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The map upstream's `getObsoleteCPUConfig` gives with no HC models: the 34 models of
    /// `hardcodedObsoleteCPUModels` in `controllers/handlers/kubevirt.go`, each true,
    /// written out here from upstream's source rather than from our constant.
    fn upstream_built_in_map() -> Map<String, Value> {
        let upstream = json!({
            "486": true, "486-v1": true, "pentium": true, "pentium-v1": true,
            "pentium2": true, "pentium2-v1": true, "pentium3": true, "pentium3-v1": true,
            "pentiumpro": true, "pentiumpro-v1": true, "coreduo": true, "coreduo-v1": true,
            "n270": true, "n270-v1": true, "core2duo": true, "core2duo-v1": true,
            "Conroe": true, "Conroe-v1": true, "athlon": true, "athlon-v1": true,
            "phenom": true, "phenom-v1": true, "qemu64": true, "qemu64-v1": true,
            "qemu32": true, "qemu32-v1": true, "kvm64": true, "kvm64-v1": true,
            "kvm32": true, "kvm32-v1": true, "Opteron_G1": true, "Opteron_G1-v1": true,
            "Opteron_G2": true, "Opteron_G2-v1": true,
        });
        upstream.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn without_hc_models_kubevirt_gets_hcos_built_in_list() {
        let models = obsolete_cpu_models(&json!({}));
        assert_eq!(models, Value::Object(upstream_built_in_map()));
        assert_eq!(models.as_object().map(Map::len), Some(34));
    }

    #[test]
    fn hc_models_join_the_built_in_list_and_min_cpu_model_is_dropped() {
        let spec = json!({"obsoleteCPUs": {
            "cpuModels": ["Penryn", "486", "Nehalem"], "minCPUModel": "Haswell"}});
        let mut expected = upstream_built_in_map();
        expected.insert("Penryn".into(), json!(true));
        expected.insert("Nehalem".into(), json!(true));
        let models = obsolete_cpu_models(&spec);
        assert_eq!(models, Value::Object(expected));
        assert!(models.get("Haswell").is_none());
    }

    #[test]
    fn host_devices_take_kubevirts_shape_without_the_disabled_ones() {
        let spec = json!({"permittedHostDevices": {
            "pciHostDevices": [
                {"pciDeviceSelector": "10DE:1EB8", "resourceName": "nvidia.com/TU104GL_Tesla_T4"},
                {"pciDeviceSelector": "8086:6F54", "resourceName": "intel.com/qat",
                 "externalResourceProvider": true},
                {"pciDeviceSelector": "10DE:1DB6", "resourceName": "nvidia.com/GV100GL",
                 "disabled": true},
            ],
            "mediatedDevices": [
                {"mdevNameSelector": "GRID T4-1Q", "resourceName": "nvidia.com/GRID_T4-1Q",
                 "externalResourceProvider": false},
                {"mdevNameSelector": "GRID T4-2Q", "resourceName": "nvidia.com/GRID_T4-2Q",
                 "disabled": true},
            ],
            "usbHostDevices": [
                {"resourceName": "kubevirt.io/peripherals",
                 "selectors": [{"vendor": "045e", "product": "07a5"},
                               {"vendor": "062a", "product": "4102"}]},
                {"resourceName": "kubevirt.io/storage", "externalResourceProvider": true},
                {"resourceName": "kubevirt.io/webcam", "disabled": true,
                 "selectors": [{"vendor": "046d", "product": "0825"}]},
            ],
        }});
        // Upstream's toKvPciHostDevices, toKvMediatedDevices and toKvUSBHostDevices, as
        // KubeVirt's PermittedHostDevices marshals (omitempty on the lists, selectors and
        // externalResourceProvider).
        let expected = json!({
            "pciHostDevices": [
                {"pciVendorSelector": "10DE:1EB8", "resourceName": "nvidia.com/TU104GL_Tesla_T4"},
                {"pciVendorSelector": "8086:6F54", "resourceName": "intel.com/qat",
                 "externalResourceProvider": true},
            ],
            "mediatedDevices": [
                {"mdevNameSelector": "GRID T4-1Q", "resourceName": "nvidia.com/GRID_T4-1Q"},
            ],
            "usb": [
                {"resourceName": "kubevirt.io/peripherals",
                 "selectors": [{"vendor": "045e", "product": "07a5"},
                               {"vendor": "062a", "product": "4102"}]},
                {"resourceName": "kubevirt.io/storage", "externalResourceProvider": true},
            ],
        });
        assert_eq!(permitted_host_devices(&spec), Some(expected));
    }

    #[test]
    fn no_host_devices_stay_unset_and_all_disabled_leaves_an_empty_object() {
        assert_eq!(permitted_host_devices(&json!({})), None);
        assert_eq!(
            permitted_host_devices(&json!({"permittedHostDevices": null})),
            None
        );
        let all_disabled = json!({"permittedHostDevices": {
            "pciHostDevices": [{"pciDeviceSelector": "10DE:1EB8", "resourceName": "gpu", "disabled": true}],
            "usbHostDevices": [],
        }});
        assert_eq!(permitted_host_devices(&all_disabled), Some(json!({})));
    }
}
