//! The gate forms' bodies: `application/x-www-form-urlencoded`, a few short fields.

/// The value of field `name` in `body`, `+` and `%XX` decoded; `None` when absent. A field
/// longer than 2 KiB is treated as absent (the forms hold nothing that long).
pub(crate) fn field(body: &[u8], name: &str) -> Option<Vec<u8>> {
    for pair in body.split(|&b| b == b'&') {
        let (k, v) = match memchr::memchr(b'=', pair) {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &b""[..]),
        };
        if decode(k).as_deref() == Some(name.as_bytes()) {
            return decode(v).filter(|v| v.len() <= 2048);
        }
    }
    None
}

/// The value of field `name` in a query string.
pub(crate) fn query(query: &[u8], name: &str) -> Option<Vec<u8>> {
    field(query, name)
}

fn decode(s: &[u8]) -> Option<Vec<u8>> {
    if s.len() > 3 * 2048 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < s.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(s[i + 1]), hex(s[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let body = b"email=a%40b.example&code=12+34&x&bad=%zz%4";
        assert_eq!(field(body, "email").unwrap(), b"a@b.example");
        assert_eq!(field(body, "code").unwrap(), b"12 34");
        assert_eq!(field(body, "x").unwrap(), b"");
        assert_eq!(field(body, "bad").unwrap(), b"%zz%4");
        assert_eq!(field(body, "none"), None);
        assert_eq!(field(b"", "a"), None);
        assert_eq!(field(b"a=%", "a").unwrap(), b"%");
        let long = [b"a=".as_slice(), &[b'x'; 3000]].concat();
        assert_eq!(field(&long, "a"), None);
    }
}
