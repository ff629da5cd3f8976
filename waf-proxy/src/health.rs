//! Active health checks, beside the passive ones: for each upstream that configures
//! `health`, every server gets `GET path` every `interval`; `fall` failures in a row take
//! it out of rotation, `rise` successes bring it back ([`Upstream::record_check`]).
//!
//! One task on the control thread checks every upstream of the current state, so a reload
//! that adds, changes or drops checks takes effect at once; the new state's servers start
//! in rotation (as nginx's do), and are taken out after `fall` failed checks. Checks use
//! the same connector and TLS settings as requests, from the control thread's own pool.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Request, Uri};
use http_body_util::{BodyExt, Empty};

use crate::client;
use crate::config::HealthCheck;
use crate::server::Shared;
use crate::state::Upstream;

/// How often the task looks for checks that are due.
const TICK: Duration = Duration::from_millis(50);

/// Runs the checks of the current state, forever.
pub async fn run(shared: Arc<Shared>) {
    let mut due: HashMap<(String, String), Instant> = HashMap::new();
    loop {
        let state = shared.state.load_full();
        let now = Instant::now();
        for up in &state.upstreams {
            let Some(h) = &up.config.health else { continue };
            for (i, s) in up.servers.iter().enumerate() {
                let key = (up.config.name.clone(), s.authority.to_string());
                if due.get(&key).is_some_and(|t| *t > now) {
                    continue;
                }
                due.insert(key, now + h.interval);
                tokio::spawn(check(up.clone(), i, h.clone()));
            }
        }
        tokio::time::sleep(TICK).await;
    }
}

async fn check(up: Arc<Upstream>, i: usize, h: HealthCheck) {
    let s = &up.servers[i];
    let Ok(req) = Request::get(Uri::from(h.path.clone()))
        .header(http::header::HOST, s.authority.as_str())
        .header(http::header::USER_AGENT, "waf-proxy-health-check")
        .body(Empty::new().map_err(|e| match e {}).boxed())
    else {
        return;
    };
    let ok = match tokio::time::timeout(h.timeout, async {
        let resp = client::send(
            &up.client_key,
            &up.config,
            up.tls.as_ref(),
            &s.authority,
            s.tls,
            req,
        )
        .await?;
        let status = resp.status().as_u16();
        // Read the answer to its end so the connection goes back to the pool.
        let _ = resp.into_body().collect().await;
        Ok::<u16, client::UpstreamError>(status)
    })
    .await
    {
        Ok(Ok(status)) => status == h.expect_status,
        _ => false,
    };
    match up.record_check(i, ok, h.rise, h.fall) {
        Some(false) => {
            tracing::warn!(upstream = %up.config.name, server = %s.authority, "health check failed: out of rotation");
            eprintln!(
                "waf-proxy: upstream {} server {} is down (health check)",
                up.config.name, s.authority
            );
        }
        Some(true) => {
            tracing::info!(upstream = %up.config.name, server = %s.authority, "health check passed: back in rotation");
            eprintln!(
                "waf-proxy: upstream {} server {} is up (health check)",
                up.config.name, s.authority
            );
        }
        None => {}
    }
}
