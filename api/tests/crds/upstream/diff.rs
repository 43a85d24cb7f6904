//! The differences between our flattened schema of a kind and upstream's, and the allow-list
//! that says why each one we keep is there.

use std::fmt;

use super::flat::{Flat, ROOT, parent, under};

/// How ours differs from upstream at one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    /// Both declare the path with different type classes (below it nothing is compared).
    Type,
    /// One keeps unknown fields there and the other does not.
    Preserve,
    /// The required fields differ.
    Required,
    /// The allowed values differ.
    Enum,
    /// Upstream declares it, ours does not and prunes it: the value is silently lost.
    Pruned,
    /// Upstream declares it, ours keeps it under an object that keeps unknown fields: its
    /// name and type are never checked.
    Unchecked,
    /// Ours declares it, upstream never had it.
    Invented,
    /// Upstream serves this kind at this version, we do not.
    NotServed,
    /// We serve it, the pinned upstream sources have no schema for it.
    NoUpstream,
}

impl Category {
    const ALL: [(Category, &'static str); 9] = [
        (Category::Type, "type"),
        (Category::Preserve, "preserve"),
        (Category::Required, "required"),
        (Category::Enum, "enum"),
        (Category::Pruned, "pruned"),
        (Category::Unchecked, "unchecked"),
        (Category::Invented, "invented"),
        (Category::NotServed, "not-served"),
        (Category::NoUpstream, "no-upstream"),
    ];

    fn parse(word: &str) -> Option<Category> {
        Self::ALL.iter().find(|(_, w)| *w == word).map(|(c, _)| *c)
    }

    fn word(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(c, _)| *c == self)
            .map(|(_, w)| *w)
            .unwrap_or("?")
    }
}

/// One difference, with what each side says.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Difference {
    pub kind: String,
    pub version: String,
    pub category: Category,
    pub path: String,
    /// What the two sides say, for the reader (`ours string, upstream int-or-string`).
    pub detail: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {} # {}",
            self.kind,
            self.version,
            self.category.word(),
            self.path,
            self.detail
        )
    }
}

/// Every difference of `ours` from `upstream` for one kind and version. Below a path only one
/// side has, only that subtree's root is reported.
pub fn compare(kind: &str, version: &str, ours: &Flat, upstream: &Flat) -> Vec<Difference> {
    let mut found = Vec::new();
    let mut push = |category, path: &str, detail: String| {
        found.push(Difference {
            kind: kind.to_owned(),
            version: version.to_owned(),
            category,
            path: path.to_owned(),
            detail,
        })
    };
    // Paths below a type mismatch or an opaque node are not compared.
    let mut stopped: Vec<&str> = Vec::new();
    let is_stopped = |stopped: &Vec<&str>, path: &str| stopped.iter().any(|s| under(path, s));
    for (path, theirs) in upstream {
        if is_stopped(&stopped, path) {
            continue;
        }
        match ours.get(path) {
            Some(mine) => {
                let opaque = ["meta", "recursive"];
                if mine.class != theirs.class
                    && !(opaque.contains(&theirs.class.as_str()) && mine.class == "object")
                {
                    push(
                        Category::Type,
                        path,
                        format!("ours {}, upstream {}", mine.class, theirs.class),
                    );
                    stopped.push(path);
                    continue;
                }
                if opaque.contains(&theirs.class.as_str()) || mine.class == "meta" {
                    stopped.push(path);
                    continue;
                }
                if mine.preserve != theirs.preserve {
                    let side = if mine.preserve { "ours" } else { "upstream" };
                    push(
                        Category::Preserve,
                        path,
                        format!("only {side} keeps unknown fields"),
                    );
                }
                if mine.required != theirs.required {
                    push(
                        Category::Required,
                        path,
                        format!(
                            "ours [{}], upstream [{}]",
                            mine.required.join(","),
                            theirs.required.join(",")
                        ),
                    );
                }
                if mine.enumeration != theirs.enumeration {
                    push(
                        Category::Enum,
                        path,
                        format!(
                            "ours [{}], upstream [{}]",
                            mine.enumeration.join("|"),
                            theirs.enumeration.join("|")
                        ),
                    );
                }
            }
            None => {
                let Some(holder) = ours.get(parent(path)) else {
                    continue; // below a subtree root already reported
                };
                let size = upstream
                    .keys()
                    .filter(|p| *p == path || under(p, path))
                    .count();
                let category = if holder.preserve {
                    Category::Unchecked
                } else {
                    Category::Pruned
                };
                push(category, path, format!("{size} upstream paths"));
                stopped.push(path);
            }
        }
    }
    for path in ours.keys() {
        if path != ROOT
            && !upstream.contains_key(path)
            && upstream.contains_key(parent(path))
            && !is_stopped(&stopped, path)
        {
            let size = ours.keys().filter(|p| *p == path || under(p, path)).count();
            push(Category::Invented, path, format!("{size} of our paths"));
        }
    }
    found.sort();
    found
}

/// One line of the allow-list: `KIND VERSION CATEGORY PATH # reason`; `*` as the version is
/// every version; the path covers itself and everything below it.
#[derive(Debug)]
pub struct Allowed {
    pub line: usize,
    kind: String,
    version: String,
    category: Category,
    path: String,
    pub text: String,
}

impl Allowed {
    pub fn covers(&self, d: &Difference) -> bool {
        self.kind == d.kind
            && (self.version == "*" || self.version == d.version)
            && self.category == d.category
            && (self.path == d.path || under(&d.path, &self.path))
    }
}

/// Reads the allow-list; every entry must give its reason after ` # `.
pub fn parse_allowed(text: &str) -> Result<Vec<Allowed>, String> {
    let mut entries = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let what = |why: &str| format!("line {}: {why}: {raw:?}", i + 1);
        let (entry, reason) = line
            .split_once(" # ")
            .ok_or_else(|| what("no ` # reason`"))?;
        if reason.trim().is_empty() {
            return Err(what("an empty reason"));
        }
        let words: Vec<&str> = entry.split_whitespace().collect();
        let [kind, version, category, path] = words[..] else {
            return Err(what("not `KIND VERSION CATEGORY PATH`"));
        };
        entries.push(Allowed {
            line: i + 1,
            kind: kind.to_owned(),
            version: version.to_owned(),
            category: Category::parse(category).ok_or_else(|| what("an unknown category"))?,
            path: path.to_owned(),
            text: line.to_owned(),
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::super::flat::parse;
    use super::*;

    #[test]
    fn the_comparison_reports_each_kind_of_difference_once_at_its_root() {
        let upstream = parse(
            ".\tobject\n\
             spec\tobject\n\
             spec.a\tstring\n\
             spec.b\tobject\n\
             spec.b.c\tstring\n\
             spec.d\tobject\n\
             spec.d.e\tinteger\n\
             spec.d.e2\tinteger\n\
             spec.f\tint-or-string\n\
             spec.g\tstring\tenum=x|y\n",
        )
        .unwrap();
        let ours = parse(
            ".\tobject\n\
             spec\tobject\n\
             spec.a\tstring\n\
             spec.d\tobject\tpreserve\n\
             spec.f\tstring\n\
             spec.g\tstring\tenum=x\n\
             spec.z\tobject\n\
             spec.z.y\tstring\n",
        )
        .unwrap();
        let lines: Vec<String> = compare("K", "v1", &ours, &upstream)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            lines,
            [
                "K v1 type spec.f # ours string, upstream int-or-string",
                "K v1 preserve spec.d # only ours keeps unknown fields",
                "K v1 enum spec.g # ours [x], upstream [x|y]",
                "K v1 pruned spec.b # 2 upstream paths",
                "K v1 unchecked spec.d.e # 1 upstream paths",
                "K v1 unchecked spec.d.e2 # 1 upstream paths",
                "K v1 invented spec.z # 2 of our paths",
            ]
        );
    }

    #[test]
    fn an_entry_covers_its_subtree_and_needs_a_reason() {
        let allowed = parse_allowed("K * unchecked spec.d # typed later\n").unwrap();
        let d = |path: &str, version: &str| Difference {
            kind: "K".into(),
            version: version.into(),
            category: Category::Unchecked,
            path: path.into(),
            detail: String::new(),
        };
        assert!(allowed[0].covers(&d("spec.d.e", "v2")));
        assert!(allowed[0].covers(&d("spec.d", "v1")));
        assert!(!allowed[0].covers(&d("spec.dd", "v1")));
        assert!(parse_allowed("K v1 unchecked spec.d\n").is_err());
        assert!(parse_allowed("K v1 nonsense spec.d # why\n").is_err());
    }
}
