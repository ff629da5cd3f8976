//! The gates as a person meets them: the real `waf-proxy` binary on loopback, headless
//! Chromium driven through chromedriver (WebDriver), and for sign-in a real SMTP server
//! (Python's `aiosmtpd`) that the test reads the code from.
//!
//! Each test saves screenshots of the pages it sees under
//! `$CARGO_TARGET_TMPDIR/screenshots/`; with `WAF_UPDATE_SCREENSHOTS=1` they are also
//! copied to `docs/screenshots/` (the README shows them).

#[allow(dead_code)]
#[path = "../proxy/util.rs"]
mod util;
mod webdriver;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use util::{config, temp_dir, upstream, Proxy};
use waf_test_support::{code_in, Smtp};
use webdriver::{Browser, Driver};

const KEYS: &str = "keys = [\"browser test key, at least 32 bytes long\"]\n";

fn rules_file(dir: &Path) -> PathBuf {
    let p = dir.join("rules.conf");
    std::fs::write(&p, "SecRuleEngine On\n").unwrap();
    p
}

/// Saves a screenshot named `name`.
async fn shot(b: &Browser, name: &str) {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("screenshots")
        .join(format!("{name}.png"));
    b.screenshot(&out).await;
    if std::env::var_os("WAF_UPDATE_SCREENSHOTS").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/screenshots");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::copy(&out, docs.join(format!("{name}.png"))).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proof_of_work_is_solved_by_the_browser_and_the_pass_accepted() {
    let up = upstream();
    let dir = temp_dir("browser-pow");
    let rules = rules_file(&dir);
    let host = format!(
        r#"[host.gates]
{KEYS}[host.gates.challenge]
difficulty = 12
[[host.rules]]
name = "hard"
expression = 'http.request.uri.path == "/hard"'
action = "challenge"
difficulty = 24
[[host.rules]]
name = "app"
expression = 'http.request.uri.path starts_with "/app"'
action = "challenge"
[[host.rules]]
name = "blocked"
expression = 'http.request.uri.path == "/blocked"'
action = "block"
"#
    );
    // A strict CSP on the host: the pages carry their own.
    let host = format!("headers = {{ csp = \"default-src 'self'\" }}\n{host}");
    let proxy = Proxy::start(&dir, &config(&[up.addr.to_string()], &rules, "", &host));
    let driver = Driver::start().await;
    // The page while it works: a high difficulty, and a browser that does not wait for
    // the page's script to finish (a normal one waits for the navigation the solved
    // challenge starts).
    let eager = driver.browser(None).await;
    eager.go(&proxy.url("/hard")).await;
    let t = eager.wait_text("Checking your browser", 10).await;
    assert!(t.contains("Request id"), "{t}");
    shot(&eager, "challenge").await;
    eager.quit().await;
    let b = driver.browser(None).await;

    // The real one: the page's script solves it, posts, and lands where it was going.
    let started = Instant::now();
    b.go(&proxy.url("/app/page?x=1")).await;
    let t = b.wait_text("ok GET /app/page 0", 30).await;
    assert!(
        b.url().await.ends_with("/app/page?x=1"),
        "{}",
        b.url().await
    );
    let names = b.cookie_names().await;
    assert!(names.iter().any(|n| n == "__waf_pass"), "{names:?} {t}");
    eprintln!("difficulty 12 solved in {:?}", started.elapsed());
    // The pass is accepted: straight to the upstream, no challenge page.
    b.go(&proxy.url("/app/other")).await;
    assert!(b.text().await.contains("ok GET /app/other 0"));

    // Plain HTTP on a name that is not localhost: no WebCrypto, so the page's own
    // SHA-256 solves it.
    let insecure = driver.browser_resolving("waf.test").await;
    let url = proxy.url("/app/js").replace("127.0.0.1", "waf.test");
    let started = Instant::now();
    insecure.go(&url).await;
    let t = insecure.wait_text("ok GET /app/js 0", 60).await;
    assert_eq!(
        insecure
            .eval("return typeof (window.crypto && window.crypto.subtle)")
            .await,
        serde_json::json!("undefined"),
        "the origin was secure after all: {t}"
    );
    let names = insecure.cookie_names().await;
    assert!(names.iter().any(|n| n == "__waf_pass"), "{names:?}");
    eprintln!(
        "difficulty 12 solved without WebCrypto in {:?}",
        started.elapsed()
    );
    insecure.quit().await;

    // A client without the cookie (a plain HTTP client) is still challenged, with JSON.
    let r = reqwest::get(proxy.url("/app/page")).await.unwrap();
    assert_eq!(r.status(), 403);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"], "challenge_required");

    // The block page, restyled.
    b.go(&proxy.url("/blocked")).await;
    let t = b.wait_text("This request was blocked", 5).await;
    assert!(t.contains("403 Forbidden"), "{t}");
    shot(&b, "block").await;
    b.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_room_of_capacity_one_admits_two_browsers_in_order() {
    let up = upstream();
    let dir = temp_dir("browser-queue");
    let rules = rules_file(&dir);
    let host = format!(
        r#"[host.gates]
{KEYS}[[host.gates.waiting_room]]
name = "sale"
match = 'http.request.uri.path starts_with "/sale"'
capacity = 1
idle_secs = 4
refresh_secs = 1
"#
    );
    let proxy = Proxy::start(&dir, &config(&[up.addr.to_string()], &rules, "", &host));
    let driver = Driver::start().await;
    let a = driver.browser(None).await;
    let b = driver.browser(None).await;
    let c = driver.browser(None).await;

    // a is first: in at once.
    a.go(&proxy.url("/sale")).await;
    assert!(a.text().await.contains("ok GET /sale 0"));
    // b, then c, wait in line.
    b.go(&proxy.url("/sale")).await;
    let t = b.wait_text("Your place in line", 5).await;
    assert!(t.contains("\n1\n") || t.contains("line\n1"), "{t}");
    shot(&b, "queue").await;
    c.go(&proxy.url("/sale")).await;
    let t = c.wait_text("Your place in line", 5).await;
    assert!(t.contains('2'), "{t}");
    // While a is active, nobody else gets in.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        a.go(&proxy.url("/sale/item")).await;
        assert!(a.text().await.contains("ok GET /sale/item 0"));
    }
    assert!(b.text().await.contains("Your place in line"));
    assert!(c.text().await.contains("Your place in line"));
    // a leaves: after its 4 idle seconds, b (refreshing itself every second) is let in
    // first while c keeps waiting, now first in line.
    let left = Instant::now();
    b.wait_text("ok GET /sale 0", 20).await;
    let b_in = left.elapsed();
    let t = c.text().await;
    assert!(t.contains("Your place in line"), "c got in before b: {t}");
    // b goes idle too: then c.
    c.wait_text("ok GET /sale 0", 20).await;
    let c_in = left.elapsed();
    assert!(c_in > b_in, "b at {b_in:?}, c at {c_in:?}");
    eprintln!("b admitted after {b_in:?}, c after {c_in:?}");
    for x in [a, b, c] {
        x.quit().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_code_sign_in_through_a_real_smtp_server() {
    let up = upstream();
    let dir = temp_dir("browser-signin");
    let rules = rules_file(&dir);
    let smtp = Smtp::start(&dir);
    let host = format!(
        r#"[host.gates]
{KEYS}strings = {{ brand = "Example Inc. · secured access" }}
[host.gates.sign_in]
match = 'not http.request.uri.path starts_with "/public"'
allowed = ["alice@example.com", "@example.org"]
max_attempts = 3
[smtp]
server = "127.0.0.1"
port = {}
security = "plain"
from = "Sign-in <no-reply@example.com>"
"#,
        smtp.port
    );
    let proxy = Proxy::start(&dir, &config(&[up.addr.to_string()], &rules, "", &host));
    let driver = Driver::start().await;
    let b = driver.browser(None).await;

    b.go(&proxy.url("/public/info")).await;
    assert!(b.text().await.contains("ok GET /public/info 0"));
    // A protected page: to the sign-in page, carrying where to go back to.
    b.go(&proxy.url("/reports/2026?q=1")).await;
    let t = b.wait_text("Sign in to continue", 5).await;
    assert!(t.contains("Example Inc."), "{t}");
    assert!(b.url().await.contains("/.waf/sign-in?return_to="));
    shot(&b, "sign-in").await;
    b.fill("#email", "alice@example.com").await;
    b.click("#send").await;
    b.wait_text("Check your email", 10).await;
    shot(&b, "code").await;
    let mail = tokio::task::block_in_place(|| smtp.mail(1));
    assert!(mail.contains("alice@example.com"), "{mail}");
    let code = code_in(&mail);
    assert!(code.chars().all(|c| c.is_ascii_digit()), "{code:?}");
    // The proxy's own output never shows the code.
    assert!(
        !proxy
            .stderr
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(&code)),
        "the code was logged"
    );
    // A wrong code first, then the right one.
    let wrong = if code == "000000" { "111111" } else { "000000" };
    b.fill("#code", wrong).await;
    b.click("#verify").await;
    b.wait_text("That code is not right", 5).await;
    b.fill("#code", &code).await;
    b.click("#verify").await;
    b.wait_text("ok GET /reports/2026 0", 10).await;
    assert!(
        b.url().await.ends_with("/reports/2026?q=1"),
        "{}",
        b.url().await
    );
    assert!(b.cookie_names().await.iter().any(|n| n == "__waf_session"));
    // The session is checked on every request.
    b.go(&proxy.url("/reports/other")).await;
    assert!(b.text().await.contains("ok GET /reports/other 0"));
    // Sign-out ends it.
    b.go(&proxy.url("/.waf/sign-out")).await;
    b.wait_text("You are signed out", 5).await;
    shot(&b, "signed-out").await;
    b.go(&proxy.url("/reports/other")).await;
    b.wait_text("Sign in to continue", 5).await;

    // An address not on the list gets the same page, and no mail.
    b.fill("#email", "mallory@evil.example").await;
    b.click("#send").await;
    b.wait_text("Check your email", 10).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let count = std::fs::read_dir(smtp.maildir.join("new")).unwrap().count();
    assert_eq!(count, 1, "a mail went to an address not allowed");
    b.quit().await;
}
