//! Writes every CRD of the API as `<group>_<plural>.yaml` into a directory:
//! `cargo run -p ferrovirt-api --bin crdgen -- deploy/crds`. With no directory the CRDs are
//! printed to standard output as one multi-document YAML stream.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args_os().nth(1).map(PathBuf::from);
    let mut stdout = String::new();
    for crd in api::crds::deployed() {
        let yaml = match api::crds::to_yaml(&crd) {
            Ok(yaml) => yaml,
            Err(e) => {
                eprintln!(
                    "crdgen: cannot serialize {}: {e}",
                    api::crds::file_name(&crd)
                );
                return ExitCode::FAILURE;
            }
        };
        match &dir {
            Some(dir) => {
                let path = dir.join(api::crds::file_name(&crd));
                if let Err(e) =
                    std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, yaml))
                {
                    eprintln!("crdgen: cannot write {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
            }
            None => {
                stdout.push_str("---\n");
                stdout.push_str(&yaml);
            }
        }
    }
    print!("{stdout}");
    ExitCode::SUCCESS
}
