//! Prints the source tree's breaches of its house rules (module cycles, long files, long
//! functions): `cargo run -p ferrovirt-tests --bin structure [ROOT]`. The test suite runs the
//! same check; this shows it for another checkout, or while a restructuring is under way.

use std::path::PathBuf;
use std::process::ExitCode;

use ferrovirt_tests::structure::check_workspace;

fn main() -> ExitCode {
    let root = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(ferrovirt_tests::repo_root);
    match check_workspace(&root) {
        Ok(offences) if offences.is_empty() => ExitCode::SUCCESS,
        Ok(offences) => {
            for offence in &offences {
                println!("{offence}");
            }
            println!("{} offences in {}", offences.len(), root.display());
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("cannot read {}: {error}", root.display());
            ExitCode::from(2)
        }
    }
}
