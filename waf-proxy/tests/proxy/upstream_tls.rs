//! TLS to upstreams: a CA and certificates made here with rcgen, an HTTPS upstream (and one
//! that requires a client certificate), verification, SNI name, pooling.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::util::*;

/// Writes `ca.pem`, `server.pem`/`server.key` (for `upstream.test`) and
/// `client.pem`/`client.key` into `dir`.
fn make_pki(dir: &Path) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    for (name, sans) in [
        ("server", vec!["upstream.test".to_string()]),
        ("client", vec!["proxy.test".to_string()]),
    ] {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(sans)
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
    }
}

/// An HTTPS upstream on loopback answering `tls ok PATH`; with `client_ca`, it requires a
/// client certificate signed by that CA. Counts its TLS connections.
fn tls_upstream(dir: &Path, require_client_cert: bool) -> (SocketAddr, Arc<AtomicUsize>) {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("server.pem"))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if require_client_cert {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(dir.join("ca.pem")).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let cfg = Arc::new(builder.with_single_cert(certs, key).unwrap());
    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let n = count.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let n = n.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    n.fetch_add(1, Ordering::SeqCst);
                    let svc = service_fn(|req: Request<Incoming>| async move {
                        let text = format!("tls ok {}", req.uri().path());
                        Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(
                            text,
                        ))))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
    });
    (addr, count)
}

fn proxy_config(server: SocketAddr, tls: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [[upstream]]\nname = \"app\"\nservers = [\"https://{server}\"]\nconnect_timeout_ms = 1000\nread_timeout_ms = 2000\n{tls}\n\
         [[host]]\nnames = [\"*\"]\nupstream = \"app\"\nwaf = {{ mode = \"off\" }}\n"
    )
}

#[tokio::test]
async fn https_upstreams_are_verified_named_and_pooled() {
    let dir = temp_dir("upstream-tls");
    make_pki(&dir);
    let (addr, conns) = tls_upstream(&dir, false);
    let c = client();

    // The CA bundle and the name the certificate carries: served, over one pooled
    // connection.
    let proxy = Proxy::start(
        &dir,
        &proxy_config(
            addr,
            "tls = { ca = \"ca.pem\", server_name = \"upstream.test\" }",
        ),
    );
    for i in 0..5 {
        let r = get(&c, &proxy.url(&format!("/r{i}"))).await;
        assert_eq!(
            (r.status, r.body.as_str()),
            (200, format!("tls ok /r{i}").as_str())
        );
    }
    assert_eq!(
        conns.load(Ordering::SeqCst),
        1,
        "TLS connections are pooled"
    );
    drop(proxy);

    // Verification is on: the system roots do not know this CA, and the certificate does
    // not name 127.0.0.1.
    let dir2 = temp_dir("upstream-tls-unverified");
    let proxy = Proxy::start(&dir2, &proxy_config(addr, ""));
    assert_eq!(get(&c, &proxy.url("/")).await.status, 502);
    drop(proxy);
    let proxy = Proxy::start(&dir, &proxy_config(addr, "tls = { ca = \"ca.pem\" }"));
    assert_eq!(get(&c, &proxy.url("/")).await.status, 502, "wrong name");
}

#[tokio::test]
async fn client_certificates_for_upstreams_that_require_one() {
    let dir = temp_dir("upstream-mtls");
    make_pki(&dir);
    let (addr, _) = tls_upstream(&dir, true);
    let c = client();
    let with_cert = Proxy::start(
        &dir,
        &proxy_config(
            addr,
            "tls = { ca = \"ca.pem\", server_name = \"upstream.test\", cert = \"client.pem\", key = \"client.key\" }",
        ),
    );
    let r = get(&c, &with_cert.url("/m")).await;
    assert_eq!((r.status, r.body.as_str()), (200, "tls ok /m"));
    drop(with_cert);
    let without = Proxy::start(
        &dir,
        &proxy_config(
            addr,
            "tls = { ca = \"ca.pem\", server_name = \"upstream.test\" }",
        ),
    );
    assert_eq!(get(&c, &without.url("/m")).await.status, 502);
}

#[test]
fn a_client_certificate_needs_its_key() {
    let dir = temp_dir("upstream-tls-bad");
    let cfg = proxy_config(
        "127.0.0.1:1".parse().unwrap(),
        "tls = { ca = \"ca.pem\", cert = \"client.pem\" }",
    );
    let path = dir.join("proxy.toml");
    std::fs::write(&path, cfg).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_waf-proxy"))
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("upstream[0].tls"), "{text}");
}
