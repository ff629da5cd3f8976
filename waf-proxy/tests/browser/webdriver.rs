//! A small W3C WebDriver client over chromedriver's HTTP API: just what the browser tests
//! use (navigate, read the URL and text, fill and click, cookies, screenshots). Headless
//! Chromium, phone-sized window; a test that cannot start it fails saying what is missing.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

/// A running chromedriver; killed on drop.
pub struct Driver {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Driver {
    /// Starts `chromedriver` on a free loopback port.
    pub async fn start() -> Driver {
        let port = free_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "chromedriver is not installed (Debian: apt-get install chromium chromium-driver)",
            );
        let d = Driver {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = d.http.get(format!("{}/status", d.base)).send().await {
                if let Ok(v) = r.json::<Value>().await {
                    if v["value"]["ready"] == true {
                        return d;
                    }
                }
            }
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A new headless browser with its own profile (cookies), a phone-sized window and
    /// `user_agent` when given.
    pub async fn browser(&self, user_agent: Option<&str>) -> Browser {
        self.browser_with(user_agent, "normal", &[]).await
    }

    /// A browser that resolves `name` to 127.0.0.1, so that a page served to
    /// `http://name:port/` comes from an insecure origin (no `crypto.subtle`).
    pub async fn browser_resolving(&self, name: &str) -> Browser {
        let rule = format!("--host-resolver-rules=MAP {name} 127.0.0.1");
        self.browser_with(None, "normal", &[rule.as_str()]).await
    }

    async fn browser_with(
        &self,
        user_agent: Option<&str>,
        strategy: &str,
        extra: &[&str],
    ) -> Browser {
        let mut args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=412,860".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
        ];
        if let Some(ua) = user_agent {
            args.push(format!("--user-agent={ua}"));
        }
        args.extend(extra.iter().map(|a| a.to_string()));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "pageLoadStrategy": strategy,
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args}
        }}});
        let v = self.call("POST", "/session", Some(caps)).await;
        let id = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_string();
        Browser {
            base: format!("{}/session/{id}", self.base),
            http: self.http.clone(),
        }
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        call(&self.http, method, &format!("{}{path}", self.base), body).await
    }
}

async fn call(http: &reqwest::Client, method: &str, url: &str, body: Option<Value>) -> Value {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut r = http.request(m, url).timeout(Duration::from_secs(60));
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let v: Value = resp.json().await.unwrap();
    let value = v.get("value").cloned().unwrap_or(Value::Null);
    if value.get("error").is_some() {
        panic!("{method} {url}: {value}");
    }
    value
}

/// One browser session.
pub struct Browser {
    base: String,
    http: reqwest::Client,
}

impl Browser {
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        call(&self.http, method, &format!("{}{path}", self.base), body).await
    }

    /// Navigates to `url` (returns when the page has loaded).
    pub async fn go(&self, url: &str) {
        self.call("POST", "/url", Some(json!({ "url": url }))).await;
    }

    /// The current URL.
    pub async fn url(&self) -> String {
        self.call("GET", "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Runs `script` (a function body) and returns its value.
    pub async fn eval(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// The page's visible text.
    pub async fn text(&self) -> String {
        self.eval("return document.body ? document.body.innerText : ''")
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits until the page's text contains `needle` (up to `secs`); the text.
    pub async fn wait_text(&self, needle: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let t = self.text().await;
            if t.contains(needle) {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "page never showed {needle:?}; it shows {t:?} at {}",
                self.url().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Types `text` into the element `css` selects.
    pub async fn fill(&self, css: &str, text: &str) {
        let e = self.element(css).await;
        self.call(
            "POST",
            &format!("/element/{e}/value"),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Clicks the element `css` selects.
    pub async fn click(&self, css: &str) {
        let e = self.element(css).await;
        self.call("POST", &format!("/element/{e}/click"), Some(json!({})))
            .await;
    }

    async fn element(&self, css: &str) -> String {
        let v = self
            .call(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v.as_object()
            .and_then(|o| o.values().next())
            .and_then(|v| v.as_str())
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_string()
    }

    /// The names of the cookies the browser holds for the current page.
    pub async fn cookie_names(&self) -> Vec<String> {
        let v = self.call("GET", "/cookie", None).await;
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|c| c["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Saves a screenshot of the page as PNG at `path`.
    pub async fn screenshot(&self, path: &Path) {
        let v = self.call("GET", "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// Ends the session (closes the browser).
    pub async fn quit(self) {
        let _ = self.http.delete(&self.base).send().await;
    }
}
