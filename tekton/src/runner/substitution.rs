//! Variable substitution as Tekton does it (`pkg/substitution`): every `$(KEY)` whose key is
//! known is replaced by its value in one pass, so a value put in is never read again for
//! variables, and an unknown `$(...)` is left as written. In a list (a step's `command` or
//! `args`), an element that is exactly `$(KEY)` or `$(KEY[*])` for an array becomes that
//! array's elements, possibly none.

use std::collections::BTreeMap;

/// The values a text's variables are replaced with: string values by key (`params.name`,
/// `context.taskRun.name`) and arrays by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replacements {
    pub strings: BTreeMap<String, String>,
    pub arrays: BTreeMap<String, Vec<String>>,
}

impl Replacements {
    /// Adds a string value under each of `keys` (Tekton knows a parameter by three
    /// spellings: `params.x`, `params["x"]`, `params['x']`).
    pub fn string(&mut self, keys: &[String], value: &str) {
        for key in keys {
            self.strings.insert(key.clone(), value.to_string());
        }
    }

    /// `text` with each known `$(KEY)` replaced.
    pub fn apply(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("$(") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let known = after
                .find(')')
                .and_then(|end| self.strings.get(&after[..end]).map(|v| (end, v)));
            match known {
                Some((end, value)) => {
                    out.push_str(value);
                    rest = &after[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// A list with each element's variables replaced, an element that is exactly one array
    /// variable becoming the array's elements.
    pub fn apply_list(&self, list: &[String]) -> Vec<String> {
        list.iter()
            .flat_map(|element| match self.whole_array(element) {
                Some(array) => array.clone(),
                None => vec![self.apply(element)],
            })
            .collect()
    }

    /// The array `element` is exactly the variable of (`$(KEY)` or `$(KEY[*])`).
    fn whole_array(&self, element: &str) -> Option<&Vec<String>> {
        let inner = element.strip_prefix("$(")?.strip_suffix(')')?;
        let key = inner.strip_suffix("[*]").unwrap_or(inner);
        self.arrays.get(key)
    }
}

/// The three spellings of a parameter's key: `params.NAME`, `params["NAME"]`,
/// `params['NAME']`.
pub fn param_keys(name: &str) -> Vec<String> {
    vec![
        format!("params.{name}"),
        format!("params[\"{name}\"]"),
        format!("params['{name}']"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replacements() -> Replacements {
        let mut r = Replacements::default();
        r.string(&param_keys("vmName"), "vm-1");
        r.string(&["context.taskRun.namespace".to_string()], "tasks");
        r.string(&param_keys("loop"), "$(params.vmName)");
        r.arrays.insert(
            "params.flags".into(),
            vec!["--a".to_string(), "--b".to_string()],
        );
        r.arrays.insert("params.none".into(), vec![]);
        r
    }

    #[test]
    fn known_variables_are_replaced_in_one_pass_and_unknown_ones_kept() {
        let r = replacements();
        assert_eq!(
            r.apply("vm $(params.vmName) in $(context.taskRun.namespace)"),
            "vm vm-1 in tasks"
        );
        assert_eq!(
            r.apply("$(params[\"vmName\"])/$(params['vmName'])"),
            "vm-1/vm-1"
        );
        assert_eq!(
            r.apply("$(params.nope) $(unclosed"),
            "$(params.nope) $(unclosed"
        );
        // A value is not read again for variables.
        assert_eq!(r.apply("$(params.loop)"), "$(params.vmName)");
        assert_eq!(r.apply("$$(params.vmName))"), "$vm-1)");
    }

    #[test]
    fn an_element_that_is_an_array_variable_becomes_its_elements() {
        let r = replacements();
        let list: Vec<String> = [
            "run",
            "$(params.flags)",
            "$(params.none[*])",
            "x=$(params.vmName)",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(r.apply_list(&list), ["run", "--a", "--b", "x=vm-1"]);
        // Not alone in its element: left as written, as Tekton's webhook would refuse it.
        assert_eq!(
            r.apply_list(&["-$(params.flags)".to_string()]),
            ["-$(params.flags)"]
        );
    }
}
