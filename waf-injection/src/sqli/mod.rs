//! SQL injection detection: libinjection's tokenizer, folding and fingerprint check.

/// A SQL injection fingerprint: up to 8 token-type letters (`s&sos`, `1UE`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Fingerprint {
    bytes: [u8; 8],
    len: u8,
}

impl Fingerprint {
    /// The letters.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Fingerprint({:?})",
            String::from_utf8_lossy(self.as_bytes())
        )
    }
}

/// The fingerprint of `input` when it is a SQL injection, `None` otherwise.
pub fn detect_sqli(input: &[u8]) -> Option<Fingerprint> {
    let _ = input;
    None
}
