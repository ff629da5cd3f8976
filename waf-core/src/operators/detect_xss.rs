//! `@detectXSS`: libinjection's XSS detector.
//!
//! **What.** Matches when libinjection classifies the value as an XSS vector (an HTML tag,
//! attribute or URL that can run script, in any of the HTML contexts it tries). The detector
//! sits behind [`crate::detect::InjectionDetector`]; see that module for why.
//!
//! **Argument.** None (anything given is ignored, as in ModSecurity).
//!
//! ```text
//! SecRule ARGS "@detectXSS" "id:941100,phase:2,block,t:none,t:utf8toUnicode,t:urlDecodeUni"
//! ```

use crate::detect::{default_detector, InjectionDetector};

/// A compiled `@detectXSS`.
#[derive(Debug)]
pub(crate) struct DetectXss {
    detector: Box<dyn InjectionDetector>,
}

impl DetectXss {
    /// Ignores the argument.
    pub(crate) fn new(_argument: &str) -> Result<DetectXss, String> {
        Ok(DetectXss {
            detector: default_detector(),
        })
    }

    /// Runs the detector.
    pub(crate) fn evaluate(&self, input: &[u8]) -> bool {
        !input.is_empty() && self.detector.xss(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects() {
        let op = DetectXss::new("").unwrap();
        assert!(!op.evaluate(b""));
        assert!(!op.evaluate(b"this is not an XSS"));
        assert!(op.evaluate(b"<a href=\"javascript:alert(1)\">)"));
        assert!(op.evaluate(b"<script>alert(1)</script>"));
    }
}
