//! HTTPS: certificates generated here, SNI, TLS 1.2 and 1.3, ALPN h2 and http/1.1,
//! session resumption.

use std::sync::Arc;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use crate::util::*;

struct Cert {
    der: rustls::pki_types::CertificateDer<'static>,
}

fn write_cert(dir: &std::path::Path, name: &str) -> Cert {
    let ck = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
    std::fs::write(dir.join(format!("{name}.pem")), ck.cert.pem()).unwrap();
    std::fs::write(
        dir.join(format!("{name}.key")),
        ck.signing_key.serialize_pem(),
    )
    .unwrap();
    Cert {
        der: ck.cert.der().clone(),
    }
}

fn client_config(cert: &Cert, alpn: &[&[u8]], tls12_only: bool) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(cert.der.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider);
    let builder = if tls12_only {
        builder
            .with_protocol_versions(&[&rustls::version::TLS12])
            .unwrap()
    } else {
        builder.with_safe_default_protocol_versions().unwrap()
    };
    let mut cc = builder.with_root_certificates(roots).with_no_client_auth();
    cc.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(cc)
}

async fn connect(
    proxy: &Proxy,
    cc: &Arc<ClientConfig>,
    name: &str,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let tcp = tokio::net::TcpStream::connect(proxy.https.unwrap())
        .await
        .unwrap();
    TlsConnector::from(cc.clone())
        .connect(ServerName::try_from(name.to_string()).unwrap(), tcp)
        .await
        .unwrap()
}

fn tls_config(dir: &std::path::Path, up: &Upstream) -> String {
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, RULES).unwrap();
    let base = config(
        &[up.addr.to_string()],
        &rules,
        "listen_tls = [\"127.0.0.1:0\"]",
        "",
    );
    let base = base.replace(
        "names = [\"*\"]",
        "names = [\"a.test\"]\ntls = { cert = \"a.test.pem\", key = \"a.test.key\" }",
    );
    format!(
        "{base}\n[[host]]\nnames = [\"b.test\"]\nupstream = \"app\"\ntls = {{ cert = \"b.test.pem\", key = \"b.test.key\" }}\n\
         waf = {{ mode = \"block\", rules = [{:?}] }}\n",
        rules.to_str().unwrap()
    )
}

#[tokio::test]
async fn h2_over_tls_with_sni_and_blocking() {
    let up = upstream();
    let dir = temp_dir("tls-h2");
    let a = write_cert(&dir, "a.test");
    let b = write_cert(&dir, "b.test");
    let proxy = Proxy::start(&dir, &tls_config(&dir, &up));

    for (cert, name) in [(&a, "a.test"), (&b, "b.test")] {
        // Each name gets its own certificate: the client trusts only that one.
        let cc = client_config(cert, &[b"h2", b"http/1.1"], false);
        let tls = connect(&proxy, &cc, name).await;
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        assert_eq!(
            tls.get_ref().1.protocol_version(),
            Some(rustls::ProtocolVersion::TLSv1_3)
        );
        let (mut send, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(conn);
        let resp = send
            .send_request(
                Request::get(format!("https://{name}/h2"))
                    .body(Full::new(Bytes::new()))
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.version(), http::Version::HTTP_2);
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.headers()["strict-transport-security"],
            "max-age=31536000"
        );
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"ok GET /h2 0");
        let resp = send
            .send_request(
                Request::get(format!("https://{name}/?q=1%20union%20select%202"))
                    .body(Full::new(Bytes::new()))
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), 403);
    }
}

#[tokio::test]
async fn http1_over_tls12_and_session_resumption() {
    let up = upstream();
    let dir = temp_dir("tls-h1");
    let a = write_cert(&dir, "a.test");
    let _b = write_cert(&dir, "b.test");
    let proxy = Proxy::start(&dir, &tls_config(&dir, &up));

    for tls12 in [true, false] {
        let cc = client_config(&a, &[b"http/1.1"], tls12);
        for round in 0..2 {
            let tls = connect(&proxy, &cc, "a.test").await;
            let session = tls.get_ref().1;
            let want = if tls12 {
                rustls::ProtocolVersion::TLSv1_2
            } else {
                rustls::ProtocolVersion::TLSv1_3
            };
            assert_eq!(session.protocol_version(), Some(want));
            assert_eq!(session.alpn_protocol(), Some(&b"http/1.1"[..]));
            let kind = session.handshake_kind();
            if round == 1 {
                assert_eq!(kind, Some(rustls::HandshakeKind::Resumed), "tls12={tls12}");
            }
            let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .unwrap();
            tokio::spawn(conn);
            let resp = send
                .send_request(
                    Request::get("/t")
                        .header("host", "a.test")
                        .body(Full::new(Bytes::new()))
                        .unwrap(),
                )
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(&body[..], b"ok GET /t 0");
            // The Host must name the same virtual host as SNI.
            let resp = send
                .send_request(
                    Request::get("/t")
                        .header("host", "b.test")
                        .body(Full::new(Bytes::new()))
                        .unwrap(),
                )
                .await
                .unwrap();
            assert_eq!(resp.status(), 421);
            assert_eq!(
                resp.headers()["strict-transport-security"],
                "max-age=31536000"
            );
        }
    }
}
