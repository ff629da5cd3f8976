//! Request body processors: temporary stubs until the real ones land.
#![allow(dead_code, missing_docs)]

pub(crate) mod urlencoded {
    pub(crate) struct UrlencodedOutcome {
        pub(crate) invalid_encoding: bool,
    }
    pub(crate) fn parse(
        input: &[u8],
        separator: u8,
        _max: usize,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> UrlencodedOutcome {
        for part in input.split(|&b| b == separator).filter(|p| !p.is_empty()) {
            let (k, v) = match part.iter().position(|&b| b == b'=') {
                Some(i) => (&part[..i], &part[i + 1..]),
                None => (part, &b""[..]),
            };
            out.push((decode(k), decode(v)));
        }
        UrlencodedOutcome {
            invalid_encoding: false,
        }
    }
    fn decode(s: &[u8]) -> Vec<u8> {
        let s: Vec<u8> = s
            .iter()
            .map(|&b| if b == b'+' { b' ' } else { b })
            .collect();
        crate::eval::percent_decode_for_stub(&s)
    }
}

pub(crate) mod cookie {
    pub(crate) fn parse(value: &[u8], out: &mut Vec<(Vec<u8>, Vec<u8>)>) {
        for part in value.split(|&b| b == b';') {
            let part = part.trim_ascii();
            if part.is_empty() {
                continue;
            }
            match part.iter().position(|&b| b == b'=') {
                Some(i) => out.push((part[..i].to_vec(), part[i + 1..].to_vec())),
                None => out.push((part.to_vec(), Vec::new())),
            }
        }
    }
}

pub(crate) mod json {
    pub(crate) fn parse(
        _input: &[u8],
        _depth: usize,
        _max: usize,
        _out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<(), String> {
        Ok(())
    }
}

pub(crate) mod xml {
    pub(crate) struct Xml {
        pub(crate) text: Vec<Vec<u8>>,
        pub(crate) attributes: Vec<Vec<u8>>,
    }
    pub(crate) fn parse(_input: &[u8], _depth: usize) -> Result<Xml, String> {
        Ok(Xml {
            text: Vec::new(),
            attributes: Vec::new(),
        })
    }
}

pub(crate) mod multipart {
    #[derive(Default)]
    pub(crate) struct Flags {
        pub(crate) boundary_quoted: bool,
        pub(crate) boundary_whitespace: bool,
        pub(crate) crlf_lf_lines: bool,
        pub(crate) data_after: bool,
        pub(crate) data_before: bool,
        pub(crate) file_limit_exceeded: bool,
        pub(crate) header_folding: bool,
        pub(crate) invalid_header_folding: bool,
        pub(crate) invalid_part: bool,
        pub(crate) invalid_quoting: bool,
        pub(crate) lf_line: bool,
        pub(crate) missing_semicolon: bool,
        pub(crate) unmatched_boundary: bool,
    }
    pub(crate) struct FilePart {
        pub(crate) field_name: Vec<u8>,
        pub(crate) filename: Vec<u8>,
        pub(crate) size: usize,
    }
    pub(crate) struct MultipartLimits {
        pub(crate) max_parts: usize,
        pub(crate) max_args: usize,
    }
    #[derive(Default)]
    pub(crate) struct Multipart {
        pub(crate) args: Vec<(Vec<u8>, Vec<u8>)>,
        pub(crate) files: Vec<FilePart>,
        pub(crate) part_headers: Vec<(Vec<u8>, Vec<u8>)>,
        pub(crate) names: Vec<Vec<u8>>,
        pub(crate) filenames: Vec<Vec<u8>>,
        pub(crate) flags: Flags,
        pub(crate) strict_error: bool,
        pub(crate) error: Option<String>,
    }
    pub(crate) fn parse(_ct: &[u8], _body: &[u8], _l: &MultipartLimits) -> Multipart {
        Multipart::default()
    }
}
