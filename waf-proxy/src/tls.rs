//! TLS termination with rustls (ring provider): one `ServerConfig` for the process, a
//! certificate per host chosen by SNI through the current [`State`](crate::state::State),
//! so a reload that changes a certificate takes effect for new connections.
//!
//! TLS 1.2 and 1.3, ALPN `h2` and `http/1.1`, session resumption with both stateless
//! tickets (TLS 1.3 and 1.2) and a server-side session cache of
//! [`SESSION_CACHE_SIZE`] entries.

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, ServerSessionMemoryCache};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

use crate::state::State;

/// Entries in the server-side TLS session cache (about 100 bytes to 1 KB each).
pub const SESSION_CACHE_SIZE: usize = 4096;

/// Loads a PEM certificate chain and private key.
pub fn load_certified_key(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("{}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in the file", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| format!("unsupported private key: {e}"))?;
    Ok(Arc::new(CertifiedKey::new(certs, signing)))
}

/// Picks the certificate of the host named by SNI, or of the first host that has one.
#[derive(Debug)]
struct SniResolver {
    state: Arc<ArcSwap<State>>,
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let state = self.state.load();
        let name = hello.server_name().map(|n| n.to_ascii_lowercase());
        if let Some(i) = state.find_host(name.as_deref()) {
            if let Some(c) = &state.hosts[i].cert {
                return Some(c.clone());
            }
        }
        state.hosts.iter().find_map(|h| h.cert.clone())
    }
}

/// The process's TLS server config.
pub fn server_config(state: Arc<ArcSwap<State>>) -> Result<Arc<ServerConfig>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(SniResolver { state }));
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    cfg.ticketer = rustls::crypto::ring::Ticketer::new()?;
    cfg.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE_SIZE);
    Ok(Arc::new(cfg))
}
