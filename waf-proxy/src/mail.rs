//! Sending the sign-in codes: the core decides what to send ([`waf_core::policy::gate::Mail`]),
//! the proxy sends it, with `lettre` over SMTP.
//!
//! ```toml
//! [smtp]
//! server = "127.0.0.1"          # the relay
//! port = 587                    # default: 587 with STARTTLS, 25 plain, 465 TLS
//! security = "starttls"         # "starttls" (default), "tls", or "plain" for a local relay
//! from = "Sign-in <no-reply@example.com>"
//! username = "waf"              # optional, with password
//! password = "secret"
//! timeout_ms = 10000            # the whole send, then the page says it failed
//! ```
//!
//! With `starttls` and `tls` the relay's certificate is verified against Mozilla's roots
//! (`webpki-roots`). The code is in the mail's body only: nothing here logs the mail, and a failure
//! is logged with the relay's error and no address.

use std::time::Duration;

use lettre::message::Mailbox;
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde::Deserialize;

/// Default time a send may take.
pub const DEFAULT_SMTP_TIMEOUT_MS: u64 = 10_000;

/// `[smtp]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSmtp {
    /// The relay's host name or address.
    pub server: String,
    /// Its port (default by `security`: 587, 465 or 25).
    #[serde(default)]
    pub port: Option<u16>,
    /// `"starttls"` (default), `"tls"` or `"plain"`.
    #[serde(default)]
    pub security: Option<String>,
    /// The sender, `"Name <address>"` or an address.
    pub from: String,
    /// Login, with `password`.
    #[serde(default)]
    pub username: Option<String>,
    /// Password for `username`.
    #[serde(default)]
    pub password: Option<String>,
    /// The whole send, in ms (default 10000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// How the connection to the relay is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// Plain, upgraded with STARTTLS (required).
    StartTls,
    /// TLS from the first byte.
    Tls,
    /// No TLS (a relay on the same machine or network).
    Plain,
}

/// `[smtp]`, validated.
#[derive(Clone)]
pub struct Smtp {
    /// The relay.
    pub server: String,
    /// Its port.
    pub port: u16,
    /// Connection security.
    pub security: Security,
    /// The sender.
    pub from: Mailbox,
    /// Login.
    pub credentials: Option<(String, String)>,
    /// Send timeout.
    pub timeout: Duration,
}

impl std::fmt::Debug for Smtp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Smtp")
            .field("server", &self.server)
            .field("port", &self.port)
            .field("security", &self.security)
            .field("from", &self.from.to_string())
            .field(
                "credentials",
                &self.credentials.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl TryFrom<RawSmtp> for Smtp {
    type Error = String;

    fn try_from(r: RawSmtp) -> Result<Smtp, String> {
        let security = match r.security.as_deref().unwrap_or("starttls") {
            "starttls" => Security::StartTls,
            "tls" => Security::Tls,
            "plain" => Security::Plain,
            other => {
                return Err(format!(
                    "security {other:?}: use \"starttls\", \"tls\" or \"plain\""
                ))
            }
        };
        let port = r.port.unwrap_or(match security {
            Security::StartTls => 587,
            Security::Tls => 465,
            Security::Plain => 25,
        });
        if r.server.is_empty() {
            return Err("server is empty".into());
        }
        let from: Mailbox = r
            .from
            .parse()
            .map_err(|e| format!("from {:?} is not an address: {e}", r.from))?;
        let credentials = match (r.username, r.password) {
            (Some(u), Some(p)) => Some((u, p)),
            (None, None) => None,
            _ => return Err("give both username and password, or neither".into()),
        };
        let timeout = r.timeout_ms.unwrap_or(DEFAULT_SMTP_TIMEOUT_MS);
        if timeout == 0 {
            return Err("timeout_ms must be > 0".into());
        }
        Ok(Smtp {
            server: r.server,
            port,
            security,
            from,
            credentials,
            timeout: Duration::from_millis(timeout),
        })
    }
}

/// Sends `mail` through `smtp`. The error names the step that failed, never the address or
/// the code.
pub async fn send(smtp: &Smtp, mail: &waf_core::policy::gate::Mail) -> Result<(), String> {
    let to: Mailbox = mail
        .to
        .parse()
        .map_err(|_| "the recipient is not a valid address".to_string())?;
    let message = Message::builder()
        .from(smtp.from.clone())
        .to(to)
        .subject(mail.subject.clone())
        .body(mail.body.clone())
        .map_err(|e| format!("cannot build the message: {e}"))?;
    let builder = match smtp.security {
        Security::Plain => {
            AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(smtp.server.as_str())
        }
        Security::StartTls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&smtp.server)
            .map_err(|e| format!("smtp: {e}"))?,
        Security::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(&smtp.server)
            .map_err(|e| format!("smtp: {e}"))?,
    };
    let mut builder = builder.port(smtp.port).timeout(Some(smtp.timeout));
    if let Some((u, p)) = &smtp.credentials {
        builder = builder.credentials(Credentials::new(u.clone(), p.clone()));
    }
    let transport = builder.build();
    match tokio::time::timeout(smtp.timeout, transport.send(message)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("smtp: {e}")),
        Err(_) => Err("smtp: timed out".into()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    const BASE: &str = "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:1\"]\n[[host]]\nnames = [\"*\"]\nupstream = \"app\"\n";

    fn errors(extra: &str) -> String {
        Config::parse(Path::new("proxy.toml"), &format!("{BASE}{extra}"))
            .map(|_| String::new())
            .unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn gate_and_smtp_config_errors_say_where() {
        let keys = "[host.gates]\nkeys = [\"0123456789abcdef0123456789abcdef\"]\n";
        assert_eq!(errors(keys), "");
        // Unknown keys: file, line and column.
        let e = errors(&format!("{keys}bogus = 1\n"));
        assert!(
            e.starts_with("proxy.toml:9:1: unknown field `bogus`"),
            "{e}"
        );
        let e = errors(&format!(
            "{keys}[host.gates.sign_in]\nallowed = [\"@example.com\"]\nfrist = 1\n"
        ));
        assert!(e.contains("proxy.toml:11:1: unknown field `frist`"), "{e}");
        // Sign-in without a relay.
        let e = errors(&format!(
            "{keys}[host.gates.sign_in]\nallowed = [\"@example.com\"]\n"
        ));
        assert!(
            e.contains("host[0].gates.sign_in: sign-in sends codes by mail"),
            "{e}"
        );
        let ok = format!("{keys}[host.gates.sign_in]\nallowed = [\"@example.com\"]\n[smtp]\nserver = \"127.0.0.1\"\nsecurity = \"plain\"\nfrom = \"a@example.com\"\n");
        assert_eq!(errors(&ok), "");
        let e = errors(&ok.replace("\"plain\"", "\"ssl\""));
        assert!(e.contains("proxy.toml: smtp: security \"ssl\""), "{e}");
        let e = errors(&ok.replace("a@example.com", "not an address"));
        assert!(e.contains("smtp: from"), "{e}");
        // Core checks come back with the host's location.
        let e = errors("[host.gates]\nkeys = [\"short\"]\n");
        assert!(
            e.contains("host[0].policy") && e.contains("shorter than 32"),
            "{e}"
        );
    }
}
