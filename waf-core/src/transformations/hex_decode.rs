//! `t:hexDecode`: decodes a string of hex digit pairs (`"414243"` -> `"ABC"`).
//!
//! ```text
//! SecRule ARGS:data "@contains <script" "id:1,t:hexDecode,deny"
//! ```
//!
//! ModSecurity decodes pair after pair without checking the digits (and drops an odd last
//! digit). The Coraza test vectors we run (`invalidCharacter`, `invalidLen` in
//! `hexDecode.json`) expect an empty value when the input is not valid hex: a non-hex
//! character or an odd length. We follow the vectors: garbage in, empty value out.

use std::borrow::Cow;

use super::hex;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    if input.is_empty() {
        return Cow::Borrowed(input);
    }
    if input.len() % 2 != 0 {
        return Cow::Owned(Vec::new());
    }
    let mut out = Vec::with_capacity(input.len() / 2);
    for at in (0..input.len()).step_by(2) {
        match hex::pair(input, at) {
            Some(b) => out.push(b),
            None => return Cow::Owned(Vec::new()),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_pairs() {
        assert_eq!(apply(b"546573740043617365").as_ref(), b"Test\x00Case");
        assert_eq!(apply(b"4A4b").as_ref(), b"JK");
    }

    #[test]
    fn invalid_input_gives_empty() {
        assert_eq!(apply(b"01234567890z").as_ref(), b"");
        assert_eq!(apply(b"54657374004").as_ref(), b"");
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
