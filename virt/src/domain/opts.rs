//! QEMU's `key=value,...` option strings, for the options QEMU only takes that way: values
//! have their commas doubled as QEMU's option parser requires.

use std::fmt::Display;

/// A QEMU `key=value,...` option string.
#[derive(Debug, Clone)]
pub struct Opts(String);

impl Opts {
    /// Starts with a bare first value (`user`, `socket`, `q35`).
    pub fn new(first: &str) -> Self {
        Self(escape(first))
    }

    /// Adds `key=value`.
    pub fn set(mut self, key: &str, value: impl Display) -> Self {
        self.0.push(',');
        self.0.push_str(key);
        self.0.push('=');
        self.0.push_str(&escape(&value.to_string()));
        self
    }

    pub fn build(self) -> String {
        self.0
    }
}

fn escape(value: &str) -> String {
    value.replace(',', ",,")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commas_in_values_are_doubled() {
        let opts = Opts::new("user")
            .set("hostname", "a,b")
            .set("id", "n0")
            .build();
        assert_eq!(opts, "user,hostname=a,,b,id=n0");
    }
}
