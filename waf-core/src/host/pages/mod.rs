//! The pages a person sees: block, challenge, waiting room, sign-in. Rendered here so that
//! every host (tower, actix-web, the proxy, the C module) serves the same bytes.
//!
//! Each page is one self-contained HTML document: inline CSS (light and dark), no script,
//! font or image from anywhere else, a viewport that fits a phone, and the request id in
//! the footer so a visitor can quote it. The challenge page carries the small inline
//! script that solves the proof of work with WebCrypto, and the waiting room one that
//! reloads the page.
//!
//! Templates use one construct, `{{name}}`, replaced by an HTML-escaped value: a page
//! variable ([`PageKind::variables`]) or a string of the strings table
//! (`strings.rs`, every sentence in one place so it can be translated). A user can replace
//! any page with a file of their own (`pages = { block = "blocked.html" }`) and any
//! string (`strings = { block_heading = "Nope" }`); a template naming something unknown,
//! or an unknown string key, is a load error. Rendering is one pass over the template.

mod strings;

/// The `Content-Security-Policy` to send with a page: its inline style and script only,
/// nothing from elsewhere, forms back to this site, no framing. A host's own (stricter or
/// looser) CSP would either break the page or allow more than it needs, so a page carries
/// this one instead.
pub const PAGE_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;

use http::StatusCode;
use serde::Deserialize;

use crate::verdict::Intervention;

/// One of the pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PageKind {
    /// A blocked request.
    Block,
    /// The proof-of-work challenge.
    Challenge,
    /// A cookie challenge the browser failed (it keeps no cookies).
    Cookie,
    /// The waiting room.
    Queue,
    /// Sign-in: the email address.
    SignIn,
    /// Sign-in: the code.
    Code,
    /// After sign-out.
    SignedOut,
}

const KINDS: [PageKind; 7] = [
    PageKind::Block,
    PageKind::Challenge,
    PageKind::Cookie,
    PageKind::Queue,
    PageKind::SignIn,
    PageKind::Code,
    PageKind::SignedOut,
];

macro_rules! page {
    ($file:literal) => {
        concat!(
            include_str!("head.html"),
            include_str!($file),
            include_str!("foot.html")
        )
    };
}

impl PageKind {
    /// The name used in config (`pages = { sign_in = "..." }`) and as the string prefix.
    pub fn name(self) -> &'static str {
        match self {
            PageKind::Block => "block",
            PageKind::Challenge => "challenge",
            PageKind::Cookie => "cookie",
            PageKind::Queue => "queue",
            PageKind::SignIn => "sign_in",
            PageKind::Code => "code",
            PageKind::SignedOut => "signed_out",
        }
    }

    /// The variables a template of this page may name, besides the strings (every page
    /// has `request_id`, `status` and `title`).
    pub fn variables(self) -> &'static [&'static str] {
        match self {
            PageKind::Block => &["reason"],
            PageKind::Challenge => &["action", "challenge", "form_token", "difficulty"],
            PageKind::Cookie => &["return_to"],
            PageKind::Queue => &["position", "refresh_secs"],
            PageKind::SignIn => &["action", "form_token", "return_to", "email", "error"],
            PageKind::Code => &[
                "action",
                "form_token",
                "return_to",
                "email",
                "error",
                "pending",
                "code_minutes",
            ],
            PageKind::SignedOut => &["return_to"],
        }
    }

    fn builtin(self) -> &'static str {
        match self {
            PageKind::Block => page!("block.html"),
            PageKind::Challenge => page!("challenge.html"),
            PageKind::Cookie => page!("cookie.html"),
            PageKind::Queue => page!("queue.html"),
            PageKind::SignIn => page!("sign_in.html"),
            PageKind::Code => page!("code.html"),
            PageKind::SignedOut => page!("signed_out.html"),
        }
    }

    fn index(self) -> usize {
        KINDS.iter().position(|k| *k == self).unwrap_or(0)
    }
}

/// `pages = { .. }`: a template file per page to use instead of the built-in one.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PageFiles {
    /// The block page.
    pub block: Option<PathBuf>,
    /// The proof-of-work challenge (keep its form fields and script, see the built-in one).
    pub challenge: Option<PathBuf>,
    /// Cookies required.
    pub cookie: Option<PathBuf>,
    /// The waiting room.
    pub queue: Option<PathBuf>,
    /// Sign-in: address.
    pub sign_in: Option<PathBuf>,
    /// Sign-in: code.
    pub code: Option<PathBuf>,
    /// Signed out.
    pub signed_out: Option<PathBuf>,
}

impl PageFiles {
    fn file(&self, kind: PageKind) -> Option<&PathBuf> {
        match kind {
            PageKind::Block => self.block.as_ref(),
            PageKind::Challenge => self.challenge.as_ref(),
            PageKind::Cookie => self.cookie.as_ref(),
            PageKind::Queue => self.queue.as_ref(),
            PageKind::SignIn => self.sign_in.as_ref(),
            PageKind::Code => self.code.as_ref(),
            PageKind::SignedOut => self.signed_out.as_ref(),
        }
    }

    /// Makes relative paths relative to `base`.
    pub fn resolve_paths(&mut self, base: &std::path::Path) {
        for p in [
            &mut self.block,
            &mut self.challenge,
            &mut self.cookie,
            &mut self.queue,
            &mut self.sign_in,
            &mut self.code,
            &mut self.signed_out,
        ] {
            if let Some(f) = p.take() {
                *p = Some(base.join(f));
            }
        }
    }
}

/// A page template or string is unusable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {message}")]
pub struct PageError {
    /// The page or string.
    pub what: String,
    /// What is wrong.
    pub message: String,
}

/// The compiled page set: templates and strings. Cheap to build with the defaults (no
/// allocation), immutable, shared by a [`crate::Waf`].
#[derive(Clone, Debug)]
pub struct Pages {
    templates: [Cow<'static, str>; 7],
    overrides: Vec<(String, String)>,
}

impl Default for Pages {
    fn default() -> Self {
        Pages {
            templates: KINDS.map(|k| Cow::Borrowed(k.builtin())),
            overrides: Vec::new(),
        }
    }
}

impl Pages {
    /// The built-in pages with `files` and `strings` replacing some; every template is
    /// read and checked now.
    pub fn new(files: &PageFiles, strings: &BTreeMap<String, String>) -> Result<Pages, PageError> {
        let mut pages = Pages::default();
        for (key, value) in strings {
            if !strings::STRINGS.iter().any(|(k, _)| k == key) {
                return Err(PageError {
                    what: format!("strings.{key}"),
                    message: "no such string".into(),
                });
            }
            pages.overrides.push((key.clone(), value.clone()));
        }
        for kind in KINDS {
            if let Some(path) = files.file(kind) {
                let text = std::fs::read_to_string(path).map_err(|e| PageError {
                    what: format!("pages.{}", kind.name()),
                    message: format!("cannot read {}: {e}", path.display()),
                })?;
                check(kind, &text).map_err(|message| PageError {
                    what: format!("pages.{} ({})", kind.name(), path.display()),
                    message,
                })?;
                pages.templates[kind.index()] = Cow::Owned(text);
            }
        }
        Ok(pages)
    }

    /// The text of string `key` (an override, else the built-in English), unexpanded.
    pub fn string(&self, key: &str) -> &str {
        if let Some((_, v)) = self.overrides.iter().find(|(k, _)| k == key) {
            return v;
        }
        strings::STRINGS
            .iter()
            .find(|(k, _)| *k == key)
            .map_or("", |(_, v)| v)
    }

    /// String `key` with the `{{var}}` it names filled in from `vars`, not escaped (for
    /// plain-text mail).
    pub fn text(&self, key: &str, vars: &[(&str, &str)]) -> String {
        let mut out = String::new();
        expand(
            self.string(key),
            &mut out,
            &|name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| *v),
            false,
        );
        out
    }

    /// Renders page `kind` with `vars` (escaped), for a request whose id is `request_id`,
    /// answered with `status`.
    pub fn render(
        &self,
        kind: PageKind,
        status: StatusCode,
        request_id: &str,
        vars: &[(&str, &str)],
    ) -> String {
        let code = status.as_str();
        let title_key = format!("{}_title", kind.name());
        let title = self.string(&title_key);
        let template = &self.templates[kind.index()];
        let mut out = String::with_capacity(template.len() + 256);
        let var = |name: &str| -> Option<&str> {
            match name {
                "request_id" => Some(request_id),
                "status" => Some(code),
                "title" => Some(title),
                _ => vars.iter().find(|(k, _)| *k == name).map(|(_, v)| *v),
            }
        };
        let mut rest: &str = template;
        while let Some(i) = rest.find("{{") {
            out.push_str(&rest[..i]);
            let after = &rest[i + 2..];
            let Some(j) = after.find("}}") else {
                out.push_str(&rest[i..]);
                rest = "";
                break;
            };
            let name = after[..j].trim();
            if let Some(v) = var(name) {
                escape_into(v, &mut out);
            } else if strings::STRINGS.iter().any(|(k, _)| *k == name) {
                expand(self.string(name), &mut out, &var, true);
            }
            rest = &after[j + 2..];
        }
        out.push_str(rest);
        out
    }

    /// The block page for `intervention` (what [`super::block_response`] renders with the
    /// built-in pages): HTML, or JSON when `Accept` prefers it; redirects as there.
    pub fn block(
        &self,
        intervention: &Intervention,
        request_id: &str,
        accept: Option<&[u8]>,
    ) -> super::BlockPage {
        super::block_page::block_response_with(self, intervention, request_id, accept)
    }
}

/// Expands `{{var}}` inside a string (one level: strings do not name strings).
fn expand<'v>(text: &str, out: &mut String, var: &dyn Fn(&str) -> Option<&'v str>, html: bool) {
    let mut rest = text;
    while let Some(i) = rest.find("{{") {
        push(&rest[..i], out, html);
        let after = &rest[i + 2..];
        let Some(j) = after.find("}}") else {
            push(&rest[i..], out, html);
            return;
        };
        if let Some(v) = var(after[..j].trim()) {
            push(v, out, html);
        }
        rest = &after[j + 2..];
    }
    push(rest, out, html);
}

fn push(s: &str, out: &mut String, html: bool) {
    if html {
        escape_into(s, out);
    } else {
        out.push_str(s);
    }
}

/// HTML-escapes `s` onto `out` (text and quoted attribute values).
pub(crate) fn escape_into(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// Every `{{name}}` of a user template must be a variable of its page or a string.
fn check(kind: PageKind, text: &str) -> Result<(), String> {
    let mut rest = text;
    let mut line = 1;
    while let Some(i) = rest.find("{{") {
        line += rest[..i].matches('\n').count();
        let after = &rest[i + 2..];
        let Some(j) = after.find("}}") else {
            return Err(format!("line {line}: `{{{{` is not closed"));
        };
        let name = after[..j].trim();
        let known = ["request_id", "status", "title"].contains(&name)
            || kind.variables().contains(&name)
            || strings::STRINGS.iter().any(|(k, _)| *k == name);
        if !known {
            return Err(format!(
                "line {line}: unknown name {{{{{name}}}}} (variables here: request_id, status, title, {})",
                kind.variables().join(", ")
            ));
        }
        rest = &after[j + 2..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_pages_name_only_known_things_and_are_self_contained() {
        for kind in KINDS {
            let t = kind.builtin();
            check(kind, t).unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
            for external in ["src=\"http", "href=\"http", "@import", "url(", "<link"] {
                assert!(!t.contains(external), "{}: {external}", kind.name());
            }
            assert!(t.contains("name=\"viewport\""));
            assert!(t.contains("{{request_id}}"), "{}", kind.name());
        }
        for (k, _) in strings::STRINGS {
            let used = KINDS
                .iter()
                .any(|p| p.builtin().contains(&format!("{{{{{k}}}}}")))
                || k.ends_with("_title")
                || k.starts_with("mail_")
                || [
                    "challenge_failed",
                    "sign_in_not_allowed",
                    "sign_in_invalid_email",
                    "sign_in_rate_limited",
                    "sign_in_send_failed",
                    "form_expired",
                    "code_wrong",
                    "code_expired",
                    "code_locked",
                ]
                .contains(k);
            assert!(used, "string {k} is used nowhere");
        }
    }

    #[test]
    fn render_escapes_and_fills_strings_with_variables() {
        let p = Pages::default();
        let html = p.render(
            PageKind::Code,
            StatusCode::OK,
            "id-<1>",
            &[("email", "a\"b@example.com"), ("code_minutes", "10")],
        );
        assert!(html.contains("<code id=\"request-id\">id-&lt;1&gt;</code>"));
        assert!(
            html.contains("If a&quot;b@example.com may sign in here"),
            "{html}"
        );
        assert!(html.contains("valid for 10 minutes"));
        assert!(!html.contains("{{"), "{html}");
        assert!(html.contains("<title>Enter your code</title>"));
        // Plain text for mail: not escaped.
        assert_eq!(
            p.text("mail_subject", &[("code", "123456")]),
            "Your sign-in code: 123456"
        );
    }

    #[test]
    fn user_templates_and_strings_replace_the_built_in_ones() {
        let dir = std::env::temp_dir().join(format!("waf-pages-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("block.html");
        std::fs::write(&good, "<p>{{block_heading}} {{request_id}} {{status}}</p>").unwrap();
        let files = PageFiles {
            block: Some(good),
            ..PageFiles::default()
        };
        let mut strings = BTreeMap::new();
        strings.insert("block_heading".to_string(), "Nicht erlaubt".to_string());
        let p = Pages::new(&files, &strings).unwrap();
        assert_eq!(
            p.render(PageKind::Block, StatusCode::FORBIDDEN, "x", &[]),
            "<p>Nicht erlaubt x 403</p>"
        );

        let bad = dir.join("bad.html");
        std::fs::write(&bad, "<p>\n{{nope}}</p>").unwrap();
        let e = Pages::new(
            &PageFiles {
                queue: Some(bad.clone()),
                ..PageFiles::default()
            },
            &BTreeMap::new(),
        )
        .unwrap_err();
        assert!(e.message.contains("line 2: unknown name {{nope}}"), "{e}");
        std::fs::write(&bad, "{{request_id").unwrap();
        assert!(Pages::new(
            &PageFiles {
                queue: Some(bad),
                ..PageFiles::default()
            },
            &BTreeMap::new()
        )
        .is_err());
        let mut unknown = BTreeMap::new();
        unknown.insert("no_such".to_string(), "x".to_string());
        assert!(Pages::new(&PageFiles::default(), &unknown).is_err());
        let missing = PageFiles {
            code: Some(dir.join("missing.html")),
            ..PageFiles::default()
        };
        assert!(Pages::new(&missing, &BTreeMap::new())
            .unwrap_err()
            .message
            .contains("cannot read"));
    }
}
