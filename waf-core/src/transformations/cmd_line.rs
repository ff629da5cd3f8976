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

/// What the one pass does with each byte.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Copied as it is (`/` and `(` are [`Class::Joins`]).
    Plain,
    /// An ASCII capital: copied in lower case.
    Upper,
    /// `\`, `"`, `'` or `^`: deleted.
    Deleted,
    /// Space, `,`, `;`, `\t`, `\r` or `\n`: one space for a whole run.
    Separator,
    /// `/` or `(`: copied, and the space before it deleted.
    Joins,
}

/// Each byte's [`Class`].
static CLASSES: [Class; 256] = {
    let mut t = [Class::Plain; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = match b as u8 {
            b'"' | b'\'' | b'\\' | b'^' => Class::Deleted,
            b' ' | b',' | b';' | b'\t' | b'\r' | b'\n' => Class::Separator,
            b'/' | b'(' => Class::Joins,
            b'A'..=b'Z' => Class::Upper,
            _ => Class::Plain,
        };
        b += 1;
    }
    t
};

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    super::owned_if(input, apply_into)
}

/// Writes the transformed value into `out` (empty) when it differs from `input`.
pub(super) fn apply_into(input: &[u8], out: &mut Vec<u8>) -> bool {
    let class = |b: u8| CLASSES[usize::from(b)];
    // The first byte the pass would change: a capital, a deleted byte, a separator other
    // than one space followed by a plain byte or a capital.
    let first = (0..input.len()).find(|&i| match class(input[i]) {
        Class::Plain | Class::Joins => false,
        Class::Separator if input[i] == b' ' => {
            matches!(
                input.get(i + 1).map(|&b| class(b)),
                Some(Class::Deleted | Class::Separator | Class::Joins)
            )
        }
        _ => true,
    });
    let Some(first) = first else {
        return false;
    };
    // The output is never longer than the input: written by index into a buffer of the
    // input's length, then cut to what was written.
    out.clear();
    out.extend_from_slice(input);
    let mut j = first;
    let mut space = false;
    for &b in &input[first..] {
        match class(b) {
            Class::Deleted => {}
            Class::Separator => {
                if !space {
                    out[j] = b' ';
                    j += 1;
                    space = true;
                }
            }
            Class::Joins => {
                if space {
                    j -= 1;
                }
                space = false;
                out[j] = b;
                j += 1;
            }
            Class::Upper => {
                out[j] = b.to_ascii_lowercase();
                j += 1;
                space = false;
            }
            Class::Plain => {
                out[j] = b;
                j += 1;
                space = false;
            }
        }
    }
    out.truncate(j);
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

    /// The rules of the module docs, one byte at a time with no shortcut.
    fn reference(input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut space = false;
        for &b in input {
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
        out
    }

    #[test]
    fn every_short_input_as_the_rules_say() {
        let alphabet = b"aA ,\"/(\xc0";
        let mut inputs = vec![Vec::new()];
        for _ in 0..5 {
            let longer: Vec<Vec<u8>> = inputs
                .iter()
                .filter(|i| i.len() == inputs.last().map_or(0, Vec::len))
                .flat_map(|i| alphabet.iter().map(move |&b| [&i[..], &[b]].concat()))
                .collect();
            inputs.extend(longer);
        }
        for input in inputs {
            let mut out = Vec::new();
            let changed = apply_into(&input, &mut out);
            let expected = reference(&input);
            assert_eq!(changed, expected != input, "{input:?}");
            assert_eq!(apply(&input).as_ref(), &expected[..], "{input:?}");
        }
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"test"), Cow::Borrowed(_)));
        assert!(!matches!(apply(b"cat /etc/passwd"), Cow::Borrowed(_)));
        assert!(matches!(apply(b"ls -la x"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
