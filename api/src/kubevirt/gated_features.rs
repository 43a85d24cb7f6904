//! What virt-api refuses unless the cluster's feature gates enable it: a VirtualMachine's
//! or VirtualMachineInstance's use of a gated feature, judged against the active KubeVirt
//! CR's `developerConfiguration.featureGates`, in virt-api's words. Today the video device
//! of `VideoConfig`, the one gated feature this platform runs.

use serde_json::Value;

/// virt-api's refusal of a video device without its gate.
pub const VIDEO_REFUSAL: &str =
    "Video configuration is specified but the VideoConfig feature gate is not enabled";

/// The refusal of `object` (a VirtualMachine or VirtualMachineInstance, as sent) under the
/// feature gates `gates`; none when it uses nothing gated off, or is another kind.
pub fn refusal(object: &Value, gates: &[String]) -> Option<&'static str> {
    let spec = match object["kind"].as_str() {
        Some("VirtualMachine") => &object["spec"]["template"]["spec"],
        Some("VirtualMachineInstance") => &object["spec"],
        _ => return None,
    };
    let enabled = |gate: &str| gates.iter().any(|g| g == gate);
    let video = &spec["domain"]["devices"]["video"];
    (!video.is_null() && !enabled("VideoConfig")).then_some(VIDEO_REFUSAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_video_device_needs_the_videoconfig_gate_in_vms_and_vmis() {
        let devices = json!({"video": {"type": "virtio"}});
        let vm = json!({"kind": "VirtualMachine",
                        "spec": {"template": {"spec": {"domain": {"devices": devices}}}}});
        let vmi = json!({"kind": "VirtualMachineInstance",
                         "spec": {"domain": {"devices": devices}}});
        let gated = vec!["VideoConfig".to_owned()];
        for object in [&vm, &vmi] {
            assert_eq!(refusal(object, &[]), Some(VIDEO_REFUSAL));
            assert_eq!(refusal(object, &gated), None);
        }
        let plain = json!({"kind": "VirtualMachineInstance", "spec": {"domain": {"devices": {}}}});
        assert_eq!(refusal(&plain, &[]), None);
        let other = json!({"kind": "DataVolume", "spec": {"domain": {"devices": devices}}});
        assert_eq!(refusal(&other, &[]), None);
    }
}
