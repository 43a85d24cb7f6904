//! The older API versions upstream's CRDs serve beside the storage version, with the CRDs in
//! `deploy/crds`: an object written at either version reads back at the other, carrying
//! what both declare; SSP's v1beta2 and v1beta3 (strategy `None`) each keep only their own
//! fields, as kube-apiserver prunes a converted object.

use serde_json::{Value, json};

use crate::common::{Cluster, crds, run};

/// `resource` (`plural.version.group`) named `name`, read with kubectl.
fn read(c: &Cluster, resource: &str, namespace: Option<&str>, name: &str) -> Value {
    let mut args = vec!["get", resource, name];
    if let Some(namespace) = namespace {
        args.extend(["-n", namespace]);
    }
    c.json(&args)
}

/// Applies `object` and reads it back at `version` of `plural.group`.
fn applied_read_at(c: &Cluster, object: &Value, plural: &str, version: &str) -> Value {
    c.ok_stdin(&["apply", "-f", "-"], &object.to_string());
    let api_version = object["apiVersion"].as_str().expect("an apiVersion");
    let group = api_version.split('/').next().expect("a group");
    let namespace = object["metadata"]["namespace"].as_str();
    let name = object["metadata"]["name"].as_str().expect("a name");
    read(c, &format!("{plural}.{version}.{group}"), namespace, name)
}

/// A kind served at two versions with one schema: (plural, old, new, the object at old).
fn same_schema_kinds() -> Vec<(&'static str, &'static str, &'static str, Value)> {
    vec![
        (
            "virtualmachines",
            "v1alpha3",
            "v1",
            json!({"apiVersion": "kubevirt.io/v1alpha3", "kind": "VirtualMachine",
                   "metadata": {"name": "vm", "namespace": "default"},
                   "spec": {"runStrategy": "Halted",
                            "template": {"spec": {"domain": {"devices": {}}}}}}),
        ),
        (
            "virtualmachineinstances",
            "v1alpha3",
            "v1",
            json!({"apiVersion": "kubevirt.io/v1alpha3", "kind": "VirtualMachineInstance",
                   "metadata": {"name": "vmi", "namespace": "default"},
                   "spec": {"domain": {"devices": {}}}}),
        ),
        (
            "kubevirts",
            "v1alpha3",
            "v1",
            json!({"apiVersion": "kubevirt.io/v1alpha3", "kind": "KubeVirt",
                   "metadata": {"name": "kubevirt", "namespace": "default"},
                   "spec": {"imagePullPolicy": "IfNotPresent"}}),
        ),
        (
            "cdis",
            "v1alpha1",
            "v1beta1",
            json!({"apiVersion": "cdi.kubevirt.io/v1alpha1", "kind": "CDI",
                   "metadata": {"name": "cdi"},
                   "spec": {"imagePullPolicy": "IfNotPresent"}}),
        ),
        (
            "networkaddonsconfigs",
            "v1alpha1",
            "v1",
            json!({"apiVersion": "networkaddonsoperator.network.kubevirt.io/v1alpha1",
                   "kind": "NetworkAddonsConfig", "metadata": {"name": "cluster"},
                   "spec": {"imagePullPolicy": "IfNotPresent"}}),
        ),
    ]
}

#[test]
fn upstreams_older_versions_read_back_at_the_storage_version_and_back() {
    let c = Cluster::start(crds());
    for (plural, old, new, at_old) in same_schema_kinds() {
        let at_new = applied_read_at(&c, &at_old, plural, new);
        let group = at_old["apiVersion"]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap();
        assert_eq!(at_new["apiVersion"], format!("{group}/{new}"), "{plural}");
        assert_eq!(at_new["spec"], at_old["spec"], "{plural} at {new}");
        // Written back at the storage version, and read at the older one.
        let mut changed = at_new.clone();
        changed["metadata"] = json!({"name": at_old["metadata"]["name"],
                                     "namespace": at_old["metadata"]["namespace"]});
        // A change the kind's spec has: the pull policy, or a VM's run strategy; a VMI's
        // spec is read back unchanged.
        if changed["spec"].get("imagePullPolicy").is_some() {
            changed["spec"]["imagePullPolicy"] = json!("Always");
        } else if changed["spec"].get("runStrategy").is_some() {
            changed["spec"]["runStrategy"] = json!("Manual");
        }
        if changed["metadata"]["namespace"].is_null() {
            changed["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("namespace");
        }
        let at_old_again = applied_read_at(&c, &changed, plural, old);
        assert_eq!(
            at_old_again["apiVersion"],
            format!("{group}/{old}"),
            "{plural}"
        );
        assert_eq!(at_old_again["spec"], changed["spec"], "{plural} at {old}");
    }
}

#[test]
fn specs_upstream_leaves_optional_are_optional() {
    let c = Cluster::start(crds());
    let nac = json!({"apiVersion": "networkaddonsoperator.network.kubevirt.io/v1",
                     "kind": "NetworkAddonsConfig", "metadata": {"name": "cluster"}});
    let read = applied_read_at(&c, &nac, "networkaddonsconfigs", "v1");
    assert_eq!(read["spec"], json!({}), "a missing spec reads as empty");
    let hpp = json!({"apiVersion": "hostpathprovisioner.kubevirt.io/v1beta1",
                     "kind": "HostPathProvisioner", "metadata": {"name": "hpp"}});
    applied_read_at(&c, &hpp, "hostpathprovisioners", "v1beta1");
    let cdi = json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDI",
                     "metadata": {"name": "cdi"},
                     "spec": {"config": {"imagePullSecrets": [{}]}}});
    let read = applied_read_at(&c, &cdi, "cdis", "v1beta1");
    assert_eq!(
        read["spec"]["config"]["imagePullSecrets"],
        json!([{"name": ""}])
    );
}

#[test]
fn ssp_moves_between_v1beta2_and_v1beta3_keeping_what_each_declares() {
    let c = Cluster::start(crds());
    c.ok(&["create", "namespace", "kubevirt-hyperconverged"]);
    let common = json!({"namespace": "openshift"});
    let v1beta2 = json!({"apiVersion": "ssp.kubevirt.io/v1beta2", "kind": "SSP",
        "metadata": {"name": "ssp", "namespace": "kubevirt-hyperconverged"},
        "spec": {"commonTemplates": common, "templateValidator": {"replicas": 1},
                 "tokenGenerationService": {"enabled": true},
                 "featureGates": {"deployVmConsoleProxy": true},
                 "tektonPipelines": {"namespace": "tekton"}}});
    let v1beta3 = applied_read_at(&c, &v1beta2, "ssps", "v1beta3");
    assert_eq!(
        v1beta3["spec"],
        json!({"commonTemplates": common, "templateValidator": {"replicas": 1},
               "tokenGenerationService": {"enabled": true}}),
        "v1beta2's ignored fields are not stored"
    );
    let mut changed = json!({"apiVersion": "ssp.kubevirt.io/v1beta3", "kind": "SSP",
        "metadata": {"name": "ssp", "namespace": "kubevirt-hyperconverged"}});
    changed["spec"] = v1beta3["spec"].clone();
    changed["spec"]["enableMultipleArchitectures"] = json!(true);
    changed["spec"]["cluster"] = json!({"workloadArchitectures": ["amd64", "arm64"]});
    let v1beta2 = applied_read_at(&c, &changed, "ssps", "v1beta2");
    assert_eq!(v1beta2["apiVersion"], "ssp.kubevirt.io/v1beta2");
    assert_eq!(
        v1beta2["spec"],
        json!({"commonTemplates": common, "templateValidator": {"replicas": 1},
               "tokenGenerationService": {"enabled": true}}),
        "v1beta3's architectures are not said at v1beta2"
    );
    let stored = read(
        &c,
        "ssps.v1beta3.ssp.kubevirt.io",
        Some("kubevirt-hyperconverged"),
        "ssp",
    );
    assert_eq!(
        stored["spec"]["cluster"]["workloadArchitectures"],
        json!(["amd64", "arm64"])
    );
    // kubectl's own choice is the storage version.
    let preferred = read(&c, "ssp", Some("kubevirt-hyperconverged"), "ssp");
    assert_eq!(preferred["apiVersion"], "ssp.kubevirt.io/v1beta3");
}

#[test]
fn a_deprecated_version_warns_on_every_request_and_the_current_one_does_not() {
    let c = Cluster::start(crds());
    let vm = json!({"apiVersion": "kubevirt.io/v1alpha3", "kind": "VirtualMachine",
                    "metadata": {"name": "old", "namespace": "default"},
                    "spec": {"runStrategy": "Halted",
                             "template": {"spec": {"domain": {"devices": {}}}}}});
    let warning = "Warning: kubevirt.io/v1alpha3 is now deprecated and will be removed";
    let stderr = |args: &[&str], input: Option<&str>| {
        let out = run(c.kubectl_command(args), input);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), stderr)
    };
    let (applied, said) = stderr(&["apply", "-f", "-"], Some(&vm.to_string()));
    assert!(applied && said.contains(warning), "{said}");
    for args in [
        ["get", "virtualmachines.v1alpha3.kubevirt.io", "old"],
        ["get", "virtualmachines.v1alpha3.kubevirt.io", "missing"],
    ] {
        let (_, said) = stderr(&args, None);
        assert!(said.contains(warning), "{args:?}: {said}");
    }
    let (found, said) = stderr(&["get", "virtualmachines.v1.kubevirt.io", "old"], None);
    assert!(found && !said.contains("Warning"), "{said}");
}
