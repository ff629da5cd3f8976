//! An axum app behind the WAF (OWASP CRS, paranoia level 1, blocking):
//! `cargo run -p waf-examples --example axum_app`, then
//! `curl -i "http://127.0.0.1:3000/?q=1'%20UNION%20SELECT%20password%20FROM%20users--"` → 403.
//!
//! Arguments (both optional): the rules file (default `examples/crs.conf`) and the address
//! to listen on (default `127.0.0.1:3000`). `RUST_LOG=waf=debug` shows every report.
use std::net::SocketAddr;

use axum::routing::{get, post};
use axum::Router;
use tracing_subscriber::EnvFilter;
use waf_core::Waf;
use waf_tower::WafLayer;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "waf=info".into()))
        .init();
    let mut args = std::env::args().skip(1);
    let rules = args
        .next()
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/crs.conf").to_owned());
    let addr: SocketAddr = args.next().as_deref().unwrap_or("127.0.0.1:3000").parse()?;

    let waf = Waf::builder().seclang_file(&rules).build()?;
    let app = Router::new()
        .route("/", get(|| async { "hello from axum\n" }))
        .route("/echo", post(|body: String| async move { body }))
        .layer(WafLayer::new(waf));

    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on http://{addr} (rules: {rules})");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
