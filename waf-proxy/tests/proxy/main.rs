//! Integration tests: the real `waf-proxy` binary on loopback in front of a real upstream.

mod util;

mod basic;
mod cli;
mod crs;
mod edge;
mod health;
mod ml;
mod plain;
mod plain_waf;
mod reload;
mod tls;
mod upstream_tls;
mod websocket;
