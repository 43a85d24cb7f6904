//! CDI's PVC rendering on `ferrovirt up`: a claim labeled
//! `cdi.kubevirt.io/applyStorageProfile: "true"` is completed from its class's StorageProfile
//! when it is created (kubectl reads back what was filled in), a claim that cannot be is
//! refused with CDI's message, and CDIConfig's `webhookPvcRendering: Disabled` turns it off.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::platform::Platform;

/// A claim asking for rendering, with `spec`.
fn labeled_claim(name: &str, spec: Value) -> String {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": name, "namespace": "default",
                        "labels": {"cdi.kubevirt.io/applyStorageProfile": "true"}},
           "spec": spec})
    .to_string()
}

/// The StorageProfile of the default class once its controller has described it.
fn described_profile(platform: &Platform) -> Value {
    let started = Instant::now();
    loop {
        let profile = platform.json(&["get", "storageprofile", "hostpath-csi"]);
        if let Some(profile) = profile.filter(|p| p["status"]["claimPropertySets"][0].is_object()) {
            return profile;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no StorageProfile hostpath-csi"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_labeled_claim_is_completed_from_its_storage_profile() {
    let platform = Platform::start("pvc-rendering");
    let set = described_profile(&platform)["status"]["claimPropertySets"][0].clone();
    let size = json!({"requests": {"storage": "64Mi"}});
    platform.ok_stdin(
        &["create", "-f", "-"],
        Some(&labeled_claim("bare", json!({"resources": size}))),
    );
    let bare = platform.json(&["get", "pvc", "bare"]).expect("the claim");
    assert_eq!(bare["spec"]["storageClassName"], "hostpath-csi", "{bare}");
    assert_eq!(bare["spec"]["accessModes"], set["accessModes"], "{bare}");
    assert_eq!(bare["spec"]["volumeMode"], set["volumeMode"], "{bare}");
    // 64 MiB over (1 - 0.06), rounded up: what a DataVolume asking for 64Mi gets.
    assert_eq!(
        bare["spec"]["resources"]["requests"]["storage"], "71392409",
        "{bare}"
    );

    let refused = platform.kubectl(
        &["create", "-f", "-"],
        Some(&labeled_claim(
            "nothing",
            json!({"storageClassName": "no-such-class", "resources": size}),
        )),
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains(r#"admission webhook "pvc-mutate.cdi.kubevirt.io" denied the request: PVC spec is missing accessMode and no storageClass to choose profile"#),
        "{said}"
    );

    platform.patch_cdi_config(r#"{"spec":{"webhookPvcRendering":"Disabled"}}"#);
    let spec = json!({"accessModes": ["ReadWriteOnce"], "resources": size});
    platform.ok_stdin(
        &["create", "-f", "-"],
        Some(&labeled_claim("as-written", spec)),
    );
    let kept = platform
        .json(&["get", "pvc", "as-written"])
        .expect("the claim");
    assert_eq!(
        kept["spec"]["resources"]["requests"]["storage"], "64Mi",
        "{kept}"
    );
}
