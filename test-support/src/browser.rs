//! An HTTP client that keeps cookies like a browser, for the gate tests of the
//! middleware crates (the `browser` feature: reqwest).

use std::collections::BTreeMap;

/// A browser: its cookies, no redirects followed (`browser` feature).
pub struct Browser {
    http: reqwest::Client,
    /// Cookies kept, by name.
    pub jar: BTreeMap<String, String>,
    /// The `Accept` header sent (a browser's by default).
    pub accept: &'static str,
}

impl Default for Browser {
    fn default() -> Browser {
        Browser::new()
    }
}

/// One answer: status, `Location` and body.
pub struct Got {
    /// The status code.
    pub status: u16,
    /// The `Location` header, if any.
    pub location: Option<String>,
    /// The body as text.
    pub body: String,
}

impl Browser {
    /// A browser with an empty cookie jar.
    pub fn new() -> Browser {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            jar: BTreeMap::new(),
            accept: "text/html,application/xhtml+xml",
        }
    }

    /// Sends `req` with the jar's cookies and keeps the cookies the answer sets.
    pub async fn send(&mut self, req: reqwest::RequestBuilder) -> Got {
        let cookies: Vec<String> = self.jar.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let req = req
            .header("accept", self.accept)
            .header("user-agent", "gates-test")
            .header("cookie", cookies.join("; "));
        let resp = req.send().await.unwrap();
        for v in resp.headers().get_all("set-cookie") {
            let v = v.to_str().unwrap();
            let (k, val) = v.split(';').next().unwrap().split_once('=').unwrap();
            if v.contains("Max-Age=0") {
                self.jar.remove(k);
            } else {
                self.jar.insert(k.into(), val.into());
            }
        }
        let status = resp.status().as_u16();
        let location = resp
            .headers()
            .get("location")
            .map(|l| l.to_str().unwrap().to_string());
        Got {
            status,
            location,
            body: resp.text().await.unwrap(),
        }
    }

    /// GET `url`.
    pub async fn get(&mut self, url: &str) -> Got {
        let req = self.http.get(url);
        self.send(req).await
    }

    /// POSTs `form` urlencoded to `url`.
    pub async fn post(&mut self, url: &str, form: &[(&str, &str)]) -> Got {
        let body = form
            .iter()
            .map(|(k, v)| format!("{k}={}", enc(v)))
            .collect::<Vec<_>>()
            .join("&");
        let req = self
            .http
            .post(url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        self.send(req).await
    }
}

/// Percent-encodes every byte but ASCII letters and digits.
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The value of hidden input `name` in a page (`&amp;` decoded).
pub fn input(html: &str, name: &str) -> String {
    let at = html
        .find(&format!("name=\"{name}\" value=\""))
        .unwrap_or_else(|| panic!("no input {name} in {html}"));
    let rest = &html[at + name.len() + 15..];
    rest[..rest.find('"').unwrap()].replace("&amp;", "&")
}
