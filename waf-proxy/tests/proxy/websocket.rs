//! WebSocket through the proxy, with a real client and server (tokio-tungstenite): the
//! handshake is inspected like any request, then frames are relayed both ways; an idle
//! connection is closed after `websocket_idle_timeout_ms`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

use crate::util::*;

/// A WebSocket echo server on loopback.
fn ws_upstream() -> SocketAddr {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
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
                tokio::spawn(async move {
                    let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                        return;
                    };
                    while let Some(Ok(m)) = ws.next().await {
                        if (m.is_text() || m.is_binary()) && ws.send(m).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
    });
    addr
}

fn start(idle_ms: u64) -> Proxy {
    let up = ws_upstream();
    let dir = temp_dir("ws");
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, RULES).unwrap();
    Proxy::start(
        &dir,
        &config(
            &[up.to_string()],
            &rules,
            &format!("websocket_idle_timeout_ms = {idle_ms}"),
            "",
        ),
    )
}

#[tokio::test]
async fn frames_are_relayed_both_ways_after_an_inspected_handshake() {
    let proxy = start(5000);
    let tcp = tokio::net::TcpStream::connect(proxy.http).await.unwrap();
    let (mut ws, resp) = tokio_tungstenite::client_async(format!("ws://{}/chat", proxy.http), tcp)
        .await
        .expect("handshake through the proxy");
    assert_eq!(resp.status(), 101);
    assert!(resp.headers().contains_key("x-request-id"));
    for i in 0..20 {
        let text = format!("hello {i}");
        ws.send(Message::text(text.clone())).await.unwrap();
        let got = ws.next().await.unwrap().unwrap();
        assert_eq!(got, Message::text(text));
    }
    let big = vec![7u8; 200_000];
    ws.send(Message::binary(big.clone())).await.unwrap();
    assert_eq!(ws.next().await.unwrap().unwrap(), Message::binary(big));
    ws.close(None).await.unwrap();

    // The handshake is a request like any other: an attack in it is blocked, and the
    // connection is closed after the answer.
    let tcp = tokio::net::TcpStream::connect(proxy.http).await.unwrap();
    let err = tokio_tungstenite::client_async(
        format!("ws://{}/chat?q=1%20union%20select%202", proxy.http),
        tcp,
    )
    .await
    .expect_err("blocked handshake");
    match err {
        tokio_tungstenite::tungstenite::Error::Http(r) => {
            assert_eq!(r.status(), 403);
            assert_eq!(r.headers()["connection"], "close");
        }
        e => panic!("{e}"),
    }

    // Plain requests still work on other connections.
    assert_eq!(
        get(&client(), &proxy.url("/x")).await.status,
        502,
        "the upstream only speaks WebSocket"
    );
}

#[tokio::test]
async fn an_idle_upgraded_connection_is_closed() {
    let proxy = start(500);
    let tcp = tokio::net::TcpStream::connect(proxy.http).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(format!("ws://{}/", proxy.http), tcp)
        .await
        .unwrap();
    ws.send(Message::text("ping")).await.unwrap();
    assert_eq!(ws.next().await.unwrap().unwrap(), Message::text("ping"));
    let t = Instant::now();
    let end = tokio::time::timeout(Duration::from_secs(5), ws.next()).await;
    let elapsed = t.elapsed();
    match end {
        Ok(None) | Ok(Some(Err(_))) | Ok(Some(Ok(Message::Close(_)))) => {}
        other => panic!("expected the connection to end, got {other:?}"),
    }
    assert!(
        elapsed >= Duration::from_millis(400),
        "closed too early: {elapsed:?}"
    );
}
