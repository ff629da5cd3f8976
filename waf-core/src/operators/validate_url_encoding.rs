//! `@validateUrlEncoding`: the value holds a broken `%` escape.
//!
//! **What.** Matches when a `%` is not followed by two hex digits (`%`, `%0`, `%zz`, `%0%`).
//! `%00` is valid. An empty value never matches. Same rules as ModSecurity's
//! `validate_url_encoding`.
//!
//! **Argument.** None.
//!
//! ```text
//! SecRule REQUEST_URI "@validateUrlEncoding" "id:920220,phase:1,block"
//! ```

use memchr::memchr;

/// `@validateUrlEncoding`.
#[derive(Debug)]
pub(crate) struct ValidateUrlEncoding;

impl ValidateUrlEncoding {
    /// True when `input` holds an invalid escape.
    pub(crate) fn evaluate(&self, input: &[u8]) -> bool {
        let mut i = 0;
        while let Some(found) = input.get(i..).and_then(|rest| memchr(b'%', rest)) {
            let at = i + found;
            match input.get(at + 1..at + 3) {
                Some([a, b]) if a.is_ascii_hexdigit() && b.is_ascii_hexdigit() => i = at + 3,
                _ => return true,
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        let t = |s: &str| ValidateUrlEncoding.evaluate(s.as_bytes());
        for ok in ["", "Hello%20World!", "a+b", "%00", "%ff%FF", "x%41"] {
            assert!(!t(ok), "{ok}");
        }
        for bad in ["%", "%0", "%f", "%0z", "%z0", "%0%", "x=new %w20$", "%41%"] {
            assert!(t(bad), "{bad}");
        }
    }
}
