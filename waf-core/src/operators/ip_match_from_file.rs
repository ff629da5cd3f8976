//! `@ipMatchFromFile` (alias `@ipMatchF`): `@ipMatch` with the networks read from a file.
//!
//! **What.** Same as `@ipMatch`.
//!
//! **Argument.** A file name, relative to the directory of the rule file, read once at load
//! time. One address or CIDR network per line; blank lines and `#` comments are skipped. A
//! missing file or a bad entry is a load error; remote (`https://`) files are refused. A file
//! without entries gives an operator that never matches.
//!
//! ```text
//! SecRule REMOTE_ADDR "@ipMatchFromFile blocked-ips.data" "id:1,phase:1,deny"
//! ```

use std::path::Path;

use super::{ip_match::IpMatch, read_data_file};

/// Reads the file named by `argument` and builds the matcher.
pub(crate) fn compile(argument: &str, rules_dir: Option<&Path>) -> Result<IpMatch, String> {
    let name = argument.trim();
    if name.is_empty() {
        return Err("@ipMatchFromFile needs a file name".to_owned());
    }
    let lines = read_data_file(name, rules_dir)?;
    let entries = lines
        .iter()
        .map(|line| {
            std::str::from_utf8(line)
                .map_err(|_| format!("invalid IP entry in {name:?}: not UTF-8"))
        })
        .collect::<Result<Vec<&str>, String>>()?;
    IpMatch::from_entries(&entries).map_err(|e| format!("{e} in {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_networks() {
        let d = std::env::temp_dir().join(format!("waf-ipf-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("ok.data"),
            "127.0.0.1\n192.168.0.0/24\n\n# a comment\n::1\r\n",
        )
        .unwrap();
        std::fs::write(d.join("bad.data"), "127.0.0.1\nnope\n").unwrap();
        let m = compile("ok.data", Some(&d)).unwrap();
        assert!(m.evaluate(b"192.168.0.7"));
        assert!(m.evaluate(b"::1"));
        assert!(!m.evaluate(b"127.0.0.2"));
        assert!(compile("bad.data", Some(&d)).unwrap_err().contains("nope"));
        assert!(compile("missing.data", Some(&d)).is_err());
        assert!(compile("", Some(&d)).is_err());
    }
}
