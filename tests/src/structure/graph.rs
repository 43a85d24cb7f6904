//! The module graph of one crate, file by file, and its cycles.
//!
//! A file's module uses another when it names a path into it. A module naming its own
//! ancestors does not count: a child working in its parent's terms is how Rust modules nest.
//! Everything else does, parents naming their children included, so a cycle is a set of
//! modules that cannot be read one after the other.

use std::collections::BTreeSet;

use super::SourceFile;

/// Each cycle of the crate made of `files`, as its modules' paths.
pub fn cycles(files: &[SourceFile]) -> Vec<Vec<String>> {
    let edges = edges(files);
    strongly_connected(files.len(), &edges)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            component
                .iter()
                .map(|&i| module_name(&files[i].module))
                .collect()
        })
        .collect()
}

fn module_name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

/// For each file, the files whose items it names.
fn edges(files: &[SourceFile]) -> Vec<BTreeSet<usize>> {
    files
        .iter()
        .map(|file| {
            file.named_paths
                .iter()
                .filter_map(|path| owner(files, path))
                .filter(|&target| !file.module.starts_with(&files[target].module))
                .collect()
        })
        .collect()
}

/// The file whose module is the longest prefix of `path`.
fn owner(files: &[SourceFile], path: &[String]) -> Option<usize> {
    files
        .iter()
        .enumerate()
        .filter(|(_, file)| path.starts_with(&file.module))
        .max_by_key(|(_, file)| file.module.len())
        .map(|(index, _)| index)
}

/// Tarjan's strongly connected components, iteratively (no recursion to overflow).
fn strongly_connected(nodes: usize, edges: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    let mut index = vec![usize::MAX; nodes];
    let mut low = vec![0; nodes];
    let mut on_stack = vec![false; nodes];
    let mut stack = Vec::new();
    let mut components = Vec::new();
    let mut next = 0;
    for start in 0..nodes {
        if index[start] != usize::MAX {
            continue;
        }
        let mut work: Vec<(usize, Vec<usize>)> =
            vec![(start, edges[start].iter().copied().collect())];
        index[start] = next;
        low[start] = next;
        next += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some((node, pending)) = work.last_mut() {
            let node = *node;
            if let Some(target) = pending.pop() {
                if index[target] == usize::MAX {
                    index[target] = next;
                    low[target] = next;
                    next += 1;
                    stack.push(target);
                    on_stack[target] = true;
                    work.push((target, edges[target].iter().copied().collect()));
                } else if on_stack[target] {
                    low[node] = low[node].min(index[target]);
                }
                continue;
            }
            work.pop();
            if let Some((parent, _)) = work.last() {
                low[*parent] = low[*parent].min(low[node]);
            }
            if low[node] == index[node] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                component.sort_unstable();
                components.push(component);
            }
        }
    }
    components
}
