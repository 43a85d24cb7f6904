//! Compiles Kubernetes' `generated.proto` files into one `FileDescriptorSet` for the API
//! server's protobuf media type (`src/apiserver/kube_protobuf`).
//!
//! The files come from the `k8s-rs-pb` crate's sources (Kubernetes 1.33, the version the
//! server reports), found through `cargo metadata`; `protobuf-parse` compiles them without
//! `protoc`. The set is written to `$OUT_DIR/kubernetes.fds` and embedded in the binary.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Kubernetes version whose definitions are compiled, as k8s-rs-pb names its folders.
const KUBERNETES: &str = "v1_33";

/// The packages the server speaks protobuf for, with everything they import.
const PROTO_FILES: &[&str] = &[
    "apimachinery/pkg/api/resource/generated.proto",
    "apimachinery/pkg/apis/meta/v1/generated.proto",
    "apimachinery/pkg/runtime/generated.proto",
    "apimachinery/pkg/runtime/schema/generated.proto",
    "apimachinery/pkg/util/intstr/generated.proto",
    "api/core/v1/generated.proto",
    "api/apps/v1/generated.proto",
    "api/events/v1/generated.proto",
    "api/storage/v1/generated.proto",
    "api/coordination/v1/generated.proto",
    "api/rbac/v1/generated.proto",
    "api/authentication/v1/generated.proto",
    "api/authorization/v1/generated.proto",
    "api/admissionregistration/v1/generated.proto",
    "api/batch/v1/generated.proto",
    "api/policy/v1/generated.proto",
    "kube_aggregator/pkg/apis/apiregistration/v1/generated.proto",
];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=../Cargo.lock");
    let root = proto_root().unwrap_or_else(|err| panic!("finding Kubernetes' .proto files: {err}"));
    let inputs: Vec<PathBuf> = PROTO_FILES.iter().map(|f| root.join(f)).collect();
    let set = protobuf_parse::Parser::new()
        .pure()
        .include(&root)
        .inputs(&inputs)
        .file_descriptor_set()
        .unwrap_or_else(|err| panic!("compiling {}: {err:#}", root.display()));
    let bytes = protobuf::Message::write_to_bytes(&set)
        .unwrap_or_else(|err| panic!("encoding the descriptor set: {err}"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("kubernetes.fds"), bytes)
        .unwrap_or_else(|err| panic!("writing kubernetes.fds: {err}"));
}

/// `src/<version>` of the k8s-rs-pb package this build resolved.
fn proto_root() -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    // Only the build machine's packages: those of other platforms may never have been
    // downloaded, and a build script must not reach the network.
    let host = std::env::var("HOST").map_err(|e| format!("cargo sets HOST: {e}"))?;
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host, "--manifest-path"])
        .arg(&manifest)
        .output()
        .map_err(|e| format!("running cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
    let package_manifest = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "k8s-rs-pb")
        .and_then(|p| p["manifest_path"].as_str())
        .ok_or("k8s-rs-pb is not among the resolved packages")?;
    let root = Path::new(package_manifest)
        .parent()
        .ok_or("k8s-rs-pb's manifest has no folder")?
        .join("src")
        .join(KUBERNETES);
    if !root.join(PROTO_FILES[0]).is_file() {
        return Err(format!("{} holds no {}", root.display(), PROTO_FILES[0]));
    }
    Ok(root)
}
