//! `@pmFromFile` (alias `@pmf`): phrase match with phrases read from files.
//!
//! **What.** Same as `@pm` (ASCII case-insensitive, first match wins, `TX.0` = matched text).
//!
//! **Argument.** One or more file names separated by spaces, relative to the directory of the
//! rule file. Each file holds one phrase per line (a phrase may contain spaces); leading and
//! trailing whitespace is trimmed, blank lines and `#` comments are skipped. Files are read
//! once, at load time; a missing file is a load error. Remote (`https://`) files are refused.
//! A file without phrases gives an operator that never matches (as in ModSecurity), so a
//! list can be emptied to disable it.
//!
//! ```text
//! SecRule REQUEST_FILENAME "@pmFromFile restricted-files.data" "id:1,phase:1,deny"
//! ```

use std::path::Path;

use super::{pm::Pm, read_data_file};

/// Reads the files named by `argument` and builds the phrase matcher.
pub(crate) fn compile(argument: &str, rules_dir: Option<&Path>) -> Result<Pm, String> {
    let mut phrases = Vec::new();
    for name in argument.split_ascii_whitespace() {
        phrases.extend(read_data_file(name, rules_dir)?);
    }
    if argument.split_ascii_whitespace().next().is_none() {
        return Err("@pmFromFile needs a file name".to_owned());
    }
    Pm::from_phrases(&phrases).map_err(|e| format!("{e} (in {argument:?})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("waf-pmf-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("a.data"), "# comment\n\nfoo bar \r\n  baz\n").unwrap();
        std::fs::write(d.join("b.data"), "qux\n").unwrap();
        std::fs::write(d.join("empty.data"), "# nothing\n\n").unwrap();
        d
    }

    #[test]
    fn reads_phrases_relative_to_rules_dir() {
        let d = dir();
        let pm = compile("a.data b.data", Some(&d)).unwrap();
        assert!(pm.evaluate(b"xxFOO BARxx", None));
        assert!(!pm.evaluate(b"foo", None));
        assert!(pm.evaluate(b"baz", None));
        assert!(pm.evaluate(b"qux", None));
        assert!(!pm.evaluate(b"comment", None));
    }

    #[test]
    fn errors() {
        let d = dir();
        assert!(compile("missing.data", Some(&d))
            .unwrap_err()
            .contains("cannot read"));
        assert!(compile("", Some(&d)).is_err());
        assert!(!compile("empty.data", Some(&d))
            .unwrap()
            .evaluate(b"x", None));
        assert!(compile("https://example.com/x.data", Some(&d)).is_err());
    }
}
