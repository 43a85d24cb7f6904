//! The `expression` generator of template parameters (OpenShift's ExpressionValueGenerator):
//! every `[RANGES]{N}` in the `from` string becomes N random characters drawn from RANGES;
//! the rest is kept as written. `test[0-9]{1}x` gives `test7x`, `[a-z0-9]{5}` gives `k3x0p`.
//!
//! RANGES is made of ranges (`a-z`, `A-F`, `0-9`), single characters, and the classes `\w`
//! (letters, digits and `_`), `\d` (digits), `\a` (letters and digits) and `\A` (symbols).
//! Ranges follow OpenShift's alphabet order (lower case, upper case, digits), and, unlike
//! OpenShift's generator, include their last character.

use std::sync::LazyLock;

use regex::Regex;

const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const DIGITS: &str = "0123456789";
const SYMBOLS: &str = "~!@#$%^&*()-_+={}[]\\|<,>.?/\"';:`";

/// `[RANGES]{N}`: the part of an expression the generator replaces.
static GENERATOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\[([a-zA-Z0-9\-\\]+)\]\{([0-9]+)\}").unwrap_or_else(|err| panic!("{err}"))
});

/// Why an expression cannot be generated from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeneratorError {
    /// Neither a range nor a class between the brackets (OpenShift's message and spelling).
    #[error("malformed expresion syntax: {0}")]
    Malformed(String),
    /// The length is 0 or above 255.
    #[error("range must be within [1-255] characters ({0})")]
    Length(u64),
    /// A range whose first character comes after its last.
    #[error("invalid range specified: {0}-{1}")]
    Range(char, char),
    /// The operating system gave no random bytes.
    #[error("no random bytes from the operating system: {0}")]
    Entropy(String),
}

/// A source of uniformly random indexes.
pub trait Randomness {
    /// A random number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> Result<usize, GeneratorError>;
}

/// Random numbers from the operating system (`getrandom`).
#[derive(Debug, Default, Clone, Copy)]
pub struct OsRandomness;

impl Randomness for OsRandomness {
    fn below(&mut self, n: usize) -> Result<usize, GeneratorError> {
        let n = n as u64;
        // Rejection sampling: values at or above the largest multiple of n are drawn again.
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let mut bytes = [0u8; 8];
            getrandom::fill(&mut bytes).map_err(|err| GeneratorError::Entropy(err.to_string()))?;
            let value = u64::from_le_bytes(bytes);
            if value < zone {
                return Ok((value % n) as usize);
            }
        }
    }
}

/// The value generated from `expression`.
pub fn generate(expression: &str, random: &mut dyn Randomness) -> Result<String, GeneratorError> {
    let mut out = String::with_capacity(expression.len());
    let mut rest = 0;
    for found in GENERATOR.captures_iter(expression) {
        let (Some(whole), Some(ranges), Some(length)) = (found.get(0), found.get(1), found.get(2))
        else {
            continue;
        };
        let alphabet = alphabet(ranges.as_str())?;
        let length = checked_length(length.as_str())?;
        out.push_str(&expression[rest..whole.start()]);
        for _ in 0..length {
            out.push(alphabet[random.below(alphabet.len())?]);
        }
        rest = whole.end();
    }
    out.push_str(&expression[rest..]);
    Ok(out)
}

fn checked_length(digits: &str) -> Result<usize, GeneratorError> {
    let length: u64 = digits.parse().unwrap_or(u64::MAX);
    if (1..=255).contains(&length) {
        Ok(length as usize)
    } else {
        Err(GeneratorError::Length(length))
    }
}

/// The characters named between the brackets, each once, in the order first named.
fn alphabet(ranges: &str) -> Result<Vec<char>, GeneratorError> {
    let chars: Vec<char> = ranges.chars().collect();
    let mut alphabet = Vec::new();
    let mut named_a_range = false;
    let mut i = 0;
    while i < chars.len() {
        let (members, used, is_range) = member(&chars[i..])?;
        named_a_range |= is_range;
        for c in members.chars() {
            if !alphabet.contains(&c) {
                alphabet.push(c);
            }
        }
        i += used;
    }
    if !named_a_range || alphabet.is_empty() {
        return Err(GeneratorError::Malformed(format!("[{ranges}]")));
    }
    Ok(alphabet)
}

/// The characters of the member at the start of `chars`, how many characters it takes, and
/// whether it is a range or class (rather than a single character).
fn member(chars: &[char]) -> Result<(String, usize, bool), GeneratorError> {
    match chars {
        ['\\', class, ..] => {
            let members = match class {
                'w' => format!("{LOWER}{UPPER}{DIGITS}_"),
                'd' => DIGITS.to_string(),
                'a' => format!("{LOWER}{UPPER}{DIGITS}"),
                'A' => SYMBOLS.to_string(),
                _ => return Err(GeneratorError::Malformed(chars.iter().collect())),
            };
            Ok((members, 2, true))
        }
        [from, '-', to, ..] if *to != '\\' => Ok((range(*from, *to)?, 3, true)),
        ['-', ..] | ['\\'] => Err(GeneratorError::Malformed(chars.iter().collect())),
        [single, ..] => Ok((single.to_string(), 1, false)),
        [] => Ok((String::new(), 0, false)),
    }
}

/// The characters from `from` to `to`, both included, in OpenShift's alphabet order.
fn range(from: char, to: char) -> Result<String, GeneratorError> {
    let order = format!("{LOWER}{UPPER}{DIGITS}");
    let position = |c: char| order.find(c);
    match (position(from), position(to)) {
        (Some(start), Some(end)) if start <= end => Ok(order[start..=end].to_string()),
        _ => Err(GeneratorError::Range(from, to)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Draws 0, 1, 2, ... so the output is predictable.
    struct Counting(usize);
    impl Randomness for Counting {
        fn below(&mut self, n: usize) -> Result<usize, GeneratorError> {
            self.0 += 1;
            Ok((self.0 - 1) % n)
        }
    }

    fn matches(value: &str, pattern: &str) -> bool {
        Regex::new(&format!("^{pattern}$")).unwrap().is_match(value)
    }

    #[test]
    fn text_outside_brackets_is_kept() {
        let value = generate("test[0-9]{1}x", &mut OsRandomness).unwrap();
        assert!(matches(&value, "test[0-9]x"), "{value}");
        assert_eq!(
            generate("no expression", &mut OsRandomness).unwrap(),
            "no expression"
        );
    }

    #[test]
    fn every_expression_is_replaced_with_its_length() {
        let value = generate("fedora-[a-z0-9]{16}", &mut OsRandomness).unwrap();
        assert!(matches(&value, "fedora-[a-z0-9]{16}"), "{value}");
        let value = generate("[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{4}", &mut OsRandomness).unwrap();
        assert!(
            matches(&value, "[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{4}"),
            "{value}"
        );
        let value = generate("0x[A-F0-9]{4}", &mut OsRandomness).unwrap();
        assert!(matches(&value, "0x[A-F0-9]{4}"), "{value}");
    }

    #[test]
    fn ranges_include_their_last_character() {
        let value = generate("[a-c]{6}", &mut Counting(0)).unwrap();
        assert_eq!(value, "abcabc");
        let value = generate("[0-1]{8}", &mut Counting(0)).unwrap();
        assert_eq!(value, "01010101");
    }

    #[test]
    fn classes_name_openshifts_alphabets() {
        assert!(matches(
            &generate("[\\d]{20}", &mut OsRandomness).unwrap(),
            "[0-9]{20}"
        ));
        assert!(matches(
            &generate("[\\a]{20}", &mut OsRandomness).unwrap(),
            "[a-zA-Z0-9]{20}"
        ));
        assert!(matches(
            &generate("[\\w]{20}", &mut OsRandomness).unwrap(),
            "[a-zA-Z0-9_]{20}"
        ));
        let symbols = generate("[\\A]{20}", &mut OsRandomness).unwrap();
        assert!(symbols.chars().all(|c| SYMBOLS.contains(c)), "{symbols}");
        assert!(matches(
            &generate("[A-Z\\d]{10}", &mut OsRandomness).unwrap(),
            "[A-Z0-9]{10}"
        ));
    }

    #[test]
    fn malformed_expressions_are_refused_with_openshifts_messages() {
        let err = generate("[abc]{3}", &mut OsRandomness).unwrap_err();
        assert_eq!(err.to_string(), "malformed expresion syntax: [abc]");
        let err = generate("[a-z]{0}", &mut OsRandomness).unwrap_err();
        assert_eq!(
            err.to_string(),
            "range must be within [1-255] characters (0)"
        );
        let err = generate("[a-z]{256}", &mut OsRandomness).unwrap_err();
        assert_eq!(
            err.to_string(),
            "range must be within [1-255] characters (256)"
        );
        let err = generate("[z-a]{2}", &mut OsRandomness).unwrap_err();
        assert_eq!(err.to_string(), "invalid range specified: z-a");
        assert!(generate("[\\q]{2}", &mut OsRandomness).is_err());
    }

    #[test]
    fn os_randomness_covers_the_whole_range() {
        let mut seen = [false; 4];
        for _ in 0..200 {
            seen[OsRandomness.below(4).unwrap()] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
