//! [`SmtpMailer`] (feature `smtp`): a ready [`Mailer`] for the sign-in codes, sending
//! through an SMTP relay with `lettre` on tokio (STARTTLS, TLS, or plain for a relay on the
//! same machine or network).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use lettre::message::Mailbox;
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use waf_core::host::Mailer;
use waf_core::policy::gate::Mail;

/// Default longest time one mail may take (connect, greet, send): 10 s.
pub const DEFAULT_SMTP_TIMEOUT: Duration = Duration::from_secs(10);

/// How the connection to the relay is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SmtpSecurity {
    /// Plain, upgraded with STARTTLS, which is required (port 587).
    StartTls,
    /// TLS from the first byte (port 465).
    Tls,
    /// No TLS: only for a relay on the same machine or a trusted network.
    DangerousPlain,
}

/// Sends sign-in mails through one SMTP relay. Cheap to clone (the transport pools its
/// connections).
#[derive(Clone)]
pub struct SmtpMailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    timeout: Duration,
}

impl std::fmt::Debug for SmtpMailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpMailer")
            .field("from", &self.from.to_string())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl SmtpMailer {
    /// A mailer sending from `from` (`"Name <address>"` or an address) through
    /// `server:port`, with `credentials` (user, password) when given. Errors say which
    /// argument is wrong.
    pub fn new(
        server: &str,
        port: u16,
        security: SmtpSecurity,
        from: &str,
        credentials: Option<(String, String)>,
    ) -> Result<SmtpMailer, String> {
        let from: Mailbox = from
            .parse()
            .map_err(|e| format!("from {from:?} is not an address: {e}"))?;
        let builder = match security {
            SmtpSecurity::DangerousPlain => {
                AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(server)
            }
            SmtpSecurity::StartTls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(server)
                .map_err(|e| format!("smtp server {server:?}: {e}"))?,
            SmtpSecurity::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(server)
                .map_err(|e| format!("smtp server {server:?}: {e}"))?,
        };
        let mut builder = builder.port(port).timeout(Some(DEFAULT_SMTP_TIMEOUT));
        if let Some((u, p)) = credentials {
            builder = builder.credentials(Credentials::new(u, p));
        }
        Ok(SmtpMailer {
            transport: builder.build(),
            from,
            timeout: DEFAULT_SMTP_TIMEOUT,
        })
    }

    /// Bounds the whole of one mail (connect, greeting, TLS, send) by `timeout` instead of
    /// [`DEFAULT_SMTP_TIMEOUT`]; each SMTP command keeps lettre's own bound of
    /// [`DEFAULT_SMTP_TIMEOUT`] as well.
    pub fn timeout(mut self, timeout: Duration) -> SmtpMailer {
        self.timeout = timeout;
        self
    }
}

impl Mailer for SmtpMailer {
    fn send(&self, mail: Mail) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> {
        let transport = self.transport.clone();
        let from = self.from.clone();
        let timeout = self.timeout;
        Box::pin(async move {
            let to: Mailbox = mail
                .to
                .parse()
                .map_err(|_| "the recipient is not a valid address".to_string())?;
            let message = Message::builder()
                .from(from)
                .to(to)
                .subject(mail.subject)
                .body(mail.body)
                .map_err(|e| format!("cannot build the message: {e}"))?;
            match tokio::time::timeout(timeout, transport.send(message)).await {
                Ok(Ok(_)) => Ok(()),
                // lettre's error names the relay's answer, not the recipient or the body.
                Ok(Err(e)) => Err(format!("smtp: {e}")),
                Err(_) => Err("smtp: timed out".to_string()),
            }
        })
    }
}
