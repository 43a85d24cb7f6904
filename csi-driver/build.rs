//! Generates the CSI bindings from `proto/csi.proto` with the protoc binary vendored by the
//! `protoc-bin-vendored` crate, so building needs no protoc on the machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let well_known = protoc_bin_vendored::include_path()?;
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    println!("cargo:rerun-if-changed=proto/csi.proto");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_with_config(
            config,
            &[std::path::PathBuf::from("proto/csi.proto")],
            &[std::path::PathBuf::from("proto"), well_known],
        )?;
    Ok(())
}
