//! Generates the launcher's control-socket bindings from `proto/launcher.proto` with the
//! protoc binary vendored by `protoc-bin-vendored`, so building needs no protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let well_known = protoc_bin_vendored::include_path()?;
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    println!("cargo:rerun-if-changed=proto/launcher.proto");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_with_config(
            config,
            &[std::path::PathBuf::from("proto/launcher.proto")],
            &[std::path::PathBuf::from("proto"), well_known],
        )?;
    Ok(())
}
