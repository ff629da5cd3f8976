//! `t:urlEncode`: percent-encodes every byte except ASCII letters, digits and `*`; a space
//! becomes `+`. Escapes use lower-case hex (`%2f`), as in ModSecurity.
//!
//! ```text
//! SecRule ARGS:q "@contains %3cscript" "id:1,t:urlEncode,deny"
//! ```

use std::borrow::Cow;

use super::hex::LOWER;

fn is_kept(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'*'
}

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    let Some(first) = input.iter().position(|&b| !is_kept(b)) else {
        return Cow::Borrowed(input);
    };
    let mut out = Vec::with_capacity(input.len() + 16);
    out.extend_from_slice(&input[..first]);
    for &b in &input[first..] {
        if is_kept(b) {
            out.push(b);
        } else if b == b' ' {
            out.push(b'+');
        } else {
            out.extend_from_slice(&[
                b'%',
                LOWER[usize::from(b >> 4)],
                LOWER[usize::from(b & 0x0f)],
            ]);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes() {
        assert_eq!(apply(b"Test Case").as_ref(), b"Test+Case");
        assert_eq!(
            apply(b"a*-._~%\x00\xff").as_ref(),
            b"a*%2d%2e%5f%7e%25%00%ff"
        );
        assert!(matches!(apply(b"TestCase09*"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
