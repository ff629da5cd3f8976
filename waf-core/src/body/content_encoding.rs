//! `Content-Encoding` on a request body: decode it for inspection, or refuse it.
//!
//! Servers and frameworks that inflate request bodies (nginx with a module, ASP.NET Core's
//! request decompression, Express's `body-parser`) hand the application the decoded bytes,
//! so a WAF that inspects the compressed stream sees nothing. We decode `gzip`/`x-gzip`,
//! `deflate` (zlib, or raw deflate as some clients send it), `br` and `identity`, in the
//! reverse order of the header's list (RFC 9110 §8.4), and inspect the result.
//!
//! Anything else fails with [`Refused`], which the engine turns into a refusal: an
//! unknown coding (`zstd`, `compress`), a corrupt stream, a decoded size over `max_output`
//! (the request body limit), or a compression ratio over [`crate::limits::DEFAULT_DECOMPRESSION_RATIO`] once past
//! [`crate::limits::DEFAULT_DECOMPRESSION_GRACE`] bytes (a decompression bomb). Memory: at most `max_output + 1` bytes per
//! coding step.

use std::io::Read;

/// Why a compressed body is refused; the text becomes `REQBODY_ERROR_MSG`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused(pub(crate) String);

/// Decodes `body` according to the `Content-Encoding` value `header`.
pub(crate) fn decode(header: &[u8], body: Vec<u8>, max_output: usize) -> Result<Vec<u8>, Refused> {
    let codings: Vec<Vec<u8>> = header
        .split(|&b| b == b',')
        .map(|c| c.trim_ascii().to_ascii_lowercase())
        .filter(|c| !c.is_empty())
        .collect();
    let mut data = body;
    for coding in codings.iter().rev() {
        let cap = max_output.min(
            data.len()
                .saturating_mul(crate::limits::DEFAULT_DECOMPRESSION_RATIO)
                .max(crate::limits::DEFAULT_DECOMPRESSION_GRACE),
        );
        data = match coding.as_slice() {
            b"identity" => continue,
            b"gzip" | b"x-gzip" => read_capped(flate2::read::MultiGzDecoder::new(&data[..]), cap)?,
            b"deflate" => match read_capped(flate2::read::ZlibDecoder::new(&data[..]), cap) {
                Ok(v) => v,
                Err(_) => read_capped(flate2::read::DeflateDecoder::new(&data[..]), cap)?,
            },
            b"br" => read_capped(brotli::Decompressor::new(&data[..], 4096), cap)?,
            other => {
                return Err(Refused(format!(
                    "Content-Encoding {} is not supported",
                    String::from_utf8_lossy(other)
                )))
            }
        };
    }
    Ok(data)
}

fn read_capped(reader: impl Read, cap: usize) -> Result<Vec<u8>, Refused> {
    let mut out = Vec::new();
    reader
        .take(cap as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| Refused(format!("Content-Encoding: corrupt stream ({e})")))?;
    if out.len() > cap {
        return Err(Refused(format!(
            "Content-Encoding: decoded body over {cap} bytes (size or ratio limit)"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn codings() {
        assert_eq!(decode(b"gzip", gz(b"a=1"), 100).unwrap(), b"a=1");
        assert_eq!(decode(b"X-GZIP", gz(b"a=1"), 100).unwrap(), b"a=1");
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(b"a=2").unwrap();
        assert_eq!(
            decode(b"deflate", z.finish().unwrap(), 100).unwrap(),
            b"a=2"
        );
        let mut raw =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        raw.write_all(b"a=3").unwrap();
        assert_eq!(
            decode(b"deflate", raw.finish().unwrap(), 100).unwrap(),
            b"a=3"
        );
        let mut br = Vec::new();
        brotli::BrotliCompress(&mut &b"a=4"[..], &mut br, &Default::default()).unwrap();
        assert_eq!(decode(b"br", br, 100).unwrap(), b"a=4");
        // Applied in reverse order of the list.
        assert_eq!(decode(b"gzip, gzip", gz(&gz(b"a=5")), 100).unwrap(), b"a=5");
        assert_eq!(decode(b"identity", b"a=6".to_vec(), 100).unwrap(), b"a=6");
    }

    #[test]
    fn refusals() {
        assert!(decode(b"zstd", b"x".to_vec(), 100).is_err());
        assert!(decode(b"gzip", b"\x1f\x8b\x08\0garbage".to_vec(), 100).is_err());
        // Over the size cap, exactly at it.
        assert!(decode(b"gzip", gz(&[b'a'; 101]), 100).is_err());
        assert_eq!(decode(b"gzip", gz(&[b'a'; 100]), 100).unwrap().len(), 100);
        // A bomb: 20 MiB of one byte is over the ratio cap even under a large size cap.
        let bomb = gz(&vec![0u8; 20 << 20]);
        assert!(decode(b"gzip", bomb, 100 << 20).is_err());
    }
}
