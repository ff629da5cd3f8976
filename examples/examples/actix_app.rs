//! An actix-web app behind the WAF (OWASP CRS, paranoia level 1, blocking):
//! `cargo run -p waf-examples --example actix_app`, then
//! `curl -i "http://127.0.0.1:8080/?q=1'%20UNION%20SELECT%20password%20FROM%20users--"` → 403.
//!
//! Arguments (both optional): the rules file (default `examples/crs.conf`) and the address
//! to listen on (default `127.0.0.1:8080`). `RUST_LOG=waf=debug` shows every report.
use std::net::SocketAddr;

use actix_web::{web, App, HttpServer};
use tracing_subscriber::EnvFilter;
use waf_core::Waf;

#[actix_web::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "waf=info".into()))
        .init();
    let mut args = std::env::args().skip(1);
    let rules = args
        .next()
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/crs.conf").to_owned());
    let addr: SocketAddr = args.next().as_deref().unwrap_or("127.0.0.1:8080").parse()?;

    let waf = Waf::builder().seclang_file(&rules).build()?;
    println!("listening on http://{addr} (rules: {rules})");
    HttpServer::new(move || {
        App::new()
            .wrap(waf_actix::Waf::new(waf.clone()))
            .route("/", web::get().to(|| async { "hello from actix-web\n" }))
            .route("/echo", web::post().to(|body: String| async move { body }))
    })
    .bind(addr)?
    .run()
    .await?;
    Ok(())
}
