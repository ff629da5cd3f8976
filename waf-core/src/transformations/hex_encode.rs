//! `t:hexEncode`: every byte becomes two lower-case hex digits (`"A"` -> `"41"`).
//!
//! ```text
//! SecRule ARGS:token "@streq 098f6bcd4621d373cade4e832627b4f6" "id:1,t:md5,t:hexEncode,pass"
//! ```

use std::borrow::Cow;

use super::hex::LOWER;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    if input.is_empty() {
        return Cow::Borrowed(input);
    }
    let mut out = Vec::with_capacity(input.len() * 2);
    for &b in input {
        out.push(LOWER[usize::from(b >> 4)]);
        out.push(LOWER[usize::from(b & 0x0f)]);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_lowercase() {
        assert_eq!(apply(b"Test\x00\xff").as_ref(), b"5465737400ff");
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
