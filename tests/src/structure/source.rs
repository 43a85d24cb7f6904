//! One source file as the structure check sees it: its module's place in the crate, its
//! production size, its functions' lengths, and the module paths it names.

use std::path::Path;

use syn::spanned::Spanned;
use syn::visit::{self, Visit};

/// What the check needs of one `.rs` file.
#[derive(Debug, Default)]
pub struct SourceFile {
    /// The module path this file defines (`[]` for `lib.rs`/`main.rs`, `["bin", NAME]` for a
    /// binary under `src/bin/`).
    pub module: Vec<String>,
    /// The module `crate::` names from this file.
    pub crate_root: Vec<String>,
    /// Lines outside `cfg(test)` items.
    pub production_lines: usize,
    /// Production functions, outside test modules.
    pub functions: Vec<Function>,
    /// Every path into this crate that production code names, made absolute (from the crate
    /// root) but not yet resolved to a file.
    pub named_paths: Vec<Vec<String>>,
    /// Modules this file declares as test-only in files of their own (`#[cfg(test)] mod
    /// tests;`): those files are tests, not production.
    pub test_modules: Vec<Vec<String>>,
}

/// A function's name, first line and length in lines.
#[derive(Debug, Clone)]
pub struct Function {
    pub name: String,
    pub line: usize,
    pub lines: usize,
}

impl SourceFile {
    /// Parses `text`, the file at `path` inside the crate at `crate_dir`.
    pub fn parse(crate_dir: &Path, path: &Path, text: &str) -> Result<SourceFile, String> {
        let syntax = syn::parse_file(text).map_err(|e| {
            let at = e.span().start();
            format!("{}:{}: {e}", at.line, at.column)
        })?;
        let (crate_root, module) = module_of(&crate_dir.join("src"), path);
        let mut walker = Walker {
            scopes: vec![Scope {
                module: module.clone(),
                children: child_modules(&syntax.items),
            }],
            crate_root: crate_root.clone(),
            test_lines: 0,
            functions: Vec::new(),
            named_paths: Vec::new(),
            test_modules: Vec::new(),
        };
        walker.visit_file(&syntax);
        Ok(SourceFile {
            module,
            crate_root,
            production_lines: text.lines().count().saturating_sub(walker.test_lines),
            functions: walker.functions,
            named_paths: walker.named_paths,
            test_modules: walker.test_modules,
        })
    }
}

/// The crate root `crate::` means in `path`, and the module `path` defines.
fn module_of(src: &Path, path: &Path) -> (Vec<String>, Vec<String>) {
    let relative = path.strip_prefix(src).unwrap_or(path);
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs");
    if parts.is_empty() && matches!(stem, "lib" | "main") {
        return (Vec::new(), Vec::new());
    }
    let root = if parts.first().is_some_and(|p| p == "bin") {
        let name = parts.get(1).cloned().unwrap_or_else(|| stem.to_string());
        vec!["bin".to_string(), name]
    } else {
        Vec::new()
    };
    if !matches!(stem, "mod" | "main") || parts.len() < root.len() {
        parts.push(stem.to_string());
    }
    (root, parts)
}

/// A module scope while walking: its absolute path and the child modules it declares.
struct Scope {
    module: Vec<String>,
    children: Vec<String>,
}

struct Walker {
    scopes: Vec<Scope>,
    crate_root: Vec<String>,
    test_lines: usize,
    functions: Vec<Function>,
    named_paths: Vec<Vec<String>>,
    test_modules: Vec<Vec<String>>,
}

impl Walker {
    fn scope(&self) -> &Scope {
        self.scopes
            .last()
            .expect("the file's own scope is never popped")
    }

    /// `segments` made absolute from the crate root, or `None` when the path leaves the
    /// crate (another crate, a prelude name, a local item).
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        let scope = self.scope();
        let mut base = match first.as_str() {
            "crate" => self.crate_root.clone(),
            "self" => scope.module.clone(),
            "super" => {
                let mut parent = scope.module.clone();
                parent.pop();
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    parent.pop();
                    rest = &rest[1..];
                }
                parent.extend(rest.iter().cloned());
                return Some(parent);
            }
            child if scope.children.iter().any(|c| c == child) => {
                let mut path = scope.module.clone();
                path.push(child.to_string());
                path
            }
            _ => return None,
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn record(&mut self, segments: Vec<String>) {
        if let Some(path) = self.absolute(&segments) {
            self.named_paths.push(path);
        }
    }

    fn record_use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.record_use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => self.record_leaf(prefix, &name.ident),
            syn::UseTree::Rename(rename) => self.record_leaf(prefix, &rename.ident),
            syn::UseTree::Glob(_) => self.record(prefix.clone()),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.record_use_tree(prefix, tree);
                }
            }
        }
    }

    fn record_leaf(&mut self, prefix: &[String], ident: &syn::Ident) {
        let mut path = prefix.to_vec();
        if ident != "self" {
            path.push(ident.to_string());
        }
        self.record(path);
    }

    fn skip_test_item(&mut self, attrs: &[syn::Attribute], span: proc_macro2::Span) -> bool {
        if !is_test_only(attrs) {
            return false;
        }
        self.test_lines += span.end().line + 1 - span.start().line;
        true
    }

    fn record_function(&mut self, name: &syn::Ident, sig_span: proc_macro2::Span, end: usize) {
        let line = sig_span.start().line;
        self.functions.push(Function {
            name: name.to_string(),
            line,
            lines: end + 1 - line,
        });
    }
}

impl<'ast> Visit<'ast> for Walker {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if self.skip_test_item(item_attrs(item), item.span()) {
            if let syn::Item::Mod(m) = item {
                let mut module = self.scope().module.clone();
                module.push(m.ident.to_string());
                self.test_modules.push(module);
            }
            return;
        }
        visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        if let syn::ImplItem::Fn(f) = item
            && self.skip_test_item(&f.attrs, item.span())
        {
            return;
        }
        visit::visit_impl_item(self, item);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        let Some((_, items)) = &item.content else {
            return;
        };
        let mut module = self.scope().module.clone();
        module.push(item.ident.to_string());
        self.scopes.push(Scope {
            module,
            children: child_modules(items),
        });
        visit::visit_item_mod(self, item);
        self.scopes.pop();
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        let end = item.block.brace_token.span.close().end().line;
        self.record_function(&item.sig.ident, item.sig.span(), end);
        visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        let end = item.block.brace_token.span.close().end().line;
        self.record_function(&item.sig.ident, item.sig.span(), end);
        visit::visit_impl_item_fn(self, item);
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if let Some(block) = &item.default {
            let end = block.brace_token.span.close().end().line;
            self.record_function(&item.sig.ident, item.sig.span(), end);
        }
        visit::visit_trait_item_fn(self, item);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.record_use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            self.record(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        visit::visit_path(self, path);
    }
}

/// The modules `items` declare, inline or in their own files.
fn child_modules(items: &[syn::Item]) -> Vec<String> {
    items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(m) if !is_test_only(&m.attrs) => Some(m.ident.to_string()),
            _ => None,
        })
        .collect()
}

/// `#[cfg(test)]` (or a `cfg` that needs `test`) and `#[test]` items.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        if attr.path().is_ident("test") {
            return true;
        }
        if !attr.path().is_ident("cfg") {
            return false;
        }
        let tokens = attr
            .meta
            .require_list()
            .map(|l| l.tokens.to_string())
            .unwrap_or_default();
        tokens
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .any(|w| w == "test")
            && !tokens.contains("not")
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}
