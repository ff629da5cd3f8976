//! `t:cmdLine`: normalises a Windows or Unix command line so that evasions like
//! `c^md /c "d"ir` match `cmd/c dir`.
//!
//! ```text
//! SecRule ARGS "@rx \bcmd/c\b" "id:1,t:cmdLine,deny"
//! ```
//!
//! The rules, in ModSecurity's order (`cmd_line.cc`), applied in one pass:
//! - delete `\`, `"`, `'` and `^`;
//! - turn space, `,`, `;`, `\t`, `\r` and `\n` into a space, one for a whole run (a deleted
//!   character does not end the run);
//! - delete the space before `/` and `(`;
//! - lower-case ASCII letters.
//!
//! `\v`, `\f` and bytes above 0x7F are ordinary characters here.

use std::borrow::Cow;

/// Whether the byte is copied unchanged when it does not follow a separator.
fn is_plain(b: u8) -> bool {
    !matches!(
        b,
        b'"' | b'\'' | b'\\' | b'^' | b' ' | b',' | b';' | b'\t' | b'\r' | b'\n' | b'A'..=b'Z'
    )
}

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    super::owned_if(input, apply_into)
}

/// Writes the transformed value into `out` (empty) when it differs from `input`.
pub(super) fn apply_into(input: &[u8], out: &mut Vec<u8>) -> bool {
    // A single space followed by a plain byte other than `/` or `(` is also kept as is.
    let first = (0..input.len()).find(|&i| match input[i] {
        b' ' => match input.get(i + 1) {
            Some(&next) => !is_plain(next) || next == b'/' || next == b'(',
            None => false,
        },
        b => !is_plain(b),
    });
    let Some(first) = first else {
        return false;
    };
    out.reserve(input.len());
    out.extend_from_slice(&input[..first]);
    let mut space = false;
    for &b in &input[first..] {
        match b {
            b'"' | b'\'' | b'\\' | b'^' => {}
            b' ' | b',' | b';' | b'\t' | b'\r' | b'\n' => {
                if !space {
                    out.push(b' ');
                    space = true;
                }
            }
            b'/' | b'(' => {
                if space {
                    out.pop();
                }
                space = false;
                out.push(b);
            }
            _ => {
                out.push(b.to_ascii_lowercase());
                space = false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modsecurity_rules() {
        assert_eq!(apply(b"C^OMMAND /C DIR").as_ref(), b"command/c dir");
        assert_eq!(apply(b"cmd,/c DiR").as_ref(), b"cmd/c dir");
        assert_eq!(apply(b"\"command\" /c DiR").as_ref(), b"command/c dir");
        assert_eq!(apply(b"a ;\t\r\n, b").as_ref(), b"a b");
        assert_eq!(apply(b"a \"\" (b)").as_ref(), b"a(b)");
        assert_eq!(apply(b"echo  x").as_ref(), b"echo x");
        assert_eq!(apply(b"x ").as_ref(), b"x ");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"test"), Cow::Borrowed(_)));
        assert!(!matches!(apply(b"cat /etc/passwd"), Cow::Borrowed(_)));
        assert!(matches!(apply(b"ls -la x"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
