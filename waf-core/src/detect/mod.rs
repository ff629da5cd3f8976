//! Semantic injection detectors behind `@detectSQLi` and `@detectXSS`.
//!
//! # Why a trait
//!
//! Both operators are libinjection in every engine (ModSecurity bundles the C library,
//! Coraza uses a Go port). Ours is the `waf-injection` crate of this workspace: the same
//! verdicts and fingerprints as C libinjection 3.9.2 (differential-tested against the C
//! library on more than 280,000 inputs), faster than it and allocation-free. The operators
//! do not call it directly: they hold an [`InjectionDetector`], so a differential test can
//! run two detectors side by side and a replacement touches only this module.
//!
//! The trait is internal on purpose: detector output (the SQLi fingerprint) goes into
//! `TX.0` and logs, so changing detectors is a behaviour change we want to review here, not a
//! plug-in point for users.

use std::fmt;

/// A SQL injection fingerprint, as libinjection computes it: up to 8 token-type letters
/// (`s&1UE`, `1UE`), logged as the match of `@detectSQLi`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    bytes: [u8; 8],
    len: u8,
}

impl Fingerprint {
    /// Builds a fingerprint from its letters; more than 8 bytes are cut.
    pub(crate) fn new(letters: &[u8]) -> Fingerprint {
        let mut bytes = [0; 8];
        let len = letters.len().min(8);
        bytes[..len].copy_from_slice(&letters[..len]);
        Fingerprint {
            bytes,
            len: len as u8,
        }
    }

    /// The letters.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Fingerprint({:?})",
            String::from_utf8_lossy(self.as_bytes())
        )
    }
}

/// Decides whether a value is a SQL injection or an XSS vector.
///
/// Implementations must not panic on any input and should not allocate per call on benign
/// input; they are called for every value a `@detectSQLi`/`@detectXSS` rule targets.
pub(crate) trait InjectionDetector: fmt::Debug + Send + Sync {
    /// The SQLi fingerprint when `input` is a SQL injection, `None` otherwise.
    fn sqli(&self, input: &[u8]) -> Option<Fingerprint>;

    /// True when `input` is an XSS vector.
    fn xss(&self, input: &[u8]) -> bool;
}

/// The detector the operators use. Swapping the implementation happens here, and only here.
pub(crate) fn default_detector() -> Box<dyn InjectionDetector> {
    Box::new(Libinjection)
}

/// The default detector: `waf-injection`, libinjection's algorithms in our own Rust.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Libinjection;

impl InjectionDetector for Libinjection {
    fn sqli(&self, input: &[u8]) -> Option<Fingerprint> {
        waf_injection::detect_sqli(input).map(|f| Fingerprint::new(f.as_bytes()))
    }

    fn xss(&self, input: &[u8]) -> bool {
        waf_injection::detect_xss(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqli_fingerprints() {
        let d = Libinjection;
        assert_eq!(
            d.sqli(b"1' OR '1'='1").map(|f| f.as_bytes().to_vec()),
            Some(b"s&sos".to_vec())
        );
        assert_eq!(
            d.sqli(b"1 UNION SELECT password FROM users")
                .map(|f| f.as_bytes().to_vec()),
            Some(b"1UEnk".to_vec())
        );
        assert_eq!(d.sqli(b"hello world"), None);
        assert_eq!(d.sqli(b""), None);
    }

    #[test]
    fn xss() {
        let d = Libinjection;
        assert!(d.xss(b"<script>alert(1)</script>"));
        assert!(d.xss(b"<a href=\"javascript:alert(1)\">"));
        assert!(!d.xss(b"Hello, world!"));
        assert!(!d.xss(b""));
    }

    #[test]
    fn fingerprint_is_cut_at_8() {
        assert_eq!(Fingerprint::new(b"123456789").as_bytes(), b"12345678");
        assert_eq!(
            format!("{:?}", Fingerprint::new(b"s&1")),
            "Fingerprint(\"s&1\")"
        );
    }

    #[test]
    fn no_panic_on_odd_bytes() {
        let d = Libinjection;
        for input in [&b"\xff\xfe\x00'"[..], b"'''''''''", b"<<<<<", b"/*", b"\\"] {
            let _ = d.sqli(input);
            let _ = d.xss(input);
        }
    }
}
