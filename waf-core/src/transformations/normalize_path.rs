//! `t:normalizePath` (also `t:normalisePath`): removes `.` segments, resolves `..` against
//! the previous segment and collapses repeated slashes.
//!
//! ```text
//! SecRule REQUEST_FILENAME "@contains /etc/passwd" "id:1,t:normalizePath,deny"
//! ```
//!
//! A port of ModSecurity's `normalize_path_inplace` (`normalise_path.cc`):
//! - `a//b` -> `a/b`, `a/./b` -> `a/b`, `a/b/../c` -> `a/c`;
//! - an absolute path cannot go above the root (`/../../etc` -> `/etc`);
//! - a relative path keeps the `..` it cannot resolve (`a/../../b` -> `../b`), and a
//!   leading `./` disappears (`./x` -> `x`, `.` -> empty);
//! - a trailing slash is kept only if the input had one.
//!
//! Coraza uses Go's `filepath.Clean` plus a trailing-slash fix; the two agree on every test
//! vector.

use std::borrow::Cow;

/// Whether ModSecurity's algorithm could change the path: some segment is `.`, `..` or
/// empty (other than the leading one of an absolute path and the trailing one).
fn may_change(path: &[u8]) -> bool {
    // One segment (most values: a dotted name, a number, an address): only `.` or `..`.
    if memchr::memchr(b'/', path).is_none() {
        return matches!(path, b"." | b"..");
    }
    let last = path.split(|&b| b == b'/').count() - 1;
    path.split(|&b| b == b'/')
        .enumerate()
        .any(|(n, seg)| match seg {
            b"" => n != 0 && n != last,
            b"." | b".." => true,
            _ => false,
        })
}

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    if input.is_empty() || !may_change(input) {
        return Cow::Borrowed(input);
    }
    let mut buf = input.to_vec();
    normalize(&mut buf);
    Cow::Owned(buf)
}

/// Normalises `buf` (using `/` as the only separator) in place.
pub(super) fn normalize(buf: &mut Vec<u8>) {
    if buf.is_empty() {
        return;
    }
    let end = buf.len() - 1;
    let relative = buf[0] != b'/';
    let trailing = buf[end] == b'/';
    let mut src = 0usize;
    let mut dst = 0usize;
    let mut hit_root = false;
    let mut done = false;

    while !done && src <= end && dst <= end {
        // Normalise at the end of each segment, and always at the end of the input.
        let at_segment_end = if src == end {
            done = true;
            true
        } else {
            buf[src + 1] == b'/'
        };
        if at_segment_end {
            if src != end && buf[src] == b'/' {
                // An empty segment: the copy below skips the extra slashes.
            } else if buf[src] == b'.' {
                if dst > 0 && buf[dst - 1] == b'.' {
                    // A back-reference `..`.
                    if relative && (hit_root || dst <= 2) {
                        // Nothing to go back to: keep the `..`.
                        hit_root = true;
                    } else {
                        // Remove the `..` and the previous segment, not above the root.
                        let mut d = dst as isize - 3;
                        while d > 0 && buf[d as usize] != b'/' {
                            d -= 1;
                        }
                        dst = if d <= 0 {
                            hit_root = true;
                            usize::from(!relative && src == end)
                        } else {
                            d as usize
                        };
                        if done {
                            continue;
                        }
                        src += 1;
                    }
                } else if dst == 0 {
                    // A leading `./`: drop it.
                    if done {
                        continue;
                    }
                    src += 1;
                } else if buf[dst - 1] == b'/' {
                    // A self-reference `/./`: drop it.
                    if done {
                        continue;
                    }
                    dst -= 1;
                    src += 1;
                }
            } else if dst > 0 {
                hit_root = false;
            }
        }

        // Copy the byte, skipping to the last of several slashes.
        if buf[src] == b'/' {
            while src < end && buf[src + 1] == b'/' {
                src += 1;
            }
            // A relative path does not get a leading slash.
            if relative && dst == 0 {
                src += 1;
                continue;
            }
        }
        buf[dst] = buf[src];
        dst += 1;
        src += 1;
    }

    if !trailing && dst > 0 && buf[dst - 1] == b'/' {
        dst -= 1;
    }
    buf.truncate(dst);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        String::from_utf8(apply(s.as_bytes()).into_owned()).unwrap()
    }

    #[test]
    fn one_segment_changes_only_as_a_dot_or_two() {
        // `..` is kept (a relative path keeps what it cannot resolve), but goes through.
        for (path, changes, out) in [
            (".", true, ""),
            ("..", true, ".."),
            ("...", false, "..."),
            ("a.b", false, "a.b"),
            ("user@example.com", false, "user@example.com"),
            ("35.5", false, "35.5"),
        ] {
            assert_eq!(may_change(path.as_bytes()), changes, "{path}");
            assert_eq!(apply(path.as_bytes()).as_ref(), out.as_bytes(), "{path}");
        }
    }

    #[test]
    fn resolves_segments() {
        assert_eq!(norm("/dir/foo//bar"), "/dir/foo/bar");
        assert_eq!(norm("dir/../../foo"), "../foo");
        assert_eq!(norm("dir/./.././../../foo/bar/./"), "../../foo/bar/");
        assert_eq!(
            norm("/dir/./subdir/../subsubdir/../subsubsubdir/../"),
            "/dir/"
        );
        assert_eq!(norm("/../../etc/./passwd"), "/etc/passwd");
        assert_eq!(norm("/a/b/.."), "/a");
        // ModSecurity keeps the root slash, then strips it as a trailing slash.
        assert_eq!(norm("/.."), "");
        assert_eq!(norm("/a/.."), "");
        assert_eq!(norm("."), "");
        assert_eq!(norm("./.."), "..");
        assert_eq!(norm("a./b.."), "a./b..");
    }

    #[test]
    fn borrowed_when_unchanged() {
        for s in ["", "/foo/bar/baz", "x", "/a/", "a/b/", "/"] {
            assert!(matches!(apply(s.as_bytes()), Cow::Borrowed(_)), "{s:?}");
        }
        // These run the normaliser, which finds nothing to do.
        for s in ["..", "../", "../.."] {
            let t = super::super::Transformation::NormalizePath;
            assert!(matches!(t.apply(s.as_bytes()), Cow::Borrowed(_)), "{s:?}");
        }
    }
}
