//! `waf-proxy demo`: the proxy with the default profile (or CRS at PL1) in front of a
//! small upstream started by the same command, on loopback.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::config::Config;

/// Default demo listen address.
pub const DEFAULT_DEMO_LISTEN: &str = "127.0.0.1:8080";

/// Starts the demo upstream on an ephemeral loopback port, in its own thread; returns its
/// address.
pub fn start_upstream() -> io::Result<SocketAddr> {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("demo-upstream".into())
        .spawn(move || {
            rt.block_on(async move {
                let Ok(listener) = TcpListener::from_std(std_listener) else {
                    return;
                };
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    tokio::spawn(async move {
                        let svc = service_fn(|req: Request<Incoming>| async move {
                            let (parts, body) = req.into_parts();
                            let n = body
                                .collect()
                                .await
                                .map(|b| b.to_bytes().len())
                                .unwrap_or(0);
                            let text = format!(
                                "Hello from the demo upstream: {} {} ({n} body bytes)\n",
                                parts.method,
                                parts.uri.path_and_query().map_or("/", |p| p.as_str())
                            );
                            Ok::<_, std::convert::Infallible>(Response::new(Full::new(
                                Bytes::from(text),
                            )))
                        });
                        let _ = auto::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                    });
                }
            });
        })?;
    Ok(addr)
}

/// The demo config: `listen` in front of `upstream`, the default profile or CRS at PL1.
pub fn config(listen: &str, upstream: SocketAddr, crs: Option<&Path>) -> Result<Config, String> {
    let waf = match crs {
        Some(dir) => {
            let dir: PathBuf = dir
                .canonicalize()
                .map_err(|e| format!("{}: {e}", dir.display()))?;
            let dir = dir
                .to_string_lossy()
                .replace('\\', "\\\\")
                .replace('"', "\\\"");
            format!("waf = {{ mode = \"block\", crs = \"{dir}\", paranoia = 1 }}")
        }
        None => "waf = { mode = \"block\" }".to_string(),
    };
    let text = format!(
        "[server]\nlisten = [\"{listen}\"]\nreload_poll_ms = 0\n\
         [log]\naccess = \"stdout\"\n\
         [[upstream]]\nname = \"demo\"\nservers = [\"{upstream}\"]\n\
         [[host]]\nnames = [\"*\"]\nupstream = \"demo\"\ndefault = true\n{waf}\n"
    );
    Config::parse(Path::new("<demo>"), &text).map_err(|e| e.to_string())
}
