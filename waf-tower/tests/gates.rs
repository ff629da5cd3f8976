//! The gates (challenges, waiting room, email-code sign-in) served by waf-tower in front of
//! a real axum server on 127.0.0.1, with a real HTTP client, and for sign-in a real SMTP
//! server (Python's `aiosmtpd`, started here) that the code is read from.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use waf_core::Waf;
use waf_test_support::browser::{input, Browser};
use waf_test_support::{code_in, Smtp};
use waf_tower::{SmtpMailer, SmtpSecurity, WafLayer};

const KEYS: &str = "[gates]\nkeys = [\"an axum test key of at least 32 bytes\"]\n";

/// Starts the app (`/`, `/protected`, `/shop`, `/private` answer their path) behind a
/// layer with `policy`; its base URL.
async fn serve(policy: &str, mailer: Option<SmtpMailer>) -> String {
    let config: waf_core::policy::PolicyConfig = toml::from_str(policy).unwrap();
    let mut b = WafLayer::builder(Waf::builder().build().unwrap())
        .policy(&config)
        .unwrap();
    if let Some(m) = mailer {
        b = b.mailer(Arc::new(m));
    }
    let app = Router::new()
        .route("/", get(|| async { "home" }))
        .route("/protected", get(|| async { "protected" }))
        .route("/shop", get(|| async { "shop" }))
        .route("/private", get(|| async { "private" }))
        .layer(b.build());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookie_challenge_round_trip_and_pass() {
    let url = serve(
        &format!(
            "{KEYS}[[rules]]\nname = \"p\"\nexpression = 'http.request.uri.path == \"/protected\"'\naction = \"challenge\"\nchallenge = \"cookie\"\n"
        ),
        None,
    )
    .await;
    let mut b = Browser::new();
    assert_eq!(b.get(&format!("{url}/")).await.body, "home");
    let r = b.get(&format!("{url}/protected")).await;
    assert_eq!(r.status, 302, "{}", r.body);
    let check = r.location.unwrap();
    assert!(check.starts_with("/.waf/cookie?"), "{check}");
    assert!(b.jar.contains_key("__waf_pass"));
    // The cookie check (a gate endpoint, answered by the middleware) sends it back.
    let r = b.get(&format!("{url}{check}")).await;
    assert_eq!((r.status, r.location.as_deref()), (303, Some("/protected")));
    let r = b.get(&format!("{url}/protected")).await;
    assert_eq!((r.status, r.body.as_str()), (200, "protected"));
    // A client that drops cookies gets the "cookies required" page.
    let mut nocookies = Browser::new();
    let r = nocookies.get(&format!("{url}/protected")).await;
    nocookies.jar.clear();
    let r = nocookies
        .get(&format!("{url}{}", r.location.unwrap()))
        .await;
    assert!(
        r.body.contains("<html") && r.body.to_lowercase().contains("cookie"),
        "{}",
        r.body
    );
    // A forged pass is challenged again; an API client is redirected too (a cookie
    // challenge asks only that the client keeps cookies).
    let mut forged = Browser::new();
    let mut pass = b.jar["__waf_pass"].clone().into_bytes();
    pass[3] ^= 1;
    forged
        .jar
        .insert("__waf_pass".into(), String::from_utf8(pass).unwrap());
    assert_eq!(forged.get(&format!("{url}/protected")).await.status, 302);
    let mut api = Browser::new();
    api.accept = "application/json";
    let r = api.get(&format!("{url}/protected")).await;
    assert_eq!(r.status, 302);
    assert!(api.jar.contains_key("__waf_pass"));
    // An unknown gate endpoint is 404, and never reaches the app.
    assert_eq!(b.get(&format!("{url}/.waf/nope")).await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_room_admits_in_order() {
    let url = serve(
        &format!(
            "{KEYS}[[gates.waiting_room]]\nname = \"shop\"\nmatch = 'http.request.uri.path == \"/shop\"'\ncapacity = 1\nidle_secs = 1\nrefresh_secs = 1\n"
        ),
        None,
    )
    .await;
    let shop = format!("{url}/shop");
    let (mut a, mut b, mut c) = (Browser::new(), Browser::new(), Browser::new());
    let r = a.get(&shop).await;
    assert_eq!((r.status, r.body.as_str()), (200, "shop"));
    let r = b.get(&shop).await;
    assert_eq!(r.status, 503);
    assert!(r.body.contains("<html"), "the waiting page");
    c.accept = "application/json";
    let r = c.get(&shop).await;
    assert_eq!(r.status, 503);
    assert!(r.body.contains("\"position\":\"2\""), "{}", r.body);
    // While a is active nobody else gets in.
    for _ in 0..6 {
        assert_eq!(a.get(&shop).await.status, 200);
        assert_eq!(b.get(&shop).await.status, 503);
        assert_eq!(c.get(&shop).await.status, 503);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // a leaves: after its idle second b is in, c is next.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(c.get(&shop).await.status, 503);
    assert_eq!(b.get(&shop).await.status, 200);
    let r = c.get(&shop).await;
    assert!(r.body.contains("\"position\":\"1\""), "{}", r.body);
    assert_eq!(a.get(&shop).await.status, 503, "a's place is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_through_a_real_smtp_server() {
    let dir = std::env::temp_dir().join(format!("waf-tower-signin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let smtp = Smtp::start(&dir);
    let mailer = SmtpMailer::new(
        "127.0.0.1",
        smtp.port,
        SmtpSecurity::DangerousPlain,
        "WAF <waf@example.com>",
        None,
    )
    .unwrap();
    let url = serve(
        &format!(
            "{KEYS}[gates.sign_in]\nmatch = 'http.request.uri.path == \"/private\"'\nallowed = [\"alice@example.com\"]\n"
        ),
        Some(mailer),
    )
    .await;
    let mut b = Browser::new();
    assert_eq!(b.get(&format!("{url}/")).await.body, "home");
    let r = b.get(&format!("{url}/private")).await;
    assert_eq!(r.status, 303);
    let page = b.get(&format!("{url}{}", r.location.unwrap())).await;
    assert_eq!(page.status, 200);
    let code_page = b
        .post(
            &format!("{url}/.waf/sign-in"),
            &[
                ("email", "alice@example.com"),
                ("form_token", &input(&page.body, "form_token")),
                ("return_to", &input(&page.body, "return_to")),
            ],
        )
        .await;
    assert_eq!(code_page.status, 200, "{}", code_page.body);
    let mail = tokio::task::block_in_place(|| smtp.mail(1));
    assert!(mail.contains("alice@example.com"), "{mail}");
    let code = &code_in(&mail);
    let code_form = |code: String| {
        vec![
            ("pending", input(&code_page.body, "pending")),
            ("code", code),
            ("form_token", input(&code_page.body, "form_token")),
            ("return_to", input(&code_page.body, "return_to")),
        ]
    };
    let wrong = code_form(if code == "000000" { "111111" } else { "000000" }.into());
    let wrong: Vec<(&str, &str)> = wrong.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = b.post(&format!("{url}/.waf/sign-in/code"), &wrong).await;
    assert_ne!(r.status, 303, "a wrong code signs in");
    let right = code_form(code.to_string());
    let right: Vec<(&str, &str)> = right.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = b.post(&format!("{url}/.waf/sign-in/code"), &right).await;
    assert_eq!(
        (r.status, r.location.as_deref()),
        (303, Some("/private")),
        "{}",
        r.body
    );
    let r = b.get(&format!("{url}/private")).await;
    assert_eq!((r.status, r.body.as_str()), (200, "private"));
    // Sign-out: sign-in is needed again.
    b.get(&format!("{url}/.waf/sign-out")).await;
    assert_eq!(b.get(&format!("{url}/private")).await.status, 303);
}
