//! The repository held to its house rules, and the check itself on small trees.

use std::path::Path;

use super::*;

fn parsed(module_file: &str, text: &str) -> SourceFile {
    SourceFile::parse(
        Path::new("/c"),
        &Path::new("/c/src").join(module_file),
        text,
    )
    .expect("test source parses")
}

#[test]
fn the_repository_keeps_its_house_rules() {
    let offences = check_workspace(&crate::repo_root()).expect("the tree is readable");
    let listed: Vec<String> = offences.iter().map(ToString::to_string).collect();
    assert!(
        listed.is_empty(),
        "{} offences:\n{}",
        listed.len(),
        listed.join("\n")
    );
}

#[test]
fn siblings_naming_each_other_are_a_cycle() {
    let files = [
        parsed("lib.rs", "mod a; mod b;"),
        parsed("a.rs", "use crate::b::B; pub struct A;"),
        parsed(
            "b.rs",
            "pub struct B; fn f() -> super::a::A { super::a::A }",
        ),
    ];
    assert_eq!(
        graph::cycles(&files),
        vec![vec!["a".to_string(), "b".to_string()]]
    );
}

#[test]
fn a_child_naming_its_parent_is_no_cycle() {
    let files = [
        parsed("lib.rs", "mod a;"),
        parsed("a/mod.rs", "mod b; pub use b::B; pub struct A;"),
        parsed(
            "a/b.rs",
            "use super::A; use crate::a::A as Again; pub struct B;",
        ),
    ];
    assert!(graph::cycles(&files).is_empty());
}

#[test]
fn a_cycle_through_a_third_module_is_found() {
    let files = [
        parsed("lib.rs", "mod a; mod b; mod c;"),
        parsed("a.rs", "use crate::b;"),
        parsed("b.rs", "fn f() { crate::c::g() }"),
        parsed("c.rs", "use crate::{a::X, d};"),
    ];
    assert_eq!(graph::cycles(&files).len(), 1);
}

#[test]
fn test_modules_are_not_production() {
    let file = parsed(
        "a.rs",
        "fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::b;\n    #[test]\n    fn t() {}\n}\n",
    );
    assert_eq!(file.production_lines, 1);
    assert!(file.named_paths.is_empty());
    assert_eq!(file.functions.len(), 1);
}

#[test]
fn long_functions_are_measured_from_fn_to_brace() {
    let body = "    let _ = 1;\n".repeat(MAX_FN_LINES);
    let file = parsed(
        "a.rs",
        &format!("/// doc\nfn long() {{\n{body}}}\nfn short() {{}}\n"),
    );
    let offences = size_offences("a.rs", &file);
    assert_eq!(
        offences,
        vec![Offence::LongFunction {
            file: "a.rs".into(),
            line: 2,
            name: "long".into(),
            lines: MAX_FN_LINES + 2
        }]
    );
}

#[test]
fn bin_targets_have_their_own_crate_root() {
    let file = parsed("bin/tool.rs", "mod x; use crate::x::Y;");
    assert_eq!(file.module, vec!["bin", "tool"]);
    assert_eq!(file.named_paths, vec![vec!["bin", "tool", "x", "Y"]]);
}
