//! Templates on `ferrovirt up`: the common templates bundle applied with kubectl,
//! `ferrovirt process NAME -p KEY=VALUE | kubectl apply -f -` giving the template's VM,
//! `processedtemplates` answered to kubectl, and bad parameters refused with OpenShift's
//! messages.

use crate::platform;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use platform::Platform;
use serde_json::Value;

const NAMESPACE: &str = "templates";

/// A template with a required parameter, as a user would write one.
const REQUIRED_TEMPLATE: &str = r#"
apiVersion: template.openshift.io/v1
kind: Template
metadata:
  name: with-required
objects:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: ${NAME}
  data:
    database: ${DB}
    replicas: "${{REPLICAS}}"
parameters:
- name: NAME
  generate: expression
  from: cm-[a-z0-9]{5}
- name: DB
  required: true
- name: REPLICAS
  value: "3"
labels:
  made-by: ${DB}
"#;

/// `ferrovirt ARGS` against the platform, with `stdin` piped in.
fn ferrovirt(platform: &Platform, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .args(args)
        .env("KUBECONFIG", platform.kubeconfig())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running ferrovirt");
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes()).expect("writing stdin");
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("ferrovirt output")
}

fn stdout_of(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr_of_failure(output: Output, what: &str) -> String {
    assert!(
        !output.status.success(),
        "{what} succeeded: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn templates_are_served_processed_and_refused_with_openshifts_messages() {
    let platform = Platform::start("templates");
    platform.ok(&["create", "namespace", NAMESPACE]);

    // The bundle applies as Templates; kubectl discovers both template resources.
    let bundle = stdout_of(
        ferrovirt(&platform, &["common-templates"], None),
        "common-templates",
    );
    platform.ok_stdin(&["apply", "-n", NAMESPACE, "-f", "-"], Some(&bundle));
    let template = platform
        .json(&["get", "-n", NAMESPACE, "template", "fedora-server-small"])
        .expect("the fedora-server-small template");
    assert_eq!(
        template["metadata"]["labels"]["os.template.kubevirt.io/fedora43"],
        "true"
    );
    let resources = platform.ok(&["api-resources", "--api-group", "template.openshift.io"]);
    assert!(resources.contains("processedtemplates"), "{resources}");
    assert!(resources.contains("templates"), "{resources}");

    // `ferrovirt process | kubectl apply` makes the template's VM with the given parameters.
    let args = [
        "process",
        "fedora-server-small",
        "-n",
        NAMESPACE,
        "-p",
        "NAME=web",
        "-p",
        "DATA_SOURCE_NAME=fedora-golden",
        "-o",
        "yaml",
    ];
    let list = stdout_of(ferrovirt(&platform, &args, None), "process");
    assert!(list.contains("kind: List"), "{list}");
    // kubectl validates the items of a List on the client against /openapi/v2, where the
    // embedded server's VirtualMachine definition lacks apiVersion, kind and metadata (a
    // single object is validated by the server): validation is left to the server here.
    platform.ok_stdin(
        &["apply", "--validate=false", "-n", NAMESPACE, "-f", "-"],
        Some(&list),
    );
    let vm = platform
        .json(&["get", "-n", NAMESPACE, "vm", "web"])
        .expect("the VM the template made");
    assert_eq!(
        vm["metadata"]["labels"]["vm.kubevirt.io/template"],
        "fedora-server-small"
    );
    let source = &vm["spec"]["dataVolumeTemplates"][0]["spec"]["sourceRef"];
    assert_eq!(source["name"], "fedora-golden");
    assert_eq!(source["namespace"], "kubevirt-os-images");
    let spec = &vm["spec"]["template"]["spec"];
    assert_eq!(spec["domain"]["memory"]["guest"], "2Gi");
    let user_data = spec["volumes"][1]["cloudInitNoCloud"]["userData"]
        .as_str()
        .unwrap();
    let password = user_data
        .lines()
        .find_map(|line| line.strip_prefix("password: "))
        .expect("a generated password");
    assert_eq!(password.len(), 14, "{user_data}");
    assert!(!password.contains('$'), "{user_data}");

    // The template's validation rule travels with the VM: 1Gi is refused with its message.
    let smaller = r#"{"spec":{"template":{"spec":{"domain":{"memory":{"guest":"1Gi"}}}}}}"#;
    let refused = platform.kubectl(
        &[
            "patch",
            "-n",
            NAMESPACE,
            "vm",
            "web",
            "--type=merge",
            "-p",
            smaller,
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "1Gi was accepted");
    assert!(stderr.contains("This VM requires more memory."), "{stderr}");

    // Without NAME, a name is generated from the template's expression.
    let out = stdout_of(
        ferrovirt(
            &platform,
            &["process", "fedora-server-small", "-n", NAMESPACE],
            None,
        ),
        "process without NAME",
    );
    let list: Value = serde_json::from_str(&out).expect("JSON by default");
    let name = list["items"][0]["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("fedora-") && name.len() == 23, "{name}");

    // A template of the user's: non-string parameters and labels; a required one missing
    // is refused with OpenShift's message.
    platform.ok_stdin(
        &["apply", "-n", NAMESPACE, "-f", "-"],
        Some(REQUIRED_TEMPLATE),
    );
    let err = stderr_of_failure(
        ferrovirt(
            &platform,
            &["process", "with-required", "-n", NAMESPACE],
            None,
        ),
        "process without a required parameter",
    );
    assert!(
        err.contains("template.parameters[1]: Required value: template.parameters[1]: parameter DB is required and must be specified"),
        "{err}"
    );
    let err = stderr_of_failure(
        ferrovirt(
            &platform,
            &[
                "process",
                "with-required",
                "-n",
                NAMESPACE,
                "-p",
                "DB=x",
                "-p",
                "BOGUS=1",
            ],
            None,
        ),
        "process with an unknown parameter",
    );
    assert!(err.contains("unknown parameter name \"BOGUS\""), "{err}");
    let out = stdout_of(
        ferrovirt(
            &platform,
            &["process", "with-required", "-n", NAMESPACE, "-p", "DB=pg"],
            None,
        ),
        "process with DB",
    );
    let list: Value = serde_json::from_str(&out).unwrap();
    let config_map = &list["items"][0];
    assert_eq!(config_map["data"]["database"], "pg");
    assert_eq!(config_map["metadata"]["labels"]["made-by"], "pg");
    assert!(
        config_map["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("cm-")
    );
    // `${{REPLICAS}}` became the JSON number, not the string "3".
    assert_eq!(config_map["data"]["replicas"], 3);

    // processedtemplates answers kubectl directly, as OpenShift's API server does.
    let template = platform.ok(&[
        "get",
        "-n",
        NAMESPACE,
        "template",
        "with-required",
        "-o",
        "json",
    ]);
    let mut template: Value = serde_json::from_str(&template).unwrap();
    template["parameters"][1]["value"] = Value::String("mysql".into());
    let path = format!("/apis/template.openshift.io/v1/namespaces/{NAMESPACE}/processedtemplates");
    let processed = platform.ok_stdin(
        &["create", "--raw", &path, "-f", "-"],
        Some(&template.to_string()),
    );
    let processed: Value = serde_json::from_str(&processed).unwrap();
    assert_eq!(processed["kind"], "Template");
    assert_eq!(processed["objects"][0]["data"]["database"], "mysql");
    template["parameters"][1]["value"] = Value::String(String::new());
    let out = platform.kubectl(
        &["create", "--raw", &path, "-f", "-"],
        Some(&template.to_string()),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("parameter DB is required and must be specified"),
        "{err}"
    );
}
