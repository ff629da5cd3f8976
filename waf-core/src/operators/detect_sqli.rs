//! `@detectSQLi`: libinjection's SQL injection detector.
//!
//! **What.** Matches when libinjection classifies the value as SQL injection. With `capture`,
//! `TX.0` gets the fingerprint (`s&1UE`), which CRS 942100 logs as the matched data. The
//! detector sits behind [`crate::detect::InjectionDetector`]; see that module for why.
//!
//! **Argument.** None (anything given is ignored, as in ModSecurity).
//!
//! ```text
//! SecRule ARGS "@detectSQLi" "id:942100,phase:2,block,capture,t:none,t:utf8toUnicode,t:urlDecodeUni"
//! ```

use super::Captures;
use crate::detect::{default_detector, InjectionDetector};

/// A compiled `@detectSQLi`.
#[derive(Debug)]
pub(crate) struct DetectSqli {
    detector: Box<dyn InjectionDetector>,
}

impl DetectSqli {
    /// Ignores the argument.
    pub(crate) fn new(_argument: &str) -> Result<DetectSqli, String> {
        Ok(DetectSqli {
            detector: default_detector(),
        })
    }

    /// Runs the detector; on a match fills `captures` with the fingerprint.
    pub(crate) fn evaluate(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        if input.is_empty() {
            return false;
        }
        match self.detector.sqli(input) {
            Some(fingerprint) => {
                if let Some(captures) = captures {
                    captures.fill([fingerprint.as_bytes()]);
                }
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_and_captures_fingerprint() {
        let op = DetectSqli::new("").unwrap();
        assert!(!op.evaluate(b"", None));
        assert!(!op.evaluate(b"this is not isqli", None));
        assert!(op.evaluate(b"ascii(substring(version() from 1 for 1))", None));
        let mut c = Captures::default();
        assert!(op.evaluate(b"1' OR '1'='1", Some(&mut c)));
        assert_eq!(c.groups, vec![b"s&sos".to_vec()]);
    }
}
